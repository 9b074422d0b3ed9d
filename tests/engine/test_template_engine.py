"""The engine with real chat templates on the tiny random-weight model: the prompt is the template's
rendering, tool calls come in the family's syntax and return as OpenAI tool_calls; a model without
a template refuses chat and still completes text, with structure."""

import json
from contextlib import contextmanager

import jsonschema
import pytest

from trellis.engine.tool_syntax import syntax_for_template
from trellis.errors import InvalidRequestError
from trellis.model.chat_template import ChatTemplate, template_messages

from . import chat_template_cases as cases

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string", "maxLength": 12},
                                                "unit": {"enum": ["celsius", "fahrenheit"]}},
                                                "required": ["city", "unit"], "additionalProperties": False}}}
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


@contextmanager
def template(engine, source):
    """The engine with another chat template (same vocabulary: the ChatML family's stop tokens)."""
    saved = engine.template, engine.tool_syntax
    engine.template = ChatTemplate(source, bos_token=saved[0].bos_token, eos_token=saved[0].eos_token,
                                   now=lambda: cases.FIXED_NOW)
    engine.tool_syntax = syntax_for_template(source) if engine.template.supports_tools else None
    try:
        yield engine
    finally:
        engine.template, engine.tool_syntax = saved


@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                                  "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                                  "Mistral-Small-3.2-24B-Instruct-2506.jinja"])
def test_tool_calls_in_the_familys_syntax(engine, name):
    source = cases.template_source(name)
    with template(engine, source) as e:
        request = {"messages": CHAT, "tools": [WEATHER], "max_tokens": 160, "seed": 3, "complete_on_length": True,
                   "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        job = e.chat_job(request)
        prompt, constraint = job.prompt, job.constraint
        expected = e.template.render(template_messages(CHAT), tools=[WEATHER])
        assert prompt == e.tokenizer.encode(expected) and "get_weather" in expected
        assert constraint.field == "tools"
        r = e.chat.completions.create(**request)
    (choice,) = r.choices
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and choice.finish_reason in ("tool_calls", "length")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    if "istral" in name:
        assert len(call.id) == 9 and call.id.isalnum()
    # The answer goes back into the history and the template takes it (Mistral checks the ids).
    history = CHAT + [{"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 3}'}]
    with template(engine, source) as e:
        prompt = e.chat_job({"messages": history, "tools": [WEATHER], "max_tokens": 4}).prompt
    assert e.tokenizer.decode(prompt).count("get_weather") >= 2


def test_tool_choice_none_and_no_tools_render_without_tools(engine):
    with template(engine, cases.template_source("Qwen-Qwen2.5-7B-Instruct.jinja")) as e:
        job = e.chat_job({"messages": CHAT, "tools": [WEATHER], "tool_choice": "none"})
        prompt, constraint = job.prompt, job.constraint
        assert constraint is None and "get_weather" not in e.tokenizer.decode(prompt)
        r = e.chat.completions.create(messages=CHAT, max_tokens=4, seed=1)
        assert r.choices[0].message.get("tool_calls") is None


def test_template_errors_and_thinking_switch(engine):
    with template(engine, cases.template_source("google-gemma-2-2b-it.jinja")) as e:
        with pytest.raises(InvalidRequestError, match="System role not supported") as err:
            e.chat.completions.create(messages=CHAT, max_tokens=2)
        assert err.value.field == "messages"
    with template(engine, cases.template_source("Qwen-Qwen3-0.6B.jinja")) as e:
        user = [{"role": "user", "content": "hi"}]
        on = e.chat_job({"messages": user}).prompt
        off = e.chat_job({"messages": user, "extra_body": {"enable_thinking": False}}).prompt
        assert e.tokenizer.decode(off) == e.tokenizer.decode(on) + "<think>\n\n</think>\n\n"


def test_a_model_without_template_refuses_chat_but_completes_text(engine):
    assert ChatTemplate.from_manifest({"tokenizer": {"bos_token_id": 1}}, ["a", "b"]).source is None
    with template(engine, None) as e:
        with pytest.raises(InvalidRequestError, match="no chat template") as err:
            e.chat.completions.create(messages=CHAT, max_tokens=2)
        assert err.value.field == "messages"
        r = e.completions.create(prompt="The sky is", max_tokens=4, seed=2)
        assert r.object == "text_completion" and r.usage.completion_tokens <= 4


def test_text_completions_with_structure(engine):
    """completions.create takes response_format and complete_on_length as chat does."""
    rf = {"type": "json_object", "schema": SCHEMA}
    r = engine.completions.create(prompt="Person: ", response_format=rf, max_tokens=20, seed=4, complete_on_length=True)
    (choice,) = r.choices
    jsonschema.validate(json.loads(choice.text), SCHEMA)
    assert choice.finish_reason in ("stop", "length") and r.usage.extra["grammar_cache_hit"] is not None
    chunks = list(engine.completions.create(prompt="Person: ", response_format=rf, max_tokens=20, seed=4,
                                            complete_on_length=True, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == choice.text
    r = engine.completions.create(prompt="Digits: ", response_format={"type": "regex", "regex": "[0-9]{3}-[a-z]{2}"},
                                  max_tokens=10, seed=5)
    assert __import__("re").fullmatch("[0-9]{3}-[a-z]{2}", r.choices[0].text)
    with pytest.raises(InvalidRequestError) as err:
        engine.completions.create(prompt="x", response_format={"type": "regex"})
    assert err.value.field.startswith("response_format")

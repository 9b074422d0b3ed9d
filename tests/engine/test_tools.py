"""Tool calling: the structural tag compiles and enforces calls; calls parse back; history renders."""

from __future__ import annotations

import json

import pytest

from trellis.engine.request import parse_chat_request
from trellis.engine.tools import (END_TAG, NO_ARGUMENTS, TRIGGER, arguments_schema, parse_tool_calls,
                                  render_tool_messages, tool_call_text, tool_prompt, tool_response_format)
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.structural_tag import normalize_structural_tag

# web-llm's function-calling example tools
WEATHER = {"type": "function", "function": {
    "name": "get_current_weather", "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current time in a given location",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}
PING = {"type": "function", "function": {"name": "ping"}}  # no parameters: arguments must be {}
TOOLS = [WEATHER, TIME, PING]
NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}

CALL_WEATHER = '<tool_call>{"name": "get_current_weather", "arguments": {"location": "Paris", "unit": "celsius"}}</tool_call>'
CALL_TIME = '<tool_call>{"name": "get_time", "arguments": {"location": "Tokyo"}}</tool_call>'


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(Vocabulary.smollm2())


def matcher(compiler, tool_choice="auto", **options) -> GrammarMatcher:
    grammar, key = compiler.compile_response_format(tool_response_format(TOOLS, tool_choice, **options))
    assert grammar is not None and len(key) == 64
    return GrammarMatcher(grammar)


def accepts(compiler, text: str, tool_choice="auto", **options) -> bool:
    """Whether `text` is a complete output under the tool grammar."""
    m = matcher(compiler, tool_choice, **options)
    return m.accept_string(text) and m.can_terminate()


# ---- the response format --------------------------------------------------------------------


def test_response_format_shape():
    fmt = tool_response_format(TOOLS, "auto")
    assert fmt["type"] == "structural_tag"
    f = fmt["format"]
    assert (f["type"], f["triggers"], f["at_least_one"], f["stop_after_first"]) == \
        ("triggered_tags", [TRIGGER], False, False)
    assert f["tags"][0] == {"begin": '<tool_call>{"name": "get_current_weather", "arguments": ',
                            "content": {"type": "json_schema", "json_schema": WEATHER["function"]["parameters"]},
                            "end": "}</tool_call>"}
    assert f["tags"][2]["content"]["json_schema"] == NO_ARGUMENTS
    # the grammar layer accepts it as is
    assert normalize_structural_tag(fmt)["format"]["tags"][1]["begin"].startswith(TRIGGER)


def test_response_format_per_choice():
    assert tool_response_format(TOOLS, "none") is None and tool_response_format(None, "auto") is None
    required = tool_response_format(TOOLS, "required")["format"]
    assert (required["at_least_one"], required["stop_after_first"], len(required["tags"])) == (True, False, 3)
    named = tool_response_format(TOOLS, NAMED_TIME)["format"]
    assert (named["at_least_one"], named["stop_after_first"]) == (True, True)
    assert [t["begin"] for t in named["tags"]] == ['<tool_call>{"name": "get_time", "arguments": ']
    single = tool_response_format(TOOLS, "auto", parallel_tool_calls=False)["format"]
    assert (single["at_least_one"], single["stop_after_first"]) == (False, True)


def test_arguments_schema():
    assert arguments_schema({"name": "f"}) == NO_ARGUMENTS
    assert arguments_schema({"name": "f", "parameters": True}) == {"type": "object"}
    assert arguments_schema({"name": "f", "parameters": {"properties": {"a": {}}}}) == \
        {"properties": {"a": {}}, "type": "object"}
    assert arguments_schema(WEATHER["function"]) is WEATHER["function"]["parameters"]


# ---- the grammar enforces calls -------------------------------------------------------------


def test_valid_calls_are_accepted(compiler):
    assert accepts(compiler, "Sure. " + CALL_WEATHER)
    assert accepts(compiler, CALL_TIME)
    assert accepts(compiler, '<tool_call>{"name": "ping", "arguments": {}}</tool_call>')
    assert accepts(compiler, "It is sunny.")  # auto: plain text is an answer too
    assert accepts(compiler, CALL_WEATHER + "\n" + CALL_TIME + " Done.")  # parallel calls, text around
    assert accepts(compiler, '<tool_call>{"name": "get_current_weather", "arguments": {"location": "Paris"}}</tool_call>')


@pytest.mark.parametrize("text", [
    CALL_WEATHER.replace("celsius", "kelvin"),  # not in the enum
    CALL_WEATHER.replace("get_current_weather", "get_weather"),  # unknown function
    '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',  # missing required argument
    '<tool_call>{"name": "get_current_weather", "arguments": {"location": "P", "wind": 1}}</tool_call>',
    '<tool_call>{"name": "ping", "arguments": {"a": 1}}</tool_call>',  # no parameters: {} only
    '<tool_call>{"name": "get_time", "arguments": ["Tokyo"]}</tool_call>',
    "I will mention <tool_call> in prose",  # the trigger can only start a call
])
def test_invalid_calls_are_rejected(compiler, text):
    assert not accepts(compiler, text)


def test_unfinished_call_cannot_end(compiler):
    m = matcher(compiler)
    assert m.accept_string('Ok <tool_call>{"name": "get_time", "arguments": {"location": "Tokyo"}')
    assert not m.can_terminate()
    assert m.accept_string("}</tool_call>") and m.can_terminate()


def test_required_needs_a_call(compiler):
    m = matcher(compiler, "required")
    assert m.accept_string("Let me check.") and not m.can_terminate()
    assert m.accept_string(" " + CALL_WEATHER) and m.can_terminate()
    assert accepts(compiler, CALL_WEATHER + CALL_TIME, "required")


def test_named_function_only(compiler):
    assert accepts(compiler, CALL_TIME, NAMED_TIME)
    assert not accepts(compiler, CALL_WEATHER, NAMED_TIME)
    assert not accepts(compiler, "The time is noon.", NAMED_TIME)
    assert not accepts(compiler, CALL_TIME + CALL_TIME, NAMED_TIME)  # generation ends after the call
    m = matcher(compiler, NAMED_TIME)
    assert m.accept_string(CALL_TIME) and m.can_terminate() and not m.accept_string(" more")


def test_no_parallel_calls(compiler):
    assert accepts(compiler, CALL_WEATHER, parallel_tool_calls=False)
    assert not accepts(compiler, CALL_WEATHER + CALL_TIME, parallel_tool_calls=False)


# ---- parsing calls back ---------------------------------------------------------------------


def test_parse_round_trip():
    content, calls = parse_tool_calls("Sure. " + CALL_WEATHER, TOOLS)
    assert content == "Sure."
    assert calls == [{"id": "call_0", "type": "function", "function": {
        "name": "get_current_weather", "arguments": '{"location":"Paris","unit":"celsius"}'}}]
    assert json.loads(calls[0]["function"]["arguments"]) == {"location": "Paris", "unit": "celsius"}


def test_parse_several_calls_and_plain_text():
    content, calls = parse_tool_calls(CALL_WEATHER + "\n" + CALL_TIME + "\n", TOOLS)
    assert content is None
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("call_0", "get_current_weather"),
                                                                 ("call_1", "get_time")]
    assert parse_tool_calls("  Just text.\n", TOOLS) == ("Just text.", [])
    assert parse_tool_calls("", TOOLS) == (None, [])


def test_parse_keeps_broken_regions_as_content():
    cut = '<tool_call>{"name": "get_time", "arguments": {"loca'
    assert parse_tool_calls("Checking. " + cut, TOOLS) == ("Checking. " + cut, [])
    content, calls = parse_tool_calls(CALL_TIME + " then " + cut, TOOLS)
    assert content == "then " + cut and len(calls) == 1
    unknown = CALL_TIME.replace("get_time", "launch")
    assert parse_tool_calls(unknown, TOOLS) == (unknown, [])
    assert parse_tool_calls(unknown)[1][0]["function"]["name"] == "launch"  # without tools: any name


def test_parse_end_tag_inside_a_string():
    text = '<tool_call>{"name": "get_time", "arguments": {"location": "</tool_call>"}}</tool_call> ok'
    content, calls = parse_tool_calls(text, TOOLS)
    assert content == "ok" and json.loads(calls[0]["function"]["arguments"]) == {"location": END_TAG}


def test_parse_is_the_inverse_of_rendering():
    text = tool_call_text("get_time", '{"location":"Tokyo"}')
    assert text == CALL_TIME
    assert parse_tool_calls(text, TOOLS)[1][0]["function"]["arguments"] == '{"location":"Tokyo"}'


# ---- prompt and history ---------------------------------------------------------------------


def test_tool_prompt():
    prompt = tool_prompt(TOOLS, "auto")
    lines = prompt.split("<tools>\n")[1].split("\n</tools>")[0].split("\n")
    assert [json.loads(line)["name"] for line in lines] == ["get_current_weather", "get_time", "ping"]
    assert json.loads(lines[0])["parameters"] == WEATHER["function"]["parameters"]
    assert '<tool_call>{"name": <function-name>, "arguments": <arguments-json-object>}</tool_call>' in prompt
    assert tool_prompt(TOOLS, "none") == "" and tool_prompt(None) == ""
    assert "at least one" in tool_prompt(TOOLS, "required")
    named = tool_prompt(TOOLS, NAMED_TIME)
    assert "get_current_weather" not in named and "You must call the function get_time." in named


def test_render_history():
    request = parse_chat_request({"messages": [
        {"role": "user", "content": "Weather in Paris and time in Tokyo?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_current_weather",
                                                          "arguments": '{"location":"Paris","unit":"celsius"}'}},
            {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": '{"location": "Tokyo"}'}}]},
        {"role": "tool", "content": "21 C", "tool_call_id": "a"},
        {"role": "tool", "content": "09:00", "tool_call_id": "b"},
    ], "tools": TOOLS}, vocab_size=49152)
    out = render_tool_messages(request.messages, request.tools, request.tool_choice, default_system="You are Smol.")
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"] == "You are Smol.\n\n" + tool_prompt(TOOLS, "auto")
    assert out[2]["content"] == "Checking.\n" + CALL_WEATHER + "\n" + CALL_TIME
    assert out[3]["content"] == "<tool_response>21 C</tool_response>\n<tool_response>09:00</tool_response>"
    assert all(set(m) == {"role", "content"} for m in out)


def test_render_appends_to_an_existing_system_message():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    out = render_tool_messages(messages, TOOLS, "required")
    assert out[0]["content"] == "Be brief.\n\n" + tool_prompt(TOOLS, "required")
    assert render_tool_messages(messages, TOOLS, "none") == messages
    assert render_tool_messages(messages) == messages
    assert messages[0]["content"] == "Be brief."  # the input is not modified

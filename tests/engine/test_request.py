"""The request protocol: every validation rule names the offending field."""

from __future__ import annotations

import pytest

from trellis.engine.request import (MAX_N, MAX_TOP_LOGPROBS, ChatRequest, CompletionRequest, GenerationConfig,
                                    parse_chat_request, parse_completion_request)
from trellis.errors import InvalidRequestError

VOCAB = 49152
USER = {"role": "user", "content": "What is the weather in Paris?"}
WEATHER = {"type": "function", "function": {
    "name": "get_current_weather", "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}


def chat(**fields) -> ChatRequest:
    return parse_chat_request({"messages": [USER], **fields}, vocab_size=VOCAB)


def chat_error(request: dict, **kwargs) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as info:
        parse_chat_request(request, vocab_size=VOCAB, **kwargs)
    return info.value


def field_of(**fields) -> str:
    return chat_error({"messages": [USER], **fields}).field


def messages_error(*messages) -> InvalidRequestError:
    return chat_error({"messages": list(messages)})


# ---- defaults and a full round trip ---------------------------------------------------------


def test_minimal_request_gets_openai_defaults():
    r = chat()
    assert r.messages == [USER]
    assert r.config == GenerationConfig()
    c = r.config
    assert (c.temperature, c.top_p, c.frequency_penalty, c.presence_penalty, c.repetition_penalty, c.n) == \
        (1.0, 1.0, 0.0, 0.0, 1.0, 1)
    assert c.max_tokens is None and c.seed is None and c.stop == () and c.logit_bias == {}
    assert not (c.logprobs or c.ignore_eos or c.complete_on_length) and c.top_logprobs == 0
    assert (r.stream, r.include_usage, r.response_format, r.tools, r.tool_choice, r.model) == \
        (False, False, None, None, None, None)


def test_model_defaults_apply_where_the_request_is_silent():
    defaults = {"temperature": 0.6, "top_p": 0.9, "repetition_penalty": 1.1, "max_tokens": 256}
    r = parse_chat_request({"messages": [USER], "top_p": 0.5, "temperature": None}, vocab_size=VOCAB,
                           defaults=defaults)
    assert (r.config.temperature, r.config.top_p, r.config.repetition_penalty, r.config.max_tokens) == \
        (0.6, 0.5, 1.1, 256)


def test_bad_defaults_are_named():
    assert chat_error({"messages": [USER]}, defaults={"temperature": 3}).field == "defaults.temperature"
    assert chat_error({"messages": [USER]}, defaults={"top_k": 3}).field == "defaults.top_k"


def test_full_request_round_trips():
    request = {
        "model": "SmolLM2-135M-Instruct",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}],
             "name": "ann"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "get_current_weather", "arguments": '{"location": "Paris"}'}}]},
            {"role": "tool", "content": '{"temperature": 21}', "tool_call_id": "call_0"},
        ],
        "stream": True, "stream_options": {"include_usage": True}, "n": 2,
        "frequency_penalty": 0.5, "presence_penalty": -0.5, "repetition_penalty": 1.2,
        "max_tokens": 64, "stop": ["\n\n", "END"], "temperature": 0, "top_p": 0.95,
        "logit_bias": {"17": -100, "42": 5.5}, "logprobs": True, "top_logprobs": 3, "seed": 7,
        "tools": [WEATHER, TIME], "tool_choice": "required", "parallel_tool_calls": False,
        "ignore_eos": False, "complete_on_length": True,
        "extra_body": {"enable_latency_breakdown": True, "enable_thinking": False},
    }
    r = parse_chat_request(request, vocab_size=VOCAB)
    assert r.model == "SmolLM2-135M-Instruct"
    assert r.messages == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather\nin Paris?", "name": "ann"},
        {"role": "assistant", "content": "", "tool_calls": request["messages"][2]["tool_calls"]},
        {"role": "tool", "content": '{"temperature": 21}', "tool_call_id": "call_0"},
    ]
    assert r.config == GenerationConfig(
        max_tokens=64, temperature=0.0, top_p=0.95, seed=7, stop=("\n\n", "END"), frequency_penalty=0.5,
        presence_penalty=-0.5, repetition_penalty=1.2, logit_bias={17: -100.0, 42: 5.5}, logprobs=True,
        top_logprobs=3, n=2, ignore_eos=False, complete_on_length=True)
    assert (r.stream, r.include_usage) == (True, True)
    assert r.tools == [WEATHER, TIME] and r.tool_choice == "required" and r.parallel_tool_calls is False
    assert r.latency_breakdown is True and r.enable_thinking is False
    assert isinstance(r.config.temperature, float) and isinstance(r.config.logit_bias[17], float)


def test_nulls_mean_absent():
    r = chat(stream=None, stream_options=None, n=None, max_tokens=None, stop=None, seed=None, logit_bias=None,
             logprobs=None, top_logprobs=None, tools=None, tool_choice=None, response_format=None, model=None,
             extra_body=None, ignore_eos=None)
    assert r.config == GenerationConfig() and r.tools is None


def test_null_unknown_fields_are_absent_too():
    # a response message echoed back into the history, with OpenAI's null fields
    echoed = {"role": "assistant", "content": "Sunny.", "refusal": None, "function_call": None, "audio": None}
    r = parse_chat_request({"messages": [USER, echoed, USER], "functions": None, "user": None}, vocab_size=VOCAB)
    assert r.messages[1] == {"role": "assistant", "content": "Sunny."}
    assert messages_error(USER, {**echoed, "refusal": "no"}, USER).field == "messages[1].refusal"


# ---- top level ------------------------------------------------------------------------------


def test_unknown_and_unsupported_fields():
    assert field_of(temprature=0.5) == "temprature"
    err = chat_error({"messages": [USER], "functions": []})
    assert err.field == "functions" and "tools" in err.message
    assert field_of(user=["u1"]) == "user" and field_of(metadata="m") == "metadata"
    # OpenAI's bookkeeping fields change nothing: accepted and ignored
    ignored = {"user": "u1", "metadata": {"k": "v"}, "store": False, "service_tier": "auto"}
    assert parse_chat_request({"messages": [USER], **ignored}, vocab_size=VOCAB) == \
        parse_chat_request({"messages": [USER]}, vocab_size=VOCAB)
    assert field_of(best_of=2) == "best_of"
    assert chat_error(["not", "a", "dict"]).field == "request"


@pytest.mark.parametrize("fields, where", [
    ({"temperature": True}, "temperature"),
    ({"temperature": "0.5"}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": 2.01}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_p": False}, "top_p"),
    ({"frequency_penalty": 2.5}, "frequency_penalty"),
    ({"presence_penalty": -3}, "presence_penalty"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"repetition_penalty": -1.0}, "repetition_penalty"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_completion_tokens": 0}, "max_completion_tokens"),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "max_completion_tokens"),
    ({"n": 0}, "n"),
    ({"n": MAX_N + 1}, "n"),
    ({"n": True}, "n"),
    ({"seed": 1.5}, "seed"),
    ({"seed": "7"}, "seed"),
    ({"seed": True}, "seed"),
    ({"logprobs": 1}, "logprobs"),
    ({"logprobs": "yes"}, "logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": False, "top_logprobs": 0}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": MAX_TOP_LOGPROBS + 1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 1.5}, "top_logprobs"),
    ({"ignore_eos": 1}, "ignore_eos"),
    ({"complete_on_length": "true"}, "complete_on_length"),
    ({"stream": 1}, "stream"),
    ({"model": 3}, "model"),
])
def test_generation_field_errors(fields, where):
    assert field_of(**fields) == where


def test_integral_floats_are_integers_and_ints_are_floats():
    c = chat(n=2.0, max_tokens=10.0, seed=3.0, temperature=1, top_p=1).config
    assert (c.n, c.max_tokens, c.seed) == (2, 10, 3) and all(isinstance(v, int) for v in (c.n, c.max_tokens, c.seed))
    assert isinstance(c.temperature, float) and isinstance(c.top_p, float)


def test_boundaries_are_accepted():
    c = chat(temperature=2, top_p=1, frequency_penalty=-2, presence_penalty=2, max_tokens=1, n=MAX_N,
             logprobs=True, top_logprobs=MAX_TOP_LOGPROBS, seed=-5).config
    assert (c.temperature, c.n, c.top_logprobs, c.seed) == (2.0, MAX_N, MAX_TOP_LOGPROBS, -5)
    assert chat(temperature=0).config.temperature == 0.0
    assert chat(max_completion_tokens=9).config.max_tokens == 9
    assert chat(max_tokens=9, max_completion_tokens=9).config.max_tokens == 9
    assert chat(logprobs=True, top_logprobs=0).config.top_logprobs == 0


def test_stop():
    assert chat(stop="###").config.stop == ("###",)
    assert chat(stop=["a", "b", "c", "d"]).config.stop == ("a", "b", "c", "d")
    assert chat(stop=[]).config.stop == ()
    assert field_of(stop="") == "stop"
    assert field_of(stop=["a", "b", "c", "d", "e"]) == "stop"
    assert field_of(stop=["a", ""]) == "stop[1]"
    assert field_of(stop=["a", 3]) == "stop[1]"
    assert field_of(stop=5) == "stop"


def test_logit_bias():
    assert chat(logit_bias={"0": 1, str(VOCAB - 1): -1, 5: 100, " 7": -100}).config.logit_bias == \
        {0: 1.0, VOCAB - 1: -1.0, 5: 100.0, 7: -100.0}
    assert field_of(logit_bias={"abc": 1}) == 'logit_bias["abc"]'
    assert field_of(logit_bias={str(VOCAB): 1}) == f'logit_bias["{VOCAB}"]'
    assert field_of(logit_bias={"-1": 1}) == 'logit_bias["-1"]'
    assert field_of(logit_bias={"3": 100.5}) == 'logit_bias["3"]'
    assert field_of(logit_bias={"3": True}) == 'logit_bias["3"]'
    assert field_of(logit_bias={"3": 1, 3: 2}) == 'logit_bias["3"]'
    assert field_of(logit_bias=[1, 2]) == "logit_bias"


def test_stream_options():
    assert chat(stream=True, stream_options={"include_usage": True}).include_usage is True
    assert chat(stream=True, stream_options={}).include_usage is False
    assert chat(stream=True, n=3).config.n == 3  # streaming several choices is allowed
    assert field_of(stream_options={"include_usage": True}) == "stream_options"
    assert field_of(stream=False, stream_options={"include_usage": True}) == "stream_options"
    assert field_of(stream=True, stream_options={"include_usage": 1}) == "stream_options.include_usage"
    assert field_of(stream=True, stream_options={"usage": True}) == "stream_options.usage"
    assert field_of(stream=True, stream_options=True) == "stream_options"


def test_response_format_shape_only():
    rf = {"type": "json_object", "schema": {"type": "object"}}
    assert chat(response_format=rf).response_format == rf
    assert chat(response_format={"type": "anything"}).response_format == {"type": "anything"}  # grammar layer's job
    assert field_of(response_format="json") == "response_format"
    assert field_of(response_format={"schema": {}}) == "response_format.type"
    assert field_of(response_format={"type": 3}) == "response_format.type"


def test_extra_body():
    assert chat(extra_body={}).latency_breakdown is False
    assert chat(extra_body={"enable_thinking": True}).enable_thinking is True
    assert field_of(extra_body={"enable_latency_breakdown": "yes"}) == "extra_body.enable_latency_breakdown"
    assert field_of(extra_body={"top_k": 5}) == "extra_body.top_k"


# ---- messages -------------------------------------------------------------------------------


def test_messages_required_and_non_empty():
    assert chat_error({}).field == "messages"
    assert chat_error({"messages": []}).field == "messages"
    assert chat_error({"messages": {"role": "user"}}).field == "messages"
    assert messages_error("hi").field == "messages[0]"


@pytest.mark.parametrize("messages, where", [
    ([{"content": "hi"}], "messages[0].role"),
    ([{"role": "robot", "content": "hi"}], "messages[0].role"),
    ([{"role": "function", "content": "hi", "name": "f"}], "messages[0].role"),
    ([USER, {"role": "system", "content": "late"}, USER], "messages[1].role"),
    ([USER, {"role": "assistant", "content": "Sunny."}], "messages[1].role"),
    ([{"role": "system", "content": "s"}], "messages[0].role"),
    ([{"role": "user"}], "messages[0].content"),
    ([{"role": "user", "content": None}], "messages[0].content"),
    ([{"role": "user", "content": 5}], "messages[0].content"),
    ([{"role": "user", "content": "hi", "weight": 1}], "messages[0].weight"),
    ([{"role": "user", "content": "hi", "name": 5}], "messages[0].name"),
    ([{"role": "user", "content": "hi", "tool_call_id": "x"}], "messages[0].tool_call_id"),
    ([{"role": "system", "content": "s", "tool_calls": []}, USER], "messages[0].tool_calls"),
    ([USER, {"role": "assistant"}, USER], "messages[1].content"),
    ([USER, {"role": "assistant", "content": None, "tool_calls": []}, USER], "messages[1].content"),
    ([{"role": "tool", "content": "21 C"}], "messages[0].tool_call_id"),
    ([{"role": "tool", "content": "21 C", "tool_call_id": 5}], "messages[0].tool_call_id"),
    ([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}], "messages[0].content[1].text"),
    ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[0].content[0].text"),
    ([{"role": "user", "content": [{"type": "text", "text": "a", "x": 1}]}], "messages[0].content[0].x"),
    ([{"role": "user", "content": [{"type": "video", "text": "a"}]}], "messages[0].content[0].type"),
    ([{"role": "user", "content": ["a"]}], "messages[0].content[0]"),
])
def test_message_errors(messages, where):
    assert messages_error(*messages).field == where


def test_image_parts_are_refused_clearly():
    err = messages_error({"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]})
    assert err.field == "messages[0].content[1]" and "text-only" in err.message


def test_message_forms_accepted():
    r = parse_chat_request({"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "Hi", "name": "bob"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": ""},
    ]}, vocab_size=VOCAB)
    assert [m["content"] for m in r.messages] == ["Be brief.", "Hi", "Hello!", ""]
    assert r.messages[1]["name"] == "bob" and "name" not in r.messages[0]
    # a tool result may end the conversation
    assert parse_chat_request({"messages": [{"role": "tool", "content": "x", "tool_call_id": "c"}]},
                              vocab_size=VOCAB).messages[-1]["role"] == "tool"


def test_last_message_error_names_its_index():
    err = messages_error(USER, {"role": "assistant", "content": "ok"})
    assert err.field == "messages[1].role" and "last message" in err.message


@pytest.mark.parametrize("call, where", [
    ({"type": "function", "function": {"name": "f", "arguments": "{}"}}, "messages[1].tool_calls[0].id"),
    ({"id": "c", "type": "function"}, "messages[1].tool_calls[0].function"),
    ({"id": "c", "type": "retrieval", "function": {"name": "f", "arguments": "{}"}}, "messages[1].tool_calls[0].type"),
    ({"id": "c", "function": {"arguments": "{}"}}, "messages[1].tool_calls[0].function.name"),
    ({"id": "c", "function": {"name": "f"}}, "messages[1].tool_calls[0].function.arguments"),
    ({"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}, "messages[1].tool_calls[0].function.arguments"),
    ({"id": "c", "function": {"name": "f", "arguments": "{oops"}}, "messages[1].tool_calls[0].function.arguments"),
    ({"id": "c", "function": {"name": "f", "arguments": "{}", "x": 1}}, "messages[1].tool_calls[0].function.x"),
    ({"id": "c", "function": {"name": "f", "arguments": "{}"}, "index": 0}, "messages[1].tool_calls[0].index"),
    ({"id": 3, "function": {"name": "f", "arguments": "{}"}}, "messages[1].tool_calls[0].id"),
])
def test_tool_call_errors(call, where):
    assert messages_error(USER, {"role": "assistant", "content": None, "tool_calls": [call]}, USER).field == where


# ---- tools ----------------------------------------------------------------------------------


def test_tools_default_to_auto():
    r = chat(tools=[WEATHER])
    assert r.tool_choice == "auto" and r.parallel_tool_calls is True and r.tools == [WEATHER]
    named = {"type": "function", "function": {"name": "get_time"}}
    assert chat(tools=[WEATHER, TIME], tool_choice=named).tool_choice == named
    for choice in ("none", "auto", "required"):
        assert chat(tools=[WEATHER], tool_choice=choice).tool_choice == choice


def test_tool_forms_accepted():
    bare = {"type": "function", "function": {"name": "now"}}
    anything = {"type": "function", "function": {"name": "any-thing_2", "parameters": True, "strict": True,
                                                 "description": None}}
    r = chat(tools=[bare, anything])
    assert r.tools == [bare, {"type": "function", "function": {"name": "any-thing_2", "parameters": True,
                                                               "strict": True}}]


def _tool(**function):
    return {"type": "function", "function": function}


@pytest.mark.parametrize("tools, where", [
    ("get_weather", "tools"),
    ([], "tools"),
    (["get_weather"], "tools[0]"),
    ([{"type": "retrieval", "function": {"name": "f"}}], "tools[0].type"),
    ([{"function": {"name": "f"}}], "tools[0].type"),
    ([{"type": "function"}], "tools[0].function"),
    ([{"type": "function", "function": {"name": "f"}, "extra": 1}], "tools[0].extra"),
    ([_tool(description="no name")], "tools[0].function.name"),
    ([_tool(name="has space")], "tools[0].function.name"),
    ([_tool(name="x" * 65)], "tools[0].function.name"),
    ([_tool(name="")], "tools[0].function.name"),
    ([_tool(name=5)], "tools[0].function.name"),
    ([WEATHER, _tool(name="get_current_weather")], "tools[1].function.name"),
    ([_tool(name="f", description=3)], "tools[0].function.description"),
    ([_tool(name="f", parameters="{}")], "tools[0].function.parameters"),
    ([_tool(name="f", parameters=False)], "tools[0].function.parameters"),
    ([_tool(name="f", strict="yes")], "tools[0].function.strict"),
    ([_tool(name="f", returns={})], "tools[0].function.returns"),
])
def test_tool_errors(tools, where):
    assert field_of(tools=tools) == where


@pytest.mark.parametrize("fields, where", [
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"tool_choice": "none"}, "tool_choice"),
    ({"parallel_tool_calls": False}, "parallel_tool_calls"),
    ({"tools": [WEATHER], "parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": 1}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "function": {"name": "get_current_weather"}}},
     "tool_choice.type"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function"}}, "tool_choice.function"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {}}}, "tool_choice.function.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
     "tool_choice.function.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_current_weather",
                                                                            "arguments": "{}"}}},
     "tool_choice.function.arguments"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_current_weather"}}, "tool_choice.name"),
])
def test_tool_choice_errors(fields, where):
    assert field_of(**fields) == where


def test_tools_and_response_format_conflict():
    err = chat_error({"messages": [USER], "tools": [WEATHER], "response_format": {"type": "json_object"}})
    assert err.field == "response_format" and "both constrain the output" in err.message
    # no conflict when the tools cannot be called, or the format constrains nothing
    assert chat(tools=[WEATHER], tool_choice="none", response_format={"type": "json_object"}).response_format
    assert chat(tools=[WEATHER], response_format={"type": "text"}).tools == [WEATHER]


# ---- completions ----------------------------------------------------------------------------


def completion(**fields) -> CompletionRequest:
    return parse_completion_request({"prompt": "Once upon a time", **fields}, vocab_size=VOCAB)


def completion_field(request: dict) -> str:
    with pytest.raises(InvalidRequestError) as info:
        parse_completion_request(request, vocab_size=VOCAB)
    return info.value.field


def test_completion_defaults_and_round_trip():
    r = completion()
    assert (r.prompt, r.echo, r.config, r.stream, r.include_usage, r.response_format, r.model) == \
        ("Once upon a time", False, GenerationConfig(), False, False, None, None)
    r = parse_completion_request(
        {"prompt": "2+2=", "echo": True, "max_tokens": 3, "temperature": 0, "stop": "\n", "stream": True,
         "stream_options": {"include_usage": True}, "response_format": {"type": "regex", "regex": "[0-9]+"},
         "model": "m", "logprobs": True, "top_logprobs": 2, "extra_body": {"enable_latency_breakdown": True}},
        vocab_size=VOCAB, defaults={"temperature": 0.7, "top_p": 0.8})
    assert (r.prompt, r.echo, r.stream, r.include_usage, r.model, r.latency_breakdown) == \
        ("2+2=", True, True, True, "m", True)
    assert r.config == GenerationConfig(max_tokens=3, temperature=0.0, top_p=0.8, stop=("\n",), logprobs=True,
                                        top_logprobs=2)
    assert r.response_format == {"type": "regex", "regex": "[0-9]+"}


@pytest.mark.parametrize("request_, where", [
    ({}, "prompt"),
    ({"prompt": None}, "prompt"),
    ({"prompt": ["a", "b"]}, "prompt"),
    ({"prompt": [1, 2, 3]}, "prompt"),
    ({"prompt": 5}, "prompt"),
    ({"prompt": "x", "echo": "yes"}, "echo"),
    ({"prompt": "x", "suffix": "end"}, "suffix"),
    ({"prompt": "x", "best_of": 2}, "best_of"),
    ({"prompt": "x", "user": 5}, "user"),
    ({"prompt": "x", "store": "yes"}, "store"),
    ({"prompt": "x", "messages": [USER]}, "messages"),
    ({"prompt": "x", "tools": [WEATHER]}, "tools"),
    ({"prompt": "x", "temperature": 9}, "temperature"),
    ({"prompt": "x", "logprobs": 5}, "logprobs"),
    ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
    ({"prompt": "x", "extra_body": {"enable_thinking": False}}, "extra_body.enable_thinking"),
    ({"prompt": "x", "response_format": []}, "response_format"),
])
def test_completion_errors(request_, where):
    assert completion_field(request_) == where


def test_completion_refusals_explain():
    with pytest.raises(InvalidRequestError, match="token ids"):
        parse_completion_request({"prompt": [1, 2]}, vocab_size=VOCAB)
    with pytest.raises(InvalidRequestError, match="not supported"):
        parse_completion_request({"prompt": "x", "suffix": "y"}, vocab_size=VOCAB)

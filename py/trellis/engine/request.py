"""The request protocol: OpenAI / web-llm chat and text-completion requests, validated in one place.

`parse_chat_request` and `parse_completion_request` turn a request dict (JSON as a browser or a
client sends it) into typed dataclasses, or raise `InvalidRequestError(message, field)` naming the
offending field: "messages[2].content", "stop[1]", 'logit_bias["abc"]', "tools[0].function.name".

Conventions (web-llm's `openai_api_protocols/`, checked against OpenAI's reference):
  * `null` means "absent" for every optional field (web-llm types them `T | null`), unknown ones
    included: a response message echoed back into the history (`"refusal": null`) is accepted.
  * Unknown fields with a value are refused, never ignored, at the top level and inside messages,
    content parts, tool calls, tools, tool_choice, stream_options and extra_body: a typo must not
    silently change the output.
  * Booleans are never numbers (JSON `true` is not a temperature). Integer fields (n, max_tokens,
    seed, top_logprobs) also take integral floats such as 2.0: JavaScript has one number type and
    JSON Schema counts 2.0 as an integer.
  * Ranges: temperature 0..2 (0 = greedy), top_p (0, 1], frequency/presence penalty -2..2,
    repetition_penalty > 0, max_tokens >= 1 (null: until the context fills), n 1..MAX_N,
    top_logprobs 0..MAX_TOP_LOGPROBS and only with logprobs true, seed any integer, stop a string
    or up to MAX_STOP non-empty strings, logit_bias token ids 0..vocab_size-1 -> -100..100.

Decisions where web-llm and OpenAI differ or are silent:
  * MAX_N = 128: a sanity cap; the engine may refuse less if it cannot hold that many sequences.
    n > 1 is allowed with streaming (OpenAI streams choices by index; web-llm refuses).
  * MAX_TOP_LOGPROBS = 20, OpenAI's cap (web-llm's is 5): the sampler ranks candidates anyway.
  * `extra_body` is accepted because web-llm has it: `enable_latency_breakdown` (bool) and, for
    chat, `enable_thinking` (bool; stored for the engine, meaningless for non-thinking models).
  * `max_completion_tokens` (OpenAI's newer name) is accepted as an alias of `max_tokens`.
  * `parallel_tool_calls` (OpenAI) is accepted with tools; false allows at most one call.
  * `complete_on_length` (Trellis extension, bool): when max_tokens cuts a grammar-constrained
    output, finish the structure instead of returning it cut.
  * Message content may be a list of text parts for every role (OpenAI allows it); the texts are
    joined with "\n". Image, audio and file parts are refused: the models are text-only.
  * `suffix`, `best_of`, and the deprecated `functions` / `function_call` are refused with a
    message saying so; prompts given as lists (of strings or token ids) are refused. `user`,
    `metadata`, `store` and `service_tier` (OpenAI's bookkeeping) are checked for type and ignored.
  * tools together with a response_format are refused (both constrain the output; tool calls are
    themselves enforced through a structural-tag response format), unless tool_choice is "none".
  * Without tools, tool_choice is an error; with tools it defaults to "auto".

The response_format is checked only for shape here (an object with a string "type");
`trellis.grammar.response_format` validates the rest when it compiles it.
Pure Python (runs under Pyodide).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from ..errors import InvalidRequestError

MAX_N = 128
MAX_TOP_LOGPROBS = 20
MAX_STOP = 4
MAX_LOGIT_BIAS = 100.0
# Objects and arrays one inside the other in a tool call's arguments: the chat template writes
# them back with tojson, which recurses.
MAX_ARGUMENT_NESTING = 256
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOKEN_ID = re.compile(r"[+-]?[0-9]+")

# Fields of model-level `defaults` (e.g. from the model's generation config).
DEFAULTABLE = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "repetition_penalty",
               "max_tokens")

_GENERATION_FIELDS = {
    "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "logit_bias", "logprobs", "top_logprobs", "n",
    "ignore_eos", "complete_on_length",
}
# OpenAI fields that do not change the answer (bookkeeping for OpenAI's own service): accepted when
# well-formed and ignored, as vLLM's and llama.cpp's servers do.
_IGNORED = {"user": str, "metadata": dict, "store": bool, "service_tier": str}
_COMMON_FIELDS = _GENERATION_FIELDS | set(_IGNORED) | {"model", "stream", "stream_options", "response_format",
                                                       "extra_body"}
_CHAT_FIELDS = _COMMON_FIELDS | {"messages", "tools", "tool_choice", "parallel_tool_calls"}
_COMPLETION_FIELDS = _COMMON_FIELDS | {"prompt", "echo"}
_UNSUPPORTED = {
    "suffix": "not supported (no fill-in-the-middle)",
    "best_of": "not supported; use n and pick among the choices",
    "functions": "deprecated by OpenAI and not supported; use tools",
    "function_call": "deprecated by OpenAI and not supported; use tool_choice",
}
_ROLES = ("system", "user", "assistant", "tool")
_MESSAGE_FIELDS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "name", "tool_call_id"},
}
_EXTRA_BODY = {"chat": {"enable_latency_breakdown", "enable_thinking"},
               "completion": {"enable_latency_breakdown"}}


@dataclass(frozen=True)
class GenerationConfig:
    """Sampling and limits, shared by chat and text completions."""
    max_tokens: int | None = None  # None: until the context window fills
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: bool = False
    top_logprobs: int = 0
    n: int = 1
    ignore_eos: bool = False
    complete_on_length: bool = False  # Trellis: finish a constrained structure cut by max_tokens


@dataclass
class ChatRequest:
    messages: list[dict]  # {"role", "content": str, "name"?, "tool_calls"?, "tool_call_id"?}
    config: GenerationConfig
    stream: bool = False
    include_usage: bool = False
    response_format: dict | None = None
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None  # "none" | "auto" | "required" | {"type", "function"}
    model: str | None = None
    parallel_tool_calls: bool = True
    latency_breakdown: bool = False  # extra_body.enable_latency_breakdown
    enable_thinking: bool | None = None  # extra_body.enable_thinking


@dataclass
class CompletionRequest:
    prompt: str
    echo: bool
    config: GenerationConfig
    stream: bool = False
    include_usage: bool = False
    response_format: dict | None = None
    model: str | None = None
    latency_breakdown: bool = False


# ---- scalar checks ------------------------------------------------------------------------


def _fail(message: str, where: str):
    raise InvalidRequestError(message, where)


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


def _as_bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        _fail(f"must be a boolean, got {_kind(value)}", where)
    return value


def _as_float(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(f"must be a number, got {_kind(value)}", where)
    try:
        value = float(value)
    except OverflowError:  # an int past the float range
        value = math.inf
    if not math.isfinite(value):
        _fail("must be a finite number", where)
    return value


def _as_int(value, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JavaScript numbers: 2.0 is 2
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(f"must be an integer, got {_kind(value)}", where)
    return value


def _as_str(value, where: str) -> str:
    if not isinstance(value, str):
        _fail(f"must be a string, got {_kind(value)}", where)
    return value


def _in_range(value, where: str, lo=None, hi=None, *, lo_open: bool = False):
    if lo is not None and (value <= lo if lo_open else value < lo) or hi is not None and value > hi:
        left = f"({lo}" if lo_open else f"[{lo}" if lo is not None else "(-inf"
        right = f"{hi}]" if hi is not None else "inf)"
        _fail(f"must be in {left}, {right}, got {value}", where)
    return value


def _check_fields(obj: dict, allowed: set, where: str) -> None:
    for key, value in obj.items():
        if key not in allowed and value is not None:
            name = f"{where}.{key}" if where else str(key)
            _fail("unknown field", name)


def _object(value, where: str) -> dict:
    if not isinstance(value, dict):
        _fail(f"must be an object, got {_kind(value)}", where)
    return value


# ---- generation config --------------------------------------------------------------------


def _generation_config(req: dict, defaults: dict | None, vocab_size: int) -> GenerationConfig:
    defaults = defaults or {}
    for key in defaults:
        if key not in DEFAULTABLE:
            _fail(f"unknown default (defaultable: {', '.join(DEFAULTABLE)})", f"defaults.{key}")

    def pick(key):  # (value, field name) from the request, else the model's defaults
        if req.get(key) is not None:
            return req[key], key
        if defaults.get(key) is not None:
            return defaults[key], f"defaults.{key}"
        return None, key

    def number(key, fallback, lo=None, hi=None, lo_open=False) -> float:
        value, where = pick(key)
        if value is None:
            return fallback
        return _in_range(_as_float(value, where), where, lo, hi, lo_open=lo_open)

    out = {
        "temperature": number("temperature", 1.0, 0.0, 2.0),
        "top_p": number("top_p", 1.0, 0.0, 1.0, lo_open=True),
        "frequency_penalty": number("frequency_penalty", 0.0, -2.0, 2.0),
        "presence_penalty": number("presence_penalty", 0.0, -2.0, 2.0),
        "repetition_penalty": number("repetition_penalty", 1.0, 0.0, None, lo_open=True),
    }

    # max_tokens, or OpenAI's newer name for it
    alias = req.get("max_completion_tokens")
    if alias is not None and req.get("max_tokens") is not None and alias != req["max_tokens"]:
        _fail("conflicts with max_tokens; give one of them", "max_completion_tokens")
    value, where = (alias, "max_completion_tokens") if alias is not None else pick("max_tokens")
    out["max_tokens"] = None if value is None else _in_range(_as_int(value, where), where, 1)

    out["n"] = 1 if req.get("n") is None else _in_range(_as_int(req["n"], "n"), "n", 1, MAX_N)
    out["seed"] = None if req.get("seed") is None else _as_int(req["seed"], "seed")
    out["stop"] = _stop(req.get("stop"))
    out["logit_bias"] = _logit_bias(req.get("logit_bias"), vocab_size)

    logprobs = req.get("logprobs")
    if isinstance(logprobs, int) and not isinstance(logprobs, bool):
        _fail("must be a boolean (the count of alternatives goes in top_logprobs)", "logprobs")
    out["logprobs"] = False if logprobs is None else _as_bool(logprobs, "logprobs")
    top = req.get("top_logprobs")
    if top is not None:
        if not out["logprobs"]:
            _fail("requires logprobs: true", "top_logprobs")
        top = _in_range(_as_int(top, "top_logprobs"), "top_logprobs", 0, MAX_TOP_LOGPROBS)
    out["top_logprobs"] = top or 0

    for key in ("ignore_eos", "complete_on_length"):
        out[key] = False if req.get(key) is None else _as_bool(req[key], key)
    return GenerationConfig(**out)


def _stop(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        if not value:
            _fail("must not be empty", "stop")
        return (value,)
    if not isinstance(value, list):
        _fail(f"must be a string or a list of strings, got {_kind(value)}", "stop")
    if len(value) > MAX_STOP:
        _fail(f"at most {MAX_STOP} stop sequences, got {len(value)}", "stop")
    for i, s in enumerate(value):
        if not _as_str(s, f"stop[{i}]"):
            _fail("must not be empty", f"stop[{i}]")
    return tuple(value)


def _logit_bias(value, vocab_size: int) -> dict[int, float]:
    if value is None:
        return {}
    out: dict[int, float] = {}
    for key, bias in _object(value, "logit_bias").items():
        where = f"logit_bias[{json.dumps(str(key))}]"
        if isinstance(key, int) and not isinstance(key, bool):
            token = key
        elif isinstance(key, str) and _TOKEN_ID.fullmatch(key.strip()):
            token = int(key)
        else:
            _fail("keys must be token ids (integers, given as strings in JSON)", where)
        if not 0 <= token < vocab_size:
            _fail(f"token id out of range 0..{vocab_size - 1}", where)
        if token in out:
            _fail("token id given twice", where)
        out[token] = _in_range(_as_float(bias, where), where, -MAX_LOGIT_BIAS, MAX_LOGIT_BIAS)
    return out


# ---- fields shared by both request kinds --------------------------------------------------


def _top_level(req, allowed: set, what: str) -> dict:
    if not isinstance(req, dict):
        _fail(f"a {what} request must be an object, got {_kind(req)}", "request")
    for key, value in req.items():
        if key not in allowed and value is not None:
            _fail(_UNSUPPORTED.get(key, "unknown field"), str(key))
    for key, kind in _IGNORED.items():
        value = req.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) != (kind is bool)):
            _fail(f"must be a {'boolean' if kind is bool else 'string' if kind is str else 'object'}, "
                  f"got {_kind(value)}", key)
    return req


def _streaming(req: dict) -> tuple[bool, bool]:
    stream = False if req.get("stream") is None else _as_bool(req["stream"], "stream")
    options = req.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        _fail("only allowed when stream is true", "stream_options")
    _check_fields(_object(options, "stream_options"), {"include_usage"}, "stream_options")
    usage = options.get("include_usage")
    return stream, False if usage is None else _as_bool(usage, "stream_options.include_usage")


def _response_format(value) -> dict | None:
    if value is None:
        return None
    _object(value, "response_format")
    if "type" not in value:
        _fail("required", "response_format.type")
    _as_str(value["type"], "response_format.type")
    return value


def _extra_body(req: dict, kind: str) -> dict:
    value = req.get("extra_body")
    if value is None:
        return {}
    _check_fields(_object(value, "extra_body"), _EXTRA_BODY[kind], "extra_body")
    return {k: _as_bool(v, f"extra_body.{k}") for k, v in value.items() if v is not None}


def _model(req: dict) -> str | None:
    return None if req.get("model") is None else _as_str(req["model"], "model")


# ---- messages -----------------------------------------------------------------------------


def _content(value, where: str) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        _fail(f"must be a string or a list of text parts, got {_kind(value)}", where)
    texts = []
    for j, part in enumerate(value):
        at = f"{where}[{j}]"
        kind = _object(part, at).get("type")
        if kind in ("image_url", "input_image", "input_audio", "file"):
            _fail(f"{kind} parts are not supported: this model is text-only", at)
        if kind != "text":
            _fail(f"must be 'text', got {kind!r}", f"{at}.type")
        _check_fields(part, {"type", "text"}, at)
        if "text" not in part:
            _fail("required", f"{at}.text")
        texts.append(_as_str(part["text"], f"{at}.text"))
    return "\n".join(texts)


def _tool_calls(value, where: str) -> list[dict]:
    if not isinstance(value, list):
        _fail(f"must be a list, got {_kind(value)}", where)
    calls = []
    for j, call in enumerate(value):
        at = f"{where}[{j}]"
        _check_fields(_object(call, at), {"id", "type", "function"}, at)
        for key in ("id", "function"):
            if key not in call:
                _fail("required", f"{at}.{key}")
        if call.get("type", "function") != "function":
            _fail(f"must be 'function', got {call['type']!r}", f"{at}.type")
        fn = _object(call["function"], f"{at}.function")
        _check_fields(fn, {"name", "arguments"}, f"{at}.function")
        for key in ("name", "arguments"):
            if key not in fn:
                _fail("required", f"{at}.function.{key}")
        arguments = _as_str(fn["arguments"], f"{at}.function.arguments")
        _check_arguments(arguments, f"{at}.function.arguments")
        calls.append({"id": _as_str(call["id"], f"{at}.id"), "type": "function",
                      "function": {"name": _as_str(fn["name"], f"{at}.function.name"),
                                   "arguments": arguments}})
    return calls


def _check_arguments(text: str, where: str) -> None:
    """Tool-call arguments are JSON text nested at most MAX_ARGUMENT_NESTING deep."""
    try:
        value = json.loads(text)
    except RecursionError:
        _fail(f"nested deeper than {MAX_ARGUMENT_NESTING} objects and arrays (a limit)", where)
    except ValueError as e:
        _fail(f"must be JSON text ({e})", where)
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > MAX_ARGUMENT_NESTING:
            _fail(f"nested deeper than {MAX_ARGUMENT_NESTING} objects and arrays (a limit)", where)
        level = [x for v in level if isinstance(v, (dict, list)) for x in (v.values() if isinstance(v, dict) else v)]


def _messages(value) -> list[dict]:
    if value is None:
        _fail("required", "messages")
    if not isinstance(value, list):
        _fail(f"must be a list of messages, got {_kind(value)}", "messages")
    if not value:
        _fail("must contain at least one message", "messages")
    out = []
    for i, m in enumerate(value):
        at = f"messages[{i}]"
        _object(m, at)
        if "role" not in m:
            _fail("required", f"{at}.role")
        role = m["role"]
        if role not in _ROLES:
            hint = " (the 'function' role is deprecated; use 'tool')" if role == "function" else ""
            _fail(f"must be one of {', '.join(_ROLES)}, got {role!r}{hint}", f"{at}.role")
        if role == "system" and i != 0:
            _fail("a system message is only allowed as the first message", f"{at}.role")
        _check_fields(m, _MESSAGE_FIELDS[role], at)
        msg: dict = {"role": role}
        if role == "assistant" and m.get("tool_calls") is not None:
            msg["tool_calls"] = _tool_calls(m["tool_calls"], f"{at}.tool_calls")
        if m.get("content") is None:
            if not msg.get("tool_calls"):
                _fail("required" + (" unless tool_calls is given" if role == "assistant" else ""),
                      f"{at}.content")
            msg["content"] = ""
        else:
            msg["content"] = _content(m["content"], f"{at}.content")
        if m.get("name") is not None:
            msg["name"] = _as_str(m["name"], f"{at}.name")
        if role == "tool":
            if m.get("tool_call_id") is None:
                _fail("required for a tool message", f"{at}.tool_call_id")
            msg["tool_call_id"] = _as_str(m["tool_call_id"], f"{at}.tool_call_id")
        out.append(msg)
    if out[-1]["role"] not in ("user", "tool"):
        _fail("the last message must be from the user (or a tool result)", f"messages[{len(out) - 1}].role")
    return out


# ---- tools --------------------------------------------------------------------------------


def _tools(value) -> list[dict] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        _fail(f"must be a list of tools, got {_kind(value)}", "tools")
    if not value:
        _fail("must list at least one tool (omit the field for none)", "tools")
    out, seen = [], set()
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        _check_fields(_object(tool, at), {"type", "function"}, at)
        if tool.get("type") != "function":
            _fail(f"must be 'function', got {tool.get('type')!r}", f"{at}.type")
        if "function" not in tool:
            _fail("required", f"{at}.function")
        fn = _object(tool["function"], f"{at}.function")
        _check_fields(fn, {"name", "description", "parameters", "strict"}, f"{at}.function")
        if "name" not in fn:
            _fail("required", f"{at}.function.name")
        name = _as_str(fn["name"], f"{at}.function.name")
        if not TOOL_NAME.fullmatch(name):
            _fail("must be 1-64 characters of a-z, A-Z, 0-9, '_' or '-'", f"{at}.function.name")
        if name in seen:
            _fail(f"duplicate function name {name!r}", f"{at}.function.name")
        seen.add(name)
        out_fn: dict = {"name": name}
        if fn.get("description") is not None:
            out_fn["description"] = _as_str(fn["description"], f"{at}.function.description")
        params = fn.get("parameters")
        if params is not None:
            if params is False:
                _fail("false matches no arguments: such a function can never be called", f"{at}.function.parameters")
            if params is not True:
                _object(params, f"{at}.function.parameters")
            out_fn["parameters"] = params
        if fn.get("strict") is not None:
            out_fn["strict"] = _as_bool(fn["strict"], f"{at}.function.strict")
        out.append({"type": "function", "function": out_fn})
    return out


def _tool_choice(value, tools: list[dict] | None):
    if value is None:
        return "auto" if tools else None
    if not tools:
        _fail("only allowed together with tools", "tool_choice")
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            _fail(f"must be 'none', 'auto', 'required' or a named function, got {value!r}", "tool_choice")
        return value
    _check_fields(_object(value, "tool_choice"), {"type", "function"}, "tool_choice")
    if value.get("type") != "function":
        _fail(f"must be 'function', got {value.get('type')!r}", "tool_choice.type")
    if "function" not in value:
        _fail("required", "tool_choice.function")
    fn = _object(value["function"], "tool_choice.function")
    _check_fields(fn, {"name"}, "tool_choice.function")
    if "name" not in fn:
        _fail("required", "tool_choice.function.name")
    name = _as_str(fn["name"], "tool_choice.function.name")
    names = [t["function"]["name"] for t in tools]
    if name not in names:
        _fail(f"{name!r} is not one of the tools ({', '.join(names)})", "tool_choice.function.name")
    return {"type": "function", "function": {"name": name}}


# ---- entry points -------------------------------------------------------------------------


def parse_chat_request(request: dict, *, vocab_size: int, defaults: dict | None = None) -> ChatRequest:
    """Validate a chat-completion request; `defaults` are the model's sampling defaults (keys in
    DEFAULTABLE), used where the request leaves a field out. Raises InvalidRequestError."""
    req = _top_level(request, _CHAT_FIELDS, "chat completion")
    messages = _messages(req.get("messages"))
    config = _generation_config(req, defaults, vocab_size)
    stream, include_usage = _streaming(req)
    response_format = _response_format(req.get("response_format"))
    tools = _tools(req.get("tools"))
    tool_choice = _tool_choice(req.get("tool_choice"), tools)
    parallel = req.get("parallel_tool_calls")
    if parallel is not None:
        if not tools:
            _fail("only allowed together with tools", "parallel_tool_calls")
        _as_bool(parallel, "parallel_tool_calls")
    if tools and tool_choice != "none" and response_format is not None and response_format["type"] != "text":
        _fail("cannot be combined with tools: both constrain the output (tool calls are enforced "
              "through a structural-tag response format); drop one, or set tool_choice to 'none'",
              "response_format")
    extra = _extra_body(req, "chat")
    return ChatRequest(messages=messages, config=config, stream=stream, include_usage=include_usage,
                       response_format=response_format, tools=tools, tool_choice=tool_choice,
                       model=_model(req), parallel_tool_calls=parallel is not False,
                       latency_breakdown=extra.get("enable_latency_breakdown", False),
                       enable_thinking=extra.get("enable_thinking"))


def parse_completion_request(request: dict, *, vocab_size: int,
                             defaults: dict | None = None) -> CompletionRequest:
    """Validate a raw-prompt completion request (web-llm's completion.ts). Raises
    InvalidRequestError."""
    req = _top_level(request, _COMPLETION_FIELDS, "completion")
    prompt = req.get("prompt")
    if prompt is None:
        _fail("required", "prompt")
    if isinstance(prompt, list):
        _fail("a list (of prompts or token ids) is not supported; give one string", "prompt")
    _as_str(prompt, "prompt")
    echo = False if req.get("echo") is None else _as_bool(req["echo"], "echo")
    config = _generation_config(req, defaults, vocab_size)
    stream, include_usage = _streaming(req)
    extra = _extra_body(req, "completion")
    return CompletionRequest(prompt=prompt, echo=echo, config=config, stream=stream,
                             include_usage=include_usage,
                             response_format=_response_format(req.get("response_format")),
                             model=_model(req), latency_breakdown=extra.get("enable_latency_breakdown", False))

"""Tool calling through structural tags, for models without a tool template of their own.

(A model whose chat template writes `tools` gets its family's own syntax instead: tool_syntax.py.)

The default model (SmolLM2-135M-Instruct, ChatML) was not trained on a tool format, so Trellis uses
the Hermes / Qwen convention and lets the grammar make it exact:

  * Prompt: `tool_prompt` is appended to the system message. It lists each function on one line
    as JSON ({"name", "description", "parameters"}) inside <tools></tools>, and asks for calls as
        <tool_call>{"name": <function-name>, "arguments": <arguments-json-object>}</tool_call>
    (on one line, exactly the text the grammar enforces, so the prompt never fights the grammar).
  * Grammar: `tool_response_format` is a structural-tag response format (web-llm / xgrammar
    "triggered_tags"): free text in which "<tool_call>" can only start a call; a call is
        <tool_call>{"name": "get_weather", "arguments": ARGS}</tool_call>
    with ARGS enforced by the function's parameters schema (one tag per function, so the name
    selects the schema). tool_choice "auto": calls are optional; "required": at least one call
    (free text alone cannot end); a named function: only that function's tag, at least one call;
    "none": no grammar and no tool prompt.
    stop_after_first: false (parallel calls, with text between them, are allowed) unless the
    request names one function or sets parallel_tool_calls false; then generation ends after the
    first call, since a second call could only repeat it or be refused.
  * Parsing: `parse_tool_calls` cuts the calls out of the generated text and returns them in
    OpenAI's shape, with the remaining text as the content.
  * History: `render_tool_messages` turns assistant messages with tool_calls back into the same
    <tool_call> text, and tool results into <tool_response>...</tool_response> blocks sent as a
    *user* turn (consecutive results merged into one turn), as Qwen's template does: SmolLM2 has
    never seen a "tool" role, and a user turn keeps the conversation alternating.

Functions without `parameters` take no arguments (OpenAI: "an empty parameter list"), so their
ARGS must be {}; `parameters: true` means any object; a schema without a "type" is made an object
schema, since arguments are always a JSON object.
Pure Python (runs under Pyodide).
"""

from __future__ import annotations

import json

TRIGGER = "<tool_call>"
END_TAG = "</tool_call>"
NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}


def tool_functions(tools) -> list[dict]:
    """The function definitions of OpenAI tools ({"type": "function", "function": {...}})."""
    return [t["function"] for t in tools or ()]


def named_function(tool_choice) -> str | None:
    return tool_choice["function"]["name"] if isinstance(tool_choice, dict) else None


def arguments_schema(function: dict):
    """The JSON Schema that a call's arguments must match."""
    params = function.get("parameters")
    if params is None:
        return NO_ARGUMENTS
    if params is True:
        return {"type": "object"}
    if isinstance(params, dict) and "type" not in params:
        return {**params, "type": "object"}
    return params


def _begin(name: str) -> str:
    return f'{TRIGGER}{{"name": {json.dumps(name)}, "arguments": '


def tool_call_text(name: str, arguments: str) -> str:
    """One call as the model writes it (`arguments` is JSON text)."""
    try:
        arguments = json.dumps(json.loads(arguments), ensure_ascii=False)  # the prompt's style
    except ValueError:
        pass
    return f"{_begin(name)}{arguments}}}{END_TAG}"


def tool_prompt(tools, tool_choice="auto", *, parallel_tool_calls: bool = True) -> str:
    """Text to append to the system message ("" for tool_choice "none" or no tools)."""
    if not tools or tool_choice == "none":
        return ""
    named = named_function(tool_choice)
    lines = []
    for fn in tool_functions(tools):
        if named is None or fn["name"] == named:
            entry = {"name": fn["name"], "description": fn.get("description", ""),
                     "parameters": arguments_schema(fn)}
            lines.append(json.dumps(entry, ensure_ascii=False))
    text = ("# Tools\n\nYou can call the following functions, one per line:\n<tools>\n"
            + "\n".join(lines) + "\n</tools>\n\n"
            "To call a function, write its name and arguments as a JSON object inside "
            "<tool_call></tool_call> tags, like this:\n"
            '<tool_call>{"name": <function-name>, "arguments": <arguments-json-object>}</tool_call>')
    if named is not None:
        return text + f"\n\nYou must call the function {named}."
    if tool_choice == "required":
        text += "\n\nYou must call at least one function."
    else:
        text += "\n\nCall a function only when it helps; otherwise answer directly."
    if parallel_tool_calls:
        text += " You may call several functions, each in its own <tool_call> tag."
    return text


def tool_response_format(tools, tool_choice="auto", *, parallel_tool_calls: bool = True) -> dict | None:
    """The structural-tag response format that enforces tool calls (None for "none"/no tools)."""
    if not tools or tool_choice == "none":
        return None
    named = named_function(tool_choice)
    tags = [{"begin": _begin(fn["name"]),
             "content": {"type": "json_schema", "json_schema": arguments_schema(fn)},
             "end": "}" + END_TAG}
            for fn in tool_functions(tools) if named is None or fn["name"] == named]
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [TRIGGER], "tags": tags,
        "at_least_one": named is not None or tool_choice == "required",
        "stop_after_first": named is not None or not parallel_tool_calls}}


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _parse_call(text: str, i: int, decoder: json.JSONDecoder, names) -> tuple[dict, int] | None:
    """The call whose JSON starts at text[i] (after the trigger) and its end, or None."""
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    try:
        obj, j = decoder.raw_decode(text, i)  # not a search for END_TAG: a string may contain it
    except ValueError:
        return None
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    if not text.startswith(END_TAG, j) or not isinstance(obj, dict) or set(obj) != {"name", "arguments"}:
        return None
    name, arguments = obj["name"], obj["arguments"]
    if isinstance(arguments, str):  # some models quote the arguments
        try:
            arguments = decoder.decode(arguments)
        except ValueError:
            return None
    if not isinstance(name, str) or (names is not None and name not in names) or not isinstance(arguments, dict):
        return None
    return {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))}, \
        j + len(END_TAG)


def parse_tool_calls(text: str, tools=None) -> tuple[str | None, list[dict]]:
    """(content, tool_calls) of generated text: each well-formed <tool_call> region becomes an
    OpenAI tool call with id "call_<index>" and compact JSON arguments; the text around the calls,
    stripped, is the content (None if empty). A region that does not parse (cut by max_tokens, or
    naming a function not in `tools`) stays in the content."""
    names = {fn["name"] for fn in tool_functions(tools)} if tools else None
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    pieces, calls, pos, search = [], [], 0, 0
    while (start := text.find(TRIGGER, search)) >= 0:
        found = _parse_call(text, start + len(TRIGGER), decoder, names)
        if found is None:  # keep it as text; look for a call after this trigger
            search = start + len(TRIGGER)
            continue
        call, end = found
        pieces.append(text[pos:start])
        calls.append({"id": f"call_{len(calls)}", "type": "function", "function": call})
        pos = search = end
    pieces.append(text[pos:])
    content = "".join(pieces).strip()
    return content or None, calls


def render_tool_messages(messages: list[dict], tools=None, tool_choice="auto", *,
                         parallel_tool_calls: bool = True, default_system: str | None = None) -> list[dict]:
    """Normalized messages (as parse_chat_request returns them) -> plain {"role", "content"}
    messages for the ChatML template: tool calls and results rendered as text, and the tool prompt
    appended to the system message (a system message of `default_system` plus the prompt is
    inserted when none leads, so the model keeps its usual system text)."""
    out: list[dict] = []
    previous_tool = False
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "tool":
            block = f"<tool_response>{content}</tool_response>"
            if previous_tool:  # consecutive results: one user turn
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block})
            previous_tool = True
            continue
        previous_tool = False
        if role == "assistant" and m.get("tool_calls"):
            calls = [tool_call_text(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]
            content = "\n".join(([content] if content else []) + calls)
        out.append({"role": role, "content": content})
    prompt = tool_prompt(tools, tool_choice, parallel_tool_calls=parallel_tool_calls)
    if prompt:
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{prompt}" if out[0]["content"] else prompt
        else:
            out.insert(0, {"role": "system", "content": f"{default_system}\n\n{prompt}" if default_system else prompt})
    return out

"""Tool calls in each model family's own syntax, for models whose chat template writes tools.

A template that mentions `tools` gets the request's tools and the tool-call history itself (the
model sees the prompt it was trained on). The calls it then writes are enforced by a structural
tag in the syntax the family was trained to write, and parsed back into OpenAI `tool_calls`:

  hermes        <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>    Qwen2.5/3, Hermes 2/3
  llama3_json   {"name": "f", "parameters": {...}}                              Llama 3.1 / 3.2
  mistral_list  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]            Mistral Nemo (v3 tekken)
  mistral_args  [TOOL_CALLS]f[ARGS]{...}                                        Mistral Small 3.2 (v11+)

The family is read from the template's own text (`syntax_for_template`): the marker it writes in
the assistant's tool-call turns. A template that mentions tools in no syntax known here, or none
at all (SmolLM2, SmolLM3's, Gemma's), keeps Trellis's own tool prompt (tools.py).

Per syntax, as in tools.py: one tag per function (the name selects the arguments' schema);
tool_choice "required" or a named function: at least one call; a named function or
parallel_tool_calls false: one call only. Llama 3's templates refuse more than one call per turn,
so its syntax always stops after the first. Mistral Nemo writes its calls as one JSON list, which
is enforced as one JSON Schema (an array of {"name": const, "arguments": schema} objects, one
item when calls may not be parallel). Mistral's templates require call ids of 9 alphanumerics,
so calls parsed in the Mistral syntaxes get such ids (the history then renders).

Pure Python (runs under Pyodide).
"""

from __future__ import annotations

import json
import random
import string

from .tools import arguments_schema, named_function, tool_functions

_ALNUM = string.ascii_letters + string.digits


class ToolSyntax:
    """One family's tool-call syntax: the response format that enforces calls, and their parser."""

    name = ""
    trigger = ""
    # Strings of the syntax that a family's tokenizer may hold as control tokens (Mistral's
    # [TOOL_CALLS]): the model writes them as one token, so the engine lets the grammar emit them.
    markers: tuple[str, ...] = ()
    single_call_only = False  # the family's template refuses more than one call per turn
    whole_list = False  # one tag holds every call of the turn

    def tags(self, functions: list[dict], one: bool) -> list[dict]:
        """The structural tags of `functions`' calls (`one`: a single call is allowed)."""
        raise NotImplementedError

    def response_format(self, tools, tool_choice="auto", *, parallel_tool_calls: bool = True) -> dict | None:
        """The structural tag that enforces this syntax's calls (None for "none" / no tools)."""
        if not tools or tool_choice == "none":
            return None
        named = named_function(tool_choice)
        functions = [fn for fn in tool_functions(tools) if named is None or fn["name"] == named]
        one = named is not None or not parallel_tool_calls or self.single_call_only
        return {"type": "structural_tag", "format": {
            "type": "triggered_tags", "triggers": [self.trigger], "tags": self.tags(functions, one),
            "at_least_one": named is not None or tool_choice == "required",
            "stop_after_first": one or self.whole_list}}

    def parse(self, text: str, tools=None) -> tuple[str | None, list[dict]]:
        """(content, tool_calls) of generated text: each well-formed call becomes an OpenAI tool
        call with compact JSON arguments; text around the calls, stripped, is the content (None
        if empty). A call that does not parse (cut by max_tokens, an unknown function) stays text."""
        names = {fn["name"] for fn in tool_functions(tools)} if tools else None
        decoder = json.JSONDecoder(parse_constant=_no_constants)
        pieces, calls, pos, search = [], [], 0, 0
        while (start := text.find(self.trigger, search)) >= 0:
            found = self._parse_at(text, start, decoder)
            if found is None or any(not _valid(name, args, names) for name, args in found[0]):
                search = start + len(self.trigger)
                continue
            found_calls, end = found
            pieces.append(text[pos:start])
            for name, args in found_calls:
                calls.append({"id": self.call_id(len(calls)), "type": "function",
                              "function": {"name": name, "arguments": json.dumps(
                                  args, ensure_ascii=False, separators=(",", ":"))}})
            pos = search = end
        pieces.append(text[pos:])
        content = "".join(pieces).strip()
        return content or None, calls

    def _parse_at(self, text: str, start: int, decoder) -> tuple[list[tuple[str, object]], int] | None:
        raise NotImplementedError

    def call_id(self, index: int) -> str:
        return f"call_{index}"


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def _valid(name, args, names) -> bool:
    return isinstance(name, str) and (names is None or name in names) and isinstance(args, dict)


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _decode(decoder, text: str, i: int):
    """(JSON value at text[i], end) or None."""
    try:
        return decoder.raw_decode(text, i)
    except ValueError:
        return None


def _object_call(obj, args_key: str):
    """(name, arguments) of {"name": ..., args_key: ...}, arguments given as object or JSON text."""
    if not isinstance(obj, dict) or set(obj) - {"id"} != {"name", args_key}:
        return None
    args = obj[args_key]
    if isinstance(args, str):  # some models quote the arguments
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return obj["name"], args


class Hermes(ToolSyntax):
    """<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>, as Qwen's and Hermes' templates write it."""

    name, trigger, end_tag = "hermes", "<tool_call>", "</tool_call>"

    def tags(self, functions, one):
        return [{"begin": f'<tool_call>\n{{"name": {json.dumps(fn["name"], ensure_ascii=False)}, "arguments": ',
                 "content": {"type": "json_schema", "json_schema": arguments_schema(fn)},
                 "end": "}\n</tool_call>"} for fn in functions]

    def _parse_at(self, text, start, decoder):
        found = _decode(decoder, text, _skip_space(text, start + len(self.trigger)))
        if found is None:
            return None
        call, end = _object_call(found[0], "arguments"), _skip_space(text, found[1])
        if call is None or not text.startswith(self.end_tag, end):
            return None
        return [call], end + len(self.end_tag)


class Llama3Json(ToolSyntax):
    """{"name": ..., "parameters": ...}: Llama 3.1 / 3.2's JSON tool calls (one per turn)."""

    name, trigger, single_call_only = "llama3_json", '{"name": ', True

    def tags(self, functions, one):
        return [{"begin": f'{{"name": {json.dumps(fn["name"], ensure_ascii=False)}, "parameters": ',
                 "content": {"type": "json_schema", "json_schema": arguments_schema(fn)}, "end": "}"}
                for fn in functions]

    def _parse_at(self, text, start, decoder):
        found = _decode(decoder, text, start)
        call = found and _object_call(found[0], "parameters")
        return None if not call else ([call], found[1])


class _MistralIds:
    def call_id(self, index: int) -> str:  # Mistral's templates want 9 alphanumerics
        return "".join(random.choice(_ALNUM) for _ in range(9))


class MistralList(_MistralIds, ToolSyntax):
    """[TOOL_CALLS][{"name": ..., "arguments": ...}, ...]: Mistral Nemo's calls, one JSON list."""

    name, trigger, whole_list, markers = "mistral_list", "[TOOL_CALLS]", True, ("[TOOL_CALLS]",)

    def tags(self, functions, one):
        calls = [{"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": arguments_schema(fn)},
                  "required": ["name", "arguments"], "additionalProperties": False} for fn in functions]
        schema = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls}, "minItems": 1}
        if one:
            schema["maxItems"] = 1
        return [{"begin": self.trigger, "content": {"type": "json_schema", "json_schema": schema}, "end": ""}]

    def _parse_at(self, text, start, decoder):
        found = _decode(decoder, text, _skip_space(text, start + len(self.trigger)))
        if found is None or not isinstance(found[0], list) or not found[0]:
            return None
        calls = [_object_call(item, "arguments") for item in found[0]]
        return None if None in calls else (calls, found[1])


class MistralArgs(_MistralIds, ToolSyntax):
    """[TOOL_CALLS]name[ARGS]{...}: Mistral Small 3.2's calls (v11 tokenizer), one after another."""

    name, trigger, markers = "mistral_args", "[TOOL_CALLS]", ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]")

    def tags(self, functions, one):
        return [{"begin": f"[TOOL_CALLS]{fn['name']}[ARGS]",
                 "content": {"type": "json_schema", "json_schema": arguments_schema(fn)}, "end": ""}
                for fn in functions]

    def _parse_at(self, text, start, decoder):
        i = start + len(self.trigger)
        args_at = text.find("[ARGS]", i)
        if args_at < 0:
            return None
        name = text[i:args_at].split("[CALL_ID]")[0]  # history may carry an id
        found = _decode(decoder, text, args_at + len("[ARGS]"))
        return None if found is None else ([(name, found[0])], found[1])


def syntax_for_template(source: str | None) -> ToolSyntax | None:
    """The family's tool-call syntax, read from what its template writes for tool calls; None when
    the template writes none Trellis knows (then Trellis's own prompt and syntax are used)."""
    if not source:
        return None
    if "[TOOL_CALLS]" in source:
        return MistralArgs() if "[ARGS]" in source else MistralList()
    if "<tool_call>" in source:
        return Hermes()
    if '"parameters": ' in source and "tool_call" in source:
        return Llama3Json()
    return None

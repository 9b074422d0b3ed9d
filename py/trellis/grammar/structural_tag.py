"""Structural tags: free text with embedded, enforced structures (tool calls, reasoning blocks).

Accepted forms (validated, then normalized by `normalize_structural_tag`):

    {"type": "structural_tag", "format": FORMAT}             web-llm / xgrammar / vLLM
    {"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers": [...]}
                                                              the older form (= triggered_tags)

FORMAT is one of (the xgrammar vocabulary; fields not listed here are refused, never ignored):

    {"type": "triggered_tags", "triggers": [str], "tags": [TAG], "at_least_one": bool,
     "stop_after_first": bool, "excludes": [str]}
    TAG = {"type"?: "tag", "begin": str, "content": FORMAT, "end": str | [str]}
    {"type": "const_string", "value": str}
    {"type": "json_schema", "json_schema": object | bool | str}
    {"type": "regex", "pattern": str}
    {"type": "grammar", "grammar": str}                       EBNF, root rule `root`
    {"type": "any_text", "excludes": [str]}                   inside a tag: any text up to its end
    {"type": "sequence", "elements": [FORMAT]} / {"type": "or", "elements": [FORMAT]}

Semantics of triggered_tags (exact, as a language over UTF-8 text):
  * free text is any text in which no trigger (and no `excludes` string) occurs;
  * the first occurrence of a trigger starts a tag whose `begin` starts with that trigger; the tag
    is `begin content end` with its content enforced; after `end`, free text resumes;
  * `at_least_one`: the text must contain at least one tag (free text alone cannot end);
  * `stop_after_first`: the text ends right after the first tag's `end`.

Free text is a byte-level automaton written as IR rules: an Aho-Corasick machine over the trigger
strings (states = the longest suffix of the text that is a proper prefix of a trigger), so "text
that avoids a set of strings" is exact, including overlapping triggers.

Pure Python (runs under Pyodide). Errors: `InvalidRequestError` naming the field, e.g.
"format.tags[1].content.pattern"; `UnsupportedSchemaError` from the JSON Schema front-end passes
through with `field` set to the tag's schema field.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable

from ..errors import InvalidRequestError
from . import ir
from .ir import EMPTY, NOTHING, Ref, alt, char_class, literal, repeat, seq
from .json_values import fail, parse_json, schema_of

# (kind, source, request field) -> IR: the registry's front-ends (frontends.grammar_of) for the
# formats a tag embeds (json_schema, regex, ebnf), errors naming the field.
PartToGrammar = Callable[[str, object, str], ir.Grammar]

_FORMAT_FIELDS = {
    "triggered_tags": ({"triggers", "tags"}, {"at_least_one", "stop_after_first", "excludes"}),
    "tag": ({"begin", "content", "end"}, set()),
    "const_string": ({"value"}, set()),
    "json_schema": ({"json_schema"}, {"style"}),
    "regex": ({"pattern"}, set()),
    "grammar": ({"grammar"}, {"syntax"}),
    "any_text": (set(), {"excludes"}),
    "sequence": ({"elements"}, set()),
    "or": ({"elements"}, set()),
}
MAX_TRIGGER_STATES = 4096  # bound on the free-text automaton (sum of trigger lengths)


# ---- validation and normalization ---------------------------------------------------------


def _string(value, field: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        fail(f"must be a string, got {type(value).__name__}", field)
    if nonempty and not value:
        fail("must not be empty", field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            fail(f"a lone surrogate (U+{ord(value[e.start]):04X}) has no UTF-8 encoding", field)
    return value


def _strings(value, field: str, *, nonempty_items: bool = True) -> list[str]:
    if not isinstance(value, list):
        fail(f"must be a list of strings, got {type(value).__name__}", field)
    return [_string(v, f"{field}[{i}]", nonempty=nonempty_items) for i, v in enumerate(value)]


def _bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        fail(f"must be a boolean, got {type(value).__name__}", field)
    return value


def normalize_structural_tag(tag, field: str = "") -> dict:
    """Validate a structural tag (dict or JSON text, either form) and return its canonical
    `{"type": "structural_tag", "format": ...}` form, with defaults filled in and schemas given as
    JSON text parsed. Raises InvalidRequestError naming the offending field."""
    tag = parse_json(tag, field or "structural_tag")
    with ir.nesting_guard("the structural tag", ir.NESTING_FRAMES):  # formats nest as deep as the JSON
        return _normalize(tag, field)


def _normalize(tag, field: str) -> dict:
    prefix = f"{field}." if field else ""
    if not isinstance(tag, dict):
        fail(f"must be an object, got {type(tag).__name__}", field or "structural_tag")
    kind = tag.get("type", "structural_tag")
    if kind in _FORMAT_FIELDS:  # a bare format: wrap it
        return {"type": "structural_tag", "format": _normalize_format(tag, prefix + "format")}
    if kind != "structural_tag":
        fail(f"must be 'structural_tag', got {kind!r}", prefix + "type")
    if "format" in tag:
        extra = set(tag) - {"type", "format"}
        if extra:
            fail("not allowed together with 'format'", prefix + sorted(extra)[0])
        return {"type": "structural_tag", "format": _normalize_format(tag["format"], prefix + "format")}
    if "structures" in tag or "triggers" in tag:
        extra = set(tag) - {"type", "structures", "triggers"}
        if extra:
            fail("unknown field", prefix + sorted(extra)[0])
        if "structures" not in tag:
            fail("required", prefix + "structures")
        if "triggers" not in tag:
            fail("required", prefix + "triggers")
        structures = tag["structures"]
        if not isinstance(structures, list):
            fail("must be a list", prefix + "structures")
        triggers = _strings(tag["triggers"], prefix + "triggers")
        tags = []
        for i, s in enumerate(structures):
            where = f"{prefix}structures[{i}]"
            if not isinstance(s, dict):
                fail("must be an object", where)
            for key in ("begin", "schema", "end"):
                if key not in s:
                    fail("required", f"{where}.{key}")
            extra = set(s) - {"begin", "schema", "end"}
            if extra:
                fail("unknown field", f"{where}.{sorted(extra)[0]}")
            _string(s["end"], f"{where}.end")
            if not any(_string(s["begin"], f"{where}.begin").startswith(t) for t in triggers):
                fail(f"begin {s['begin']!r} does not start with any trigger", f"{where}.begin")
            schema = parse_json(schema_of(s["schema"]), f"{where}.schema")
            if not isinstance(schema, (dict, bool)):
                fail("must be a JSON Schema (an object or a boolean)", f"{where}.schema")
            tags.append({"begin": s["begin"], "end": s["end"],
                         "content": {"type": "json_schema", "json_schema": s["schema"]}})
        legacy = {"type": "triggered_tags", "triggers": tag["triggers"], "tags": tags}
        return {"type": "structural_tag", "format": _normalize_format(legacy, prefix.rstrip(".") or "")}
    fail("a structural tag needs 'format' (or the older 'structures' and 'triggers')",
          prefix + "format")


def _normalize_format(node, field: str) -> dict:
    where = field or "format"
    if not isinstance(node, dict):
        fail(f"must be an object, got {type(node).__name__}", where)
    kind = node.get("type")
    if kind is None and {"begin", "content", "end"} <= set(node):
        kind = "tag"
    if kind not in _FORMAT_FIELDS:
        fail(f"unsupported format type {kind!r} (supported: {', '.join(sorted(_FORMAT_FIELDS))})",
              f"{field}.type" if field else "type")
    required, optional = _FORMAT_FIELDS[kind]
    sub = (lambda key: f"{field}.{key}" if field else key)
    for key in sorted(required):
        if key not in node:
            fail("required", sub(key))
    extra = set(node) - required - optional - {"type"}
    if extra:
        fail(f"unknown field for a {kind!r} format", sub(sorted(extra)[0]))
    out: dict = {"type": kind}
    if kind == "triggered_tags":
        out["triggers"] = _strings(node["triggers"], sub("triggers"))
        if not out["triggers"]:
            fail("must list at least one trigger", sub("triggers"))
        if not isinstance(node["tags"], list) or not node["tags"]:
            fail("must be a non-empty list of tags", sub("tags"))
        out["tags"] = [_normalize_tag(t, f"{sub('tags')}[{i}]") for i, t in enumerate(node["tags"])]
        for i, t in enumerate(out["tags"]):
            if not any(t["begin"].startswith(trigger) for trigger in out["triggers"]):
                fail(f"begin {t['begin']!r} does not start with any trigger", f"{sub('tags')}[{i}].begin")
        out["at_least_one"] = _bool(node.get("at_least_one", False), sub("at_least_one"))
        out["stop_after_first"] = _bool(node.get("stop_after_first", False), sub("stop_after_first"))
        out["excludes"] = _strings(node.get("excludes", []), sub("excludes"))
    elif kind == "tag":
        return _normalize_tag(node, field)
    elif kind == "const_string":
        out["value"] = _string(node["value"], sub("value"))
    elif kind == "json_schema":
        schema = parse_json(schema_of(node["json_schema"]), sub("json_schema"))
        if not isinstance(schema, (dict, bool)):
            fail("must be a JSON Schema (an object or a boolean)", sub("json_schema"))
        style = node.get("style", "json")
        if style != "json":
            fail(f"only the 'json' style is supported, got {style!r}", sub("style"))
        out["json_schema"] = schema
    elif kind == "regex":
        out["pattern"] = _string(node["pattern"], sub("pattern"))
    elif kind == "grammar":
        out["grammar"] = _string(node["grammar"], sub("grammar"), nonempty=True)
        syntax = node.get("syntax", "ebnf")
        if syntax != "ebnf":
            fail(f"only the 'ebnf' syntax is supported, got {syntax!r}", sub("syntax"))
    elif kind == "any_text":
        out["excludes"] = _strings(node.get("excludes", []), sub("excludes"))
    else:  # sequence, or
        elements = node["elements"]
        if not isinstance(elements, list) or not elements:
            fail("must be a non-empty list of formats", sub("elements"))
        out["elements"] = [_normalize_format(e, f"{sub('elements')}[{i}]") for i, e in enumerate(elements)]
    return out


def _normalize_tag(node, field: str) -> dict:
    if not isinstance(node, dict):
        fail(f"must be an object, got {type(node).__name__}", field)
    if node.get("type", "tag") != "tag":
        fail(f"must be 'tag', got {node.get('type')!r}", f"{field}.type")
    for key in ("begin", "content", "end"):
        if key not in node:
            fail("required", f"{field}.{key}")
    extra = set(node) - {"type", "begin", "content", "end"}
    if extra:
        fail("unknown field for a tag", f"{field}.{sorted(extra)[0]}")
    end = node["end"]
    if isinstance(end, list):
        end = _strings(end, f"{field}.end", nonempty_items=False)
        if not end:
            fail("must list at least one end string", f"{field}.end")
    else:
        end = _string(end, f"{field}.end")
    return {"type": "tag", "begin": _string(node["begin"], f"{field}.begin"),
            "content": _normalize_format(node["content"], f"{field}.content"), "end": end}


# ---- grammar construction -----------------------------------------------------------------


def _rename(expr: ir.Expr, prefix: str, memo: dict) -> ir.Expr:
    """`expr` with every rule reference prefixed (any Expr node type: fields that hold
    expressions, or tuples holding them at any depth, are rewritten; others are kept)."""
    done = memo.get(expr)
    if done is not None:
        return done
    if isinstance(expr, Ref):
        out = Ref(prefix + expr.name)
    elif isinstance(expr, (ir.Bytes, ir.ByteSet)):
        out = expr
    else:
        changes = {}
        for f in dataclasses.fields(expr):
            value = getattr(expr, f.name)
            renamed = _rename_within(value, prefix, memo)
            if renamed is not value:
                changes[f.name] = renamed
        out = dataclasses.replace(expr, **changes) if changes else expr
    memo[expr] = out
    return out


def _rename_within(value, prefix: str, memo: dict):
    """A field's value renamed: an expression, or a tuple (such as a machine's edges) whose
    items are; the value itself where nothing in it changed."""
    if isinstance(value, ir.Expr):
        return _rename(value, prefix, memo)
    if isinstance(value, tuple):
        items = tuple(_rename_within(v, prefix, memo) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


class _Builder:
    def __init__(self, part: PartToGrammar):
        self.rules: dict[str, ir.Expr] = {}
        self.part = part
        self.counter = 0
        self.contents: dict = {}

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"st{self.counter}_{base}"

    def define(self, base: str, body: ir.Expr) -> Ref:
        name = self.fresh(base)
        self.rules[name] = body
        return Ref(name)

    def embed(self, grammar: ir.Grammar, base: str) -> Ref:
        prefix = self.fresh(base) + "_"
        memo: dict = {}
        for name, body in grammar.rules.items():
            self.rules[prefix + name] = _rename(body, prefix, memo)
        return Ref(prefix + grammar.root)

    def content(self, kind: str, source, make) -> Ref:
        """Embed a sub-grammar once per distinct (kind, source): tools often share schemas."""
        key = (kind, json.dumps(source, sort_keys=True, ensure_ascii=False))
        ref = self.contents.get(key)
        if ref is None:
            ref = self.contents[key] = self.embed(make(), kind)
        return ref

    # -- formats --

    def format(self, node: dict, field: str, follow: ir.Expr = EMPTY) -> ir.Expr:
        """The expression for `node` followed by `follow` (passed down so that free-text
        automata can end exactly where what follows begins)."""
        kind = node["type"]
        sub = (lambda key: f"{field}.{key}" if field else key)
        if kind == "const_string":
            return seq(literal(node["value"]), follow)
        if kind in ("regex", "grammar", "json_schema"):
            front, key = {"regex": ("regex", "pattern"), "grammar": ("ebnf", "grammar"),
                          "json_schema": ("json_schema", "json_schema")}[kind]
            source = node[key]
            ref = self.content(front, source, lambda: self.part(front, source, sub(key)))
            return seq(ref, follow)
        if kind == "sequence":
            expr = follow
            for i in range(len(node["elements"]) - 1, -1, -1):
                expr = self.format(node["elements"][i], f"{sub('elements')}[{i}]", expr)
            return expr
        if kind == "or":
            after = self.define("after", follow) if follow != EMPTY else EMPTY
            return alt(*(self.format(e, f"{sub('elements')}[{i}]", after)
                         for i, e in enumerate(node["elements"])))
        if kind == "any_text":
            return self.avoid([(s, NOTHING) for s in node["excludes"]], follow, "text")
        if kind == "tag":
            return self.tag(node, field, follow)
        return self.triggered_tags(node, field, follow)

    def tag(self, node: dict, field: str, follow: ir.Expr) -> ir.Expr:
        ends = node["end"] if isinstance(node["end"], list) else [node["end"]]
        after = self.define("after", follow) if follow != EMPTY else EMPTY
        if node["content"]["type"] == "any_text":
            # Any text up to the first occurrence of an end string, which closes the tag.
            patterns = [(e, after) for e in ends if e]
            patterns += [(s, NOTHING) for s in node["content"]["excludes"]]
            if len(patterns) == len(node["content"]["excludes"]):
                fail("any_text content needs a non-empty end string", f"{field}.end")
            body = self.avoid(patterns, None, "tagtext")
        else:
            end_expr = alt(*(literal(e) for e in ends))
            body = self.format(node["content"], f"{field}.content", seq(end_expr, after))
        return seq(literal(node["begin"]), body)

    def triggered_tags(self, node: dict, field: str, follow: ir.Expr) -> ir.Expr:
        at_least_one, stop_after_first = node["at_least_one"], node["stop_after_first"]
        excludes = [(s, NOTHING) for s in node["excludes"]]
        after_tag = Ref(self.fresh("after_tag"))  # defined below: what follows a tag

        def dispatch(trigger: str) -> ir.Expr:
            options = []
            for i, t in enumerate(node["tags"]):
                if t["begin"].startswith(trigger):
                    rest = dict(t, begin=t["begin"][len(trigger):])
                    options.append(self.tag(rest, f"{field}.tags[{i}]", after_tag))
            return self.define("dispatch", alt(*options))

        dispatches = {t: dispatch(t) for t in dict.fromkeys(node["triggers"])}
        patterns = [(t, d) for t, d in dispatches.items()] + excludes
        # free text that may end (followed by `follow`), and free text that must reach a tag
        if stop_after_first:
            self.rules[after_tag.name] = follow
        else:
            loop = self.avoid(patterns, follow, "free")
            self.rules[after_tag.name] = loop
            if not at_least_one:
                return after_tag
        if at_least_one:
            return self.avoid(patterns, None, "first")
        return self.avoid(patterns, follow, "free")

    def avoid(self, patterns: list[tuple[str, ir.Expr]], end: ir.Expr | None, base: str) -> ir.Expr:
        """UTF-8 text in which no pattern string occurs, except that the first occurrence of a
        pattern p completes it and continues with its expression (NOTHING for a forbidden
        string). The text may stop anywhere and continue with `end`, unless `end` is None."""
        patterns = [(p, e) for p, e in patterns if p]
        strings = list(dict.fromkeys(p for p, _ in patterns))
        if sum(map(len, strings)) > MAX_TRIGGER_STATES:
            raise InvalidRequestError(f"trigger/exclude strings too long (over {MAX_TRIGGER_STATES} "
                                      "characters in all)", "triggers")
        prefixes = {""} | {s[:k] for s in strings for k in range(1, len(s))}
        chars = sorted({c for s in strings for c in s})
        order = sorted(prefixes, key=lambda s: (len(s), s))
        names = {s: self.fresh(f"{base}{i}") for i, s in enumerate(order)}

        def step(state: str, c: str) -> tuple[list[ir.Expr], str | None]:
            u = state + c
            done = [e for p, e in patterns if u.endswith(p)]
            if done:
                return done, None
            for k in range(len(u)):
                if u[k:] in prefixes:
                    return [], u[k:]
            return [], ""

        for state in order:
            special: list[ir.Expr] = []
            special_chars = []
            for c in chars:
                done, nxt = step(state, c)
                if done:
                    special.append(seq(literal(c), alt(*done)))
                elif nxt:  # a non-root state
                    special.append(seq(literal(c), Ref(names[nxt])))
                else:
                    continue
                special_chars.append(ord(c))
            other = char_class([(cp, cp) for cp in special_chars], negate=True)
            options = ([end] if end is not None else []) + special
            if state == "":
                body = seq(repeat(other, 0, None), alt(*options))
            else:
                body = alt(*options, seq(other, Ref(names[""])))
            self.rules[names[state]] = body
        return Ref(names[""])


def structural_tag_to_grammar(tag, *, part: PartToGrammar, field: str = "") -> ir.Grammar:
    """A structural tag (either form, dict or JSON text) as a grammar IR; `part` converts the
    formats it embeds (frontends.grammar_of: compile it as grammar_of("structural_tag", tag)).
    Raises InvalidRequestError naming the field, below `field` (the tag's place in a request)."""
    normalized = normalize_structural_tag(tag, field)
    builder = _Builder(part)
    with ir.nesting_guard("the structural tag", ir.NESTING_FRAMES):
        root = builder.format(normalized["format"], f"{field}.format" if field else "format")
    rules = {"root": root, **builder.rules}
    return ir.Grammar(rules, "root")

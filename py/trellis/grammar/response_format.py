"""Every response-format dialect -> one normalized request -> a grammar and a canonical cache key.

Dialects (the object given as `response_format`, or TGI's `grammar`):

  web-llm          {"type": "text"}                                   unconstrained (no grammar)
                   {"type": "json_object"}                            any JSON *object*
                   {"type": "json_object", "schema": obj | str}       JSON Schema
                   {"type": "grammar", "grammar": ebnf}               EBNF
                   {"type": "structural_tag", "structural_tag": obj | str}
                   rules: `schema` only with json_object; `grammar` iff type grammar;
                   `structural_tag` iff type structural_tag.
  xgrammar / vLLM  {"type": "structural_tag", "format": {...}} and the older
                   {"type": "structural_tag", "structures": [...], "triggers": [...]}
  OpenAI           {"type": "json_schema", "json_schema": {"name", "description"?, "schema", "strict"?}}
  Transformers.js  {"type": "json_schema", "json_schema": <the schema itself>}
                   {"type": "regex", "regex": pattern}
  TGI              {"type": "json", "value": schema}  /  {"type": "regex", "value": pattern}

The normalized request is a small dict, {"kind": ..., ...}, with schemas and structural tags
parsed from JSON text, so that equivalent requests in different dialects (or with different key
order) share one cache key: sha256 over canonical JSON (sorted keys, no whitespace) of the
normalized request plus the compile options.

Bad combinations raise InvalidRequestError naming the field ("response_format.schema", ...).
Pure Python (runs under Pyodide).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Callable

from ..errors import GrammarError, GrammarLimitError, InvalidRequestError, UnsupportedSchemaError
from . import ir
from .ir import Ref, byte_set, literal, repeat, seq
from .structural_tag import _fail, _parse_json as _json_value

KEY_VERSION = 1
_OPENAI_JSON_SCHEMA_FIELDS = {"name", "description", "schema", "strict"}
_OPENAI_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_KNOWN_FIELDS = {
    "text": set(),
    "json_object": {"schema", "strict"},
    "grammar": {"grammar"},
    "structural_tag": {"structural_tag", "format", "structures", "triggers"},
    "json_schema": {"json_schema", "strict"},
    "json": {"value", "strict"},
    "regex": {"regex", "value"},
}
_WEBLLM_ONLY = {"schema": "json_object", "grammar": "grammar", "structural_tag": "structural_tag"}


# Whether a JSON Schema request closes the objects and tuples it names (no members or items the
# schema does not name; see json_schema.json_schema_to_grammar's `strict`), per dialect, when the
# request does not say. web-llm compiles with web-xgrammar's compileJSONSchema defaults, whose
# strictMode is true; OpenAI's json_schema takes `strict` (false unless given); TGI builds its
# grammars with outlines, which writes only the properties a schema names; Transformers.js's form
# follows web-llm. compile_json_schema (and the benchmarks, which validate) default to the whole
# language.
STRICT_DEFAULTS = {"web-llm": True, "OpenAI": False, "TGI": True, "Transformers.js": True}


def _schema(value, field: str):
    schema = _json_value(value, field)
    if not isinstance(schema, (dict, bool)):
        _fail(f"must be a JSON Schema (an object or a boolean), got {type(schema).__name__}", field)
    return schema


def _text(value, field: str) -> str:
    if not isinstance(value, str):
        _fail(f"must be a string, got {type(value).__name__}", field)
    if not value:
        _fail("must not be empty", field)
    return value


def normalize_response_format(rf, field: str = "response_format") -> dict | None:
    """Validate `rf` in any dialect; return the normalized request, or None for unconstrained
    text. Kinds: json_object, json_schema {schema, strict}, grammar {grammar}, regex {pattern},
    structural_tag {tag}."""
    if rf is None:
        return None
    rf = _json_value(rf, field)
    if not isinstance(rf, dict):
        _fail(f"must be an object, got {type(rf).__name__}", field)
    present = {k for k, v in rf.items() if v is not None}  # web-llm treats null as absent
    kind = rf.get("type")
    if kind is None:
        _fail("required", f"{field}.type")
    if kind not in _KNOWN_FIELDS:
        _fail(f"unsupported type {kind!r} (supported: {', '.join(sorted(_KNOWN_FIELDS))})",
              f"{field}.type")
    # web-llm's rules first: each of these fields belongs to exactly one type.
    for key, owner in _WEBLLM_ONLY.items():
        if key in present and kind != owner:
            _fail(f"only allowed when type is {owner!r} (type is {kind!r})", f"{field}.{key}")
    extra = present - _KNOWN_FIELDS[kind] - {"type"}
    if extra:
        _fail(f"not allowed when type is {kind!r}", f"{field}.{sorted(extra)[0]}")

    # Trellis's extension: `strict: false` asks for the schema's whole language (see STRICT_DEFAULTS).
    strict = rf.get("strict")
    if strict is not None and not isinstance(strict, bool):
        _fail("must be a boolean", f"{field}.strict")
    if kind == "text":
        return None
    if kind == "json_object":
        if "schema" in present:
            return {"kind": "json_schema", "schema": _schema(rf["schema"], f"{field}.schema"),
                    "strict": STRICT_DEFAULTS["web-llm"] if strict is None else strict}
        if strict is not None:
            _fail("only allowed with a schema", f"{field}.strict")
        return {"kind": "json_object"}
    if kind == "grammar":
        if "grammar" not in present:
            _fail("required when type is 'grammar'", f"{field}.grammar")
        return {"kind": "grammar", "grammar": _text(rf["grammar"], f"{field}.grammar")}
    if kind == "structural_tag":
        from .structural_tag import normalize_structural_tag

        forms = [k for k in ("structural_tag", "format") if k in present]
        if "structures" in present or "triggers" in present:
            forms.append("structures")
        if not forms:
            _fail("required when type is 'structural_tag'", f"{field}.structural_tag")
        if len(forms) > 1:
            _fail(f"give the structural tag once (found {', '.join(forms)})", f"{field}.{forms[1]}")
        if forms[0] == "structural_tag":
            tag = normalize_structural_tag(rf["structural_tag"], f"{field}.structural_tag")
        else:
            tag = normalize_structural_tag({k: v for k, v in rf.items() if k in present}, field)
        return {"kind": "structural_tag", "tag": tag}
    if kind == "json_schema":
        if "json_schema" not in present:
            _fail("required when type is 'json_schema'", f"{field}.json_schema")
        js = _json_value(rf["json_schema"], f"{field}.json_schema")
        if isinstance(js, dict) and "schema" in js and set(js) <= _OPENAI_JSON_SCHEMA_FIELDS:
            # OpenAI: {"name", "description"?, "schema", "strict"?}
            if "name" in js and (not isinstance(js["name"], str) or not _OPENAI_NAME.fullmatch(js["name"])):
                _fail("must be 1-64 characters of a-z, A-Z, 0-9, '_' or '-'", f"{field}.json_schema.name")
            if "description" in js and not isinstance(js["description"], (str, type(None))):
                _fail("must be a string", f"{field}.json_schema.description")
            if strict is not None:
                _fail("give strict once, inside json_schema (OpenAI's place)", f"{field}.strict")
            inner = js.get("strict")
            if inner is not None and not isinstance(inner, bool):
                _fail("must be a boolean", f"{field}.json_schema.strict")
            return {"kind": "json_schema", "schema": _schema(js["schema"], f"{field}.json_schema.schema"),
                    "strict": STRICT_DEFAULTS["OpenAI"] if inner is None else inner}
        # Transformers.js: the schema itself
        return {"kind": "json_schema", "schema": _schema(js, f"{field}.json_schema"),
                "strict": STRICT_DEFAULTS["Transformers.js"] if strict is None else strict}
    if kind == "json":  # TGI
        if "value" not in present:
            _fail("required when type is 'json'", f"{field}.value")
        return {"kind": "json_schema", "schema": _schema(rf["value"], f"{field}.value"),
                "strict": STRICT_DEFAULTS["TGI"] if strict is None else strict}
    # regex: TGI ("value") or Transformers.js ("regex")
    keys = [k for k in ("regex", "value") if k in present]
    if not keys:
        _fail("required when type is 'regex'", f"{field}.regex")
    if len(keys) > 1:
        _fail("give the pattern once, as 'regex' or as 'value'", f"{field}.value")
    return {"kind": "regex", "pattern": _text(rf[keys[0]], f"{field}.{keys[0]}")}


def whole_language(normalized: dict | None) -> dict | None:
    """The request a validator checks text against: a schema's whole language (strict off, `1.0`
    an integer), as a valid instance is valid however it was generated."""
    if normalized is not None and normalized["kind"] == "json_schema":
        return dict(normalized, strict=False, generate=False)
    if normalized is not None and normalized["kind"] == "structural_tag":
        return dict(normalized, generate=False)
    return normalized


def cache_key(normalized: dict | None, options: dict | None = None) -> str:
    """sha256 of the canonical JSON of the normalized request plus options."""
    doc = {"v": KEY_VERSION, "request": normalized, "options": options or {}}
    try:
        with ir.nesting_guard("the request", ir.NESTING_FRAMES):  # its depth is checked (_json_value)
            text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:  # not JSON (normalize_response_format names the place first)
        raise InvalidRequestError(f"not JSON: {e}", "response_format") from e
    # A lone surrogate cannot be UTF-8; the key only needs the same bytes for the same text (the
    # front-ends refuse such strings where they constrain).
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def json_object_grammar() -> ir.Grammar:
    """Any JSON object (not any value) with no key twice in one object, JSON's whitespace around it."""
    from .builtin_json import builtin_json_grammar

    g = builtin_json_grammar(distinct_keys=True)
    ws = repeat(byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0, None)
    rules = dict(g.rules)
    rules["json_object_root"] = seq(ws, Ref("object"), ws)
    return ir.Grammar(rules, "json_object_root")


def _default_schema_to_grammar(schema, *, any_whitespace: bool, strict: bool,
                               canonical_integers: bool = True) -> ir.Grammar:
    try:
        from .json_schema import json_schema_to_grammar
    except ImportError as e:  # the JSON Schema front-end is not built into this copy
        raise UnsupportedSchemaError(f"the JSON Schema front-end is not available ({e})") from e
    return json_schema_to_grammar(schema, any_whitespace=any_whitespace, strict=strict,
                                  canonical_integers=canonical_integers)


def response_format_to_grammar(rf, *, any_whitespace: bool = True, field: str = "response_format",
                               schema_to_grammar: Callable | None = None) -> tuple[ir.Grammar | None, str]:
    """(grammar IR or None for unconstrained text, canonical cache key).

    `schema_to_grammar(schema, *, any_whitespace, strict, canonical_integers) -> ir.Grammar` replaces the JSON Schema
    front-end (tests, experiments). Raises InvalidRequestError naming the field, or
    UnsupportedSchemaError from the JSON Schema front-end."""
    normalized = normalize_response_format(rf, field)
    key = cache_key(normalized, {"any_whitespace": any_whitespace})
    return grammar_of_normalized(normalized, any_whitespace, field, schema_to_grammar), key


def grammar_of_normalized(normalized, any_whitespace: bool = True, field: str = "response_format",
                          schema_to_grammar: Callable | None = None) -> ir.Grammar | None:
    if normalized is None:
        return None
    convert = schema_to_grammar or _default_schema_to_grammar
    kind = normalized["kind"]
    if kind == "json_object":
        return json_object_grammar()
    # A request is generated (integers written canonically) unless a validator asks (whole_language).
    generate = normalized.get("generate", True)
    if kind == "json_schema":
        return convert(normalized["schema"], any_whitespace=any_whitespace, strict=normalized["strict"],
                       canonical_integers=generate)
    if kind == "grammar":
        from .ebnf import parse_ebnf
        try:
            return parse_ebnf(normalized["grammar"])
        except GrammarLimitError:
            raise
        except GrammarError as e:
            raise InvalidRequestError(f"invalid EBNF grammar: {e}", f"{field}.grammar") from e
    if kind == "regex":
        from .regex import parse_regex
        try:
            return parse_regex(normalized["pattern"])
        except GrammarLimitError:
            raise
        except GrammarError as e:
            raise InvalidRequestError(f"invalid regular expression: {e}", f"{field}.regex") from e
    from .structural_tag import structural_tag_to_grammar

    return structural_tag_to_grammar(
        normalized["tag"],
        schema_to_grammar=lambda s: convert(s, any_whitespace=any_whitespace, strict=False,
                                            canonical_integers=generate))


def refuse_empty(compiled, normalized: dict, field: str = "response_format") -> None:
    """A request whose constraint matches no string cannot be answered: InvalidRequestError.
    (The compiled grammar itself is exact: its matchers refuse every token.)"""
    if not compiled.is_empty:
        return
    kind = normalized["kind"]
    what = {"json_schema": "no JSON value is valid against this schema",
            "regex": "the regular expression matches no string", "grammar": "the grammar matches no string",
            "structural_tag": "the structural tag matches no string"}[kind]
    raise InvalidRequestError(f"{what}, so no output can satisfy it", field)


CACHE_SIZE = 64


def compile_response_format(compiler, response_format, *, any_whitespace: bool = True,
                            field: str = "response_format", schema_to_grammar: Callable | None = None):
    """(CompiledGrammar or None for unconstrained text, cache key) for a GrammarCompiler.

    Compiled grammars are memoized per compiler by cache key (a small LRU dict on the compiler),
    so a repeated request costs a normalization and one hash. A custom `schema_to_grammar`
    bypasses the memo (the key does not describe it)."""
    normalized = normalize_response_format(response_format, field)
    key = cache_key(normalized, {"any_whitespace": any_whitespace})
    if normalized is None:
        return None, key
    memo = compiler.__dict__.setdefault("_response_format_cache", {}) if schema_to_grammar is None else {}
    compiled = memo.pop(key, None)
    if compiled is None:
        grammar = grammar_of_normalized(normalized, any_whitespace, field, schema_to_grammar)
        compiled = compiler.compile_ir(grammar, source=f"response_format:{key[:12]}")
        refuse_empty(compiled, normalized, field)  # so the memo never holds an empty one
    memo[key] = compiled  # most recently used last
    while len(memo) > CACHE_SIZE:
        memo.pop(next(iter(memo)))
    return compiled, key

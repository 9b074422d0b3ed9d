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

The normalized request is a small dict, {"kind": a front-end of frontends.py, "source": ...,
its options}, with schemas and structural tags parsed from JSON text, so that equivalent requests
in different dialects (or with different key order) share one cache key: sha256 over canonical
JSON (sorted keys, no whitespace) of the normalized request. constraints.py compiles it.

Bad combinations raise InvalidRequestError naming the field ("response_format.schema", ...).
Pure Python (runs under Pyodide).
"""

from __future__ import annotations

import hashlib
import json
import re

from ..errors import InvalidRequestError
from . import ir
from .layout_options import check_indent, check_separators
from .json_values import fail, parse_json, schema_of
from .structural_tag import normalize_structural_tag

KEY_VERSION = 2  # 2: requests name their front-end (frontends.py) and carry its options
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
    schema = parse_json(schema_of(value), field)
    if not isinstance(schema, (dict, bool)):
        fail(f"must be a JSON Schema (an object or a boolean), got {type(schema).__name__}", field)
    return schema


def _text(value, field: str) -> str:
    if not isinstance(value, str):
        fail(f"must be a string, got {type(value).__name__}", field)
    if not value:
        fail("must not be empty", field)
    return value


def normalize_response_format(rf, field: str = "response_format", *, any_whitespace: bool = True,
                              indent: int | None = None, separators=None) -> dict | None:
    """Validate `rf` in any dialect; return the normalized request, or None for unconstrained
    text. Kinds: json_object, json_schema {source, strict, canonical_integers, any_whitespace,
    indent?, separators?}, ebnf {source}, regex {source}, structural_tag {source,
    canonical_integers, any_whitespace}. Generated integers are canonical (`1`, never `1.0`);
    whole_language asks for both. `indent` / `separators` (the Python API's, as
    compile_json_schema's: no request dialect carries them) join a JSON Schema request when given."""
    return read_response_format(rf, field, any_whitespace=any_whitespace, indent=indent, separators=separators)[0]


def read_response_format(rf, field: str = "response_format", *, any_whitespace: bool = True,
                         indent: int | None = None, separators=None) -> tuple[dict | None, str | None]:
    """(normalized request, the request field holding its source: where its errors point)."""
    # Only when given: the keys of requests without them stay what they were.
    layout = {k: v for k, v in (("indent", check_indent(indent)), ("separators", check_separators(separators)))
              if v is not None}
    if "separators" in layout:
        layout["separators"] = list(layout["separators"])  # as JSON has it (the key is JSON)
    if rf is None:
        return None, None
    rf = parse_json(rf, field)
    if not isinstance(rf, dict):
        fail(f"must be an object, got {type(rf).__name__}", field)
    present = {k for k, v in rf.items() if v is not None}  # web-llm treats null as absent
    kind = rf.get("type")
    if kind is None:
        fail("required", f"{field}.type")
    if kind not in _KNOWN_FIELDS:
        fail(f"unsupported type {kind!r} (supported: {', '.join(sorted(_KNOWN_FIELDS))})",
              f"{field}.type")
    # web-llm's rules first: each of these fields belongs to exactly one type.
    for key, owner in _WEBLLM_ONLY.items():
        if key in present and kind != owner:
            fail(f"only allowed when type is {owner!r} (type is {kind!r})", f"{field}.{key}")
    extra = present - _KNOWN_FIELDS[kind] - {"type"}
    if extra:
        fail(f"not allowed when type is {kind!r}", f"{field}.{sorted(extra)[0]}")

    # Trellis's extension: `strict: false` asks for the schema's whole language (see STRICT_DEFAULTS).
    strict = rf.get("strict")
    if strict is not None and not isinstance(strict, bool):
        fail("must be a boolean", f"{field}.strict")
    def schema_request(value, at: str, dialect: str, strict):
        return ({"kind": "json_schema", "source": _schema(value, at),
                 "strict": STRICT_DEFAULTS[dialect] if strict is None else strict, "canonical_integers": True,
                 "any_whitespace": any_whitespace, **layout}, at)

    if kind == "text":
        return None, None
    if kind == "json_object":
        if "schema" in present:
            return schema_request(rf["schema"], f"{field}.schema", "web-llm", strict)
        if strict is not None:
            fail("only allowed with a schema", f"{field}.strict")
        return {"kind": "json_object"}, field
    if kind == "grammar":
        if "grammar" not in present:
            fail("required when type is 'grammar'", f"{field}.grammar")
        return {"kind": "ebnf", "source": _text(rf["grammar"], f"{field}.grammar")}, f"{field}.grammar"
    if kind == "structural_tag":
        forms = [k for k in ("structural_tag", "format") if k in present]
        if "structures" in present or "triggers" in present:
            forms.append("structures")
        if not forms:
            fail("required when type is 'structural_tag'", f"{field}.structural_tag")
        if len(forms) > 1:
            fail(f"give the structural tag once (found {', '.join(forms)})", f"{field}.{forms[1]}")
        if forms[0] == "structural_tag":
            at, tag = f"{field}.structural_tag", normalize_structural_tag(rf["structural_tag"], f"{field}.structural_tag")
        else:
            at, tag = field, normalize_structural_tag({k: v for k, v in rf.items() if k in present}, field)
        return {"kind": "structural_tag", "source": tag, "canonical_integers": True,
                "any_whitespace": any_whitespace}, at
    if kind == "json_schema":
        if "json_schema" not in present:
            fail("required when type is 'json_schema'", f"{field}.json_schema")
        js = parse_json(rf["json_schema"], f"{field}.json_schema")
        if isinstance(js, dict) and "schema" in js and set(js) <= _OPENAI_JSON_SCHEMA_FIELDS:
            # OpenAI: {"name", "description"?, "schema", "strict"?}
            if "name" in js and (not isinstance(js["name"], str) or not _OPENAI_NAME.fullmatch(js["name"])):
                fail("must be 1-64 characters of a-z, A-Z, 0-9, '_' or '-'", f"{field}.json_schema.name")
            if "description" in js and not isinstance(js["description"], (str, type(None))):
                fail("must be a string", f"{field}.json_schema.description")
            if strict is not None:
                fail("give strict once, inside json_schema (OpenAI's place)", f"{field}.strict")
            inner = js.get("strict")
            if inner is not None and not isinstance(inner, bool):
                fail("must be a boolean", f"{field}.json_schema.strict")
            return schema_request(js["schema"], f"{field}.json_schema.schema", "OpenAI", inner)
        # Transformers.js: the schema itself
        return schema_request(js, f"{field}.json_schema", "Transformers.js", strict)
    if kind == "json":  # TGI
        if "value" not in present:
            fail("required when type is 'json'", f"{field}.value")
        return schema_request(rf["value"], f"{field}.value", "TGI", strict)
    # regex: TGI ("value") or Transformers.js ("regex")
    keys = [k for k in ("regex", "value") if k in present]
    if not keys:
        fail("required when type is 'regex'", f"{field}.regex")
    if len(keys) > 1:
        fail("give the pattern once, as 'regex' or as 'value'", f"{field}.value")
    return {"kind": "regex", "source": _text(rf[keys[0]], f"{field}.{keys[0]}")}, f"{field}.{keys[0]}"


def whole_language(normalized: dict | None) -> dict | None:
    """The request a validator checks text against: a schema's whole language (strict off, `1.0`
    an integer), as a valid instance is valid however it was generated."""
    if normalized is not None and normalized["kind"] == "json_schema":
        return dict(normalized, strict=False, canonical_integers=False)
    if normalized is not None and normalized["kind"] == "structural_tag":
        return dict(normalized, canonical_integers=False)
    return normalized


def cache_key(normalized: dict | None) -> str:
    """sha256 of the canonical JSON of the normalized request."""
    doc = {"v": KEY_VERSION, "request": normalized}
    try:
        with ir.nesting_guard("the request", ir.NESTING_FRAMES):  # its depth is checked (parse_json)
            text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:  # not JSON (normalize_response_format names the place first)
        raise InvalidRequestError(f"not JSON: {e}", "response_format") from e
    # A lone surrogate cannot be UTF-8; the key only needs the same bytes for the same text (the
    # front-ends refuse such strings where they constrain).
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

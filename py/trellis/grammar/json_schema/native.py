"""What the grammar core's native JSON Schema converter is handed (kernels/grammar/src/schema/,
a port of this package that writes the same grammar word for word, for the schemas it covers).

The dialect is decided here, by this package's own functions (one place): the core gets the
schema's JSON text and the options as flags. `request` says None where the port cannot take a
request (options it does not build, a document this package rewrites first); the core itself
declines the schemas it does not cover. Either way, and on any error, the Python converter then
runs, and its errors are the ones reported.
"""

from __future__ import annotations

import json
import unicodedata

from ...errors import TrellisError
from ..abi import SchemaFlag
from ..json_values import schema_of
from ._dialect import draft6_forms, format_is_annotation, is_draft4
from ._refs import DEFAULT_BASE, defrag, join
from .converter import DEFAULT_MAX_WHITESPACE, KNOWN_METASCHEMAS, detect_draft7


def _packed(version: str) -> int:
    """A Unicode version as the C ABI takes it: major * 10000 + minor * 100 + micro."""
    major, minor, micro = map(int, version.split("."))
    return major * 10000 + minor * 100 + micro


# The Unicode database regex property escapes follow here (the core declines them under another).
UNICODE_VERSION = _packed(unicodedata.unidata_version)

_OPTIONS = {"any_whitespace", "strict", "max_whitespace", "property_order", "draft", "canonical_integers",
            "format_assertion", "indent", "separators", "field"}


# How deep a text the core's reading of the top (`top` below) takes: below json.loads' own
# recursion limit, so that whatever it reads json.loads reads the same way.
TOP_MAX_DEPTH = 900


def request(source, *, any_whitespace=True, strict=False, max_whitespace=DEFAULT_MAX_WHITESPACE,
            property_order="schema", draft=None, canonical_integers=False, format_assertion=None, indent=None,
            separators=None, field=None, top=None) -> tuple[bytes, int, int, int] | None:
    """(the schema's JSON text as UTF-8, SchemaFlag flags, max_whitespace, UNICODE_VERSION) for
    tg_grammar_compile_json_schema, or None (see the module docstring): also wherever reading
    the schema fails here (too deep for json, a dialect rewrite's limit), so that the Python
    converter's path raises its own typed error. `top` (Core.json_schema_top): reads, from a
    JSON text, only what the dialect is decided from, instead of json.loads of it all (most of
    a large schema's time here); where it cannot, json.loads reads the text as before."""
    del field  # errors are the Python converter's, which names it
    try:
        return _request(source, any_whitespace, strict, max_whitespace, property_order, draft, canonical_integers,
                        format_assertion, indent, separators, top)
    except (ValueError, TypeError, RecursionError, TrellisError):
        return None


def _request(source, any_whitespace, strict, max_whitespace, property_order, draft, canonical_integers,
             format_assertion, indent, separators, top):
    if (property_order != "schema" or separators is not None or (indent is not None and not any_whitespace)
            or type(max_whitespace) is not int or not 0 <= max_whitespace <= 1000):
        return None
    text = source if isinstance(source, str) else None
    data = text.encode("utf-8", "surrogatepass") if text is not None else None
    head = top(data, TOP_MAX_DEPTH) if data is not None and top is not None else None
    # the document, or (read by `top`) its top-level $schema and $id only: all the dialect reads
    schema = json.loads(head) if head is not None else json.loads(text) if text is not None else schema_of(source)
    if not isinstance(schema, (dict, bool)):
        return None
    if text is None:  # written once: the dialect's search reads it too
        text = _dumps(schema)
        if json.loads(text) != schema:  # not JSON as it stands (a non-string key, a tuple): the walk refuses it
            return None
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if uri is not None and (not isinstance(uri, str) or not any(m in uri for m in KNOWN_METASCHEMAS)):
        return None
    draft7 = detect_draft7(schema) if draft is None else draft in ("draft7", "draft-07", "draft6", "draft4")
    draft4 = is_draft4(schema) if draft is None else draft == "draft4"
    if draft4:  # draft-04's `id` and boolean bounds, rewritten as the conversion does
        if head is not None:
            schema = json.loads(text)  # the rewrite reads the whole document
        rewritten = draft6_forms(schema, text)
        if rewritten is not schema:
            schema, text = rewritten, _dumps(rewritten)
            data = None
    if format_assertion is None:
        format_assertion = strict or not format_is_annotation(schema)
    if isinstance(schema, dict) and isinstance(schema.get("$id"), str):  # the base URI, as the walk reads it
        defrag(defrag(join(DEFAULT_BASE, schema["$id"]))[0] + "#")
    flags = (SchemaFlag.ANY_WHITESPACE * bool(any_whitespace) | SchemaFlag.STRICT * bool(strict)
             | SchemaFlag.DRAFT7 * draft7 | SchemaFlag.INTEGERS_WITHOUT_FRACTION * draft4
             | SchemaFlag.FORMAT_ASSERTION * bool(format_assertion)
             | SchemaFlag.CANONICAL_INTEGERS * bool(canonical_integers))
    if data is None:
        data = text.encode("utf-8", "surrogatepass")
    return data, int(flags), max_whitespace, UNICODE_VERSION


def _dumps(schema) -> str:
    return json.dumps(schema, ensure_ascii=False, check_circular=False)


def takes(options: dict) -> bool:
    """Whether `request` knows every option (an unknown one is the Python converter's to refuse)."""
    return _OPTIONS.issuperset(options)

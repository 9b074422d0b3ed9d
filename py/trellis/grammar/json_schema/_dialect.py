"""The forms and defaults of the dialects `$schema` names, rewritten into what the converter reads.

draft-04 writes an exclusive bound as a flag on the bound (`"maximum": 5, "exclusiveMaximum":
true`); draft-06 on made the flag the bound itself (`"exclusiveMaximum": 5`). draft-04 names a
schema resource (or, as `"#name"`, a location-independent anchor) with `id`, later drafts with
`$id`; draft-04's `$id` is an unknown keyword.

2019-09's `$recursiveRef: "#"` is 2020-12's `$dynamicRef` with one anchor name that every
resource with `$recursiveAnchor: true` declares: the outermost such resource in the dynamic
scope, when the resource the reference is written in declares it too, else that resource
itself (a plain `$ref: "#"`).

2019-09 and 2020-12 made `format` an annotation unless a meta-schema asks for the
format-assertion vocabulary; the drafts before leave asserting it to the implementation.

Each rewrite visits every subschema of the document (data such as `enum` values are left
alone) and keeps the document's shape, so that `$ref` pointers still lead to the same places.
"""

from __future__ import annotations

import json
import re

from ...errors import UnsupportedSchemaError
from ._keywords import SCHEMA_KEYWORDS, SCHEMA_LIST_KEYWORDS, SCHEMA_MAP_KEYWORDS, check_depth
from ._refs import escape_pointer

_FLAGS = (("exclusiveMaximum", "maximum"), ("exclusiveMinimum", "minimum"))
# What _draft6_forms rewrites, as JSON text: an `id` with a string value (a property named "id"
# has an object, a `required` entry a comma), any `$id`, a flag. Whatever else matches (a key in
# an example) only costs a copy.
_DRAFT4_FORMS = re.compile(r'"id"\s*:\s*"|"\$id"\s*:|"exclusiveM(?:ax|in)imum"\s*:\s*[tf]')
_ANNOTATED_FORMAT = ("json-schema.org/draft/2020-12/", "json-schema.org/draft/2019-09/")


def _declared(schema) -> str:
    return schema["$schema"] if isinstance(schema, dict) and isinstance(schema.get("$schema"), str) else ""


def _text_of(schema, text: str | None) -> str:
    """The document as JSON text, to look for keywords in: `text`, the text it was read from,
    unless a \\u escape there could spell a keyword; else written, C-fast where a walk costs as
    much as a rewrite (a cycle, which no parsed document has, ends as a RecursionError)."""
    if text is not None and "\\u" not in text:
        return text
    return json.dumps(schema, ensure_ascii=False, check_circular=False)


def is_draft4(schema) -> bool:
    return "draft-04" in _declared(schema)


def format_is_annotation(schema) -> bool:
    """Whether the document declares a dialect where `format` only annotates."""
    return any(d in _declared(schema) for d in _ANNOTATED_FORMAT)


def _rewrite(schema, edit, pointer: str = "", depth: int = 0, scope=None, enter=None):
    """`schema` with `edit(out, scope, pointer)` applied to every schema object, innermost first; `enter(schema,
    scope)` gives the scope of a schema object and its subschemas (None: no scope). Keywords are
    not checked here: the walk after it checks every one (_keywords.subschemas), and this copy
    only goes where subschemas are (a value of another shape is copied as it is)."""
    if not isinstance(schema, dict):
        return schema
    check_depth(depth, pointer)
    if enter is not None:
        scope = enter(schema, scope)
    out = {}
    for key, value in schema.items():
        t = type(value)
        if t is dict and key in SCHEMA_KEYWORDS:
            out[key] = _rewrite(value, edit, f"{pointer}/{key}", depth + 1, scope, enter)
        elif t is list and key in SCHEMA_LIST_KEYWORDS:
            out[key] = [_rewrite(s, edit, f"{pointer}/{key}/{i}", depth + 2, scope, enter)
                        for i, s in enumerate(value)]
        elif t is dict and key in SCHEMA_MAP_KEYWORDS:
            out[key] = {name: _rewrite(s, edit, f"{pointer}/{key}/{escape_pointer(name)}", depth + 2, scope, enter)
                        for name, s in value.items()}
        else:
            out[key] = value
    edit(out, scope, pointer)
    return out


def _draft6_forms(out: dict, _scope, _pointer) -> None:
    out.pop("$id", None)
    if isinstance(out.get("id"), str):
        out["$id"] = out.pop("id")
    for flag, bound in _FLAGS:
        if isinstance(out.get(flag), bool):
            exclusive = out.pop(flag)
            if exclusive and bound in out:  # without its bound the flag says nothing
                out[flag] = out.pop(bound)


def draft6_forms(schema, text: str | None = None):
    """The schema with draft-04's boolean exclusive bounds and `id` in draft-06's forms."""
    try:  # most draft-04 documents name none of the keywords this rewrites: no copy of them
        if not _DRAFT4_FORMS.search(_text_of(schema, text)):
            return schema
    except (TypeError, ValueError, RecursionError):  # not JSON, or deep: the rewrite's walk says where
        pass
    return _rewrite(schema, _draft6_forms)


def _drop_format(out: dict, _scope, _pointer) -> None:
    fmt = out.pop("format", None)
    if fmt is not None and not isinstance(fmt, str):
        out["format"] = fmt  # left for the converter to refuse as malformed


def without_formats(schema):
    """The schema with `format` read as the annotation it is."""
    return _rewrite(schema, _drop_format)


RECURSIVE_ANCHOR = "trellis:recursive"  # no $dynamicAnchor a document writes has a ':' (an NCName)


def _recursive_scope(schema: dict, anchored):
    """Whether the schema resource around (a document root or a subschema with `$id`) is anchored."""
    if anchored is None or "$id" in schema:
        return schema.get("$recursiveAnchor") is True
    return anchored


def _recursive_forms(out: dict, anchored: bool, pointer: str) -> None:
    if out.pop("$recursiveAnchor", None) is True and "$dynamicAnchor" not in out:
        out["$dynamicAnchor"] = RECURSIVE_ANCHOR
    if "$recursiveRef" not in out:
        return
    ref = out.pop("$recursiveRef")
    if ref != "#":
        raise UnsupportedSchemaError(f'$recursiveRef must be "#", got {ref!r}', "$recursiveRef", pointer)
    key, target = ("$dynamicRef", "#" + RECURSIVE_ANCHOR) if anchored else ("$ref", "#")
    if "$ref" in out or "$dynamicRef" in out:  # beside another reference: one more conjunct
        out["allOf"] = [*out.get("allOf", ()), {key: target}]
    else:
        out[key] = target


def dynamic_forms(schema, text: str | None = None):
    """The schema with 2019-09's `$recursiveRef` / `$recursiveAnchor` in 2020-12's forms."""
    try:
        present = "$recursiveRef" in _text_of(schema, text)
    except (TypeError, ValueError, RecursionError):  # not JSON, or deep: the converter's walk says where
        return schema
    return _rewrite(schema, _recursive_forms, enter=_recursive_scope) if present else schema

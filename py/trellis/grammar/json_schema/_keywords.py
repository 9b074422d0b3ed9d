"""What a schema document may hold, checked in one place as it is walked (_refs.Resolver):

- every keyword in `SHAPES` has a value of the JSON type and shape the specification gives it
  (`items: 5`, `allOf: {...}`, `uniqueItems: "yes"` are refused, never read as absent);
- the whole document is JSON: dicts with string keys, lists, strings, finite numbers, booleans
  and None (no set, bytes, tuple, NaN or infinity), at most MAX_NESTING objects and arrays deep,
  integers of at most MAX_INT_DIGITS digits;
- the strings of the keywords that constrain (SHAPES and const; not annotations or unknown
  keywords) are encodable as UTF-8: a lone surrogate such as "\\ud800" cannot be written.

Errors name the keyword and the pointer of the subschema that holds it; the message gives the
exact place inside the keyword's value.
"""

from __future__ import annotations

from ...errors import SchemaLimitError, UnsupportedSchemaError
from ..json_values import MAX_JSON_NESTING, NotJson, walk_json

MAX_NESTING = MAX_JSON_NESTING  # objects and arrays one inside the other, counted from the document's root
MAX_INT_DIGITS = 1000
_INT_LIMIT = 10**MAX_INT_DIGITS  # compared as integers: str() of a huge int is itself refused by Python
TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def _is_schema(v) -> bool:
    return isinstance(v, (dict, bool))


def _is_count(v) -> bool:
    if isinstance(v, float) and v.is_integer():
        return v >= 0
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_strings(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_type(v) -> bool:
    if isinstance(v, str):
        return v in TYPE_NAMES
    return isinstance(v, list) and bool(v) and all(isinstance(x, str) and x in TYPE_NAMES for x in v)


SCHEMA = ("a schema (an object or a boolean)", _is_schema)
SCHEMAS = ("a non-empty array of schemas", lambda v: isinstance(v, list) and bool(v) and all(map(_is_schema, v)))
SCHEMA_MAP = ("an object whose values are schemas", lambda v: isinstance(v, dict) and all(map(_is_schema, v.values())))
COUNT = ("a non-negative integer", _is_count)
NUMBER = ("a number", _is_number)
STRING = ("a string", lambda v: isinstance(v, str))

# keyword -> (what its value must be, the test). Keywords not listed are annotations or unknown.
SHAPES = {
    **dict.fromkeys(("not", "if", "then", "else", "contains", "propertyNames", "additionalProperties",
                     "additionalItems", "unevaluatedItems", "unevaluatedProperties"), SCHEMA),
    **dict.fromkeys(("allOf", "anyOf", "oneOf"), SCHEMAS),
    "prefixItems": ("an array of schemas", lambda v: isinstance(v, list) and all(map(_is_schema, v))),
    # 2020-12 says a schema; the array form (draft-07) is accepted in every draft
    "items": ("a schema or an array of schemas",
              lambda v: _is_schema(v) or (isinstance(v, list) and all(map(_is_schema, v)))),
    **dict.fromkeys(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"), SCHEMA_MAP),
    "dependentRequired": ("an object whose values are arrays of strings",
                          lambda v: isinstance(v, dict) and all(map(_is_strings, v.values()))),
    "dependencies": ("an object whose values are schemas or arrays of strings",
                     lambda v: isinstance(v, dict) and all(_is_schema(d) or _is_strings(d) for d in v.values())),
    "required": ("an array of strings", _is_strings),
    "enum": ("an array", lambda v: isinstance(v, list)),
    "type": (f"one of {', '.join(sorted(TYPE_NAMES))}, or a non-empty array of them", _is_type),
    **dict.fromkeys(("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                     "minContains", "maxContains"), COUNT),
    **dict.fromkeys(("minimum", "maximum"), NUMBER),
    # draft-04's boolean form passes here: the number builder refuses it with its own message
    **dict.fromkeys(("exclusiveMinimum", "exclusiveMaximum"),
                    ("a number", lambda v: _is_number(v) or isinstance(v, bool))),
    "multipleOf": ("a number greater than 0", lambda v: _is_number(v) and v > 0),
    "uniqueItems": ("a boolean", lambda v: isinstance(v, bool)),
    **dict.fromkeys(("pattern", "format", "contentEncoding", "contentMediaType", "$ref", "$dynamicRef", "$id",
                     "$anchor", "$dynamicAnchor", "$schema", "$recursiveRef"), STRING),
}


# Where subschemas are (the walk visits them): a keyword's value, its items, or its values.
SCHEMA_KEYWORDS = {"additionalProperties", "propertyNames", "additionalItems", "contains", "not", "if", "then",
                   "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items"}
SCHEMA_LIST_KEYWORDS = {"allOf", "anyOf", "oneOf", "prefixItems", "items"}
SCHEMA_MAP_KEYWORDS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}


def subschemas(key, value, pointer: str, depth: int) -> list[tuple[str, object]]:
    """Checks one keyword of the subschema at `pointer` (itself `depth` containers deep) and
    returns its subschemas as (pointer token(s) below the keyword, value), for the walk to
    check in turn: the keyword's shape, and that the rest of its value is JSON."""
    if type(value) is str and key in NOTES:  # most keywords of large documents: nothing to check
        return []
    if not isinstance(key, str):
        raise UnsupportedSchemaError(f"not JSON: a {type(key).__name__} key {key!r}", None, pointer)
    shape = SHAPES.get(key)
    if shape is not None and not shape[1](value):
        raise UnsupportedSchemaError(f"{key} must be {shape[0]}", key, pointer)
    if key in SCHEMA_KEYWORDS and _is_schema(value):
        return [("", value)]
    if key in SCHEMA_LIST_KEYWORDS and isinstance(value, list) and all(map(_is_schema, value)):
        _check_depth(depth + 1, key, pointer)
        return [(f"/{i}", s) for i, s in enumerate(value)]
    if key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
        _check_depth(depth + 1, key, pointer)
        out = []
        for name, s in value.items():
            if not isinstance(name, str):
                raise UnsupportedSchemaError(f"not JSON: a {type(name).__name__} key {name!r} in {key}", key, pointer)
            check_value(name, key, pointer, depth + 1)
            if _is_schema(s):
                out.append((f"/{_escape(name)}", s))
            else:  # not a schema (the shape allows it: dependencies' arrays, unknown $defs entries)
                check_value(s, key, pointer, depth + 2, where=f"/{_escape(name)}")
        return out
    # (the internal "$trellis:" keywords of negations constrain too: a schema may spell them)
    check_value(value, key, pointer, depth + 1,
                constrains=key in SHAPES or key == "const" or key.startswith("$trellis:"))
    return []


def check_value(value, key: str | None, pointer: str, depth: int, constrains: bool = True, where: str = "") -> None:
    """`value` (found at `where` inside keyword `key`, `depth` containers deep when it is one) is
    JSON within the limits; with `constrains`, its strings and keys are UTF-8."""
    t = type(value)
    if t is str:  # most values are (titles, descriptions): no walk for them
        if constrains:
            _check_text(value, key, pointer, where)
        return
    if value is None or t is bool or (t is int and -_INT_LIMIT < value < _INT_LIMIT) or (
            t is float and value - value == 0):  # a float minus itself is 0 unless NaN or infinite
        return  # the other scalars JSON holds: nothing to walk
    if t is list and all(type(x) is str for x in value):  # `required`, `type`, enums of names (28,000 in one)
        _check_depth(depth, key, pointer)
        if constrains:
            for i, x in enumerate(value):
                if not x.isascii():
                    _check_text(x, key, pointer, f"{where}/{i}")
        return
    try:
        for v, at, d in walk_json(value, where):
            if isinstance(v, str):
                if constrains:
                    _check_text(v, key, pointer, at)
            elif isinstance(v, (dict, list)):
                _check_depth(depth + d, key, pointer)
                if constrains and isinstance(v, dict):
                    for k in v:
                        _check_text(k, key, pointer, at)
            elif isinstance(v, int) and abs(v) >= _INT_LIMIT:
                raise SchemaLimitError(f"an integer of more than {MAX_INT_DIGITS} digits at {key}{at} (a limit)",
                                       key, pointer)
    except NotJson as e:
        raise UnsupportedSchemaError(f"not JSON: {e.what} at {key}{e.path}", key, pointer) from None


def check_depth(depth: int, pointer: str) -> None:
    """A subschema `depth` containers deep (the walk's own check)."""
    _check_depth(depth, None, pointer)


def _check_depth(depth: int, key, pointer: str) -> None:
    if depth > MAX_NESTING:
        raise SchemaLimitError(f"the schema nests deeper than {MAX_NESTING} objects and arrays (a limit)", key,
                               pointer)


def _check_text(text: str, key, pointer: str, at: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            cp = ord(text[e.start])
            raise UnsupportedSchemaError(f"a lone surrogate (U+{cp:04X}) at {key}{at} has no UTF-8 encoding",
                                         key, pointer) from None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# ---- keyword groups and value kinds, as the converter reads them ------------------------------

# The kinds of JSON value ("atoms") a context may still admit; a number that is not an
# integer ("frac") is told apart from an integer ("int").
ATOMS = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
TYPE_ATOMS = {"null": {"null"}, "boolean": {"boolean"}, "integer": {"int"}, "number": {"int", "frac"},
              "string": {"string"}, "array": {"array"}, "object": {"object"}}

# Notes for readers: nothing reads them, not even reference resolution.
NOTES = frozenset({"title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"})
# Accepted and ignored: they do not constrain instances.
ANNOTATIONS = NOTES | {
    "contentEncoding", "contentMediaType", "contentSchema", "$schema", "$id", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$defs", "definitions", "$vocabulary",
}
# A subschema with these alone is a list of values (with a type): each value of its own enum meets it.
VALUE_LIST = ANNOTATIONS | {"enum", "const", "type"}
# Refused when present: 2019-09's $recursiveRef is rewritten into $dynamicRef (_dialect.py) except
# under draft-07 semantics, where it is no keyword and cannot mean what its author meant.
REFUSED_KEYWORDS = frozenset({"$recursiveRef"})
REF_KEYWORDS = ("$ref", "$dynamicRef")
NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")


def count_bounds(n, lo_key: str, hi_key: str, lo: int, hi: int | None) -> tuple[int, int | None]:
    """Tighten (lo, hi) by a node's min*/max* count keywords (non-negative integers, 2.0 == 2)."""
    for key in (lo_key, hi_key):
        if key in n.schema:
            v = n.schema[key]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise UnsupportedSchemaError(f"{key} must be a non-negative integer", key, n.pointer)
            if key == lo_key:
                lo = max(lo, v)
            else:
                hi = v if hi is None else min(hi, v)
    return lo, hi

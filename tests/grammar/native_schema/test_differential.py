"""Random schemas over the keywords the native converter builds (and a few it declines), with
hostile values mixed in: the port either declines or writes the Python converter's words, and
it never converts what the Python refuses."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trellis.errors import TrellisError
from trellis.grammar import ir
from trellis.grammar.json_schema import json_schema_to_grammar, native

from .probes import Probes

TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]
NAMES = st.one_of(st.sampled_from(["a", "b", "id", "type", "a/b", "~x", "é", "", "\u2028", '"q"', "\\"]),
                  st.text(max_size=6))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.text(max_size=8), st.floats(),
                    st.sampled_from([0, -1, 10**40, 10**1001, 1.0, 0.1, -0.0, 1e300, "\ud800", "", "null"]))
COUNTS = st.one_of(st.integers(0, 300), st.sampled_from([0, 1, 2, 256, 257, 4097, 100001, 2**31, -1]),
                   st.sampled_from([2.0, 1.5, True]))
REFS = st.sampled_from(["#", "#/$defs/a", "#/$defs/b", "#/definitions/c", "#/$defs/missing", "#/properties/a",
                        "#a", "other.json", "#/$defs/a/items"])


def keywords(schema):
    value = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3),
        "properties": st.dictionaries(NAMES, schema, max_size=4),
        "required": st.lists(NAMES, max_size=3),
        "additionalProperties": st.booleans() | schema,
        "items": schema | st.booleans() | st.lists(schema, max_size=3), "prefixItems": st.lists(schema, max_size=3),
        "additionalItems": schema | st.booleans() | st.just(5),
        "enum": st.lists(SCALARS, max_size=4), "const": SCALARS,
        "$ref": REFS, "allOf": st.lists(schema, min_size=1, max_size=2),
        "minLength": COUNTS, "maxLength": COUNTS, "minItems": COUNTS, "maxItems": COUNTS,
        "uniqueItems": st.booleans() | st.just("yes"), "description": st.text(max_size=5), "x-note": SCALARS,
        "format": st.sampled_from(["date", "email", "unknown-format", "regex", "time", "date-time", "idn-email", "uri",
                                   "ipv4", 5]),
        "pattern": st.sampled_from(["^a+$", "b", "^[a-z]{2,4}$", "(", r"\p{L}+", "^.{3}$", "a|^b$", "[0-9]", 5])
        | st.text(alphabet="ab^$.*+?()[]{}|\\-0", max_size=6),
        "minimum": st.integers(-5, 5) | st.floats(),
        "maximum": st.integers(-5, 5) | st.floats(), "exclusiveMinimum": st.integers(-5, 5) | st.booleans(),
        "multipleOf": st.sampled_from([1, 2, 0.5, 0, -1, 10**30 + 1]),
        "anyOf": st.lists(schema, min_size=1, max_size=2), "oneOf": st.lists(schema, min_size=1, max_size=3),
        "not": schema, "$trellis:notConst": SCALARS, "if": schema, "then": schema, "else": schema,
        "minProperties": COUNTS, "maxProperties": COUNTS,
        "dependentRequired": st.dictionaries(NAMES, st.lists(NAMES, max_size=2), max_size=2),
        "dependencies": st.dictionaries(NAMES, st.lists(NAMES, max_size=2) | schema, max_size=2),
        "dependentSchemas": st.dictionaries(NAMES, schema, max_size=2),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "b$", "^x-", ".*", "(", "é", "^[0-9]+$"]), schema,
                                             max_size=5),
        "contains": schema, "minContains": COUNTS, "maxContains": COUNTS,
        "propertyNames": schema | st.just(5) | st.fixed_dictionaries({"enum": st.lists(NAMES, max_size=4)})
        | st.fixed_dictionaries({}, optional={"pattern": st.sampled_from(["^[a-z]+$", "^a", "(", "é"]),
                                              "minLength": COUNTS, "maxLength": COUNTS, "format": st.just("email")}),
    }
    return st.sampled_from(sorted(value)).flatmap(lambda k: st.tuples(st.just(k), value[k]))


SCHEMAS = st.recursive(st.one_of(st.booleans(), st.sampled_from(TYPES).map(lambda t: {"type": t}), st.just({})),
                       lambda inner: st.lists(keywords(inner), max_size=5).map(dict), max_leaves=10)


@st.composite
def documents(draw):
    schema = draw(SCHEMAS)
    if isinstance(schema, dict) and draw(st.booleans()):
        schema = {**schema, "$defs": {"a": draw(SCHEMAS), "b": {"$ref": "#/$defs/a"}}, "definitions": {"c": draw(SCHEMAS)}}
    if isinstance(schema, dict) and draw(st.integers(0, 4)) == 0:
        schema["$schema"] = draw(st.sampled_from(["http://json-schema.org/draft-07/schema#",
                                                  "https://json-schema.org/draft/2020-12/schema",
                                                  "http://json-schema.org/draft-04/schema#"]))
    return schema


PROBES = []


@settings(max_examples=int(__import__("os").environ.get("NATIVE_DIFF_EXAMPLES", 400)), deadline=None, suppress_health_check=list(HealthCheck))
@given(documents(), st.booleans(), st.booleans(), st.sampled_from([0, 1, 20]), st.booleans())
def test_port_declines_or_writes_the_python_words(schema, strict, any_whitespace, max_whitespace, canonical):
    if not PROBES:
        PROBES.append(Probes())
    options = dict(any_whitespace=any_whitespace, strict=strict, max_whitespace=max_whitespace,
                   canonical_integers=canonical)
    req = native.request(schema, **options)
    port = PROBES[0].convert(*req) if req is not None else {"declined": "not requested"}
    try:
        words, _ = ir.serialize(json_schema_to_grammar(schema, **options))
    except TrellisError:
        assert "declined" in port, "the port converted what the Python refuses"
        return
    if "declined" not in port:
        assert port["words"] == list(words)


# Shapes random documents rarely reach: discriminators written as ifs (Converter.if_switch), a
# oneOf split on a key, negations of ifs, types, enums, required keys, some property and items,
# counts, dependencies, propertyNames, contains and unique items from a few values.
_KIND = {"type": "object", "properties": {"kind": {"enum": ["a", "b", 3]}, "x": {"type": "integer"}}}
CHOSEN = [
    {**_KIND, "allOf": [{"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}},
                        {"if": {"properties": {"kind": {"enum": ["b", 3]}}, "required": ["kind"]},
                         "then": {"properties": {"x": {"maximum": 3}}}, "else": {"properties": {"x": False}}}]},
    {**_KIND, "oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"minimum": 1}}},
                        {"properties": {"kind": {"const": "b"}, "x": {"maximum": 5}}}]},
    {"not": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}},
    {"type": ["string", "integer", "null"], "not": {"anyOf": [{"enum": ["x", 2]}, {"type": "null"}]}},
    {"type": "object", "not": {"required": ["a", "b"]}, "properties": {"a": {"not": {"pattern": "^z"}}}},
    {"oneOf": [{"type": "integer"}, {"minimum": 3}, {"not": {"type": "string"}}]},
    {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}, "c": {}}, "minProperties": 2,
     "maxProperties": 3, "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["a"]}}},
    {"properties": {"a": {}, "b": {}}, "additionalProperties": False, "required": ["b"],
     "dependencies": {"a": ["b"], "b": {"type": "object"}, "x": False}, "not": {"maxProperties": 1}},
    {"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "additionalProperties": {"type": "integer"},
     "properties": {"a": {"type": "string"}, "d": {}}},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 8}, "properties": {"ab": {}, "A": {}}},
    {"propertyNames": True, "properties": {"x": {}}},
    {"propertyNames": {"$ref": "#/$defs/k"}, "$defs": {"k": {"type": "string", "minLength": 2}},
     "patternProperties": {"^a": {"type": "null"}}, "properties": {"b": {}, "ab": {}}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"},
     "required": ["a"], "not": {"additionalProperties": {"type": "string", "maxLength": 3}}},
    {"not": {"patternProperties": {"^x-": {"type": "integer"}}, "properties": {"x-a": {"const": 1}}}},
    {"type": "array", "items": {"type": "integer"}, "not": {"items": {"minimum": 3}}},
    {"type": "array", "contains": {"type": "string"}, "minContains": 2, "maxContains": 3, "maxItems": 6},
    {"not": {"contains": {"const": 1}}, "items": {"type": "integer"}},
    {"type": ["object", "string"], "properties": {"a": {}, "b": {"type": "integer"}},
     "dependentSchemas": {"a": {"properties": {"b": {"minimum": 3}}}, "b": {"required": ["a"]}},
     "dependencies": {"c": {"not": {"required": ["a"]}}}},
    {"type": "array", "uniqueItems": True, "minItems": 1, "maxItems": 3,
     "prefixItems": [{"enum": ["a", 1]}], "items": {"enum": ["a", "b", 1, 1.0, None]}},
]


def test_port_on_chosen_schemas():
    probes = PROBES[0] if PROBES else Probes()
    for schema in CHOSEN:
        for strict in (False, True):
            req = native.request(schema, strict=strict)
            port = probes.convert(*req)
            words, _ = ir.serialize(json_schema_to_grammar(schema, strict=strict))
            assert port.get("words") == list(words), (schema, port.get("declined"))

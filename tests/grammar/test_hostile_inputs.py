"""Hostile and big inputs through the public compile verbs: every refusal is a typed error that
says where (line/column, keyword/pointer, field), and legitimate big inputs compile exactly.

Oracles: the `jsonschema` validator, Python's `re` and `unicodedata`, and languages known by
construction (a nesting whose strings can be listed, a count's boundary).
"""

from __future__ import annotations

import json
import re
import unicodedata

import jsonschema
import pytest

from trellis.errors import (GrammarError, GrammarLimitError, InvalidRequestError, SchemaLimitError,
                            UnsupportedSchemaError)
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary


def accepts(compiled, text: str) -> bool:
    matcher = GrammarMatcher(compiled)
    return matcher.accept_string(text) and matcher.can_terminate()


def agrees_with_jsonschema(compiled, schema, instances) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    for value in instances:
        assert accepts(compiled, json.dumps(value)) == validator.is_valid(value), value


# ---- RecursionError: nesting is the user's ----------------------------------------------------


def nested(n: int, fmt: str, inner: str) -> str:
    for _ in range(n):
        inner = fmt.format(inner)
    return inner


def nested_language(n: int):
    """L0 = {a}, L(i+1) = Li b | c: the strings c b^j (j < n) and a b^n, and near misses."""
    good = ["a" + "b" * n, "c", "c" + "b" * (n - 1)]
    bad = ["a" + "b" * (n - 1), "a" + "b" * (n + 1), "c" + "b" * n, "b"]
    return good, bad


@pytest.mark.parametrize("n", [300, 700])
def test_deep_groups_compile_exactly(compiler, n):
    regex = compiler.compile_regex(nested(n, "(?:{}b|c)", "a"))
    ebnf = compiler.compile_grammar("root ::= " + nested(n, '({} "b" | "c")', '"a"'))
    good, bad = nested_language(n)
    for compiled in (regex, ebnf):
        assert all(accepts(compiled, s) for s in good)
        assert not any(accepts(compiled, s) for s in bad)
    if n <= 300:  # Python's own parser recurses: its oracle only for the shallower one
        pattern = re.compile(nested(n, "(?:{}b|c)", "a"))
        assert all(bool(pattern.fullmatch(s)) for s in good) and not any(pattern.fullmatch(s) for s in bad)


def test_redundant_parentheses_compile(compiler):
    for compiled in (compiler.compile_regex("(" * 1000 + "a" + ")" * 1000),
                     compiler.compile_grammar("root ::= " + "(" * 1000 + '"a"' + ")" * 1000)):
        assert accepts(compiled, "a") and not accepts(compiled, "aa")


def test_nesting_beyond_the_core_limit_is_a_limit_error(compiler):
    with pytest.raises(GrammarLimitError, match="nested deeper than 2000"):
        compiler.compile_regex(nested(5000, "({}b|c)", "a"))
    with pytest.raises(GrammarLimitError, match="nested deeper than 2000"):
        compiler.compile_grammar("root ::= " + nested(5000, '({} "b" | "c")', '"a"'))


def test_unclosed_deep_group_names_its_position(compiler):
    with pytest.raises(GrammarError) as info:
        compiler.compile_grammar("root ::= " + "(" * 400 + '"a"')
    assert (info.value.line, info.value.column) == (1, 10 + 399)  # the innermost '('
    with pytest.raises(GrammarError) as info:
        compiler.compile_regex("(" * 400 + "a")
    assert info.value.column == 400


def items_schema(depth: int):
    schema = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("depth", [500, 2000])
def test_deep_schemas_compile_exactly(compiler, depth):
    compiled = compiler.compile_json_schema(items_schema(depth))
    assert accepts(compiled, "[" * depth + "1" + "]" * depth)
    assert accepts(compiled, "[" * depth + "]" * depth)  # an empty array at the bottom
    assert not accepts(compiled, "[" * (depth - 1) + "1" + "]" * (depth - 1))  # an integer where an array goes
    assert not accepts(compiled, "[" * (depth + 1) + "]" * (depth + 1))  # an array where an integer goes


def test_deep_references_compile(compiler):
    """A chain of 1,000 $refs, each one object deeper: the nesting comes from references, not
    from the document."""
    defs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(999)}
    defs["d999"] = {"type": "integer"}
    compiled = compiler.compile_json_schema({"$ref": "#/$defs/d0", "$defs": defs})
    deep = "1"
    for _ in range(999):
        deep = '{"x": ' + deep + "}"
    assert accepts(compiled, deep) and accepts(compiled, "{}")
    assert not accepts(compiled, deep.replace("1", '"1"'))


def test_schemas_deeper_than_the_limit_are_a_limit_error(compiler):
    text = '{"type": "array", "items": ' * 2001 + '{"type": "integer"}' + "}" * 2001
    for schema in (items_schema(2001), text, "[" * 100_000):
        with pytest.raises(SchemaLimitError) as info:
            compiler.compile_json_schema(schema)
        assert isinstance(info.value, GrammarLimitError) and isinstance(info.value, UnsupportedSchemaError)
        assert "2000" in str(info.value) or "nests too deeply" in str(info.value)
    with pytest.raises(SchemaLimitError) as info:
        compiler.compile_json_schema(items_schema(2001))
    assert info.value.pointer == "/items" * 2001  # the 2001st schema inside: the integer one


@pytest.mark.parametrize("dialect", [{}, {"$schema": "http://json-schema.org/draft-04/schema#"}])
def test_deep_values_name_their_keyword_and_the_limit(compiler, dialect):
    """An enum value 100,000 arrays deep, and 100,000 nested `not`s: the limit (with the keyword
    and pointer where they are inside one), in every dialect (the dialects' rewrites before the
    walk check the depth as they go, or leave it to the walk)."""
    value = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(SchemaLimitError) as info:
        compiler.compile_json_schema({**dialect, "properties": {"a": {"enum": [value]}}})
    assert "2000" in str(info.value) and info.value.keyword == "enum" and info.value.pointer == "/properties/a"
    chain = {}
    for _ in range(100_000):
        chain = {"not": chain}
    with pytest.raises(SchemaLimitError, match="deeper than 2000"):
        compiler.compile_json_schema({**dialect, **chain})


# ---- UnicodeEncodeError: lone surrogates ---------------------------------------------------


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"const": "\ud800"}, "const", ""),
    ({"enum": ["a", "b\udfff"]}, "enum", ""),
    ({"type": "object", "properties": {"a": {"properties": {"\ud800": {}}}}}, "properties", "/properties/a"),
    ({"type": "object", "required": ["\ud800"]}, "required", ""),
    ({"type": "string", "pattern": "a\ud800"}, "pattern", ""),
    ({"items": {"const": {"k\ud800": 1}}}, "const", "/items"),
])
def test_lone_surrogates_in_schemas(compiler, schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        compiler.compile_json_schema(schema)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer)
    assert "surrogate" in info.value.message


def test_lone_surrogates_in_annotations_are_harmless(compiler):
    compiled = compiler.compile_json_schema({"type": "integer", "description": "\ud800", "examples": ["\udc00"]})
    assert accepts(compiled, "12")


def tool_tag(begin="<f>", end="</f>", trigger="<f"):
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [trigger], "tags": [
        {"begin": begin, "content": {"type": "json_schema", "json_schema": {"type": "integer"}}, "end": end}]}}


@pytest.mark.parametrize("tag, field", [
    (tool_tag(begin="<f\ud800>"), "format.tags[0].begin"),
    (tool_tag(end="</f\udc00>"), "format.tags[0].end"),
    (tool_tag(trigger="<\ud800"), "format.triggers[0]"),
])
def test_lone_surrogates_in_structural_tags(compiler, tag, field):
    with pytest.raises(InvalidRequestError) as info:
        compiler.compile_structural_tag(tag)
    assert info.value.field == field and "surrogate" in info.value.message


def test_lone_surrogates_in_grammars(compiler):
    with pytest.raises(GrammarError) as info:
        compiler.compile_grammar('root ::= "ab\ud800"')
    assert (info.value.line, info.value.column) == (1, 13)
    with pytest.raises(GrammarError) as info:
        compiler.compile_regex("ab\ud800")
    assert info.value.column == 3


# ---- OverflowError / ValueError: huge bounds ------------------------------------------------


@pytest.mark.parametrize("pattern, column", [("a{99999999999}", 2), ("ab{" + "9" * 5000 + "}", 3),
                                             ("a{2,3000000000}", 2)])
def test_huge_regex_bounds(compiler, pattern, column):
    with pytest.raises(GrammarLimitError) as info:
        compiler.compile_regex(pattern)
    assert info.value.column == column and "2147483647" in info.value.message


@pytest.mark.parametrize("bound", ["3000000000", "9" * 5000, "1,3000000000"])
def test_huge_ebnf_bounds(compiler, bound):
    with pytest.raises(GrammarLimitError) as info:
        compiler.compile_grammar('root ::= "a"\n  | "x"{' + bound + "}")
    assert (info.value.line, info.value.column) == (2, 8) and "2147483647" in info.value.message


@pytest.mark.parametrize("keyword", ["minLength", "maxLength", "minItems", "maxItems", "minimum", "multipleOf"])
def test_integers_of_thousands_of_digits(compiler, keyword):
    with pytest.raises(SchemaLimitError) as info:
        compiler.compile_json_schema({"properties": {"a": {keyword: 10**5000}}})
    assert (info.value.keyword, info.value.pointer) == (keyword, "/properties/a")


def test_item_counts_beyond_int32_are_exact(compiler):
    at_most = compiler.compile_json_schema({"type": "array", "items": {"type": "integer"}, "maxItems": 2**40})
    assert accepts(at_most, "[]") and accepts(at_most, "[1, 2, 3]") and not accepts(at_most, '["a"]')
    at_least = compiler.compile_json_schema({"type": "array", "minItems": 2**40})
    assert not accepts(at_least, "[]") and not accepts(at_least, "[1, 2, 3]")
    assert GrammarMatcher(at_least).accept_string("[1, 2, 3")  # a prefix of a valid (huge) array


@pytest.mark.parametrize("lo, hi", [(0, 257), (270, 300), (0, 4096), (4095, 4097), (300, None), (1000, 1000)])
def test_item_counts_around_their_bounds(compiler, lo, hi):
    schema = {"type": "array", "items": {"const": 7}, "minItems": lo, **({} if hi is None else {"maxItems": hi})}
    compiled = compiler.compile_json_schema(schema)
    top = hi if hi is not None else lo + 40
    for n in sorted({0, 1, lo - 1, lo, lo + 1, top - 1, top, top + 1, (lo + top) // 2} - {-1}):
        assert accepts(compiled, json.dumps([7] * n)) == (lo <= n and (hi is None or n <= hi)), n


# ---- KeyError / IndexError: schemas that crashed ------------------------------------------------


def test_max_contains_without_items_is_exact(compiler):
    schema = {"type": "array", "contains": {"type": "integer"}, "maxContains": 1}
    compiled = compiler.compile_json_schema(schema)
    agrees_with_jsonschema(compiled, schema, [[], [1], [1, 2], ["a"], ["a", 1, "b"], [1, "a", 2], [0.5, 1],
                                              [1.5], [[1], 2], [None, True, 3]])


def test_prefix_items_as_an_object_is_refused(compiler):
    with pytest.raises(UnsupportedSchemaError) as info:
        compiler.compile_json_schema({"items": {"prefixItems": {"a": {}}}})
    assert (info.value.keyword, info.value.pointer) == ("prefixItems", "/items")


# ---- malformed keyword values: refused, never ignored ---------------------------------------


@pytest.mark.parametrize("keyword, value", [
    ("items", 5), ("allOf", {"type": "string"}), ("uniqueItems", "yes"), ("prefixItems", {"a": {}}),
    ("required", "a"), ("required", ["a", 1]), ("properties", ["a"]), ("properties", {"a": 3}),
    ("minLength", -1), ("minLength", 1.5), ("maxItems", True), ("enum", "abc"), ("pattern", 5),
    ("type", "strin"), ("type", []), ("anyOf", []), ("oneOf", [{}, 3]), ("not", "x"), ("contains", []),
    ("multipleOf", 0), ("minimum", "5"), ("dependentRequired", {"a": "b"}), ("format", 1), ("$ref", 5),
    ("additionalProperties", None), ("patternProperties", {"^a": 1}), ("$defs", {"x": 2}),
])
def test_malformed_keywords_are_refused(compiler, keyword, value):
    schema = {"type": "object", "properties": {"a/b": {keyword: value}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compiler.compile_json_schema(schema)
    assert (info.value.keyword, info.value.pointer) == (keyword, "/properties/a~1b")


def test_well_formed_edge_values_compile(compiler):
    """What the shapes allow: empty enum, required and prefixItems, integral floats as counts,
    draft-07 array items, dependencies of either kind."""
    for schema, good, bad in [
        ({"enum": []}, [], [1]),
        ({"required": [], "type": "object"}, [{}], [1]),
        ({"type": "array", "minItems": 2.0}, [[1, 2]], [[1]]),
        ({"items": [{"type": "integer"}], "additionalItems": False}, [[1]], [[1, 2], ["a"]]),
        ({"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}, [{"a": 1, "b": 2}, {"c": 1, "d": 1}],
         [{"a": 1}, {"c": 1}]),
    ]:
        compiled = compiler.compile_json_schema(schema, draft="draft7" if "dependencies" in schema else None)
        assert all(accepts(compiled, json.dumps(v)) for v in good), schema
        assert not any(accepts(compiled, json.dumps(v)) for v in bad), schema


# ---- TypeError: values that are not JSON ------------------------------------------------------


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"enum": [{1, 2}]}, "enum", ""),
    ({"properties": {"a": {"const": b"ab"}}}, "const", "/properties/a"),
    ({"type": "number", "minimum": float("nan")}, "minimum", ""),
    ({"type": "number", "maximum": float("inf")}, "maximum", ""),
    ({"type": "object", "properties": {1: {}}}, "properties", ""),
    ({"default": {2: 3}}, "default", ""),
    ({"items": {"enum": [(1, 2)]}}, "enum", "/items"),
])
def test_non_json_values_in_schemas(compiler, schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        compiler.compile_json_schema(schema)
    assert (info.value.keyword, info.value.pointer) == (keyword, pointer)
    assert "not JSON" in info.value.message


@pytest.mark.parametrize("rf, field", [
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"enum": [{1}]}}},
     "response_format.json_schema.schema.enum[0]"),
    ({"type": "json_object", "schema": {"minimum": float("nan")}}, "response_format.schema.minimum"),
    ({"type": "json_object", "schema": {"properties": {("a",): {}}}}, "response_format.schema.properties"),
])
def test_non_json_values_in_response_formats(compiler, rf, field):
    with pytest.raises(InvalidRequestError) as info:
        compiler.compile_response_format(rf)
    assert info.value.field == field and "not JSON" in info.value.message


def test_lone_surrogate_in_a_response_format_annotation_compiles(compiler):
    compiled, key = compiler.compile_response_format(
        {"type": "json_object", "schema": {"type": "integer", "title": "\ud800"}})
    assert accepts(compiled, "5") and len(key) == 64


# ---- big but legitimate inputs compile (what llguidance accepts) ---------------------------


@pytest.mark.parametrize("n", [300, 1000])
def test_many_optional_properties(compiler, n):
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
    compiled = compiler.compile_json_schema(schema)
    last = f"p{n - 1}"
    agrees_with_jsonschema(compiled, schema, [{}, {"p0": 1, last: 2}, {"p5": "x"}, {last: None}, {"q": 1},
                                              {"p1": 1, "p2": 2, "p3": 3}])


def test_too_many_properties_blame_properties(compiler):
    with pytest.raises(SchemaLimitError) as info:
        compiler.compile_json_schema({"type": "object", "properties": {f"p{i}": {} for i in range(5000)}})
    assert (info.value.keyword, info.value.pointer) == ("properties", "") and "3000" in info.value.message


def test_fifty_thousand_items(compiler):
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": 50_000}
    compiled = compiler.compile_json_schema(schema)
    agrees_with_jsonschema(compiled, schema, [[], [1, 2, 3], ["a"], list(range(50_000)), list(range(50_001))])


def test_a_chain_of_a_thousand_rules(compiler):
    rules = [f'r{i} ::= "a" r{i + 1}' for i in range(999)] + ['r999 ::= "q" | "y"']
    compiled = compiler.compile_grammar("\n".join(rules), root="r0")
    assert accepts(compiled, "a" * 999 + "q") and accepts(compiled, "a" * 999 + "y")
    assert not accepts(compiled, "a" * 998 + "q") and not accepts(compiled, "a" * 1000 + "q")
    plain = compiler.compile_grammar("\n".join([f"r{i} ::= r{i + 1} | \"x{i}\"" for i in range(999)]
                                               + ['r999 ::= "q"']), root="r0")
    assert accepts(plain, "q") and accepts(plain, "x998") and not accepts(plain, "x999")


def test_a_repeated_unicode_class(compiler):
    compiled = compiler.compile_regex(r"[\p{L}\p{N} ]{0,200}")

    def oracle(s):
        return len(s) <= 200 and all(c == " " or unicodedata.category(c)[0] in "LN" for c in s)

    for s in ["", "héllo wörld 123", "日本語 ١٢٣ Ⅻ", "x" * 200, "é" * 200, "x" * 201, "a-b", "tab\there", "😀"]:
        assert accepts(compiled, s) == oracle(s), s


# ---- arguments of the wrong type -----------------------------------------------------------


def test_arguments_of_the_wrong_type(compiler):
    with pytest.raises(GrammarError):
        compiler.compile_regex(None)
    with pytest.raises(GrammarError):
        compiler.compile_grammar(b'root ::= "a"')
    with pytest.raises(InvalidRequestError) as info:
        compiler.compile_json_schema({}, property_order="random")
    assert info.value.field == "property_order"
    with pytest.raises(InvalidRequestError) as info:
        compiler.compile_json_schema({}, max_whitespace=-1)
    assert info.value.field == "max_whitespace"


def test_deep_structural_tags(compiler):
    def sequences(n):
        fmt = {"type": "const_string", "value": "x"}
        for _ in range(n):
            fmt = {"type": "sequence", "elements": [fmt, {"type": "const_string", "value": "y"}]}
        return {"type": "structural_tag", "format": fmt}

    compiled = compiler.compile_structural_tag(sequences(900))
    assert accepts(compiled, "x" + "y" * 900) and not accepts(compiled, "x" + "y" * 899)
    with pytest.raises(GrammarLimitError, match="2000"):
        compiler.compile_structural_tag(sequences(1200))  # 2,400 objects and arrays deep


def wrapped(n, wrap, inner):
    for _ in range(n):
        inner = wrap(inner)
    return inner


@pytest.mark.parametrize("schema", [
    wrapped(600, lambda s: {"anyOf": [s, {"type": "null"}]}, {"type": "integer"}),
    wrapped(600, lambda s: {"allOf": [s]}, {"type": "integer"}),
    wrapped(600, lambda s: {"not": s}, {"type": "integer"}),
    wrapped(600, lambda s: {"oneOf": [s, {"type": "string"}]}, {"type": "integer"}),
    wrapped(600, lambda s: {"if": {"type": "array"}, "then": {"items": s}}, {"type": "integer"}),
    wrapped(300, lambda s: {"type": "object", "properties": {"a": s}, "unevaluatedProperties": False}, {}),
    {"enum": [wrapped(1500, lambda v: [v], 1), 2]},
    {"type": "array", "prefixItems": [{"type": "integer"}] * 2000, "minItems": 2000},
], ids=["anyOf", "allOf", "not", "oneOf", "if-then", "unevaluated", "enum", "prefixItems"])
def test_deep_combinators_compile_or_are_refused_by_keyword(compiler, schema):
    """Whatever the nesting, a compiled grammar or a typed refusal that names its keyword."""
    try:
        compiler.compile_json_schema(schema)
    except UnsupportedSchemaError as e:
        assert e.keyword in ("anyOf", "oneOf", "if", "not") and e.pointer


def test_deep_values_are_matched(compiler):
    deep = wrapped(1500, lambda v: [v], 1)
    compiled = compiler.compile_json_schema({"enum": [deep, 2]})
    assert accepts(compiled, json.dumps([[1]])) is False and accepts(compiled, "2")
    assert accepts(compiled, "[" * 1500 + "1" + "]" * 1500) and not accepts(compiled, "[" * 1499 + "1" + "]" * 1499)
    compiled = compiler.compile_json_schema({"type": "array", "prefixItems": [{"type": "integer"}] * 2000,
                                             "minItems": 2000, "items": False})
    assert accepts(compiled, json.dumps(list(range(2000))))
    assert not accepts(compiled, json.dumps(list(range(1999)))) and not accepts(compiled, json.dumps(list(range(2001))))


@pytest.mark.parametrize("schema", [
    {"$id": "http://localhost]:", "allOf": [{"$ref": "e"}]},  # found by the fuzzer: urllib's ValueError
    {"$id": "http://[::1/x", "properties": {"a": {"$ref": "#/properties/b"}, "b": {}}},
])
def test_unparsable_base_uris_are_refused(compiler, schema):
    with pytest.raises(UnsupportedSchemaError) as e:
        compiler.compile_json_schema(schema)
    assert e.value.keyword == "$ref"


def test_numbers_python_hashes_alike_number_subschemas_apart(compiler):
    """Subschemas are numbered by what they say in a table (the resolver's): numbers that Python
    hashes alike (equal modulo 2^61 - 1) are hashed as their text there, or a schema of thousands
    of them would fill one bucket, each insertion scanning the ones before."""
    from trellis.grammar.json_schema._refs import MIN_NUMBERED, Resolver
    p = 2**61 - 1
    n = 2 * MIN_NUMBERED
    resolver = Resolver({"prefixItems": [{"minimum": 1 + i * p} for i in range(n)]}, draft7=False)
    assert len({hash(k) for k in resolver._numbers}) > n  # the items, the root, no two alike
    # the converter's number grammars, remembered by what their keywords say, too
    from trellis.grammar.json_schema.converter import Converter, Options
    conv = Converter({"prefixItems": [{"minimum": 1 + i * p} for i in range(n)]}, Options(True, False, 0), draft7=False)
    conv.grammar()
    assert len({hash(k) for k in conv._numbers}) >= n
    compiled = compiler.compile_json_schema({"prefixItems": [{"minimum": 1 + i * p} for i in range(3)]})
    assert accepts(compiled, f"[1, {1 + p}, {1 + 2 * p}]") and not accepts(compiled, f"[1, {p}]")

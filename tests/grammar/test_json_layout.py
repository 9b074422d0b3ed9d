"""`indent` and `separators` of the JSON Schema front-end (xgrammar's options) against json.dumps:
with any_whitespace=False the grammar takes exactly json.dumps(instance, indent=, separators=)'s
text, and refuses the same instance written compact or indented otherwise. Compared once by hand with
xgrammar 0.2.9 (not in the pinned venv: it needs torch): the same verdicts, except where xgrammar departs
from json.dumps (enum/const and unconstrained values on one line, a recursive $ref indented as at its
first use, an empty prefixItems array as "[\n  \n]", tabs refused in separators)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trellis.errors import InvalidRequestError, SchemaLimitError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary, ir
from trellis.grammar.json_schema import json_schema_to_grammar
from trellis.grammar.json_schema.converter import MAX_INDENT_DEPTH
from trellis.grammar.response_format import normalize_response_format
from tests.grammar.conftest import accepts

TREE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": False}}, "$ref": "#/$defs/node"}

# (schema, instances): nested objects, arrays, prefixItems, additionalProperties, a recursive
# $ref, enum/const with containers, empty arrays and objects. Keys in schema order.
CASES = [
    ({"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                                       "pos": {"type": "object", "properties": {"x": {"type": "number"},
                                                                                "y": {"type": "number"}}}},
      "required": ["name", "tags"]},
     [{"name": "a", "tags": []}, {"name": "b", "tags": ["x", "y"], "pos": {"x": 1.5, "y": -2}},
      {"name": "c", "tags": ["z"], "pos": {}}]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "array", "items": {"type": "boolean"}}],
      "items": {"type": "null"}},
     [[], [1], [1, [True, False]], [1, [], None, None]]),
    ({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
     [{}, {"k": []}, {"k": [1, 2], "j": [3]}]),
    (TREE, [{"v": 1}, {"v": 1, "kids": []}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}]),
    ({"enum": [[1, [2, {}]], {"a": {"b": [3]}}, "s", {}]}, [[1, [2, {}]], {"a": {"b": [3]}}, "s", {}]),
    ({"type": "object", "properties": {"c": {"const": {"k": [1, 2], "e": []}}}, "required": ["c"]},
     [{"c": {"k": [1, 2], "e": []}}]),
    ({}, [None, 3, [], {}, [1, {"a": [[], {"b": None}]}]]),
]
LAYOUTS = [dict(indent=2), dict(indent=4, separators=(" ,", " : ")), dict(indent=0),
           dict(separators=(",", ":")), dict(separators=(" , ", ":\t"))]


def nested(value) -> bool:
    """Whether the layout shows in the text (a non-empty array or object)."""
    return isinstance(value, (list, dict)) and bool(value)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[str(x) for x in LAYOUTS])
@pytest.mark.parametrize("schema, instances", CASES, ids=[str(i) for i in range(len(CASES))])
def test_json_dumps_layout_and_no_other(compiler, schema, instances, layout):
    grammar = compiler.compile_json_schema(schema, any_whitespace=False, **layout)
    for value in instances:
        assert accepts(grammar, json.dumps(value, **layout)), (value, layout)
        others = [json.dumps(value), json.dumps(value, indent=3), json.dumps(value, separators=(", ", ":"))]
        for other in others:
            if other != json.dumps(value, **layout):
                assert accepts(grammar, other) is False, (other, layout)
        if nested(value):
            assert accepts(grammar, json.dumps(value, indent=(layout.get("indent") or 0) + 1)) is False


@pytest.fixture(scope="module")
def any_value(compiler):
    """The unconstrained schema's grammars, indented by 1 and by 2."""
    return {indent: compiler.compile_json_schema({}, any_whitespace=False, indent=indent) for indent in (1, 2)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.none() | st.booleans() | st.integers(-999, 999) | st.text("ab\"\\é", max_size=3),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("xyz", max_size=2), inner,
                                                                                max_size=3), max_leaves=12))
def test_any_value_as_json_dumps_indents_it(any_value, value):
    text = json.dumps(value, indent=2, ensure_ascii=False)
    assert accepts(any_value[2], text)
    assert accepts(any_value[1], text) is (not nested(value))  # another indent: only where none shows


def test_nesting_is_unrolled_to_the_bound(compiler):
    """Indentation that grows without bound is beyond a grammar: MAX_INDENT_DEPTH levels of
    arrays and objects, recursive $ref or unconstrained values alike; scalars at any depth."""
    def deep(levels, leaf):
        v = leaf
        for _ in range(levels):
            v = [v]
        return v
    for schema in ({}, {"$defs": {"a": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/a"}},
                                                  {"type": "integer"}]}}, "$ref": "#/$defs/a"}):
        grammar = compiler.compile_json_schema(schema, any_whitespace=False, indent=1)
        assert accepts(grammar, json.dumps(deep(MAX_INDENT_DEPTH, 7), indent=1))
        assert accepts(grammar, json.dumps(deep(MAX_INDENT_DEPTH - 1, []), indent=1))
        assert not accepts(grammar, json.dumps(deep(MAX_INDENT_DEPTH + 1, 7), indent=1))
    # without an indent nothing depends on the depth: no bound
    compact = compiler.compile_json_schema({}, any_whitespace=False, separators=(",", ":"))
    assert accepts(compact, json.dumps(deep(100, 7), separators=(",", ":")))


def test_the_core_checks_read_indented_text(compiler):
    """uniqueItems over an open set and additional keys are checked by the core on the text."""
    unique = compiler.compile_json_schema({"type": "array", "uniqueItems": True, "items": {"type": "object"}},
                                          any_whitespace=False, indent=2)
    assert accepts(unique, json.dumps([{"a": [1, 2]}, {"a": [2, 1]}], indent=2))
    assert not accepts(unique, json.dumps([{"a": [1, 2]}, {"a": [1, 2]}], indent=2))
    assert not accepts(unique, json.dumps([{"b": 1, "a": 2}, {"a": 2, "b": 1}], indent=2))
    keys = compiler.compile_json_schema({"additionalProperties": {"type": "integer"}}, any_whitespace=False,
                                        indent=2, separators=(" ,", " : "))
    assert accepts(keys, '{\n  "a" : 1 ,\n  "b" : 2\n}')
    assert not accepts(keys, '{\n  "a" : 1 ,\n  "a" : 2\n}')


def test_any_whitespace_ignores_indent_and_keeps_separators(compiler):
    """As xgrammar: the whitespace is free there, the separators are literals inside it."""
    schema = CASES[0][0]
    plain = ir.serialize(json_schema_to_grammar(schema))
    assert ir.serialize(json_schema_to_grammar(schema, indent=2)) == plain
    grammar = compiler.compile_json_schema(schema, indent=2, separators=(", ", ": "))
    value = CASES[0][1][1]
    assert accepts(grammar, json.dumps(value, separators=(", ", ": ")))
    assert accepts(grammar, json.dumps(value, indent=2, separators=(", ", ": ")))  # any indentation
    assert not accepts(grammar, json.dumps(value, separators=(",", ":")))  # the literal ", " is missing


@pytest.mark.parametrize("options, field", [
    (dict(indent=-1), "indent"), (dict(indent=65), "indent"), (dict(indent=True), "indent"),
    (dict(indent="  "), "indent"), (dict(indent=2.0), "indent"),
    (dict(separators=(",",)), "separators"), (dict(separators=",:"), "separators"),
    (dict(separators=(";", ":")), "separators"), (dict(separators=(",", "=")), "separators"),
    (dict(separators=(",\x00", ":")), "separators"), (dict(separators=(1, 2)), "separators"),
    (dict(separators=(", ,", ":")), "separators"), (dict(separators=(",", ": \u00a0")), "separators"),
])
def test_malformed_options_name_themselves(options, field):
    with pytest.raises(InvalidRequestError) as e:
        json_schema_to_grammar({"type": "object"}, any_whitespace=False, **options)
    assert e.value.field == field
    with pytest.raises(InvalidRequestError) as e:
        normalize_response_format({"type": "json_object", "schema": {}}, **options)
    assert e.value.field == field


def test_request_options_are_keyed(compiler):
    rf = {"type": "json_object", "schema": CASES[0][0]}
    plain = compiler.constraints.read(rf, any_whitespace=False)
    assert "indent" not in plain.normalized and "separators" not in plain.normalized  # keys as before
    indented = compiler.constraints.read(rf, any_whitespace=False, indent=2)
    spaced = compiler.constraints.read(rf, any_whitespace=False, indent=2, separators=(" ,", ": "))
    assert len({plain.key, indented.key, spaced.key}) == 3
    assert spaced.normalized["separators"] == [" ,", ": "]
    grammar, _ = compiler.constraints.grammar(spaced)
    value = CASES[0][1][1]
    assert accepts(grammar, json.dumps(value, indent=2, separators=(" ,", ": ")))
    assert not accepts(grammar, json.dumps(value, indent=2))


def test_combinators_count_once_across_depths(compiler):
    """A context's copies at other depths are more rules, not more anyOf cases (MAX_CONTEXTS)."""
    branches = [{"type": "array", "items": {"$ref": "#/$defs/a"}}] + [{"const": i} for i in range(29)]
    schema = {"$defs": {"a": {"anyOf": branches}}, "$ref": "#/$defs/a"}
    grammar = compiler.compile_json_schema(schema, any_whitespace=False, indent=2)
    assert accepts(grammar, json.dumps([[28, []], 0], indent=2))
    assert not accepts(grammar, json.dumps([[29]], indent=2))


def test_indented_rules_are_bounded(compiler):
    """A schema whose recursion is large: the rule limit names the per-depth unrolling."""
    defs = {f"d{i}": {"type": "object", "properties": {f"p{j}": {"$ref": f"#/$defs/d{(i + j) % 200}"}
                                                       for j in range(6)}} for i in range(200)}
    schema = {"$defs": defs, "$ref": "#/$defs/d0"}
    json_schema_to_grammar(schema, any_whitespace=False)  # fine without an indent
    with pytest.raises(SchemaLimitError, match="per nesting depth"):
        json_schema_to_grammar(schema, any_whitespace=False, indent=2)

"""The compiler's JSON Schema entry point with the native converter (json_schema/native.py, the
core's tg_grammar_compile_json_schema), on the native library and the wasm module: the schemas it
covers compile to the Python converter's grammar (the same masks on every MaskBench instance of a
sample, and the same automaton), and the ones it does not, or that are malformed, go the Python
way, errors included."""

from __future__ import annotations

import json
import os

import pytest

from trellis.errors import UnsupportedSchemaError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.abi import Stat
from trellis.grammar.json_schema import json_schema_to_grammar

from .dev_corpus import dev_entries

CORES = os.environ.get("TRELLIS_CORE_BACKENDS", "native,wasmtime").split(",")
SAMPLE = 40  # covered dev schemas per option set, with their instances
SCAN = 4  # every fourth dev schema is offered to the dispatch (test_convert counts the coverage of all)


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.smollm2()


@pytest.fixture(scope="module", params=CORES)
def compiler(request, vocab):
    return GrammarCompiler(vocab, core=request.param)


def byte_walk(grammar, text: str) -> list:
    """The mask before each byte of `text` and whether the byte is accepted, until one is not;
    then whether the matcher can end."""
    m = GrammarMatcher(grammar)
    mask, out = m.new_bitmask(), []
    for b in text.encode():
        m.fill_next_token_bitmask(mask)
        ok = m.accept_string(bytes([b]))
        out.append((bytes(memoryview(mask).cast("B")), ok))
        if not ok:
            return out
    return out + [m.can_terminate()]


@pytest.mark.parametrize("strict,any_whitespace", [(False, True), (True, False)])
def test_covered_schemas_compile_to_the_python_grammar(compiler, strict, any_whitespace):
    options = dict(any_whitespace=any_whitespace, strict=strict)
    covered = []
    for i, (_, schema, tests) in enumerate(dev_entries()):
        if i % SCAN:
            continue
        handle = compiler._native_json_schema(schema, options)
        if handle is not None:
            compiler.core.free("grammar", handle)
            covered.append((schema, tests))
    assert len(covered) > 3000 // SCAN
    for schema, tests in covered[::len(covered) // SAMPLE]:  # spread over the families
        native = compiler.compile("json_schema", schema, **options)
        python = compiler.compile_ir(json_schema_to_grammar(schema, **options))
        for stat in (Stat.RULES, Stat.STATES, Stat.EMPTY):
            assert compiler.core.stat(native._handle, stat) == compiler.core.stat(python._handle, stat)
        for t in tests[:3]:
            text = json.dumps(t["data"]) if "data" in t else str(t.get("text", ""))
            assert byte_walk(native, text) == byte_walk(python, text)


def test_declined_and_malformed_schemas_go_the_python_way(compiler):
    uncovered = {"type": "object", "properties": {"a": {"enum": [1.5, [1]]}}}  # (enums of floats, arrays)
    assert compiler._native_json_schema(uncovered, {}) is None
    assert not compiler.compile("json_schema", uncovered).is_empty
    bad = {"type": "object", "properties": {"a": {"type": "strin"}}}
    assert compiler._native_json_schema(bad, {}) is None
    with pytest.raises(UnsupportedSchemaError) as e:
        compiler.compile("json_schema", bad)
    assert e.value.pointer == "/properties/a"
    deep = {"type": "array", "items": {}}
    for _ in range(2500):
        deep = {"type": "array", "items": deep}
    assert compiler._native_json_schema(deep, {}) is None


def test_text_and_dict_sources_agree(compiler):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "n": {"type": "integer"}},
              "required": ["name"]}
    a = compiler.compile("json_schema", schema)
    b = compiler.compile("json_schema", json.dumps(schema))
    assert compiler._native_json_schema(json.dumps(schema), {}) is not None
    for stat in (Stat.RULES, Stat.STATES):
        assert compiler.core.stat(a._handle, stat) == compiler.core.stat(b._handle, stat)


def test_the_top_is_what_json_loads_reads_there(compiler):
    top = compiler.core.json_schema_top
    read = lambda text: json.loads(top(text.encode("utf-8", "surrogatepass"), 900))  # noqa: E731
    long_uri = "http://json-schema.org/draft-07/schema#" + "x" * 1000  # longer than the first buffer
    for text in ['{"$schema": "http://json-schema.org/draft-04/schema#", "$id": "http://a/b", "type": "object"}',
                 '{"type": "string", "$schema": 7, "$schema": "%s"}' % long_uri,  # the last of a repeated key
                 '{"properties": {"$schema": {"type": "string"}}}', '{"$id": null, "$schema": ["\\ud800"]}',
                 "true", "false", "[1, 2]", "12", '"text"', "null", " {} "]:
        doc = json.loads(text)
        expected = {k: doc[k] for k in ("$schema", "$id") if k in doc} if isinstance(doc, dict) else (
            doc if isinstance(doc, bool) else None)
        assert read(text) == expected, text
    # not JSON, too deep, not UTF-8 (a str's lone surrogate, which json.loads reads: then it does)
    for data in [b"", b"{", b'{"a": 1,}', b"NaN x", b"[" * 901 + b"]" * 901, b'{"a": "\xff"}',
                 '{"a": "\ud800"}'.encode("utf-8", "surrogatepass")]:
        assert top(data, 900) is None, data


@pytest.mark.parametrize("schema", [
    {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s",
     "properties": {"n": {"type": "integer", "maximum": 3, "exclusiveMaximum": True}}},
    {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string", "format": "date"},
    {"$schema": "http://json-schema.org/draft-07/schema#", "$id": "http://example.com/t", "type": "integer"},
    {"$schema": "http://example.com/not-a-metaschema", "type": "integer"},
    {"$id": "http://[::1", "type": "integer"},  # an unparsable base: the Python converter's to say
    True, [1], {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
])
def test_the_request_is_the_same_read_at_the_top(compiler, schema):
    from trellis.grammar.json_schema import native
    text = json.dumps(schema)
    for strict in (False, True):
        assert native.request(text, strict=strict, top=compiler.core.json_schema_top) == native.request(
            text, strict=strict)

"""Response formats: every dialect, web-llm's validation rules, canonical cache keys."""

from __future__ import annotations

import json

import pytest

from trellis.errors import InvalidRequestError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.constraints import ConstraintService
from trellis.grammar.response_format import cache_key, normalize_response_format, whole_language

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}


def response_format_to_grammar(rf, **options):
    """(grammar IR or None, key) as the constraint service reads and converts a format."""
    constraint = ConstraintService(compiler=None).read(rf, **options)
    if constraint is None:
        return None, cache_key(None)
    return ConstraintService(compiler=None).ir_of(constraint), constraint.key


def compile_response_format(compiler, rf):
    return compiler.compile_response_format(rf)


def accepts(compiled, text) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.can_terminate()


# ---- dialects -----------------------------------------------------------------------------------

def test_text_and_none_are_unconstrained(compiler):
    for rf in (None, {"type": "text"}, {"type": "text", "schema": None}):
        grammar, key = response_format_to_grammar(rf)
        assert grammar is None and len(key) == 64
        assert compile_response_format(compiler, rf)[0] is None


def test_json_object_is_any_object_not_any_value(compiler):
    compiled, _ = compile_response_format(compiler, {"type": "json_object"})
    assert accepts(compiled, '{"a": [1, {"b": null}], "c": "d"}')
    assert accepts(compiled, ' {} \n')
    for text in ("[1]", '"x"', "1", "null", "{", '{"a"}'):
        assert not accepts(compiled, text), text


@pytest.mark.parametrize("rf, strict", [
    ({"type": "json_object", "schema": SCHEMA}, True),                                   # web-llm, object
    ({"type": "json_object", "schema": json.dumps(SCHEMA)}, True),                       # web-llm, string
    ({"type": "json_object", "schema": SCHEMA, "strict": False}, False),                 # + Trellis's extension
    ({"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}, False),  # OpenAI
    ({"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": False}}, False),
    ({"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}, True),
    ({"type": "json_schema", "json_schema": SCHEMA}, True),                              # Transformers.js
    ({"type": "json_schema", "json_schema": SCHEMA, "strict": False}, False),
    ({"type": "json", "value": SCHEMA}, True),                                           # TGI
    ({"type": "json", "value": json.dumps(SCHEMA), "strict": False}, False),
])
def test_schema_dialects_normalize_to_one_request_and_key(rf, strict):
    """Each dialect's default strictness (STRICT_DEFAULTS); equal requests share one key."""
    normalized = normalize_response_format(rf)
    assert normalized == {"kind": "json_schema", "source": SCHEMA, "strict": strict, "canonical_integers": True,
                          "any_whitespace": True}
    grammar, key = response_format_to_grammar(rf)
    assert grammar is not None
    reference = {"type": "json", "value": SCHEMA, "strict": strict}
    assert key == response_format_to_grammar(reference)[1]


def test_options_change_the_key():
    _, plain = response_format_to_grammar({"type": "json", "value": SCHEMA})
    _, loose = response_format_to_grammar({"type": "json", "value": SCHEMA, "strict": False})
    _, compact = response_format_to_grammar({"type": "json", "value": SCHEMA}, any_whitespace=False)
    assert len({plain, loose, compact}) == 3
    assert normalize_response_format({"type": "json", "value": SCHEMA}, any_whitespace=False)["any_whitespace"] is False


@pytest.mark.parametrize("rf, field", [
    ({"type": "json_object", "strict": True}, "response_format.strict"),  # no schema to close
    ({"type": "json_object", "schema": SCHEMA, "strict": "yes"}, "response_format.strict"),
    ({"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}, "strict": True}, "response_format.strict"),
    ({"type": "regex", "regex": "a", "strict": True}, "response_format.strict"),
    ({"type": "grammar", "grammar": 'root ::= "a"', "strict": False}, "response_format.strict"),
])
def test_strict_where_it_means_nothing_is_refused(rf, field):
    with pytest.raises(InvalidRequestError) as e:
        response_format_to_grammar(rf)
    assert e.value.field == field, str(e.value)


def test_integers_are_generated_canonically_and_validated_whole(compiler):
    """Every dialect generates `1`, never `1.0`; the validator's language (whole_language) and
    compile_json_schema take both, as JSON Schema does."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "integer", "maximum": 9},
                                               "c": {"const": 2}, "x": {"type": "number"}}}
    for rf in ({"type": "json_object", "schema": schema}, {"type": "json", "value": schema},
               {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}):
        generated, _ = compile_response_format(compiler, rf)
        assert accepts(generated, '{"n": 12, "m": 3, "c": 2, "x": 1.0}')
        for text in ('{"n": 12.0}', '{"m": 3.00}', '{"c": 2.0}'):
            assert not accepts(generated, text), (rf, text)
        assert compiler.constraints.validate('{"n": 12.0, "m": 3.00, "c": 2.0}', rf)["valid"]
        assert whole_language(normalize_response_format(rf))["canonical_integers"] is False
    assert accepts(compiler.compile_json_schema(schema), '{"n": 12.0}')


HERMIONE = {"type": "object", "properties": {
    "name": {"type": "string"}, "house": {"enum": ["Gryffindor", "Hufflepuff", "Ravenclaw", "Slytherin"]},
    "blood_status": {"enum": ["Pure-blood", "Half-blood", "Muggle-born"]}, "occupation": {"type": "string"},
    "wand": {"type": "object", "properties": {"wood": {"type": "string"}, "core": {"type": "string"},
                                              "length": {"type": "number"}},
             "required": ["wood", "core", "length"]},
    "alive": {"type": "boolean"}, "patronus": {"type": "string"}},
    "required": ["name", "house", "blood_status", "occupation", "wand", "alive", "patronus"]}


def test_web_llm_strict_mode_closes_named_objects_and_tuples(compiler):
    """web-llm's json_object + schema: no member the schema does not name, at any depth; the
    same text passes with strict: false (the schema's language)."""
    strict, _ = compile_response_format(compiler, {"type": "json_object", "schema": HERMIONE})
    loose, _ = compile_response_format(compiler, {"type": "json_object", "schema": HERMIONE, "strict": False})
    good = ('{"name": "Hermione Granger", "house": "Gryffindor", "blood_status": "Muggle-born", '
            '"occupation": "student", "wand": {"wood": "vine", "core": "dragon heartstring", "length": 10.75}, '
            '"alive": true, "patronus": "otter"}')
    extra_inner = good.replace('"length": 10.75}', '"length": 10.75, "lengtitlade": 10}')
    extra_outer = good.replace('"patronus": "otter"}', '"patronus": "otter", "pet": "Crookshanks"}')
    assert accepts(strict, good) and accepts(loose, good)
    for text in (extra_inner, extra_outer):
        assert not accepts(strict, text) and accepts(loose, text), text
    tuple_schema = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}
    closed, _ = compile_response_format(compiler, {"type": "json_object", "schema": tuple_schema})
    assert accepts(closed, '[1, "a"]') and not accepts(closed, '[1, "a", 2]')
    # what the schema leaves unnamed stays open: {"type": "object"}, {}, additionalProperties
    for schema, text in [({"type": "object"}, '{"any": [1]}'), ({"properties": {"a": {}}, "additionalProperties": True},
                                                                '{"a": 1, "b": 2}'),
                         ({"type": "array"}, "[1, 2, 3]")]:
        assert accepts(compile_response_format(compiler, {"type": "json_object", "schema": schema})[0], text)


def test_keys_are_stable_across_dict_order():
    a = {"type": "json_object", "schema": {"type": "object", "properties": {"x": {"type": "string", "minLength": 1},
                                                                            "y": {"type": "number"}}}}
    b = {"schema": {"properties": {"y": {"type": "number"}, "x": {"minLength": 1, "type": "string"}},
                    "type": "object"}, "type": "json_object"}
    assert response_format_to_grammar(a)[1] == response_format_to_grammar(b)[1]
    tag1 = {"type": "structural_tag", "structural_tag": {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<f"], "tags": [
            {"begin": "<f>", "content": {"type": "regex", "pattern": "[0-9]"}, "end": "</f>"}]}}}
    tag2 = {"structural_tag": json.dumps({"format": {"tags": [
        {"end": "</f>", "content": {"pattern": "[0-9]", "type": "regex"}, "begin": "<f>"}],
        "triggers": ["<f"], "type": "triggered_tags", "at_least_one": False}}), "type": "structural_tag"}
    assert response_format_to_grammar(tag1)[1] == response_format_to_grammar(tag2)[1]
    # and different requests differ
    assert response_format_to_grammar({"type": "regex", "regex": "a"})[1] != \
        response_format_to_grammar({"type": "regex", "regex": "b"})[1]


def test_regex_grammar_and_structural_tag_dialects(compiler):
    for rf in ({"type": "regex", "regex": r"\d{3}"}, {"type": "regex", "value": r"\d{3}"}):
        compiled, _ = compile_response_format(compiler, rf)
        assert accepts(compiled, "123") and not accepts(compiled, "12a")
    assert response_format_to_grammar({"type": "regex", "regex": "a"})[1] == \
        response_format_to_grammar({"type": "regex", "value": "a"})[1]
    compiled, _ = compile_response_format(compiler, {"type": "grammar", "grammar": 'root ::= "yes" | "no"'})
    assert accepts(compiled, "yes") and not accepts(compiled, "maybe")
    tag = {"format": {"type": "triggered_tags", "triggers": ["<f"], "at_least_one": True, "tags": [
        {"begin": "<f>", "content": {"type": "const_string", "value": "ok"}, "end": "</f>"}]}}
    for rf in ({"type": "structural_tag", "structural_tag": tag},
               {"type": "structural_tag", "structural_tag": json.dumps(tag)},
               {"type": "structural_tag", **tag}):
        compiled, _ = compile_response_format(compiler, rf)
        assert accepts(compiled, "hi <f>ok</f>") and not accepts(compiled, "hi")
    legacy = {"type": "structural_tag", "triggers": ["<f"], "structures": [
        {"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}]}
    grammar, _ = response_format_to_grammar(legacy)
    assert grammar is not None


def test_compiled_grammars_are_memoized_by_key(compiler):
    rf = {"type": "regex", "regex": "[a-z]+"}
    first, key1 = compile_response_format(compiler, rf)
    second, key2 = compile_response_format(compiler, {"regex": "[a-z]+", "type": "regex"})
    assert key1 == key2 and first is second


# ---- validation: web-llm's rules and the other dialects' shapes --------------------------------

@pytest.mark.parametrize("rf, field", [
    ({"type": "text", "schema": SCHEMA}, "response_format.schema"),
    ({"type": "grammar", "grammar": "root ::= \"a\"", "schema": SCHEMA}, "response_format.schema"),
    ({"type": "json_object", "grammar": "root ::= \"a\""}, "response_format.grammar"),
    ({"type": "text", "grammar": "root ::= \"a\""}, "response_format.grammar"),
    ({"type": "grammar"}, "response_format.grammar"),
    ({"type": "grammar", "grammar": None}, "response_format.grammar"),
    ({"type": "grammar", "grammar": 7}, "response_format.grammar"),
    ({"type": "grammar", "grammar": "root ::= (("}, "response_format.grammar"),
    ({"type": "structural_tag"}, "response_format.structural_tag"),
    ({"type": "json_object", "structural_tag": {"format": {}}}, "response_format.structural_tag"),
    ({"type": "structural_tag", "structural_tag": {"format": {"type": "triggered_tags", "triggers": ["<"],
                                                              "tags": [{"begin": "[", "content": {"type": "const_string", "value": "a"}, "end": "]"}]}}},
     "response_format.structural_tag.format.tags[0].begin"),
    ({"type": "structural_tag", "format": {"type": "nope"}}, "response_format.format.type"),
    ({"type": "xml"}, "response_format.type"),
    ({}, "response_format.type"),
    ({"type": "json_object", "schema": "{not json"}, "response_format.schema"),
    ({"type": "json_object", "schema": [1, 2]}, "response_format.schema"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "bad name!", "schema": SCHEMA}}, "response_format.json_schema.name"),
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": SCHEMA, "strict": "yes"}},
     "response_format.json_schema.strict"),
    ({"type": "json_schema", "json_schema": {"name": "n", "schema": 5}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": SCHEMA, "value": 1}, "response_format.value"),
    ({"type": "json"}, "response_format.value"),
    ({"type": "regex"}, "response_format.regex"),
    ({"type": "regex", "regex": "a", "value": "a"}, "response_format.value"),
    ({"type": "regex", "regex": "(a"}, "response_format.regex"),
    ({"type": "regex", "regex": ""}, "response_format.regex"),
    ("[1]", "response_format"),
])
def test_invalid_formats_name_the_field(rf, field):
    with pytest.raises(InvalidRequestError) as info:
        response_format_to_grammar(rf)
    assert info.value.field == field, str(info.value)


def test_tgi_field_prefix():
    with pytest.raises(InvalidRequestError) as info:
        normalize_response_format({"type": "json"}, field="grammar")
    assert info.value.field == "grammar.value"


PYODIDE = __import__("pathlib").Path(__file__).resolve().parents[2] / "build" / "node" / "node_modules" / "pyodide"  # build.py test installs it

PYODIDE_SCRIPT = r"""
const path = require("path"), fs = require("fs");
const { loadPyodide } = require(process.argv[2] + "/pyodide.js");
(async () => {
  const py = await loadPyodide({ indexURL: process.argv[2] + "/" });
  function copy(dir, dest) {
    py.FS.mkdirTree(dest);
    for (const f of fs.readdirSync(dir)) {
      const p = path.join(dir, f);
      if (fs.statSync(p).isDirectory()) { if (f !== "__pycache__") copy(p, dest + "/" + f); }
      else if (f.endsWith(".py")) py.FS.writeFile(dest + "/" + f, fs.readFileSync(p));
    }
  }
  copy(process.argv[3], "/lib/trellis");
  console.log(await py.runPythonAsync(fs.readFileSync(process.argv[4], "utf8")));
})().catch(e => { console.error(e); process.exit(1); });
"""

PYTHON_SIDE = r"""
import json, sys
sys.path.insert(0, "/lib")
from trellis.grammar import ir
from trellis.grammar.constraints import ConstraintService
service = ConstraintService(compiler=None)  # reading and converting need no core
tag = {"type": "structural_tag", "structural_tag": {"format": {"type": "triggered_tags", "triggers": ["<f"],
       "tags": [{"begin": "<f>", "content": {"type": "json_schema", "json_schema": {"type": "object"}}, "end": "</f>"}]}}}
out = []
tree = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
for rf, layout in [({"type": "json_object"}, {}), ({"type": "regex", "regex": "[0-9]+"}, {}), (tag, {}),
                   ({"type": "json_object", "schema": tree}, {"any_whitespace": False, "indent": 2,
                                                              "separators": (" ,", ": ")})]:
    c = service.read(rf, **layout)
    out.append([c.key, list(ir.serialize(service.ir_of(c))[0])])
json.dumps([sys.version_info[:2], out])
"""


def test_front_ends_run_under_pyodide_with_the_same_keys_and_ir(tmp_path):
    """The same response formats under Pyodide (CPython 3.14 in node): same keys, same IR words."""
    import shutil
    import subprocess

    assert shutil.which("node") and (PYODIDE / "pyodide.js").exists(), \
        "node and the pyodide npm package come with `python3 build.py test`"
    js, side = tmp_path / "run.cjs", tmp_path / "side.py"
    js.write_text(PYODIDE_SCRIPT)
    side.write_text(PYTHON_SIDE)
    package = PYODIDE.parents[3] / "py" / "trellis"
    run = subprocess.run(["node", str(js), str(PYODIDE), str(package), str(side)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    version, remote = json.loads(run.stdout.strip().splitlines()[-1])
    assert version[0] == 3 and version[1] >= 12
    namespace: dict = {}
    exec(PYTHON_SIDE.replace('sys.path.insert(0, "/lib")', "").rsplit("\n", 2)[0], namespace)
    local = [[key, words] for key, words in namespace["out"]]
    assert remote == local


def test_compiler_methods():
    from trellis.grammar import GrammarCompiler, GrammarMatcher, InvalidRequestError, Vocabulary

    compiler = GrammarCompiler(Vocabulary.smollm2())
    compiled, key = compiler.compile_response_format({"type": "json_object", "schema": {"type": "integer"}})
    m = GrammarMatcher(compiled)
    assert m.accept_string("42") and m.can_terminate() and not m.accept_string("x")
    assert compiler.compile_response_format({"type": "text"})[0] is None
    with pytest.raises(InvalidRequestError) as err:
        compiler.compile_response_format({"type": "grammar"})
    assert err.value.field and "grammar" in err.value.field
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f>"],
           "tags": [{"begin": "<f>", "content": {"type": "const_string", "value": "1"}, "end": "</f>"}]}}
    m = GrammarMatcher(compiler.compile_structural_tag(tag))
    assert m.accept_string("hi <f>1</f>") and not m.accept_string("<f>2")

"""The JSON Schema front-end against independent oracles.

- the JSON Schema Test Suite (draft 2020-12 and draft-07, optional/ included): every group
  is refused with UnsupportedSchemaError or classifies every instance right; never an
  invalid instance accepted (tokens fed one by one for a deterministic sample, accept_string
  for the rest — the same verdict);
- the `jsonschema` validator on random instances for the number, string and object builders
  (hypothesis), and Python's `re` for formats and patterns;
- the API: refusals name keyword and pointer, whitespace options, recursion, errors.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import subprocess
import unicodedata
from decimal import Decimal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.grammar import json_schema_suite as suite
from tests.grammar.conftest import accepts
from trellis.errors import UnsupportedSchemaError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary, ir
from trellis.grammar.json_schema import ANNOTATIONS, json_schema_to_grammar
from trellis.grammar.json_schema import _dfa, _numbers, _refs, _string_schema, _text


def matches(compiler, schema, text: str, **options) -> bool:
    matcher = GrammarMatcher(compiler.compile_ir(json_schema_to_grammar(schema, **options)))
    return matcher.accept_string(text) and matcher.can_terminate()


def expr_matches(expr: ir.Expr, text: str) -> bool:
    """Full match of an IR expression without rule references (a DFA, independent of the core)."""
    return _dfa.from_ir(expr).matches(text.encode("utf-8"))


# ---- the JSON Schema Test Suite -------------------------------------------------------------


@pytest.fixture(scope="module")
def suite_results(compiler):
    """The whole suite, token by token (the GUIDE method; a few seconds), with properties in any
    order: the suite's valid instances list their keys in any order, and it checks what a schema
    accepts, which the default schema order only restricts (see the test after these)."""
    assert suite.SUITE.exists(), f"the JSON Schema Test Suite is not at {suite.SUITE} (../shared beside the checkout)"
    return suite.run_suite(compiler, feeder=suite.TokenFeeder(compiler.vocab), property_order="any")


def test_suite_in_schema_order_only_restricts(compiler, suite_results):
    """Known properties in schema order (the default) accept a subset of the any-order language:
    never an invalid instance, the same refusals, and only valid instances lost."""
    in_order = suite.run_suite(compiler, property_order="schema")
    assert [(r.file, r.index) for r in in_order] == [(r.file, r.index) for r in suite_results]
    lost = 0
    for s, a in zip(in_order, suite_results):
        assert not s.invalid_accepted, (s.file, s.description)
        assert (s.status == "refused") == (a.status == "refused"), (s.file, s.description)
        assert set(a.valid_rejected) <= set(s.valid_rejected), (s.file, s.description)
        lost += s.status == "failed" and a.status == "passed"
    assert 0 < lost < 60  # the suite's instances with keys out of schema order, in a handful of files per draft


def test_suite_never_accepts_an_invalid_instance(suite_results):
    wrong = [(r.file, r.index, r.description, r.invalid_accepted) for r in suite_results if r.invalid_accepted]
    assert not wrong


def test_suite_groups_are_refused_or_pass(suite_results):
    """Groups that neither pass nor are refused are the documented restrictions only."""
    # Quoted e-mail local parts, A-labels (punycode) and '-' in a host name's third place are left
    # out of the formats (restrictions); an integer written 1e308 is not accepted as an integer.
    drafts = [d for d in suite.DRAFTS]
    expected = {f"{d}/optional/float-overflow.json" for d in drafts}
    expected |= {f"{d}/optional/format/{f}.json" for d in drafts for f in ("email", "hostname")}
    unexpected = [(r.file, r.index, r.description, r.valid_rejected)
                  for r in suite_results if r.status == "failed" and r.file not in expected]
    assert not unexpected
    assert not [r for r in suite_results if r.status == "limit"]


def test_suite_mostly_compiles_in_each_draft(suite_results):
    for draft in suite.DRAFTS:
        groups = [r for r in suite_results if r.file.startswith(draft + "/")]
        passed = sum(r.status == "passed" for r in groups)
        assert groups and passed / len(groups) >= 0.90, (draft, passed, len(groups))


def test_format_is_an_annotation_only_where_the_dialect_says_so(compiler):
    """2019-09 and 2020-12 annotate with `format`; generation (strict) and the drafts before assert it."""
    def accepts(schema, text, **options):
        g = compiler.compile_json_schema(schema, **options)
        return suite.accepts(g, text, None)

    for uri in ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema"):
        schema = {"$schema": uri, "format": "email"}
        assert accepts(schema, '"not an e-mail"')
        assert not accepts(schema, '"not an e-mail"', strict=True)
        assert not accepts(schema, '"not an e-mail"', format_assertion=True)
        assert accepts(schema, '"a@example.com"', strict=True)
    for schema in ({"format": "email"}, {"$schema": "http://json-schema.org/draft-07/schema#", "format": "email"},
                   {"$schema": "http://json-schema.org/draft-04/schema#", "format": "email"}):
        assert not accepts(schema, '"not an e-mail"')
        assert accepts(schema, '"not an e-mail"', format_assertion=False)


def test_suite_refusals_name_a_keyword(suite_results):
    for r in suite_results:
        if r.status == "refused" and r.keyword is None:
            assert "more than" in r.message, r.message


def test_suite_sample_accept_string_agrees(compiler):
    """accept_string (used by the report script) gives the token-by-token verdicts."""
    assert suite.SUITE.exists(), f"the JSON Schema Test Suite is not at {suite.SUITE}"
    feeder = suite.TokenFeeder(compiler.vocab)
    groups = list(suite.load_groups())
    sample = random.Random(3).sample(range(len(groups)), 120)
    for n in sample:
        rel, draft, i, group = groups[n]
        fast = suite.run_group(compiler, rel, draft, i, group)
        slow = suite.run_group(compiler, rel, draft, i, group, feeder=feeder)
        assert (slow.status, slow.valid_rejected, slow.invalid_accepted) == \
               (fast.status, fast.valid_rejected, fast.invalid_accepted), (rel, i)


def test_suite_compact_mode_never_accepts_invalid(compiler):
    assert suite.SUITE.exists(), f"the JSON Schema Test Suite is not at {suite.SUITE}"
    groups = list(suite.load_groups())
    chosen = set(random.Random(5).sample(range(len(groups)), 150))
    results = suite.run_suite(compiler, select=lambda n, rel, i: n in chosen, any_whitespace=False)
    assert not [r for r in results if r.invalid_accepted]
    # json.dumps' ", " and ": " pass in compact mode too: the same verdicts as with any whitespace
    loose = suite.run_suite(compiler, select=lambda n, rel, i: n in chosen)
    assert [(r.status, r.valid_rejected) for r in results] == [(r.status, r.valid_rejected) for r in loose]


# ---- numbers ------------------------------------------------------------------------------


def number_texts():
    ints = st.integers(-10 ** 6, 10 ** 6).map(str)
    decimals = st.decimals(-10000, 10000, places=3, allow_nan=False).map(lambda d: format(d, "f"))
    floats = st.floats(-1e6, 1e6, allow_nan=False).map(repr)
    return st.one_of(ints, decimals, floats, st.sampled_from(["0", "-0", "0.0", "1.0", "1e3", "-2.50", "10.000"]))


BOUNDS = st.one_of(st.none(), st.integers(-500, 500), st.decimals(-500, 500, places=2, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(lo=BOUNDS, hi=BOUNDS, exclusive=st.tuples(st.booleans(), st.booleans()),
       integer=st.booleans(), texts=st.lists(number_texts(), min_size=5, max_size=12))
def test_number_ranges_match_jsonschema(lo, hi, exclusive, integer, texts):
    schema = {"type": "integer" if integer else "number"}
    if lo is not None:
        schema["exclusiveMinimum" if exclusive[0] else "minimum"] = float(lo) if isinstance(lo, Decimal) else lo
    if hi is not None:
        schema["exclusiveMaximum" if exclusive[1] else "maximum"] = float(hi) if isinstance(hi, Decimal) else hi
    grammar = json_schema_to_grammar(schema)  # an empty interval is the empty language
    # the number rule has no references: check it with a DFA, independent of the core
    for text in texts:
        value = json.loads(text)
        expected = jsonschema.Draft202012Validator(schema).is_valid(value)
        got = _accepts_ir(grammar, text)
        if got:
            assert expected, (schema, text)
        elif expected:
            # rejections of valid values are only the documented spellings
            assert "e" in text.lower() or text.startswith("-0") or (integer and "." in text and
                                                                     not re.fullmatch(r"-?\d+\.0+", text)), \
                (schema, text)


def _accepts_ir(grammar: ir.Grammar, text: str) -> bool:
    """Inline the (non-recursive) rules and run a DFA."""
    def inline(e, depth=0):
        if isinstance(e, ir.Ref):
            return inline(grammar.rules[e.name], depth + 1)
        if isinstance(e, ir.Seq):
            return ir.Seq(tuple(inline(x, depth) for x in e.items))
        if isinstance(e, ir.Alt):
            return ir.Alt(tuple(inline(x, depth) for x in e.items))
        if isinstance(e, ir.Repeat):
            return ir.Repeat(inline(e.item, depth), e.min, e.max)
        return e
    return expr_matches(inline(grammar.rules[grammar.root]), text)


@settings(max_examples=80, deadline=None)
@given(m=st.sampled_from([2, 3, 7, 10, 0.5, 1.5, 0.01, 0.25, 2.5]),
       texts=st.lists(number_texts(), min_size=5, max_size=12), lo=st.one_of(st.none(), st.integers(-50, 50)))
def test_multiple_of_matches_exact_decimal_arithmetic(compiler, m, texts, lo):
    schema = {"multipleOf": m, **({} if lo is None else {"minimum": lo})}
    compiled = compiler.compile_ir(json_schema_to_grammar(schema))  # residue automata are cyclic: use the core
    for text in texts:
        matcher = GrammarMatcher(compiled)
        got = matcher.accept_string(text) and matcher.can_terminate()
        value = Decimal(text)
        expected = value % Decimal(repr(m)) == 0 and (lo is None or value >= lo)
        if got:
            assert expected, (schema, text)
        elif expected:
            assert "e" in text.lower() or text.startswith("-0"), (schema, text)


def test_combined_multiples_make_long_rule_chains(compiler):
    # Residue automata of several multipleOf make rule chains longer than Python's recursion
    # limit: the front-end's passes over them must not recurse along the chain.
    schema = {"type": "integer", "allOf": [{"minimum": 1}, {"anyOf": [{"multipleOf": 5}, {"multipleOf": 10}]},
                                           {"anyOf": [{"not": {"multipleOf": 5}}, {"multipleOf": 7}]},
                                           {"anyOf": [{"not": {"multipleOf": 7}}, {"multipleOf": 11}]}]}
    compiled = compiler.compile_ir(json_schema_to_grammar(schema))
    validator = jsonschema.Draft202012Validator(schema)
    for value in [0, 5, 35, 385, 770, 1155, 3850, -385, 24, 77]:
        matcher = GrammarMatcher(compiled)
        assert (matcher.accept_string(str(value)) and matcher.can_terminate()) == validator.is_valid(value), value


def test_equal_number_constraints_are_built_once(compiler, monkeypatch):
    # Two prices with equal keywords (titles aside) are one automata product, which costs
    # milliseconds; other bounds, another type or an excluded value are theirs, and each is
    # checked on its own text.
    price = {"type": "number", "multipleOf": 0.01, "minimum": -999.99, "maximum": 999.99}
    products = []
    real = _dfa.intersect
    monkeypatch.setattr(_dfa, "intersect", lambda dfas, *a: products.append(1) or real(dfas, *a))
    json_schema_to_grammar({"type": "object", "properties": {"a": price, "b": {**price, "title": "B"}}})
    assert len(products) == 1
    schema = {"type": "object", "required": ["a", "b", "c", "d", "e"], "properties": {
        "a": price, "b": dict(price), "c": {**price, "maximum": 99.99}, "d": {**price, "type": "integer"},
        "e": {**price, "not": {"const": 5}}}}
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for a, b, c, d, e in [("999.99", "0.01", "99.99", "999", "4.99"), ("999.99", "0.001", "1", "1", "1"),
                          ("1", "1", "100", "1", "1"), ("1", "1", "1", "1.5", "1"), ("1", "1", "1", "1", "5"),
                          ("1000", "1", "1", "1", "1"), ("-999.99", "-0.5", "-1", "-999", "5.25")]:
        text = f'{{"a": {a}, "b": {b}, "c": {c}, "d": {d}, "e": {e}}}'
        assert accepts(g, text) == validator.is_valid(json.loads(text)), text


def test_multiple_of_is_exact_beyond_decimal_precision(compiler):
    assert not _numbers.is_multiple(Decimal("1e308"), Decimal("0.123456789"))
    assert _numbers.is_multiple(Decimal("1e308"), Decimal("0.5"))
    assert _numbers.is_multiple(Decimal("123456789e300"), Decimal("0.123456789"))
    schema = {"allOf": [{"enum": [1e308]}, {"not": {"multipleOf": 0.123456789, "type": "integer"}}]}
    assert matches(compiler, schema, json.dumps(1e308))


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": "^[A-Za-z0-9:_\\-]+$", "maxLength": 255},  # a class repeated: counted
    {"type": "string", "pattern": "^[a-z]{2,90}$", "minLength": 70, "maxLength": 80},
    {"type": "string", "pattern": "^[^\\s\"]*$", "minLength": 3, "maxLength": 100},  # any width
    {"type": "string", "pattern": "^([a-z/-]|[a-z-][a-z/-]*[a-z-])$", "maxLength": 255},  # ASCII: counted bytes
    {"type": "string", "pattern": "^(ab|é)+$", "minLength": 3, "maxLength": 40},
    # a class repeated, its count the pattern's own: a call per character
    {"type": "string", "pattern": "^[a-zé0-9/-]{1,100}$"},
    {"type": "string", "pattern": "^[A-Za-zé0-9/ -]{70,255}$"},
    {"type": "string", "pattern": "^[ab]{81}$"},
])
# Counts of more than CALLED_CHARS characters go on in 16-character blocks: 40 puts the lengths
# tried on both sides.
@pytest.mark.parametrize("called_chars", [_string_schema.CALLED_CHARS, 40])
def test_long_lengths_with_a_pattern(compiler, schema, called_chars, monkeypatch):
    monkeypatch.setattr(_string_schema, "CALLED_CHARS", called_chars)
    compiled = compiler.compile_ir(json_schema_to_grammar(schema))
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(0)
    for n in [0, 1, 2, 3, 4, 39, 40, 41, 69, 70, 80, 81, 99, 100, 101, 254, 255, 256]:
        for _ in range(8):
            text = "".join(rng.choice(["a", "b", "é", "Z", "0", "-", "/", " ", "ab"]) for _ in range(n))
            matcher = GrammarMatcher(compiled)
            got = matcher.accept_string(json.dumps(text, ensure_ascii=False)) and matcher.can_terminate()
            assert got == validator.is_valid(text), (schema, text)


def test_integer_range_digit_automata_exhaustive():
    for lo, hi in [(0, 0), (0, 9), (7, 123), (-15, 15), (-1000, -999), (99, 1001), (5, None), (None, -3)]:
        expr = _numbers.integer_range(lo, hi)
        dfa = _dfa.from_ir(expr)
        for v in range(-1200, 1200):
            inside = (lo is None or v >= lo) and (hi is None or v <= hi)
            assert dfa.matches(str(v).encode()) == inside, (lo, hi, v)
        assert not dfa.matches(b"007") and not dfa.matches(b"-0")


# ---- strings -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec=None, exclude_categories=()), max_size=12))
def test_encode_string_is_the_canonical_spelling(text):
    spelled = "".join(_text.escape_byte(ord(c)) or c if ord(c) < 0x80 else c for c in text)
    assert _text.encode_string(text) == f'"{spelled}"' == json.dumps(text, ensure_ascii=False)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=12), lo=st.integers(0, 4), hi=st.one_of(st.none(), st.integers(0, 8)))
def test_string_lengths_and_escapes(text, lo, hi):
    schema = {"type": "string", "minLength": lo, **({} if hi is None else {"maxLength": hi})}
    encoded = json.dumps(text, ensure_ascii=False)
    grammar = json_schema_to_grammar(schema)  # hi < lo: the empty language
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return
    assert _accepts_ir(grammar, encoded) == jsonschema.Draft202012Validator(schema).is_valid(text)


PATTERNS = ["^a+$", "b", "^[0-9]{2,3}-x", "c$", "(foo|ba[rz])", "^\\d+(\\.\\d+)?$", "x.y", "^$", "[^a-c]"]


@settings(max_examples=120, deadline=None)
@given(pattern=st.sampled_from(PATTERNS), text=st.text(alphabet="abcfoxyz0123-.\n\"\\", max_size=8))
def test_pattern_is_a_search_like_pythons(pattern, text):
    schema = {"type": "string", "pattern": pattern}
    expected = re.search(pattern.replace("\\d", "[0-9]"), text) is not None
    if pattern.endswith("$") and text.endswith("\n"):
        expected = re.search(pattern.replace("\\d", "[0-9]") + "(?!\n)", text) is not None  # ECMA $: end only
        expected = expected and re.search(pattern[:-1] + "\\Z", text) is not None
    assert _accepts_ir(json_schema_to_grammar(schema), json.dumps(text, ensure_ascii=False)) == expected


def test_surrogate_pair_escapes_are_one_character_as_in_ecmascript(compiler):
    """`\\uD83D\\uDE00` in a pattern is 😀 (ECMA-262 joins the pair; Python's re, the fuzz
    oracle's, reads two code points no text holds): node's RegExp says which texts match."""
    patterns = ["\\uD83D\\uDE00\\t", "^\\uD83D\\uDE00+$", "[\\uD83D\\uDE00-\\uD83D\\uDE4F]x"]
    texts = ["a😀\tb", "😀\t", "ab", "😀", "😀😀", "😁x", "🙏x", "🙐x", "\t"]
    script = ("const [ps, ts] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(ps.map(p => ts.map(t => new RegExp(p, 'u').test(t)))))")
    expected = json.loads(subprocess.run(["node", "-e", script], input=json.dumps([patterns, texts]),
                                         capture_output=True, text=True, check=True).stdout)
    for pattern, want in zip(patterns, expected):
        compiled = compiler.compile_json_schema({"type": "string", "pattern": pattern})
        got = [accepts(compiled, json.dumps(t, ensure_ascii=False)) for t in texts]
        assert got == want, pattern


def _letters(text):
    return all(unicodedata.category(c).startswith("L") for c in text)


PROPERTY_SCHEMAS = [  # (schema, instance -> valid) with \\p classes of hundreds of ranges
    ({"type": "string", "pattern": "^\\p{Letter}+$"}, lambda v: len(v) > 0 and _letters(v)),
    ({"type": "string", "pattern": "\\p{Letter}cole"},
     lambda v: any(_letters(v[i]) and v[i + 1:i + 5] == "cole" for i in range(len(v)))),
    ({"type": "string", "pattern": "^\\p{L}+$", "maxLength": 4}, lambda v: 0 < len(v) <= 4 and _letters(v)),
    ({"type": "string", "pattern": "^[\\p{L}\\p{Nd} ]*$", "minLength": 2, "maxLength": 6},
     lambda v: 2 <= len(v) <= 6 and all(c == " " or unicodedata.category(c)[0] == "L" or unicodedata.category(c) == "Nd"
                                        for c in v)),
    ({"type": "string", "pattern": "\\P{L}\\p{Lu}", "maxLength": 5},
     lambda v: len(v) <= 5 and any(not _letters(v[i]) and unicodedata.category(v[i + 1]) == "Lu"
                                   for i in range(len(v) - 1))),
    ({"type": "string", "pattern": "^\\p{L}", "format": "ipv4"}, lambda v: False),
]
PROPERTY_TEXTS = ["", "a", "Hello", "π", "123", "école", "l'école", "L'ÉCOLE", "xcole", "৪২", "中文 42",
                  "a b", "ab cd ef", "\U0001d400\U0001d401", "1A", "é", "-%#", "aaaaa", "1.2.3.4", "\"q\\",
                  "\u0378cole"]


@pytest.mark.parametrize("index", range(len(PROPERTY_SCHEMAS)))
def test_property_escape_patterns(compiler, index):
    schema, valid = PROPERTY_SCHEMAS[index]
    compiled = compiler.compile_ir(json_schema_to_grammar(schema))
    for text in PROPERTY_TEXTS:
        matcher = GrammarMatcher(compiled)
        got = matcher.accept_string(json.dumps(text, ensure_ascii=False)) and matcher.can_terminate()
        assert got == valid(text), (schema, text)


def test_property_escape_pattern_properties(compiler):
    digits = {"type": "object", "patternProperties": {"^\\p{digit}+$": True}, "additionalProperties": False}
    letters = {"type": "object", "patternProperties": {"\\p{Letter}cole": {"type": "number"}},
               "additionalProperties": False}
    names = {"type": "object", "propertyNames": {"pattern": "^\\p{Lu}\\p{Ll}*$", "maxLength": 3}}
    for schema, good, bad in [
        (digits, ['{"42": 1}', '{"৪২": null}', "{}"], ['{"-%#": 1}', '{"4a": 1}', '{"": 1}']),
        (letters, ['{"l\'école": 1}', '{"xcole": 2, "écoles": 3}'], ['{"L\'ÉCOLE": 1}', '{"école": "x"}']),
        (names, ['{"Ab": 1}', '{"Πα": 1, "Z": 2}'], ['{"ab": 1}', '{"Abcd": 1}', '{"A1": 1}']),
    ]:
        for text in good:
            assert matches(compiler, schema, text), (schema, text)
        for text in bad:
            assert not matches(compiler, schema, text), (schema, text)


@pytest.mark.parametrize("pattern", ["^a+$", "x.y", "(foo|ba[rz])", "[^a-c]", "^(ab|é)+$", "\\p{L}cole",
                                     "^[\\p{N}_]{2,3}$", "\\P{Lu}|^\\p{Zs}"])
def test_compact_automata_accept_the_same_strings(pattern):
    expr = _text.pattern_expr(pattern, "")
    plain, compact = _dfa.from_ir(expr), _dfa.from_ir(expr, compact=True)
    assert len(compact.trans) <= len(plain.trans) and len(_dfa.minimize(compact).trans) == len(compact.trans)
    rng = random.Random(pattern)
    alphabet = ["a", "b", "c", "x", "y", "f", "o", "r", "z", "é", "É", "1", "_", "৪", " ", "\u3000", "l", "e",
                "\U0001d400", "\u0378", "\n"]
    for _ in range(300):
        data = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))).encode()
        assert plain.matches(data) == compact.matches(data), (pattern, data)


def test_only_property_patterns_get_compact_automata():
    assert _text._has_property_escape("a\\p{L}") and _text._has_property_escape("[\\P{Nd}]")
    assert not _text._has_property_escape("\\\\p{L}") and not _text._has_property_escape("p{L}\\d")


FORMAT_CASES = {
    "date": (["2020-02-29", "1999-12-31", "2000-02-29"], ["2021-02-29", "1900-02-29", "2020-13-01", "2020-1-01"]),
    "time": (["12:34:56Z", "23:59:59.123+05:30", "00:00:00z"], ["24:00:00Z", "12:60:00Z", "12:00:00", "1:00:00Z"]),
    "date-time": (["2020-01-01T00:00:00Z", "2020-01-01t10:00:00-01:00"], ["2020-01-01 00:00:00Z"]),
    "duration": (["P1D", "PT1H", "P1Y2M3DT4H5M6S", "P2W"], ["P", "PT", "P1Y2D", "PT1H2S", "P1W2D"]),
    "email": (["joe.bloggs@example.com", "a@b"], ["@b", "a.@b", "a..b@c", "ab"]),
    "hostname": (["example.com", "a-b.c"], ["-a.com", "a-.com", "a..b", "a" * 64]),
    "ipv4": (["192.168.0.1", "0.0.0.0"], ["256.0.0.1", "01.2.3.4", "1.2.3"]),
    "ipv6": (["::1", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4", "fe80::"], ["1:2:3:4:5:6:7:8:9", ":::", "1::2::3"]),
    "uuid": (["2eb8aa08-aa98-11ea-b4aa-73b441d16380"], ["2eb8aa08aa98-11ea-b4aa-73b441d16380"]),
    "uri": (["http://example.com/a?b#c", "urn:isbn:123", "mailto:a@b"], ["//example.com", "abc", "http://a b"]),
}


@pytest.mark.parametrize("name", sorted(FORMAT_CASES))
def test_formats(name):
    expr = _text.format_expr(name, "")
    good, bad = FORMAT_CASES[name]
    for text in good:
        assert expr_matches(expr, text), (name, text)
    for text in bad:
        assert not expr_matches(expr, text), (name, text)


def test_unknown_format_is_an_annotation_and_refused_formats_say_so(compiler):
    assert matches(compiler, {"format": "x-custom"}, '"anything"')
    with pytest.raises(UnsupportedSchemaError) as e:
        json_schema_to_grammar({"type": "string", "format": "idn-email"})
    assert e.value.keyword == "format" and e.value.pointer == ""


# ---- objects, arrays, combinators --------------------------------------------------------


OBJECT_SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "null"}},
    {"type": "object", "minProperties": 1, "maxProperties": 2},
    {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "required": ["a", "b"],
     "dependentRequired": {"c": ["a"]}},
    {"type": "object", "propertyNames": {"maxLength": 2}},
    {"oneOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
]
KEYS = st.sampled_from(["a", "b", "c", "x1", "xy", "long", "é"])
VALUES = st.one_of(st.none(), st.integers(-3, 3), st.sampled_from(["s", ""]))


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(OBJECT_SCHEMAS) - 1), value=st.dictionaries(KEYS, VALUES, max_size=4))
def test_objects_match_jsonschema(compiler, index, value):
    schema = OBJECT_SCHEMAS[index]
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    text = json.dumps(value, ensure_ascii=False)
    got = matches(compiler, schema, text, property_order="any")
    assert not got or expected, (schema, value)
    if expected and not got:
        # the only restriction here: with minProperties, properties come in schema order
        assert "minProperties" in schema, (schema, value)
    if "oneOf" in schema:
        return  # each branch has its own known keys
    # the default order: the valid objects whose known keys come in schema order (properties,
    # then other required keys, then dependency keys), then the others
    known = list(dict.fromkeys([*schema.get("properties", {}), *schema.get("required", []),
                                *[x for k, v in schema.get("dependentRequired", {}).items() for x in [k, *sorted(v)]]]))
    keys = list(value)
    in_order = keys == sorted(keys, key=lambda k: known.index(k) if k in known else len(known))
    assert matches(compiler, schema, text) == (got and in_order), (schema, value)


# Additional keys next to known ones: prefixes, extensions, escapes, multi-byte and empty keys.
UNKNOWN_KEY_SCHEMAS = [
    {"type": "object", "properties": {"ab": {"type": "integer"}, "abc": {}, "é": {}, "": {}, "a\n": {}},
     "additionalProperties": {"type": "null"}},
    {"type": "object", "properties": {"x": {}, "xé": {}, "日本": {}, "q\"": {}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}},
]
UNKNOWN_KEYS = st.one_of(st.sampled_from(["", "a", "ab", "abc", "abcd", "b", "é", "éa", "a\n", "a\n\n", "x", "xé",
                                          "xéé", "日", "日本", "日本語", "q", 'q"', 'q""', "\u0001", "😀", "\\"]),
                         st.text(max_size=3))


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(UNKNOWN_KEY_SCHEMAS) - 1),
       value=st.dictionaries(UNKNOWN_KEYS, st.sampled_from([None, 1]), max_size=3))
def test_additional_keys_match_jsonschema(compiler, index, value):
    schema = UNKNOWN_KEY_SCHEMAS[index]
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert matches(compiler, schema, json.dumps(value, ensure_ascii=False), property_order="any") == expected, \
        (schema, value)


ARRAY_SCHEMAS = [
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {"type": "array", "contains": {"type": "integer"}, "minContains": 2},
    {"type": "array", "contains": {"const": 1}, "maxContains": 1},
    {"type": "array", "prefixItems": [{"type": "null"}], "unevaluatedItems": {"type": "integer"}},
    {"type": "array", "items": {"not": {"type": "integer", "minimum": 2}}},
]


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(ARRAY_SCHEMAS) - 1), value=st.lists(VALUES, max_size=5))
def test_arrays_match_jsonschema(compiler, index, value):
    schema = ARRAY_SCHEMAS[index]
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert matches(compiler, schema, json.dumps(value)) == expected, (schema, value)


LISTED = [1, 1.0, 2, True, False, None, "a", "b", "1", [1], {"a": 1}, 0, 2.0]


def test_enums_under_lists_of_values_match_jsonschema(compiler):
    """An enum's candidates checked against oneOf/anyOf branches that are lists of values
    (enum, const, type: counted by value, _validate.py) and against `not: {enum}` (one excluded
    value per allOf branch): the values each schema accepts, against jsonschema, with JSON's
    equalities (1 == 1.0, true != 1; a number is written as listed or in its shortest form)."""
    rng = random.Random(5)

    def branch():
        b = {"enum": rng.sample(LISTED, rng.randint(1, 5))} if rng.random() < 0.7 else {"const": rng.choice(LISTED)}
        if rng.random() < 0.4:
            b["type"] = rng.choice(["integer", "number", "string", ["boolean", "null"], "array"])
        if rng.random() < 0.2:
            b["description"] = "notes only"
        return b

    for _ in range(60):
        schema = {"enum": LISTED, rng.choice(["oneOf", "anyOf"]): [branch() for _ in range(rng.randint(1, 4))]}
        if rng.random() < 0.5:
            schema["not"] = {"enum": rng.sample(LISTED, rng.randint(1, 4))}
        check = jsonschema.Draft202012Validator(schema)
        for v in LISTED:
            assert matches(compiler, schema, json.dumps(v)) == check.is_valid(v), (schema, v)


def test_excluded_values_of_a_negated_enum_are_looked_up_by_json_equality():
    """_negate.py writes `not: {enum: [...]}` as one `$trellis:notConst` allOf branch per value;
    the validator looks them up by value, beside the allOf's other branches."""
    from trellis.grammar.json_schema._validate import Validator, json_equal
    excluded = [1, "a", [1], None]
    schema = {"allOf": [*({"$trellis:notConst": x} for x in excluded), {"type": ["integer", "string", "array"]}]}
    resolver = _refs.Resolver(schema, draft7=False)
    validator = Validator(resolver)
    for v in LISTED:
        expected = not any(json_equal(v, x) for x in excluded) and isinstance(v, (int, float, str, list)) \
            and not isinstance(v, bool) and (not isinstance(v, float) or v.is_integer())
        assert validator.holds(v, resolver.root) == expected, v


def test_unevaluated_counts_every_anyof_branch_that_holds(compiler):
    """Exhaustively against jsonschema: the keys (items) of each anyOf branch that holds count as
    evaluated, whichever set of branches holds."""
    objects = {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False,
               "anyOf": [{"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                         {"properties": {"c": {"type": ["null", "integer"]}}, "required": ["c"]}, {"required": ["a"]}]}
    arrays = {"type": "array", "unevaluatedItems": False,
              "anyOf": [{"prefixItems": [{"type": "integer"}]}, {"prefixItems": [{}, {"type": ["null", "string"]}]}]}
    values = [None, 1, "s"]
    cases = [(objects, {k: v for k, v in zip("abcx", combo) if v is not ...})
             for combo in itertools.product([..., *values], repeat=4)]
    cases += [(arrays, list(items)) for n in range(4) for items in itertools.product(values, repeat=n)]
    for schema, value in cases:
        expected = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert matches(compiler, schema, json.dumps(value), property_order="any") == expected, (schema, value)
    assert sum(jsonschema.Draft202012Validator(objects).is_valid(v) for s, v in cases if s is objects) > 10


def test_anyof_under_unevaluated_is_refused_past_the_branch_limit(compiler):
    schema = {"unevaluatedProperties": False, "anyOf": [{"required": [k]} for k in "abcde"]}
    with pytest.raises(UnsupportedSchemaError, match="anyOf with more than 4 branches") as e:
        compiler.compile_json_schema(schema)
    assert e.value.keyword == "anyOf"


def test_recursion_through_refs(compiler):
    schema = {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                                  "next": {"$ref": "#/$defs/node"}},
                                 "required": ["v"], "additionalProperties": False}},
              "$ref": "#/$defs/node"}
    assert matches(compiler, schema, '{"v": 1, "next": {"v": 2, "next": {"v": 3}}}')
    assert not matches(compiler, schema, '{"v": 1, "next": {"next": {"v": 3}}}')


def test_anchor_and_id_relative_refs(compiler):
    schema = {"$id": "http://example.com/root.json",
              "properties": {"a": {"$ref": "item.json"}, "b": {"$ref": "#num"}},
              "$defs": {"x": {"$id": "item.json", "type": "string"}, "y": {"$anchor": "num", "type": "number"}}}
    assert matches(compiler, schema, '{"a": "s", "b": 1.5}')
    assert not matches(compiler, schema, '{"a": 1}')
    assert not matches(compiler, schema, '{"b": "s"}')


def test_enum_and_const_use_json_equality(compiler):
    schema = {"enum": [1, "a", {"k": [True, None]}, [1.5]]}
    for text in ["1", "1.0", '"a"', '{"k": [true, null]}', "[1.5]", "[1.50]"]:
        assert matches(compiler, schema, text), text
    for text in ["true", "2", '"b"', '{"k": [true]}', "[1]"]:
        assert not matches(compiler, schema, text), text


# ---- dynamic references ($dynamicRef, 2020-12) ------------------------------------------------


def generic_list(item_type=None):
    """The specification's generic list: `list` uses `#T` dynamically; a caller binds T."""
    schema = {"$id": "https://example.com/caller", "$ref": "list",
              "$defs": {"list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#T"},
                                 "$defs": {"T": {"$dynamicAnchor": "T", "type": "boolean"}}}}}
    if item_type is not None:
        schema["$defs"]["T"] = {"$dynamicAnchor": "T", "type": item_type}
    return schema


def test_dynamic_ref_binds_the_outermost_anchor(compiler):
    ints = generic_list("integer")
    assert matches(compiler, ints, "[1, 2]") and matches(compiler, ints, "[]")
    assert not matches(compiler, ints, "[1, true]")
    default = generic_list()  # nobody outside binds T: the list's own anchor
    assert matches(compiler, default, "[true, false]")
    assert not matches(compiler, default, "[1]")


def test_dynamic_ref_strict_tree(compiler):
    """The specification's strict tree: extending a recursive schema reaches every level."""
    tree = {"$id": "tree", "$dynamicAnchor": "node", "type": "object",
            "properties": {"data": True, "children": {"type": "array", "items": {"$dynamicRef": "#node"}}}}
    strict = {"$id": "https://example.com/strict-tree", "$dynamicAnchor": "node", "$ref": "tree",
              "unevaluatedProperties": False, "$defs": {"tree": tree}}
    loose = {"$id": "https://example.com/loose-tree", "$ref": "tree", "$defs": {"tree": tree}}
    deep_typo = '{"children": [{"data": 1, "children": [{"daat": 2}]}]}'
    assert matches(compiler, strict, '{"children": [{"data": 1, "children": [{"data": 2}]}]}')
    assert not matches(compiler, strict, '{"children": [{"daat": 1}]}')
    assert not matches(compiler, strict, deep_typo)
    assert matches(compiler, loose, deep_typo)


def test_dynamic_scope_is_left_after_a_branch(compiler):
    """A binding made on the way to one property does not reach a sibling property."""
    schema = {"$id": "https://example.com/two", "type": "object",
              "properties": {"a": {"$ref": "nums"}, "b": {"$ref": "list"}},
              "$defs": {"nums": {"$id": "nums", "$ref": "list",
                                 "$defs": {"T": {"$dynamicAnchor": "T", "type": "integer"}}},
                        "list": generic_list()["$defs"]["list"]}}
    assert matches(compiler, schema, '{"a": [1], "b": [true]}')
    assert not matches(compiler, schema, '{"a": [true]}')
    assert not matches(compiler, schema, '{"b": [1]}')


@pytest.mark.parametrize("ref, target", [
    ("#/$defs/T", {"$dynamicAnchor": "T", "type": "boolean"}),  # a JSON pointer, no anchor name
    ("#T", {"$anchor": "T", "type": "boolean"}),  # $anchor, not $dynamicAnchor
    ("#T", {"$anchor": "T", "$dynamicAnchor": "U", "type": "boolean"}),  # another dynamic name
])
def test_dynamic_ref_without_a_matching_dynamic_anchor_is_a_ref(compiler, ref, target):
    schema = generic_list("integer")
    schema["$defs"]["list"]["items"] = {"$dynamicRef": ref}
    schema["$defs"]["list"]["$defs"]["T"] = target
    assert matches(compiler, schema, "[true]")
    assert not matches(compiler, schema, "[1]")


def test_plain_ref_to_a_dynamic_anchor_is_static(compiler):
    # (jsonschema's resolver follows such a $ref dynamically; the specification does not)
    schema = generic_list("integer")
    schema["$defs"]["list"]["items"] = {"$ref": "#T"}
    assert matches(compiler, schema, "[true]")
    assert not matches(compiler, schema, "[1]")


DYNAMIC_SCHEMAS = [
    generic_list("string"),
    {"$id": "https://example.com/root", "$dynamicAnchor": "meta", "$ref": "base",  # a recursive extension
     "properties": {"x": {"type": "integer"}},
     "$defs": {"base": {"$id": "base", "$dynamicAnchor": "meta", "type": "object",
                        "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#meta"}},
                                       "one": {"$dynamicRef": "#meta"}}}}},
    {"$id": "https://example.com/enum", "$ref": "list",  # the exact validator (enum) meets $dynamicRef
     "$defs": {"T": {"$dynamicAnchor": "T", "enum": [1, "a", None, [1], [2, "a"]]},
               "list": {"$id": "list", "type": "array", "items": {"$dynamicRef": "#T"},
                        "$defs": {"T": {"$dynamicAnchor": "T", "type": ["array", "integer"],
                                        "items": {"$dynamicRef": "#T"}}}}}},
    {"$id": "https://example.com/not", "$ref": "list",  # under a type-only not
     "$defs": {"T": {"$dynamicAnchor": "T", "type": "string"},
               "list": {"$id": "list", "type": "array", "items": {"not": {"$dynamicRef": "#T"}},
                        "$defs": {"T": {"$dynamicAnchor": "T", "type": "integer"}}}}},
]
DYNAMIC_VALUES = st.recursive(st.one_of(st.none(), st.integers(-2, 2), st.sampled_from(["a", ""])),
                              lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(
                                  st.sampled_from(["x", "kids", "one", "y"]), inner, max_size=3)), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(DYNAMIC_SCHEMAS) - 1), value=DYNAMIC_VALUES)
def test_dynamic_refs_match_jsonschema(compiler, index, value):
    schema = DYNAMIC_SCHEMAS[index]
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert matches(compiler, schema, json.dumps(value), property_order="any") == expected, (schema, value)


@pytest.mark.parametrize("schema, draft", [
    # a $dynamicRef in a rebuilt subschema (a negation's piece): its dynamic scope is not known
    ({"$id": "https://example.com/r", "not": {"not": {"$ref": "list"}, "minItems": 2},
      "$defs": {"list": generic_list()["$defs"]["list"]}}, None),
    ({"$id": "https://example.com/r", "not": {"$ref": "wrap", "minItems": 2},  # a piece from another resource
      "$defs": {"T": {"$dynamicAnchor": "T", "type": "integer"}, "list": generic_list()["$defs"]["list"],
                "w": {"$id": "wrap", "not": {"items": {"$dynamicRef": "list#T"}}}}}, None),
    ({"items": {"$dynamicRef": "#/$defs/a"}, "$defs": {"a": {}}}, "draft7"),
])
def test_dynamic_ref_refusals(schema, draft):
    with pytest.raises(UnsupportedSchemaError) as e:
        json_schema_to_grammar(schema, draft=draft)
    assert e.value.keyword == "$dynamicRef"


def test_documents_without_dynamic_anchors_stay_static():
    """No specialization by dynamic scope unless a $dynamicRef can be dynamic (compile time)."""
    assert _refs.Resolver({"items": {"$ref": "#/$defs/a"}, "$defs": {"a": {}}}, draft7=False).root.dyn is None
    no_anchor = {"items": {"$dynamicRef": "#/$defs/a"}, "$defs": {"a": {"$dynamicAnchor": "a"}}}
    assert _refs.Resolver(no_anchor, draft7=False).root.dyn is None
    assert _refs.Resolver(generic_list("integer"), draft7=False).root.dyn == (("T", "https://example.com/caller"),)


# ---- API, options, refusals ------------------------------------------------------------------


def test_whitespace_options(compiler):
    schema = {"type": "object", "properties": {"a": {"type": "array"}}}
    loose = '{ "a" :\n [ 1 , 2 ] }'
    assert matches(compiler, schema, loose)
    assert not matches(compiler, schema, loose, any_whitespace=False)
    assert matches(compiler, schema, '{"a": [1, 2]}', any_whitespace=False)
    assert matches(compiler, schema, '{"a":[1,2]}', any_whitespace=False)
    assert not matches(compiler, schema, '{"a": [1,' + " " * 21 + "2]}")
    assert matches(compiler, schema, '{"a": [1,' + " " * 20 + "2]}")


def test_strict_closes_objects(compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert matches(compiler, schema, '{"a": 1, "b": 2}')
    assert not matches(compiler, schema, '{"a": 1, "b": 2}', strict=True)


def test_schema_as_text_and_booleans(compiler):
    assert matches(compiler, '{"type": "integer"}', "12")
    assert matches(compiler, True, '{"x": [null]}')
    empty = compiler.compile_json_schema(False)
    assert empty.is_empty and not GrammarMatcher(empty).accept_string("null")
    assert not compiler.compile_json_schema(True).is_empty


def test_compile_json_schema_method(compiler):
    compiled = compiler.compile_json_schema({"type": "boolean"})
    matcher = GrammarMatcher(compiled)
    assert matcher.accept_string("true") and matcher.can_terminate()


UNIQUE_SCHEMAS = [
    # contains used to drop uniqueItems silently: [1, 1] was accepted
    {"items": {"enum": [1, 2, 3]}, "contains": {"const": 1}, "uniqueItems": True},
    {"items": {"enum": [1, 2, 3, "a"]}, "contains": {"type": "integer"}, "minContains": 2, "maxContains": 2,
     "uniqueItems": True},
    {"prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": False, "uniqueItems": True},
    {"prefixItems": [{"enum": [1, 2]}, {"const": 1}], "items": {"enum": [3, 1.0, None]}, "uniqueItems": True,
     "maxItems": 4},
    {"prefixItems": [{"enum": [1, 2]}], "items": {"enum": [2, 3]}, "uniqueItems": True, "minItems": 2,
     "contains": {"const": 3}, "maxContains": 1},
    {"items": {"type": ["boolean", "null"]}, "uniqueItems": True, "contains": {"const": None}, "maxContains": 0,
     "minContains": 0},
]


@pytest.mark.parametrize("schema", UNIQUE_SCHEMAS)
def test_unique_items_over_positions_and_contains_match_jsonschema(compiler, schema):
    """Every array of up to 4 items from a pool (equal values in several spellings) is judged as
    jsonschema judges it; only "1.0" (a spelling of 1 that is not generated) may be refused."""
    compiled = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for k in range(5):
        for items in itertools.product([1, 2, 3, 1.0, "a", True, False, None], repeat=k):
            text = json.dumps(list(items))
            m = GrammarMatcher(compiled)
            got, expected = m.accept_string(text) and m.can_terminate(), validator.is_valid(list(items))
            assert got == expected or (expected and "1.0" in text), (schema, text)


@pytest.mark.parametrize("schema, keyword, pointer", [
    ({"properties": {"a": {"$ref": "http://example.com/other.json"}}}, "$ref", "/properties/a"),
    ({"items": {"format": "regex", "pattern": "a"}}, "format", "/items"),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "contentMediaType": "text/html"}, "contentMediaType",
     ""),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"$recursiveRef": "#"}},
      "allOf": [{"$ref": "#/definitions/d"}]}, "$recursiveRef", "/definitions/d"),
    ({"$defs": {"d": {"$recursiveRef": "#/$defs"}}, "$ref": "#/$defs/d"}, "$recursiveRef", "/$defs/d"),
    ({"items": {"$dynamicRef": "http://example.com/other.json#T"}}, "$dynamicRef", "/items"),
    ({"pattern": "(?=a)"}, "pattern", ""),
    ({"not": {"uniqueItems": True}}, "uniqueItems", "/not"),
    ({"$schema": "http://example.com/custom-meta"}, "$schema", ""),
])
def test_refusals_name_keyword_and_pointer(schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as e:
        json_schema_to_grammar(schema)
    assert (e.value.keyword, e.value.pointer) == (keyword, pointer)


def test_annotations_are_listed_and_ignored(compiler):
    schema = {key: "x" for key in ("title", "description", "$comment")}
    schema.update({"examples": [1], "default": 2, "deprecated": True, "readOnly": True, "type": "integer"})
    assert matches(compiler, schema, "5")
    assert {"title", "description", "default", "examples", "deprecated"} <= ANNOTATIONS


@pytest.mark.parametrize("lo, hi", [(0, 100), (17, 1000), (70, None), (0, 65535)])
def test_long_string_lengths_are_exact(compiler, lo, hi):
    schema = {"type": "string", "minLength": lo, **({} if hi is None else {"maxLength": hi})}
    compiled = compiler.compile_ir(json_schema_to_grammar(schema))
    edge = hi if hi is not None else 200
    for n in sorted({0, 1, 15, 16, 17, lo - 1, lo, lo + 1, edge - 1, edge, edge + 1, 1023, 1024, 1025}):
        if n < 0:
            continue
        text = json.dumps("é\n" * (n // 2) + "a" * (n % 2), ensure_ascii=False)
        matcher = GrammarMatcher(compiled)
        got = matcher.accept_string(text) and matcher.can_terminate()
        assert got == (n >= lo and (hi is None or n <= hi)), n


def test_sign_bounds_allow_exponents(compiler):
    assert matches(compiler, {"type": "number", "minimum": 0}, "1e-06")
    assert not matches(compiler, {"type": "number", "minimum": 0}, "-1e-06")
    assert not matches(compiler, {"type": "number", "exclusiveMinimum": 0}, "0.0e5")
    assert matches(compiler, {"type": "number", "exclusiveMaximum": 0}, "-2.5E+3")


NEGATION_SCHEMAS = [
    {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
               {"type": "object", "properties": {"b": {"type": "string"}}}]},
    {"not": {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}},
    {"not": {"patternProperties": {"^x": {"type": "integer"}}}},
    {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"required": ["b"]},
     "else": {"properties": {"b": {"type": "null"}}}},
    {"type": "object", "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}},
    # at most one of a, b, c not null: each pair of `if`s contradicts itself, and is cut off early
    {"type": "object", "properties": {k: {"type": ["integer", "null"]} for k in "abc"},
     "allOf": [{"if": {"not": {"properties": {k: {"const": None}}}},
                "then": {"properties": {o: {"const": None} for o in "abc" if o != k}}} for k in "abc"]},
    # oneOf branches told apart by a key their parent requires (a discriminator)
    {"type": "object", "required": ["a"], "oneOf": [
        {"properties": {"a": {"const": 1}, "b": {"type": "integer"}}, "required": ["b"]},
        {"properties": {"a": {"const": 2}}, "required": ["c"]}, {"properties": {"a": {"enum": [3, "s"]}}}]},
    # told apart on objects by patterns; a non-object satisfies both (so none of it is valid)
    {"required": ["a"], "properties": {"a": {"type": "string"}}, "oneOf": [
        {"properties": {"a": {"pattern": "^s"}, "b": {"type": "integer"}}}, {"properties": {"a": {"pattern": "x$"}}}]},
    # told apart by what each branch's patternProperties or additionalProperties say of a key another requires
    {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^(b|c)$": {"type": "null"}},
         "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "patternProperties": {"^(a|c)$": {"type": "null"}},
         "required": ["b"]},
        {"type": "object", "additionalProperties": {"type": "integer"}, "required": ["c"]}]},
    # ifs that test one key's value, split once per value (a non-object meets every if)
    {"allOf": [
        {"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]},
         "else": {"properties": {"b": {"type": "string"}}}},
        {"if": {"properties": {"a": {"enum": [2, "s", 1.0]}}, "required": ["a"]},
         "then": {"properties": {"c": {"type": "integer"}}}},
        {"if": {"properties": {"a": {"enum": [None, True]}}}, "then": {"properties": {"x1": False}},
         "else": {"required": ["c"], "type": ["object", "integer"]}}]},
]


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, len(NEGATION_SCHEMAS) - 1),
       value=st.one_of(st.dictionaries(st.sampled_from(["a", "b", "x1", "c"]), VALUES, max_size=3), VALUES))
def test_negations_match_jsonschema(compiler, index, value):
    schema = NEGATION_SCHEMAS[index]
    expected = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert matches(compiler, schema, json.dumps(value), property_order="any") == expected, (schema, value)


def test_contradicting_cases_stop_splitting(compiler):
    """Combinators split a context into cases; a case that contradicts itself on a required key
    ends there. Twelve exclusive if/then pairs, and twelve oneOf branches told apart by a key the
    parent requires (or one each branch requires), compile (each once split into more than the
    limit's 800 cases, or refused) and are exact."""
    keys = [f"k{i}" for i in range(12)]
    exclusive = {"type": "object", "properties": {k: {"type": ["integer", "null"]} for k in keys},
                 "allOf": [{"if": {"not": {"properties": {k: {"const": None}}}},
                            "then": {"properties": {o: {"const": None} for o in keys if o != k}}} for k in keys]}
    assert matches(compiler, exclusive, '{"k0": null, "k3": 4, "k7": null}')
    assert not matches(compiler, exclusive, '{"k0": 1, "k3": 4}')
    tagged = {"type": "object", "required": ["kind"], "oneOf": [
        {"properties": {"kind": {"const": f"t{i}"}}, "required": [f"f{i}"]} for i in range(12)]}
    assert matches(compiler, tagged, '{"kind": "t5", "f5": 0}')
    assert not matches(compiler, tagged, '{"kind": "t5", "f4": 0}')
    assert not matches(compiler, tagged, '{"f5": 0}')
    # told apart on objects by their file names' patterns; for other values every branch holds
    files = {"required": ["file"], "properties": {"file": {"type": "string"}}, "oneOf": [
        {"properties": {"file": {"pattern": f"\\.{ext}$"}, f"{ext}_option": {"type": "integer"}}}
        for ext in ("js", "css", "html", "md", "py", "rs", "go", "c", "h", "ts", "kt", "rb")]}
    assert matches(compiler, files, '{"file": "a.css", "css_option": 1}')
    assert not matches(compiler, files, '{"file": "a.css", "css_option": "x"}')
    assert not matches(compiler, files, '{"file": "a.txt"}')
    assert not matches(compiler, files, '"a.css"')  # a string: all twelve branches hold
    # told apart by the key each requires, which the others' patternProperties hold null
    ids = [f"id{i}" for i in range(12)]
    exclusive_ids = {"oneOf": [
        {"type": "object", "properties": {k: {"type": "string"}}, "required": [k],
         "patternProperties": {"^(" + "|".join(o for o in ids if o != k) + ")$": {"type": "null"}}} for k in ids]}
    assert matches(compiler, exclusive_ids, '{"id3": "x", "id4": null}')
    assert not matches(compiler, exclusive_ids, '{"id3": "x", "id4": "y"}')
    assert not matches(compiler, exclusive_ids, '{"id3": null, "id4": null}')


def test_if_chains_on_one_key_match_jsonschema(compiler):
    """ifs that test one key's value (a discriminator written as ifs) are split once, a case per
    value: every object over a few keys and values, and some non-objects, against jsonschema."""
    schema = NEGATION_SCHEMAS[-1]
    assert "if" in schema["allOf"][0]
    grammar = compiler.compile_ir(json_schema_to_grammar(schema, property_order="any"))
    absent = object()
    values = [dict((k, v) for k, v in zip("abcx", combo) if v is not absent) for combo in itertools.product(
        [absent, 1, 1.0, 2, "s", None, "t", True], [absent, "x", 3], [absent, 4, "y"], [absent, 0])]
    values = [{("x1" if k == "x" else k): v for k, v in d.items()} for d in values] + [1, "s", None, [], 2.5]
    validator = jsonschema.Draft202012Validator(schema)
    for value in values:
        matcher = GrammarMatcher(grammar)
        got = matcher.accept_string(json.dumps(value)) and matcher.can_terminate()
        assert got == validator.is_valid(value), value


def cross_resource(ids=("https://x.test/root", "other"), defs="$defs", key="o", root_min=True):
    """A negation whose pieces come from another schema resource, through $ref: there, "#/$defs/x" is
    that resource's own x (a string of 2+ characters), not the root's (an integer >= 3)."""
    inner = {"$id": ids[1], "not": {"$ref": f"#/{defs}/x"}, defs: {"x": {"type": "string", "minLength": 2}}}
    outer = {"allOf": [{"$ref": ids[1]}], "minimum": 5} if root_min else {"$ref": ids[1]}
    return {"$id": ids[0], "not": outer, defs: {key: inner, "x": {"type": "integer", "minimum": 3}}}


def dyn_list(item_type, items):
    schema = generic_list(item_type)
    schema["$defs"]["list"]["items"] = items
    return schema


R = "https://x.test/root"
CROSS_RESOURCE_NEGATIONS = [
    ({"$id": R, "not": {"$ref": "other", "minimum": 5},  # the original report: 7 was accepted, "ab" rejected
      "$defs": {"o": {"$id": "other", "not": {"$ref": "#/$defs/x"},
                      "$defs": {"x": {"type": "string", "minLength": 2}}},
                "x": {"type": "integer", "minimum": 3}}}, None),
    (cross_resource(), None),
    (cross_resource(("urn:example:root", "urn:example:other")), None),
    (cross_resource(key="a b%/#é"), None),  # a pointer that needs escaping in a URI
    (cross_resource(defs="definitions"), "draft7"),
    # $anchor: "#s" is other's anchor s, not the root's
    ({"$id": R, "not": {"$ref": "other#neg", "maxLength": 3},
      "$defs": {"o": {"$id": "other", "$defs": {"n": {"$anchor": "neg", "not": {"$ref": "#s"}},
                                                "s": {"$anchor": "s", "type": "integer", "minimum": 2}}},
                "s": {"$anchor": "s", "type": "string"}}}, None),
    # nested resources: c.json in b.json is a/c.json
    ({"$id": R, "not": {"$ref": "a/b.json"},
      "$defs": {"a": {"$id": "a/", "$defs": {"b": {"$id": "b.json", "not": {"$ref": "c.json", "type": "array"}},
                                              "c": {"$id": "c.json", "items": {"type": "integer"}}}},
                "c": {"$id": "c.json", "items": {"type": "string"}}}}, None),
    # an $id inside a piece at the negation's own base
    ({"$id": R, "not": {"not": {"properties": {"a": {"$id": "inner", "$ref": "#/$defs/x",
                                                     "$defs": {"x": {"type": "string"}}}}}},
      "$defs": {"x": {"type": "integer"}}}, None),
    # if / then / else negated, its `if` in another resource
    ({"$id": R, "not": {"$ref": "cond"},
      "$defs": {"c": {"$id": "cond", "if": {"$ref": "#/$defs/i"}, "then": {"minimum": 3}, "else": {"type": "array"},
                      "$defs": {"i": {"type": "integer"}}},
                "i": {"type": "string"}}}, None),
    # a general `if` that is a $ref to another resource (¬if is built)
    ({"$id": R, "if": {"$ref": "other"}, "then": {"type": "string"}, "else": {"type": ["number", "null"]},
      "$defs": {"o": {"$id": "other", "not": {"$ref": "#/$defs/x", "maximum": 0}, "$defs": {"x": {"type": "number"}}},
                "x": {"type": "null"}}}, None),
    # oneOf: a branch in another resource (negated for exclusivity), a negated overlapping oneOf there
    ({"$id": R, "oneOf": [{"$ref": "other"}, {"type": "integer"}],
      "$defs": {"o": {"$id": "other", "not": {"$ref": "#/$defs/x"}, "$defs": {"x": {"type": "string"}}},
                "x": {"type": "integer"}}}, None),
    ({"$id": R, "not": {"$ref": "one"},
      "$defs": {"o": {"$id": "one", "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
                      "$defs": {"a": {"type": "integer"}, "b": {"minimum": 2}}},
                "a": {"type": "string"}, "b": {"type": "null"}}}, None),
    ({"$id": R, "not": {"properties": {"a": {"$ref": "other"}}, "required": ["a"]},
      "$defs": {"o": {"$id": "other", "not": {"$ref": "#/$defs/x"}, "$defs": {"x": {"type": "string"}}},
                "x": {"type": "integer"}}}, None),
    # negated $dynamicRef, where the negated node's dynamic scope is known: bound by the caller or not
    (dyn_list("integer", {"not": {"$dynamicRef": "#T", "minimum": 1}}), None),
    (dyn_list(None, {"not": {"$dynamicRef": "#T", "minimum": 1}}), None),
    (dyn_list("integer", {"oneOf": [{"$dynamicRef": "#T"}, {"minimum": 0}]}), None),
    (dyn_list("integer", {"if": {"$dynamicRef": "#T", "maximum": 2}, "then": {"minimum": 0}, "else": False}), None),
]
NEG_ATOMS = st.one_of(st.none(), st.booleans(), st.integers(-2, 7), st.sampled_from([1.5, -0.5, "", "a", "ab", "abcd"]))
NEG_VALUES = st.recursive(NEG_ATOMS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)), max_leaves=6)
NEG_FIXED = [None, True, 0, 1, 2, 3, 5, 7, -1, 1.5, "", "a", "ab", "abcd", [], [1], ["a"], [1, "a"], [True], [None],
             {}, {"a": 1}, {"a": "ab"}, {"a": None}, {"b": 1}]


def _validator(schema, draft):
    return (jsonschema.Draft7Validator if draft else jsonschema.Draft202012Validator)(schema)


@pytest.mark.parametrize("index", range(len(CROSS_RESOURCE_NEGATIONS)))
def test_negation_pieces_keep_their_resource(compiler, index):
    schema, draft = CROSS_RESOURCE_NEGATIONS[index]
    compiled = compiler.compile_ir(json_schema_to_grammar(schema, draft=draft, property_order="any"))
    validator = _validator(schema, draft)
    for value in NEG_FIXED:
        matcher = GrammarMatcher(compiled)
        got = matcher.accept_string(json.dumps(value)) and matcher.can_terminate()
        assert got == validator.is_valid(value), (schema, value)


def test_negation_through_a_ref_to_another_resource(compiler):
    schema = CROSS_RESOURCE_NEGATIONS[0][0]
    assert matches(compiler, schema, '"ab"') and matches(compiler, schema, "4")
    assert not matches(compiler, schema, "7") and not matches(compiler, schema, '"a"')


@settings(max_examples=400, deadline=None)
@given(index=st.integers(0, len(CROSS_RESOURCE_NEGATIONS) - 1), value=NEG_VALUES)
def test_cross_resource_negations_match_jsonschema(compiler, index, value):
    schema, draft = CROSS_RESOURCE_NEGATIONS[index]
    expected = _validator(schema, draft).is_valid(value)
    got = matches(compiler, schema, json.dumps(value), draft=draft, property_order="any")
    assert got == expected, (schema, value)


# ---- the last pass: dead parts, unused and equal rules ----------------------------------------

_RANDOM_RULES = ["r0", "r1", "r2", "r3"]


def _random_expr(rnd: random.Random, depth: int) -> ir.Expr:
    kind = rnd.choice(["bytes", "bytes", "ref", "ref", "ref", "nothing", "empty", "set"]
                      + ["seq", "seq", "alt", "alt", "repeat"] * (depth < 3))
    if kind == "bytes":
        return ir.Bytes(rnd.choice([b"a", b"b", b"ab"]))
    if kind == "ref":
        return ir.Ref(rnd.choice(_RANDOM_RULES))
    if kind == "nothing":
        return rnd.choice([ir.NOTHING, ir.ByteSet(())])
    if kind == "empty":
        return ir.EMPTY
    if kind == "set":
        return ir.ByteSet(((0x61, 0x62),))
    if kind == "repeat":
        lo = rnd.randint(0, 2)
        return ir.Repeat(_random_expr(rnd, depth + 1), lo, rnd.choice([None, lo, lo + 1]))
    items = tuple(_random_expr(rnd, depth + 1) for _ in range(rnd.randint(1, 3)))
    return ir.Seq(items) if kind == "seq" else ir.Alt(items)


def _bounded_language(rules: dict, root: str, limit: int = 4) -> frozenset:
    """The strings of at most `limit` bytes each rule matches: a least fixpoint (the oracle)."""
    lang = {name: frozenset() for name in rules}

    def strings(e):
        if isinstance(e, ir.Bytes):
            return {e.data} if len(e.data) <= limit else set()
        if isinstance(e, ir.ByteSet):
            return {bytes([b]) for lo, hi in e.ranges for b in range(lo, hi + 1)}
        if isinstance(e, ir.Ref):
            return set(lang.get(e.name, ()))
        if isinstance(e, ir.Alt):
            return set().union(*(strings(x) for x in e.items))
        if isinstance(e, ir.Seq):
            out = {b""}
            for x in e.items:
                out = {a + b for a in out for b in strings(x) if len(a) + len(b) <= limit}
            return out
        item, out, layer = strings(e.item), {b""} if e.min == 0 else set(), {b""}
        for count in range(1, (e.max if e.max is not None else limit + e.min) + 1):
            layer = {a + b for a in layer for b in item if len(a) + len(b) <= limit}
            if count >= e.min:
                out |= layer
        return out

    while True:
        new = {name: frozenset(strings(body)) for name, body in rules.items()}
        if new == lang:
            return lang[root]
        lang = new


def _live_oracle(rules: dict):
    """Whether a node matches some string, by the definition: the productive rules are the
    least fixpoint, found by naive iteration."""
    productive: set = set()

    def live(e):
        if isinstance(e, ir.Bytes):
            return True
        if isinstance(e, ir.ByteSet):
            return bool(e.ranges)
        if isinstance(e, ir.Ref):
            return e.name in productive
        if isinstance(e, ir.Seq):
            return all(live(x) for x in e.items)
        if isinstance(e, ir.Alt):
            return any(live(x) for x in e.items)
        return e.min == 0 or live(e.item)

    while True:
        now = {name for name, body in rules.items() if live(body)}
        if now == productive:
            return live
        productive = now


@pytest.mark.parametrize("seed", range(300))
def test_serialize_keeps_the_language_and_the_core_knows_an_empty_one(compiler, seed):
    """The rules as the core gets them (reached ones, equal bodies once: ir.serialize) keep the
    root's language."""
    from trellis.errors import GrammarError

    from .test_ir import deserialize

    rnd = random.Random(seed)
    rules = {name: _random_expr(rnd, 0) for name in _RANDOM_RULES}
    if seed % 3 == 0:  # two equal bodies, built apart
        rules["r2"], rules["r3"] = (_random_expr(random.Random(-seed), 0) for _ in range(2))
    if seed % 4 == 1:  # r1 and r2 call each other last: unproductive, unless r3 is a way out
        rules["r1"] = ir.Seq((rules["r1"], ir.Ref("r2")))
        rules["r2"] = ir.Seq((rules["r2"], ir.Alt((ir.Ref("r1"), ir.Ref("r3")) if seed % 8 == 1 else (ir.Ref("r1"),))))
    expected = _bounded_language(rules, "r0")
    out = deserialize(*ir.Grammar(rules, "r0").serialize()).rules
    assert _bounded_language(out, "r0") == expected
    bodies = [b for b in out.values() if b != ir.Alt(())]
    assert all(type(b) is ir.Ref for b in bodies if bodies.count(b) > 1), out  # merged: only aliases repeat
    # Dead parts are the core's to cut (the brute-force mask tests check that no mask offers one);
    # when nothing is left, it says so.
    try:
        compiled = compiler.compile_ir(ir.Grammar(rules, "r0"))
    except GrammarError as e:
        assert "left recursion" in str(e)
        return
    assert compiled.is_empty == (not _live_oracle(rules)(rules["r0"]))


DRAFT4 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("schema, texts", [
    ({"$schema": DRAFT4, "type": "integer"}, ["1", "1.0", "-0", "2e0", "1.5"]),
    ({"$schema": DRAFT4, "enum": [0, [1]]}, ["0", "0.0", "false", "[1]", "[1.0]", "[true]"]),
    ({"$schema": DRAFT4, "type": "integer", "enum": [1, 2.0]}, ["1", "1.0", "2", "2.0"]),
    ({"$schema": DRAFT4, "maximum": 5, "exclusiveMaximum": True, "minimum": 1, "exclusiveMinimum": False},
     ["5", "4.99", "1", "0.99", "3"]),
    ({"$schema": DRAFT4, "exclusiveMaximum": True}, ["1e9", "-3"]),
    ({"$schema": DRAFT4, "id": "http://example.com/root.json",
      "properties": {"a": {"$ref": "item.json"}, "id": {"type": "string"}},
      "definitions": {"item": {"id": "item.json", "type": "integer"}, "named": {"id": "#named", "type": "null"}},
      "additionalProperties": {"$ref": "#named"}},
     ['{"a": 1}', '{"a": "x"}', '{"id": "x"}', '{"id": 1}', '{"b": null}', '{"b": 1}']),
])
def test_draft4_semantics_match_its_validator(compiler, schema, texts):
    """draft-04: integers have no fraction, constants compare as numbers, exclusive bounds are
    flags and `id` names resources and anchors; checked against jsonschema's Draft4Validator."""
    g = compiler.compile_json_schema(schema, property_order="any")
    validator = jsonschema.Draft4Validator(schema)
    for text in texts:
        assert suite.accepts(g, text, None) == validator.is_valid(json.loads(text)), text


DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
_TREE = {"$schema": DRAFT2019, "$id": "https://example.com/tree", "$recursiveAnchor": True,
         "type": "object", "properties": {"v": {"type": "integer"},
                                          "kids": {"type": "array", "items": {"$recursiveRef": "#"}}}}


@pytest.mark.parametrize("schema, texts", [
    (_TREE, ['{"v": 1, "kids": [{"v": 2}]}', '{"kids": [{"v": "x"}]}', '{"kids": [{"kids": [{"v": 1.5}]}]}']),
    # an extension that anchors too: its recursion reaches the outer resource (strict kids: no "w")
    ({"$schema": DRAFT2019, "$id": "https://example.com/strict", "$recursiveAnchor": True,
      "$ref": "https://example.com/tree", "unevaluatedProperties": False, "$defs": {"tree": _TREE}},
     ['{"v": 1}', '{"w": 1}', '{"kids": [{"w": 1}]}', '{"kids": [{"v": 1, "kids": []}]}']),
    # without $recursiveAnchor it is a plain $ref to its resource
    ({"$schema": DRAFT2019, "type": "object", "properties": {"a": {"$recursiveRef": "#"}, "b": {"type": "null"}}},
     ['{"a": {"b": null}}', '{"a": {"b": 1}}', '{"a": {"a": {}}}']),
])
def test_recursive_ref_matches_the_2019_09_validator(compiler, schema, texts):
    g = compiler.compile_json_schema(schema, property_order="any")
    validator = jsonschema.Draft201909Validator(schema)
    for text in texts:
        assert suite.accepts(g, text, None) == validator.is_valid(json.loads(text)), text


def test_recursive_ref_other_than_hash_is_refused_with_its_pointer(compiler):
    with pytest.raises(UnsupportedSchemaError) as e:
        compiler.compile_json_schema({"$schema": DRAFT2019, "properties": {"a": {"$recursiveRef": "#/x"}}})
    assert (e.value.keyword, e.value.pointer) == ("$recursiveRef", "/properties/a")


@pytest.mark.parametrize("text, instances", [
    # draft-04's flag, given as text: plainly, and spelled with \\u escapes the text must not hide
    ('{"$schema": "%s", "maximum": 5, "exclusiveMaximum": true}' % DRAFT4, [("4", True), ("5", False)]),
    ('{"$schema": "%s", "maximum": 5, "exclusiveM\\u0061ximum": true}' % DRAFT4, [("4", True), ("5", False)]),
    # ids spaced as a person writes them
    ('{"$schema": "%s", "id" : "http://example.com/root.json", "properties": {"a": {"$ref": "item.json"}}, '
     '"definitions": {"item": {"id":"item.json", "type": "integer"}}}' % DRAFT4, [('{"a": 1}', True), ('{"a": "x"}', False)]),
    ('{"$schema": "%s", "$id": "https://example.com/t", "$recursiveAnchor": true, "type": "object", '
     '"properties": {"v": {"type": "integer"}, "k": {"$recursive\\u0052ef": "#"}}}' % DRAFT2019,
     [('{"k": {"v": 1}}', True), ('{"k": {"v": "x"}}', False)]),
])
def test_dialect_forms_are_read_from_schema_text(compiler, text, instances):
    """A schema given as text is looked through for the older dialects' keywords (as its parsed
    value would be), escapes and all."""
    g = compiler.compile_json_schema(text, property_order="any")
    for instance, ok in instances:
        assert suite.accepts(g, instance, None) == ok, instance


def test_a_draft4_schema_is_copied_only_where_it_has_older_forms(monkeypatch):
    """A property or required key named "id" is not draft-04's `id`: the document is not copied
    into draft-06's forms for it (a copy of a large document costs as much as reading it)."""
    from trellis.grammar.json_schema import _dialect
    copies = []
    rewrite = _dialect._rewrite
    monkeypatch.setattr(_dialect, "_rewrite", lambda schema, edit, *a, **k: copies.append(edit) or rewrite(schema, edit, *a, **k))
    plain = {"$schema": DRAFT4, "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
    _dialect.draft6_forms(plain)
    assert copies == []
    for older in ({"id": "http://example.com/x.json"}, {"maximum": 3, "exclusiveMaximum": True}, {"$id": 1}):
        assert _dialect.draft6_forms({**plain, **older}) != {**plain, **older}


def test_enum_values_meet_the_rest_of_their_context(compiler):
    """Values of an enum-only subschema are still checked against their siblings' keywords (and
    their type), only not against the subschema they come from."""
    schema = {"allOf": [{"enum": ["a", "bb", 3, "ccc", None]}, {"maxLength": 2}], "type": ["string", "integer"]}
    for text, ok in (('"a"', True), ('"bb"', True), ("3", True), ('"ccc"', False), ("null", False)):
        assert matches(compiler, schema, text) == ok, text
    typed = {"type": "string", "enum": ["x", 1, "éé", "y\n"], "title": "t"}
    for text, ok in (('"x"', True), ("1", False), ('"y\\n"', True), ('"éé"', True), ('"é\\u00e9"', True),
                     ('"z"', False)):
        assert matches(compiler, typed, text) == ok, text


def _numbered(schema: dict) -> dict:
    """`schema` with enough unused definitions that its subschemas are numbered by content."""
    return {**schema, "$defs": {f"pad{i}": {"type": "integer", "minimum": i} for i in range(_refs.MIN_NUMBERED)}}


def test_copies_of_a_subschema_are_built_once(compiler, monkeypatch):
    """Subschemas equal but for their notes (a normalized schema's definitions written out in
    place) are one context: the grammar has far fewer rules, and the same language."""
    copy = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 3}, "y": {"type": "string"}},
            "required": ["x"], "additionalProperties": False}
    schema = _numbered({"type": "object", "additionalProperties": False,
                        "properties": {f"p{i}": {**copy, "description": f"copy {i}"} for i in range(30)}})
    shared = json_schema_to_grammar(schema)
    monkeypatch.setattr(_refs, "MIN_NUMBERED", 10**9)
    each = json_schema_to_grammar(schema)
    assert len(shared.rules) + 2 * 29 < len(each.rules)
    for text, ok in (('{"p0": {"x": 3}, "p29": {"x": 4, "y": "a"}}', True), ('{"p3": {"x": 2}}', False),
                     ('{"p7": {"y": "a"}}', False), ('{"p1": {"x": 3, "z": 1}}', False)):
        for grammar in (shared, each):
            assert GrammarMatcher(compiler.compile_ir(grammar)).accept_string(text) == ok, text


def test_copies_in_a_folder_of_definitions_are_built_once(compiler):
    """Definitions kept under a keyword that is not a schema's (a folder, as jfrog-pipelines'
    `definitions/stepTypes`) are walked when a reference first reaches them, and numbered then:
    their copies of one subschema are one context too, and a folder's `$id` or anchor names
    nothing."""
    copy = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 3}, "y": {"type": "string"}},
            "required": ["x"], "additionalProperties": False}
    folder = {f"s{i}": {"type": "object", "properties": {"conf": {**copy, "description": f"copy {i}"}},
                        "additionalProperties": False} for i in range(30)}
    folder["s0"]["$anchor"] = "nothere"
    schema = _numbered({"type": "object", "additionalProperties": False, "definitions": {"steps": folder},
                        "properties": {f"p{i}": {"$ref": f"#/definitions/steps/s{i}"} for i in range(30)}})
    spread = {**schema, "definitions": {}, "$defs": {**schema["$defs"], **folder},
              "properties": {f"p{i}": {"$ref": f"#/$defs/s{i}"} for i in range(30)}}
    assert len(json_schema_to_grammar(schema).rules) == len(json_schema_to_grammar(spread).rules)
    for text, ok in (('{"p0": {"conf": {"x": 3}}, "p29": {"conf": {"x": 4, "y": "a"}}}', True),
                     ('{"p3": {"conf": {"x": 2}}}', False), ('{"p7": {"conf": {"y": "a"}}}', False)):
        assert matches(compiler, schema, text) == ok, text
    with pytest.raises(UnsupportedSchemaError, match="not found"):
        json_schema_to_grammar({**schema, "properties": {"a": {"$ref": "#nothere"}}})


@pytest.mark.parametrize("other", [
    {"not": {"type": "string", "enum": ["CAN", "USA"]}},  # "any other country", as o35866 writes it
    {"not": {"enum": ["CAN", "USA"]}},
    {"type": "string", "pattern": "^[A-Z]{3}$"},  # overlaps the named ones: no discriminator
])
def test_a_one_of_told_apart_by_a_key_it_does_not_require(compiler, other):
    """Branches that differ in one key's value where the key is there (an address's country)
    are an anyOf among the objects that have it; without it exactly one must still hold by the
    rest. Checked against jsonschema's validator."""
    schema = {"type": "object", "oneOf": [
        {"properties": {"country": {"enum": ["CAN"]}, "state": {"enum": ["ON", "QC"]}}},
        {"properties": {"country": {"const": "USA"}, "state": {"enum": ["NY", "CA"]}}},
        {"properties": {"country": other, "state": {"type": "string", "maxLength": 3}}}]}
    validator = jsonschema.Draft7Validator(schema)
    for text in ('{}', '{"country": "CAN"}', '{"country": "CAN", "state": "NY"}', '{"country": "FRA", "state": "IDF"}',
                 '{"state": "ON"}', '{"state": "XYZW"}', '{"state": "NY"}', '{"country": 5}', '{"country": "USA"}',
                 '{"country": "USA", "state": "CA"}', '{"country": "USA", "state": "ON"}', '{"country": "fr"}',
                 '{"country": "MEX", "state": "ONTARIO"}', '{"zip": 1}'):
        assert matches(compiler, schema, text) == validator.is_valid(json.loads(text)), text


def test_the_cases_of_an_if_chain_hold_only_the_ifs_they_picked(compiler, monkeypatch):
    """A 40-way if/then chain on one key (cloudify's node types) splits into a case per value; a
    case holds the `then`s it picked, not the 40 ifs it has decided (each case would look through
    them all: quadratic)."""
    from trellis.grammar.json_schema import converter
    kinds = [f"k{i}" for i in range(40)]
    schema = {"type": "object", "properties": {"kind": {"type": "string"}, "conf": {"type": "object"}},
              "required": ["kind"],
              "allOf": [{"if": {"properties": {"kind": {"const": k}}},
                         "then": {"properties": {"conf": {"properties": {k: {"type": "integer"}},
                                                          "additionalProperties": False}}}} for k in kinds]}
    ifs = []  # per body built, the ifs in its context
    body = converter.Converter.body
    monkeypatch.setattr(converter.Converter, "body", lambda self, nodes, *rest: ifs.append(
        sum("if" in n.schema for n in nodes)) or body(self, nodes, *rest))
    json_schema_to_grammar(schema)
    assert len(ifs) > 40 and ifs[0] == 40 and not any(ifs[1:]), ifs
    monkeypatch.undo()
    for text, ok in (('{"kind": "k3", "conf": {"k3": 1}}', True), ('{"kind": "k3", "conf": {"k4": 1}}', False),
                     ('{"kind": "other", "conf": {"k4": "x"}}', True), ('{"conf": {}}', False),
                     ('{"kind": "k39", "conf": {"k39": "x"}}', False)):
        assert matches(compiler, schema, text) == ok, text


def test_a_branch_split_off_under_many_parents_is_built_once(compiler, monkeypatch):
    """A definition that is a branch of many anyOfs (each property its own) is one context once
    split off: the anyOf that offered it has said all it says."""
    from trellis.grammar.json_schema import converter
    shared = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 5}}, "required": ["x"]}
    schema = {"type": "object", "additionalProperties": False, "$defs": {"A": shared},
              "properties": {f"p{i}": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer", "minimum": i}]}
                             for i in range(20)}}
    built = []
    body = converter.Converter.body
    monkeypatch.setattr(converter.Converter, "body",
                        lambda self, nodes, *rest: built.append([n.pointer for n in nodes]) or body(self, nodes, *rest))
    json_schema_to_grammar(schema)
    assert sum("/$defs/A" in pointers for pointers in built) == 1
    monkeypatch.undo()
    for text, ok in (('{"p0": {"x": "ab"}, "p19": 19}', True), ('{"p3": 2}', False), ('{"p4": {"x": "abcdef"}}', False),
                     ('{"p5": {"y": 1}}', False), ('{"p6": {"x": ""}, "p7": {"x": "a", "z": null}}', True)):
        assert matches(compiler, schema, text) == ok, text


@pytest.mark.parametrize("first, second, cases", [
    # (text, valid against first, valid against second): property names are part of what is said
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     {"properties": {"b": {"type": "integer"}}, "additionalProperties": False},
     [('{"a": 1}', True, False), ('{"b": 1}', False, True)]),
    ({"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
     {"patternProperties": {"^b": {"type": "integer"}}, "additionalProperties": False},
     [('{"a": 1}', True, False), ('{"b": 1}', False, True)]),
    # 1, 1.0 and true are equal in Python, not in JSON Schema
    ({"const": 1}, {"const": True}, [("1", True, False), ("true", False, True)]),
    ({"enum": [1]}, {"enum": [True]}, [("1", True, False), ("true", False, True)]),
    ({"const": "1"}, {"const": 1}, [('"1"', True, False), ("1", False, True)]),
    ({"const": ["a"]}, {"const": '["a"]'}, [('["a"]', True, False), ('"[\\"a\\"]"', False, True)]),
    ({"not": True}, {"not": {"type": "integer"}}, [("-1", False, False), ('"a"', False, True)]),
    ({"items": [{"type": "integer"}]}, {"items": {"type": "integer"}},
     [("[1, 2]", True, True), ('[1, "a"]', True, False)]),
    ({"description": "x", "maxLength": 1}, {"title": "y", "maxLength": 1, "minLength": 1},
     [('""', True, False), ('"a"', True, True)]),
])
def test_subschemas_that_say_different_things_stay_apart(compiler, first, second, cases):
    """Numbered by content, two subschemas share a context only when they say the same thing."""
    schema = _numbered({"type": "object", "properties": {"f": first, "s": second}, "additionalProperties": False})
    for text, in_first, in_second in cases:
        assert matches(compiler, schema, f'{{"f": {text}}}') == in_first, ("f", text)
        assert matches(compiler, schema, f'{{"s": {text}}}') == in_second, ("s", text)


def test_copies_under_other_bases_stay_apart(compiler):
    """Equal subschemas under different `$id` bases reach different schemas through their own
    subschemas' `$ref`s."""
    copy = {"type": "object", "properties": {"w": {"$ref": "t.json", "maxLength": 3}}}
    schema = _numbered({"type": "object", "additionalProperties": False, "properties": {
        k: {"$id": f"https://{k}.example/", "properties": {"v": copy}, "$defs": {"t": {"$id": "t.json", "type": t}}}
        for k, t in (("a", "integer"), ("b", "string"))}})
    for w, in_a, in_b in (("1", True, False), ('"x"', False, True), ("1234", True, False), ('"xxxx"', False, False)):
        assert matches(compiler, schema, f'{{"a": {{"v": {{"w": {w}}}}}}}') == in_a, ("a", w)
        assert matches(compiler, schema, f'{{"b": {{"v": {{"w": {w}}}}}}}') == in_b, ("b", w)


def test_any_value_is_shared_only_under_the_same_options(compiler):
    """Any JSON value (an additional property's here) is built once per set of conversion
    options and reused: a conversion with other options gets its own, whichever comes first."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    spaced = '{"a": 1, "b": [1,  {"c":   null}]}'
    wide = '{"a": 1, "b": [1,' + " " * 25 + "2]}"
    for _ in range(2):  # the second time round every conversion finds its options' value built
        assert matches(compiler, schema, spaced)
        assert not matches(compiler, schema, spaced, any_whitespace=False)
        assert matches(compiler, schema, '{"a": 1, "b": [1, {"c": null}]}', any_whitespace=False)
        assert not matches(compiler, schema, wide)
        assert matches(compiler, schema, wide, max_whitespace=30)
        assert not matches(compiler, schema, '{"a": 1, "b": [1,' + " " * 31 + "2]}", max_whitespace=30)


def test_any_value_kept_for_a_bounded_number_of_options(compiler):
    """Separators are the caller's strings: past ANY_VALUE_OPTIONS sets of options, any value is
    built for each conversion instead of kept, and is still right."""
    from trellis.grammar.json_schema import converter
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    for i in range(converter.ANY_VALUE_OPTIONS + 8):
        separators = ("," + " " * (i % 8), ":" + " " * (i // 8))
        assert matches(compiler, schema, json.dumps({"a": 1, "b": [1, {"c": None}]}, separators=separators),
                       any_whitespace=False, separators=separators)
    assert len(converter._ANY_VALUE) <= converter.ANY_VALUE_OPTIONS

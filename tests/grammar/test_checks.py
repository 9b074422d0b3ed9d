"""Checks (ir.Check): the keywords no grammar can say, decided by the core on the text.

Each checked schema against an independent oracle — `jsonschema` for uniqueItems, minProperties
over additional keys and multipleOf; node's `RegExp(p, "u")` for format regex; datetime
arithmetic for leap seconds; base64 + json for encoded content — and the token masks of checked
grammars against accept_token on every sampled token (the mask cache cannot see the text, so
it leaves tokens that cross a check to the real stack: this is where it could go wrong).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random
import shutil
import subprocess

import jsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary

CORES = os.environ.get("TRELLIS_CORE_BACKENDS", "native,wasmtime").split(",")
DRAFT7 = "http://json-schema.org/draft-07/schema#"


@pytest.fixture(scope="module", params=CORES)
def compiler(request):
    return GrammarCompiler(Vocabulary.smollm2(), core=request.param)


def accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.can_terminate()


# ---- oracles ------------------------------------------------------------------------------


def leap_valid(text: str) -> bool:
    """RFC 3339 full-time, second 60 only at 23:59:60 UTC (datetime arithmetic)."""
    import re

    m = re.fullmatch(r"([01]\d|2[0-3]):([0-5]\d):(60|[0-5]\d)(\.\d+)?([Zz]|([+-])([01]\d|2[0-3]):([0-5]\d))", text)
    if not m:
        return False
    if m[3] != "60":
        return True
    offset = 0 if m[5] in "Zz" else (1 if m[6] == "+" else -1) * (int(m[7]) * 60 + int(m[8]))
    utc = dt.datetime(2000, 1, 2, int(m[1]), int(m[2])) - dt.timedelta(minutes=offset)
    return (utc.hour, utc.minute) == (23, 59)


def node_regex_valid(patterns: list[str]) -> list[bool]:
    assert shutil.which("node"), "node is needed (the wasm tests use it too)"
    script = ("const ps = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(ps.map(p => { try { new RegExp(p, 'u'); return true } "
              "catch (e) { return false } })))")
    out = subprocess.run(["node", "-e", script], input=json.dumps(patterns), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def base64_json_valid(text: str) -> bool:
    try:
        doc = base64.b64decode(text, validate=True).decode("utf-8")
        json.loads(doc)
    except ValueError:
        return False
    return len(text) % 4 == 0


# ---- each check against its oracle ----------------------------------------------------------

REGEX_PIECES = list("ab()[]{}|^$\\.*+?-,<>=!k0129dwsbBnucx/é") + [
    "(?<", "(?:", "(?=", "(?<=", "(?<!", "\\k<", "{2,1}", "{1,2}", "{3}", "\\u0041", "\\u{1F600}", "\\cA",
    "\\x4", "[a-z]", "[z-a]", "[\\d-z]", "(?<n>", "(?<m>", "\\1", "\\2", "\\0", "\\k<n>"]
REGEX_CASES = ["(?<name>x)", "(?<n>a)\\k<n>", "\\k<n>(?<n>a)", "(?<a>x)(?<a>y)", "(a)\\1", "(a)\\2", "\\1(a)",
               "[(]\\1", "[]", "[^]", "\\cA", "\\a", "(?P<n>x)", "(?P<n>a)(?P=n)", "(?#comment)a", "(?i)abc",
               "(?<=a+)b", "^(abc]", "([abc])+\\s+$", "a{2,1}", "a{1,2}", "a{01,1}", "a{10,9}", "a{9,10}",
               "[b-a]", "[\\d-a]", "[a-\\w]", "\\0", "\\01", "[\\0]", "x{,5}", "a**", "]", "}", "{", "(?=a)*",
               "\\u{110000}", "\\u{10FFFF}", "[--a]", "[a-b-c]", "[\\u0041-\\u0040]", "\\uD83D\\uDE00", "\\/",
               "(?<$x_1>.)\\k<$x_1>", ""]


def test_format_regex_matches_ecmascript(compiler):
    """Zero invalid patterns accepted, and none of these valid ones refused (the grammar leaves
    out only \\p{..} escapes, (?i:..) modifiers and non-ASCII group names, which these lack)."""
    rng = random.Random(3)
    patterns = set(REGEX_CASES)
    while len(patterns) < 3000:
        patterns.add("".join(rng.choice(REGEX_PIECES) for _ in range(rng.randint(1, 7))))
    patterns = sorted(patterns)
    compiled = compiler.compile_json_schema({"format": "regex"})
    ours = [accepts(compiled, json.dumps(p, ensure_ascii=False)) for p in patterns]
    wrong = [(p, o) for p, o, want in zip(patterns, ours, node_regex_valid(patterns)) if o != want]
    assert not wrong
    assert 300 < sum(ours) < 2700  # both verdicts well represented


def test_leap_seconds(compiler):
    times = [f"{h:02}:{m:02}:60{frac}{zone}" for h in (0, 1, 12, 15, 22, 23) for m in (0, 29, 58, 59)
             for frac in ("", ".123") for zone in ("Z", "z", "+00:00", "-00:00", "+01:30", "-08:00", "+23:30",
                                                   "-23:30", "+12:01", "-00:01", "+00:01", "+23:59")]
    times += ["23:59:59Z", "23:59:61Z", "24:00:00Z", "12:00:60"]
    for schema, prefix in (({"format": "time"}, ""), ({"format": "date-time"}, "1998-12-31T")):
        compiled = compiler.compile_json_schema(schema)
        for t in times:
            assert accepts(compiled, json.dumps(prefix + t)) == leap_valid(t), (schema, t)


VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 1.0, 2, -0.0, 10, 1e1, 0.5]),
                                st.sampled_from(["", "a", "é", "a\"b"])),
                      lambda inner: st.one_of(st.lists(inner, max_size=2),
                                              st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)),
                      max_leaves=4)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(VALUES, max_size=5), spacing=st.sampled_from([(",", ":"), (", ", ": ")]))
def test_unique_items_of_any_value(compiler, items, spacing):
    """uniqueItems over an open set of values (1 == 1.0, objects regardless of order)."""
    schema = {"type": "array", "uniqueItems": True}
    compiled = compiler.compile_json_schema(schema)
    text = json.dumps(items, ensure_ascii=False, separators=spacing)
    assert accepts(compiled, text) == jsonschema.Draft202012Validator(schema).is_valid(items), text


UNIQUE_SCHEMAS = [
    {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2},
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "contains": {"minimum": 5},
     "maxContains": 2},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "number"}, "uniqueItems": True},
    {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
     "uniqueItems": True},
]


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(UNIQUE_SCHEMAS) - 1),
       items=st.lists(st.one_of(st.integers(0, 7), st.sampled_from(["a", "b", 2.5]),
                                st.lists(st.integers(0, 2), max_size=3)), max_size=5))
def test_unique_items_with_other_array_keywords(compiler, index, items):
    schema = UNIQUE_SCHEMAS[index]
    compiled = compiler.compile_json_schema(schema)
    text = json.dumps(items)
    assert accepts(compiled, text) == jsonschema.Draft202012Validator(schema).is_valid(items), (schema, text)


PROPERTY_SCHEMAS = [
    {"type": "object", "minProperties": 3},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "minProperties": 3,
     "maxProperties": 4},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "string"},
     "minProperties": 2},
]


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(PROPERTY_SCHEMAS) - 1),
       members=st.lists(st.tuples(st.sampled_from(["a", "b", "x1", "x2", "é", "a\tb"]),
                                  st.one_of(st.integers(0, 3), st.sampled_from(["s", ""]))), max_size=5))
def test_min_properties_count_distinct_keys(compiler, index, members):
    """Repeated keys are refused where they would count twice; distinct ones all count."""
    schema = PROPERTY_SCHEMAS[index]
    compiled = compiler.compile_json_schema(schema)
    members.sort(key=lambda kv: kv[0] not in schema.get("properties", {}))  # known keys first (schema order)
    text = "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(v)}" for k, v in members) + "}"
    keys = [k for k, _ in members]
    expected = len(set(keys)) == len(keys) and jsonschema.Draft202012Validator(schema).is_valid(dict(members))
    got = accepts(compiled, text)
    assert got == expected or (not got and len(set(keys)) < len(keys)), (schema, text)


@pytest.mark.parametrize("m, texts", [
    (0.123456789, ["123456789", "0", "-246913578", "1", "1.0", "123456789.0", "1e308"]),
    (123456789012, ["123456789012", "246913578024", "123456789013", "0.0"]),
    (1e-300, ["1", "3.5", "12391239123"]),
])
def test_multiple_of_beyond_automata(compiler, m, texts):
    """A divisor with too many remainders for an automaton: the number's text is divided exactly."""
    from fractions import Fraction

    schema = {"type": "integer", "multipleOf": m}
    compiled = compiler.compile_json_schema(schema)
    divisor = Fraction(repr(m))
    for text in texts:
        value = Fraction(text)
        expected = value.denominator == 1 and (value / divisor).denominator == 1
        # "1e308" is an integer to JSON Schema, but integers are generated without exponents
        assert accepts(compiled, text) == (expected and "e" not in text), (m, text)


@pytest.mark.parametrize("schema", [
    {"type": "integer", "multipleOf": 785823482472},
    {"type": "number", "multipleOf": 785823482472, "minimum": -2 * 785823482472, "maximum": 5e13},
    {"type": "integer", "multipleOf": 1000003, "maximum": 10**8},
])
def test_large_integer_multiples_lead_to_no_dead_end(compiler, schema):
    """With the check on the integer part, no text the masks allow is past saving: a '.' comes
    only after a multiple (before, '5.0' was allowed and nothing could complete it), and a side
    whose far end is bounded lists its few multiples. Oracles: `jsonschema` and Fraction."""
    from fractions import Fraction

    compiled = compiler.compile_json_schema(schema)
    vocab = compiler.vocab
    numeric = [t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids
               and set(b) <= set(b"0123456789.-")]
    stops = set(vocab.stop_ids)
    rng = random.Random(7)
    for _ in range(40):
        matcher = GrammarMatcher(compiled)
        text = b""
        for _ in range(30):
            allowed = set(matcher.allowed_tokens())
            assert allowed & stops or allowed - stops, f"dead end after {text!r}"
            if allowed & stops:  # it may end here: then it is a valid instance
                value = json.loads(text)
                assert jsonschema.Draft202012Validator(schema).is_valid(value), text
                assert (Fraction(text.decode()) / Fraction(schema["multipleOf"])).denominator == 1
            choices = sorted((allowed - stops) & set(numeric))
            if not choices or rng.random() < 0.1:
                break
            token = rng.choice(choices)
            assert matcher.accept_token(token)
            text += vocab.token_bytes[token]
    for value in [0, -0.0, 785823482472, -785823482472, 785823482472.0, 5, 1000003 * 7, 10**8, 1000003 * 99]:
        for text in {json.dumps(value), json.dumps(value) + (".0" if isinstance(value, int) else "")}:
            assert accepts(compiled, text) == jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text


@pytest.mark.parametrize("doc", ['{"foo": "bar"}', "[1, 2.5e3, \"é\\n\", null]", "{:}", "[1,]", "", "  true  ",
                                 "\"\\ud800\"", "{\"a\" 1}", "0012", "-", "[[[[]]]]", "[[[[]]]"])
def test_content_media_type_json(compiler, doc):
    plain = compiler.compile_json_schema({"$schema": DRAFT7, "contentMediaType": "application/json"})
    encoded = compiler.compile_json_schema({"$schema": DRAFT7, "contentMediaType": "application/json",
                                            "contentEncoding": "base64"})
    try:
        json.loads(doc)
        valid = True
    except ValueError:
        valid = False
    assert accepts(plain, json.dumps(doc, ensure_ascii=False)) == valid
    b64 = base64.b64encode(doc.encode()).decode()
    assert accepts(encoded, json.dumps(b64)) == valid == base64_json_valid(b64)
    assert not accepts(encoded, json.dumps(b64 + "%"))


# ---- masks with checks --------------------------------------------------------------------

WALKS = [
    ({"type": "array", "uniqueItems": True}, '[1, "a", [1, 2], {"a": 1}, 10, true]'),
    ({"format": "regex"}, '"(?<year>\\\\d{4})-(?<m>\\\\d{2})\\\\k<m>[a-z]{1,3}"'),
    ({"format": "date-time"}, '"1998-12-31T15:59:60.5-08:00"'),
    ({"type": "object", "minProperties": 3}, '{"name": "x", "age": 3, "id": [1]}'),
    ({"type": "integer", "multipleOf": 0.123456789}, "1234567890"),
    ({"$schema": DRAFT7, "contentMediaType": "application/json", "contentEncoding": "base64"},
     json.dumps(base64.b64encode(b'{"a": [1, 2]}').decode())),
]


def sampled_tokens(vocab: Vocabulary, rng: random.Random) -> list[int]:
    """Tokens made of the bytes these documents use, and a random sample of the rest."""
    chars = set(b'0123456789,[]{}":  \\.-+eTZ()<>?ak=') | {0x0A}
    near = [t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids and set(b) <= chars]
    return sorted(set(near) | set(rng.sample(range(vocab.vocab_size), 400)))


@pytest.mark.parametrize("index", range(len(WALKS)))
def test_masks_agree_with_accept_token(compiler, index):
    """Along the document, token by token: the mask allows exactly the sampled tokens that
    accept_token takes (tried one at a time, rolled back)."""
    from tests.grammar.json_schema_suite import TokenFeeder

    schema, doc = WALKS[index]
    vocab = compiler.vocab
    rng = random.Random(index)
    ids = sampled_tokens(vocab, rng)
    matcher = GrammarMatcher(compiler.compile_json_schema(schema))
    tokens = TokenFeeder(vocab).tokenize(doc)
    for step, token in enumerate(tokens + [None]):
        allowed = set(matcher.allowed_tokens())
        for t in ids:
            ok = matcher.accept_token(t)
            if ok:
                matcher.rollback(1)
            assert ok == (t in allowed), (step, vocab.token_bytes[t])
        if token is None:
            assert matcher.can_terminate()
            break
        assert token in allowed, (step, vocab.token_bytes[token])
        assert matcher.accept_token(token)


def test_generated_values_pass_their_checks(compiler):
    """Random walks through the masks: whatever completes is valid (the mask never offers a
    token that completes a value its check refuses)."""
    vocab = compiler.vocab
    rng = random.Random(11)
    # short tokens of a few characters, so that walks close their values often
    chars = set(b'0123,[]{}":ab')
    short = [t for t, b in enumerate(vocab.token_bytes) if 0 < len(b) <= 2 and set(b) <= chars
             and t not in vocab.special_ids]
    oracles = {0: lambda v: jsonschema.Draft202012Validator(WALKS[0][0]).is_valid(v),
               3: lambda v: len(v) >= 3}
    completed = 0
    for index, oracle in oracles.items():
        compiled = compiler.compile_json_schema(WALKS[index][0], any_whitespace=False)
        for _ in range(30):
            matcher = GrammarMatcher(compiled)
            text = b""
            for _ in range(120):
                allowed = set(matcher.allowed_tokens())
                stop = allowed & set(vocab.stop_ids)
                if stop and (rng.random() < 0.3 or allowed <= stop):
                    completed += 1
                    assert oracle(json.loads(text)), text
                    break
                choices = sorted((allowed - stop) & set(short)) or sorted(allowed - stop)
                if not choices:
                    break
                token = rng.choice(choices)
                assert matcher.accept_token(token)
                text += vocab.token_bytes[token]
    assert completed > 20


def test_rollback_and_completion_respect_checks(compiler):
    vocab = compiler.vocab
    compiled = compiler.compile_json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    m = GrammarMatcher(compiled)
    assert m.accept_string("[1, 2")
    assert not m.accept_string(", 1]") and m.accept_string(", 3]") and m.can_terminate()
    m.rollback(1)
    assert not m.accept_string(", 2]")  # the text read by the check was rolled back too
    assert m.accept_string("]") and m.can_terminate()
    for prefix in ("[7, 70", "[7, 70, 7", "[1, 2, 3, 0, 4, 5, 6, 7, 8, 9, 1"):
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix)
        done = m.shortest_completion()  # "]" would repeat an item: one digit more first
        assert done is not None and m.accept_string(done) and m.can_terminate(), (prefix, done)
        assert len(done) <= 4
    leap = GrammarMatcher(compiler.compile_json_schema({"format": "time"}))
    assert leap.accept_string('"12:00:60+1')
    # +12:01 is the only offset that makes it 23:59:60 UTC: the check refuses each other digit
    assert [d for d in "0123456789" if leap.accept_string(d) and leap.rollback(1) is None] == ["2"]
    assert leap.accept_string("2:0") and leap.find_jump_forward_string() == '1"'
    assert {bytes(vocab.token_bytes[t]) for t in leap.allowed_tokens()} <= {b"1", b'1"', b'1",', b'1"}'} | {
        bytes(vocab.token_bytes[t]) for t in vocab.stop_ids} or all(
        vocab.token_bytes[t].startswith(b"1") for t in leap.allowed_tokens())


def test_distinct_key_check_refuses_the_keys_it_lists(compiler):
    """A key is checked once decoded: escapes and UTF-8 name the listed keys as JSON reads them."""
    from trellis.grammar import ir
    from trellis.grammar.json_schema._object_schema import distinct_key
    from trellis.grammar.json_schema._text import JSON_CHAR

    key = ir.seq(ir.literal('"'), ir.repeat(JSON_CHAR, 0, None), ir.literal('"'))
    member = ir.seq(key, distinct_key(['a"b', "é", "", "ab"]), ir.literal(":1"))
    members = ir.seq(member, ir.repeat(ir.seq(ir.literal(","), member), 0, None))
    compiled = compiler.compile_ir(ir.Grammar({"root": ir.Region(ir.seq(ir.literal("{"), members, ir.literal("}")))}))
    for text, ok in (('{"x":1}', True), ('{"a\\"b":1}', False), ('{"é":1}', False), ('{"":1}', False),
                     ('{"ab":1}', False), ('{"a":1,"b":1,"abc":1}', True), ('{"a":1,"a":1}', False),
                     ('{"e":1,"a\\\\b":1}', True), ('{"x":1,"ab":1}', False)):
        m = GrammarMatcher(compiled)
        assert (m.accept_string(text) and m.can_terminate()) == ok, text


def test_distinct_key_check_with_many_listed_keys(compiler):
    """Hundreds of listed keys, in no order, some twice, many prefixes of others: each one is
    refused, every other key taken (the core sorts them once, then looks a key up)."""
    from trellis.grammar import ir
    from trellis.grammar.json_schema._object_schema import distinct_key
    from trellis.grammar.json_schema._text import JSON_CHAR

    rng = random.Random(5)
    alphabet = ["a", "b", "é", '"', "\\", "ÿ", "z"]
    listed = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(4))) for _ in range(400)]
    others = {k + c for k in listed for c in ("a", "é", "0")} | {k[:-1] for k in listed if k} | {"0", "zz0"}
    key = ir.seq(ir.literal('"'), ir.repeat(JSON_CHAR, 0, None), ir.literal('"'))
    member = ir.seq(key, distinct_key(listed), ir.literal(":1"))
    compiled = compiler.compile_ir(ir.Grammar({"root": ir.Region(ir.seq(ir.literal("{"), member, ir.literal("}")))}))
    for k in sorted(set(listed) | others):
        m = GrammarMatcher(compiled)
        text = "{" + json.dumps(k, ensure_ascii=False) + ":1}"
        assert (m.accept_string(text) and m.can_terminate()) == (k not in listed), k


def test_malformed_checks_are_ir_errors(compiler):
    from trellis.errors import GrammarError
    from trellis.grammar import ir

    for check in (ir.Check(99), ir.Check(ir.MULTIPLE_OF, (0, 0, 0)), ir.Check(ir.UNIQUE_ITEM, (1,)),
                  ir.Check(ir.DISTINCT_KEY, (3, 97)), ir.Check(ir.DISTINCT_KEY, (1, 256)),
                  ir.Check(ir.DISTINCT_KEY, (-1,)), ir.Check(ir.DISTINCT_KEY, (1, 97, 2, 98))):
        grammar = ir.Grammar({"root": ir.Region(ir.seq(ir.literal("a"), check))})
        with pytest.raises(GrammarError, match="check"):
            compiler.compile_ir(grammar)


@settings(max_examples=40, deadline=None)
@given(m=st.integers(10**9, 2**63 - 1), prefix=st.from_regex(r"-?[1-9][0-9]{0,40}", fullmatch=True),
       nested=st.booleans())
def test_completions_of_large_integer_multiples(compiler, m, prefix, nested):
    """A multiple of a 14-digit divisor may need 14 more digits: too many for the completion's
    search to try, so the core computes them (check_digits) and the search verifies them. A
    fuzz walk found no completion where one exists."""
    schema = {"type": "integer", "multipleOf": m}
    if nested:
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
        prefix = '{"a": ' + prefix
    matcher = GrammarMatcher(compiler.compile_json_schema(schema, any_whitespace=nested))
    assert matcher.accept_string(prefix)
    done = matcher.shortest_completion()
    assert done is not None, prefix
    assert matcher.accept_string(done) and matcher.can_terminate(), (prefix, done)
    value = json.loads(prefix + done.decode())
    assert (value["a"] if nested else value) % m == 0
    assert len(done) <= 19 + 1  # at most 19 digits (m < 10^19), then the closing brace


def _fewest_digits(prefix: str, divisor: int) -> str:
    """The fewest digits (the smallest of them) after which the integer `prefix` is a multiple."""
    n = abs(int(prefix))  # digits after a minus sign make the magnitude a multiple
    for k in range(0, 200):
        x = (-n * 10**k) % divisor
        if x < 10**k:
            return str(x).zfill(k) if k else ""
    raise AssertionError("no digits")


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 2**63 - 1), zeros=st.integers(1, 45), prefix=st.from_regex(r"-?[1-9][0-9]{0,30}", fullmatch=True),
       tail=st.integers(0, 30))
def test_completions_of_integer_multiples_past_2_63(compiler, m, zeros, prefix, tail):
    """A divisor P * 10^Q over 2^63 (multipleOf 1e20, a fuzz finding) has digits too: those for P,
    then Q zeros, or only zeros when the text has enough already; the fewest, as for smaller ones."""
    divisor = m * 10**zeros
    assume(divisor >= 2**63)
    prefix += "0" * tail  # trailing zeros: some already count towards 10^Q
    matcher = GrammarMatcher(compiler.compile_json_schema({"type": "integer", "multipleOf": divisor}))
    assert matcher.accept_string(prefix)
    done = matcher.shortest_completion()
    assert done is not None, prefix
    assert done.decode() == _fewest_digits(prefix, divisor), (prefix, divisor)
    assert matcher.accept_string(done) and matcher.can_terminate()


@pytest.mark.parametrize("m, bounds", [(2.220446049250313e-16, {}), (0.3, {}), (1.7e-9, {}), (0.0000123457, {}),
                                       (2.220446049250313e-16, {"minimum": -3.5, "maximum": 1000}),
                                       (1.7e-9, {"exclusiveMaximum": 0.25})])
def test_fractional_multiples_lead_to_no_dead_end(compiler, m, bounds):
    """A multiple of m has at most m's decimals significant, and the free ones left may be too few
    to reach a multiple: before, any fraction digits were allowed and the end check refused them
    all (a fuzz finding, seed 21: 49 decimals under multipleOf 2^-52, no completion). Each digit
    and point is checked as it comes now (MULTIPLE_OF_PREFIX), bounds or not. Walks over the
    numeric tokens: wherever they stop, a completion exists, and it is a multiple (Fraction)."""
    from fractions import Fraction

    compiled = compiler.compile_json_schema({"multipleOf": m, **bounds})
    vocab = compiler.vocab
    numeric = [t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids
               and set(b) <= set(b"0123456789.-")]
    rng = random.Random(11)
    for _ in range(30):
        matcher = GrammarMatcher(compiled)
        text = b""
        for _ in range(rng.randrange(1, 25)):
            choices = sorted(set(matcher.allowed_tokens()) & set(numeric))
            if not choices:
                break
            token = rng.choice(choices)
            assert matcher.accept_token(token)
            text += vocab.token_bytes[token]
        done = matcher.shortest_completion()
        assert done is not None, f"dead end after {text!r}"
        assert matcher.accept_string(done) and matcher.can_terminate(), (text, done)
        assert (Fraction((text + done).decode()) / Fraction(repr(m))).denominator == 1, (text, done)
    assert not accepts(compiled, "0.1") if m == 0.3 else True  # 0.1x is no multiple of 0.3


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 10**15 - 1), scale=st.integers(1, 40),
       prefix=st.from_regex(r"-?[1-9][0-9]{0,20}", fullmatch=True), decimals=st.text("0123456789", max_size=45),
       dot=st.booleans())
def test_completions_of_fractional_multiples(compiler, p, scale, prefix, decimals, dot):
    """multipleOf P * 10^-s: a number in progress that the matcher accepts, with or without a
    fraction, has a completion (the fewest fraction digits, check_digits), and it is a multiple."""
    from fractions import Fraction

    m = f"{p}e-{scale}"
    if dot:
        prefix += "." + decimals
    matcher = GrammarMatcher(compiler.compile_json_schema(f'{{"multipleOf": {m}}}'))
    if not matcher.accept_string(prefix):
        return
    done = matcher.shortest_completion()
    assert done is not None, (m, prefix)
    assert matcher.accept_string(done) and matcher.can_terminate(), (m, prefix, done)
    assert (Fraction(prefix + done.decode()) / Fraction(repr(float(m)))).denominator == 1, (m, prefix, done)


def test_a_region_no_check_reads_is_built_as_its_body(compiler):
    """A region is a call of its own, which the mask caches do not see past: a repeated region
    of one byte (a fuzz finding) sent every token to the slow path, 70 ms per mask. Regions that
    no check reads are built in place; one around a check keeps its rule."""
    from trellis.grammar import ir

    byte = ir.byte_set([(0, 233)])
    plain = compiler.compile_ir(ir.Grammar({"root": ir.repeat(byte, 0, None)}))
    nested = compiler.compile_ir(ir.Grammar({"root": ir.repeat(ir.Region(ir.Region(byte)), 0, None),
                                             "other": ir.Region(ir.Region(ir.Region(ir.EMPTY)))}))
    assert nested.stats()["rules"] == plain.stats()["rules"] and nested.stats()["states"] == plain.stats()["states"]
    a, b = GrammarMatcher(plain), GrammarMatcher(nested)
    rng = random.Random(7)
    for _ in range(20):
        allowed = a.allowed_tokens()
        assert b.allowed_tokens() == allowed
        t = rng.choice(allowed)
        assert a.accept_token(t) and b.accept_token(t)
    # A check in a rule called from the region reads the region: it stays a rule.
    checked = ir.Grammar({"root": ir.seq(ir.literal("x"), ir.Region(ir.seq(ir.literal("ab"), ir.Ref("c")))),
                          "c": ir.Check(ir.MULTIPLE_OF, (0, 2, 0))})
    unchecked = ir.Grammar({"root": ir.seq(ir.literal("x"), ir.Region(ir.seq(ir.literal("ab"), ir.Ref("c")))),
                            "c": ir.EMPTY})
    assert compiler.compile_ir(checked).stats()["rules"] > compiler.compile_ir(unchecked).stats()["rules"]


@pytest.mark.parametrize("schema, prefix", [
    ({"type": "array", "items": {"type": ["boolean", "integer"]}, "uniqueItems": True}, "[true, 1, tru"),
    ({"type": "array", "items": {"type": ["string", "boolean"]}, "uniqueItems": True}, '[true,\n"a", tru'),
    ({"type": "object", "minProperties": 3}, '{"ab": 1, "a'),
])
def test_a_token_that_ends_a_value_waits_for_its_check(compiler, schema, prefix):
    """Where a value ends exactly at a token's end, the check right after it decides the token:
    the mask must not take it from the cache (the cache knows no text)."""
    vocab = compiler.vocab
    m = GrammarMatcher(compiler.compile_json_schema(schema))
    assert m.accept_string(prefix)
    for t in m.allowed_tokens():
        assert m.accept_token(t), vocab.token_bytes[t]
        m.rollback(1)
    for tail in ('e', "e,", 'b"'):
        ids = [t for t, b in enumerate(vocab.token_bytes) if b == tail.encode()]
        for t in ids:
            ok = m.accept_token(t)
            if ok:
                m.rollback(1)
            assert (t in m.allowed_tokens()) == ok, tail


# ---- one key per object ---------------------------------------------------------------------

ONE_KEY_SCHEMAS = [
    ({"patternProperties": {"^[ab]$": {"type": "integer"}}, "additionalProperties": False}, {}),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
      "propertyNames": {"maxLength": 1}}, {}),
    ({"anyOf": [{"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"},
                 "propertyNames": {"enum": ["a", "b", "c"]}},
                {"properties": {"b": {"type": "string", "maxLength": 2}}, "additionalProperties": False}]}, {}),
    ({"allOf": [{"properties": {"a": {"type": "integer"}}}, {"propertyNames": {"enum": ["a", "b"]}}],
      "additionalProperties": {"type": "integer"}}, {}),
    ({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": False},
     {"property_order": "any"}),
    ({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "object",
      "additionalProperties": {"type": "integer"}, "propertyNames": {"maxLength": 1}}},
      "propertyNames": {"maxLength": 1}}, {}),
    # additional keys that must not be the named ones (the distinct-key check lists them)
    ({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
     {}),
    ({"properties": {"a": {"type": "integer"}, "é": {"type": "integer"}}, "additionalProperties": {"type": "string"},
      "required": ["a"]}, {}),
]


def _no_repeated_key(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"key written twice: {keys}"
    return dict(pairs)


def _walk_distinct_keys(compiler, compiled, seed: int, is_valid) -> None:
    """Random walks through the masks, preferring the tokens that would repeat a key: whenever
    the text can end, it parses with every object's keys distinct and `is_valid`."""
    vocab = compiler.vocab
    small = set(b'{}[]":, abc0123456789')
    near = {t for t, b in enumerate(vocab.token_bytes) if b and t not in vocab.special_ids and set(b) <= small}
    stops = set(vocab.stop_ids)
    rng = random.Random(seed)
    ended = 0
    for _ in range(30):
        matcher = GrammarMatcher(compiled)
        text = b""
        for _ in range(60):
            allowed = set(matcher.allowed_tokens())
            if allowed & stops:
                doc = json.loads(text, object_pairs_hook=_no_repeated_key)
                assert is_valid(doc), text
                ended += 1
                if rng.random() < 0.2:
                    break
            choices = sorted((allowed - stops) & near) or sorted(allowed - stops)
            if not choices:
                break
            # Structure first (a next member, a key), so that objects get several members.
            structural = [t for t in choices if set(vocab.token_bytes[t]) & set(b',"ab')]
            token = rng.choice(structural if structural and rng.random() < 0.7 else choices)
            assert matcher.accept_token(token)
            text += vocab.token_bytes[token]
    assert ended > 0


@pytest.mark.parametrize("index", range(len(ONE_KEY_SCHEMAS)))
def test_masks_never_offer_a_key_already_in_the_object(compiler, index):
    schema, options = ONE_KEY_SCHEMAS[index]
    compiled = compiler.compile_json_schema(schema, **options)
    _walk_distinct_keys(compiler, compiled, index, jsonschema.Draft202012Validator(schema).is_valid)


def test_json_object_mode_writes_each_key_once(compiler):
    """web-llm's json_object without a schema: any object, but never a key twice in one object."""
    compiled, _ = compiler.compile_response_format({"type": "json_object"})
    _walk_distinct_keys(compiler, compiled, 7, lambda doc: isinstance(doc, dict))
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a": {"a": 1, "b": [{"a": 2}]}, "b": 1') and not m.accept_string(', "a"')

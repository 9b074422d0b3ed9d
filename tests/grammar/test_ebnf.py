"""EBNF front-end, checked through the reference recognizer against independent oracles."""

import ast
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grammar.reference import Reference
from trellis.errors import GrammarError
from trellis.grammar import ir
from trellis.grammar.ebnf import ARITHMETIC_EBNF, LLAMACPP_JSON_EBNF, WEBLLM_JSON_EBNF, parse_ebnf

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ref(text, root="root"):
    return Reference(parse_ebnf(text, root))


# ---- the web-llm JSON example ---------------------------------------------------------

LLAMACPP = ref(LLAMACPP_JSON_EBNF)
WEBLLM = ref(WEBLLM_JSON_EBNF)


def test_webllm_json_structure():
    g = parse_ebnf(LLAMACPP_JSON_EBNF)
    assert list(g.rules) == ["root", "value", "object", "array", "string", "number", "ws"]
    assert g.positions["object"] == (3, 1) and g.positions["ws"] == (20, 1)
    assert g.rules["root"] == ir.Ref("object")


def webllm_oracle(data: bytes) -> bool:
    """json.loads, narrowed to what that grammar's author chose: a top-level object,
    whitespace only after tokens and only [ \\t\\n], no raw DEL, no NaN/Infinity."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not text or text[0].isspace() or "\r" in text or "\x7f" in text:
        return False
    try:
        value = json.loads(text, parse_constant=_reject)
    except ValueError:
        return False
    return isinstance(value, dict)


def _reject(name):
    raise ValueError(name)


_text = st.text(st.characters(exclude_characters="\x7f", exclude_categories=["Cs"]), max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_layout = st.sampled_from([
    dict(separators=(",", ":")), dict(), dict(indent=2), dict(indent="\t"),
    dict(indent=0, ensure_ascii=False), dict(separators=(" ,  ", " : "), ensure_ascii=False),
])


@FAST
@given(st.dictionaries(_text, _json, max_size=4), _layout)
def test_webllm_json_accepts_serialized_objects(value, layout):
    data = json.dumps(value, **layout).encode()
    assert LLAMACPP.accepts(data)
    assert LLAMACPP.accepts(data + b" \n\t")


@FAST
@given(st.dictionaries(_text, _json, max_size=3), st.data())
def test_webllm_json_mutations_agree_with_json_loads(value, data):
    text = bytearray(json.dumps(value, ensure_ascii=data.draw(st.booleans())).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = data.draw(st.sampled_from(b'{}[]",:\\ \t\r\n0-1.eE+tfnulx\x7f\x1f\xc3\xa9\xff'))
        if op == "insert":
            text[pos:pos] = bytes([byte])
        elif pos < len(text):
            text[pos:pos + 1] = b"" if op == "delete" else bytes([byte])
    assert LLAMACPP.accepts(bytes(text)) == webllm_oracle(bytes(text)), bytes(text)


@pytest.mark.parametrize("doc", [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}',
                                 b'[1]', b'"x"', b' {}', b'{"a": 01}', b'{"a": 1.}',
                                 b'{"\x7f": 1}', b'{"a" :1,}'])
def test_webllm_json_rejects(doc):
    assert not LLAMACPP.accepts(doc) and not webllm_oracle(doc)


def test_webllm_json_prefixes():
    doc = json.dumps({"k": [1, -2.5e+3, "é\\\"\u0001", {"n": None}], "t": True}).encode()
    assert LLAMACPP.accepts(doc)
    for i in range(len(doc)):
        assert LLAMACPP.is_prefix(doc[:i]) and not LLAMACPP.accepts(doc[:i])
    assert not LLAMACPP.is_prefix(b'{"k": x')
    assert not LLAMACPP.is_prefix(b"[")  # root is an object
    assert not LLAMACPP.is_prefix(b'{"\xff')  # not UTF-8
    assert LLAMACPP.next_bytes(b'{"a": t') == {ord("r")}


# ---- arithmetic -----------------------------------------------------------------------

ARITH = ref(ARITHMETIC_EBNF)


def arithmetic_oracle(text: str) -> bool:
    """Python's own parser, keeping only integers, + - * / and parentheses."""
    if re.search(r"(?<![0-9])0[0-9]", text):  # Python accepts "00"; the grammar does not
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    allowed = (ast.Expression, ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Constant)
    return all(isinstance(n, allowed) for n in ast.walk(tree)) and all(
        type(n.value) is int for n in ast.walk(tree) if isinstance(n, ast.Constant))


@settings(max_examples=300, deadline=None)
@given(st.text("0123+-*/()", max_size=12))
def test_arithmetic_matches_python_parser(text):
    assert ARITH.accepts(text.encode()) == arithmetic_oracle(text), text


def test_arithmetic_examples():
    assert ARITH.accepts(b"(1+2)*30/4-0") and ARITH.accepts(b"((7))")
    assert not ARITH.accepts(b"1+") and ARITH.is_prefix(b"1+((")
    assert not ARITH.is_prefix(b"1)") and not ARITH.is_prefix(b"01")


# ---- random EBNF against Python's re ----------------------------------------------------

_ALPHABET = "ab-\"é😀"


# Each random node is (EBNF text, Python regex, sampler); sampler(rnd) returns a match,
# so positive cases do not depend on the (slow for negated classes) st.from_regex.
def _atoms():
    char = st.sampled_from(_ALPHABET)
    literal = st.text(_ALPHABET, min_size=1, max_size=3).map(
        lambda s: (json.dumps(s, ensure_ascii=False), re.escape(s), lambda rnd: s))
    single = char.map(lambda c: ("'" + c + "'", re.escape(c), lambda rnd: c))

    def cls(parts, negate):
        body_e = "".join(_class_char(a) + ("-" + _class_char(b) if b != a else "")
                         for a, b in parts)
        body_r = "".join(re.escape(a) + ("-" + re.escape(b) if b != a else "") for a, b in parts)
        inside = [c for c in _ALPHABET + "z\n" if any(a <= c <= b for a, b in parts) != negate]
        hat = "^" if negate else ""
        return f"[{hat}{body_e}]", f"[{hat}{body_r}]", lambda rnd: rnd.choice(inside)

    pair = st.tuples(char, char).map(lambda p: tuple(sorted(p)))
    klass = st.builds(cls, st.lists(pair, min_size=1, max_size=3), st.booleans())
    return literal | single | klass


def _class_char(c):
    return {"-": "\\-", "]": "\\]", "^": "\\^", "\\": "\\\\"}.get(c, c)


def _compose(children):
    def quantify(x, q):
        lo, hi = {"*": (0, 3), "+": (1, 3), "?": (0, 1), "{2}": (2, 2), "{1,}": (1, 3),
                  "{0,2}": (0, 2), "{1,3}": (1, 3)}[q]
        gen = lambda rnd: "".join(x[2](rnd) for _ in range(rnd.randint(lo, hi)))  # noqa: E731
        return f"({x[0]}){q}", f"(?:{x[1]}){q}", gen

    def sequence(xs):
        return (" ".join(x[0] for x in xs), "".join(f"(?:{x[1]})" for x in xs),
                lambda rnd: "".join(x[2](rnd) for x in xs))

    def choice(xs):
        return ("(" + " | ".join(x[0] for x in xs) + ")", "(?:" + "|".join(x[1] for x in xs) + ")",
                lambda rnd: rnd.choice(xs)[2](rnd))

    quant = st.sampled_from(["*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}"])
    return (st.lists(children, min_size=1, max_size=3).map(sequence)
            | st.lists(children, min_size=2, max_size=3).map(choice)
            | st.builds(quantify, children, quant))


_ebnf_regex = st.recursive(_atoms(), _compose, max_leaves=6)


def _near(rnd, samples, alphabet):
    """Matching samples plus one-edit and doubled neighbours: the strings where an
    off-by-one in a bound or a class shows."""
    out = list(samples)
    for s in samples:
        i = rnd.randint(0, len(s))
        out += [s + s, s[1:], s[:-1], s[:i] + rnd.choice(alphabet) + s[i:],
                s[:i] + s[i:i + 1] + s[i:]]
    return out


@FAST
@given(_ebnf_regex, st.lists(st.text(_ALPHABET, max_size=6), min_size=5, max_size=5),
       st.randoms(use_true_random=False))
def test_random_ebnf_agrees_with_re(node, texts, rnd):
    ebnf, pattern, sample = node
    r = ref(f"root ::= {ebnf}\n")
    compiled = re.compile(pattern)
    samples = [sample(rnd) for _ in range(3)]
    assert all(compiled.fullmatch(t) for t in samples)  # the sampler itself is right
    texts += _near(rnd, samples, _ALPHABET)
    for text in texts:
        want = compiled.fullmatch(text) is not None
        assert r.accepts(text.encode()) == want, (ebnf, pattern, text)
        if want:
            assert all(r.is_prefix(text.encode()[:i]) for i in range(len(text.encode())))


# ---- dialect details -------------------------------------------------------------------


def test_literal_escapes():
    g = parse_ebnf(r'''root ::= "a\n\t\r\\\"\'\x41\u00e9\U0001F600" 'q"\'' "é"''')
    assert g.rules["root"] == ir.Seq((ir.literal("a\n\t\r\\\"'Aé😀"), ir.literal("q\"'"),
                                      ir.literal("é")))
    assert parse_ebnf('root ::= "\\uD83D\\uDE00"').rules["root"] == ir.literal("😀")
    assert parse_ebnf('root ::= ""').rules["root"] == ir.EMPTY


def test_class_escapes_and_negation():
    r = ref(r'root ::= [\]\-\^a-c\x30-\x32\u00e9]+ [^\n]')
    for text in ["]-^abc012é!", "a\t", "]😀"]:
        assert r.accepts(text.encode()), text
    for text in ["d!", "a\n", "a", "-"]:
        assert not r.accepts(text.encode()), text
    # A '-' first or last is literal; '^' not first is literal.
    r = ref(r"root ::= [-a] [a-] [a^]")
    assert r.accepts(b"--^") and r.accepts(b"aaa") and not r.accepts(b"b--")


@pytest.mark.parametrize("quant,lo,hi", [
    ("{3}", 3, 3), ("{2,}", 2, None), ("{1,3}", 1, 3), ("{0,0}", 0, 0), ("{ 1 , 2 }", 1, 2),
    ("{,2}", 0, 2), ("*", 0, None), ("+", 1, None), ("?", 0, 1), ("?*", 0, None), ("{2}{2}", 4, 4),
])
def test_repetition_bounds(quant, lo, hi):
    r = ref(f'root ::= "a"{quant} "b"')
    for n in range(8):
        assert r.accepts(b"a" * n + b"b") == (lo <= n and (hi is None or n <= hi)), n


def test_rules_span_lines_comments_and_names():
    text = """
# leading comment
root ::= item-list   # trailing comment
  "end"
item-list ::= _item
  | _item "," item-list
_item ::= "x" | ( # comment inside a group
   "y" )
"""
    g = parse_ebnf(text)
    assert g.positions == {"root": (3, 1), "item-list": (5, 1), "_item": (7, 1)}
    r = Reference(g)
    assert r.accepts(b"x,y,xend") and not r.accepts(b"x,end")


def test_left_recursion_and_empty_rules_are_accepted_by_the_front_end():
    # The core rejects left recursion later; the front end and the reference handle it.
    r = ref('root ::= root "a" | empty\nempty ::= ""')
    assert all(r.accepts(b"a" * n) for n in range(5)) and not r.accepts(b"b")
    r = ref('root ::= "x" | ')
    assert r.accepts(b"") and r.accepts(b"x")


def test_custom_root():
    assert ref('a ::= "x"\nb ::= a a', root="b").accepts(b"xx")


# ---- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("text,line,column,words", [
    ('root ::= "abc', 1, 10, "unterminated string"),
    ('root ::= "abc\n"', 1, 10, "unterminated string"),
    ("root ::= [abc", 1, 10, "unterminated character class"),
    ('root ::= "a\\qb"', 1, 12, "unknown escape"),
    ('root ::= "\\x4"', 1, 11, "hex digits"),
    ('root ::= "\\uD800"', 1, 11, "surrogate"),
    ("root ::= [z-a]", 1, 11, "out of order"),
    ('root ::=\n  "a" foo\nfoo2 ::= "b"', 2, 7, "undefined rule 'foo'"),
    ('root ::= "a"\nx ::= "b"\nroot ::= "c"', 3, 1, "already defined at line 1, column 1"),
    ('x ::= "a"', 1, 1, "root rule 'root' is not defined"),
    ('root ::= "a"{3,2}', 1, 13, "out of order"),
    ('root ::= "a"{x}', 1, 13, "malformed repetition"),
    ('root ::= "a" )', 1, 14, "unmatched ')'"),
    ('root ::= ( "a"\nb ::= "c"', 1, 10, "unclosed '('"),
    ('root ::= * "a"', 1, 10, "nothing to repeat"),
    ('root ::= ("a" | +)', 1, 17, "nothing to repeat"),
    ('"a" ::= root', 1, 1, "expected a rule definition"),
    ('root ::= "a" @', 1, 14, "unexpected character '@'"),
    ("root : = 'a'", 1, 6, "unexpected character ':'"),
    ('root ::= "a" ::= "b"', 1, 14, "expected an expression, found '::='"),
    ('\n\n  root ::= "é" é', 3, 16, "unexpected character 'é'"),
])
def test_errors_have_positions(text, line, column, words):
    with pytest.raises(GrammarError) as info:
        parse_ebnf(text)
    err = info.value
    assert (err.line, err.column) == (line, column), err
    assert words in err.message, err


@pytest.mark.parametrize("value", [
    {}, [], {"a": [1, -2.5e3, "x\\n\\u00e9", None, True, False]}, [{"k": {"n": 0}}, "é"],
])
def test_webllm_grammar_accepts_objects_and_arrays(value):
    for text in (json.dumps(value), json.dumps(value, indent=2), json.dumps(value, separators=(",", ":"))):
        assert WEBLLM.accepts(text.encode()), text


@pytest.mark.parametrize("text", ['"top-level string"', "17", '{"a": -0.5}', '{"a" 1}', "[1,]", '{"a": "\x01"}'])
def test_webllm_grammar_rejects(text):
    # Scalars at the top and -0.x are outside web-llm's grammar (it is stricter than JSON).
    assert not WEBLLM.accepts(text.encode())

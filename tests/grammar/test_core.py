"""The C++ core (native and wasm) against independent oracles.

At every step of a walk the core's token mask must equal the brute-force mask computed with
the pure-Python reference recognizer: token t is allowed iff text + bytes(t) is a prefix of
the language; a stop token iff the text is complete. Runs once per core transport.
"""

from __future__ import annotations

import json
import os
import random
import re
from array import array
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.grammar.reference import Reference
from trellis.errors import GrammarError, GrammarLimitError, SchemaLimitError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary, ir
from trellis.grammar.builtin_json import builtin_json_grammar
from trellis.grammar.core import CoreError
from trellis.grammar.ebnf import ARITHMETIC_EBNF, WEBLLM_JSON_EBNF, parse_ebnf
from trellis.grammar.json_schema import _string_schema, json_schema_to_grammar
from trellis.grammar.regex import parse_regex

CORES = os.environ.get("TRELLIS_CORE_BACKENDS", "native,wasmtime").split(",")
STOP = 1
SPECIAL = (0, 1)


def small_vocab(alphabet: bytes, padded: int = 5) -> Vocabulary:
    """Every 1- and 2-byte string over the alphabet, some longer ones, a few UTF-8 pieces."""
    tokens = [b"", b""]  # 0: special, 1: stop
    tokens += [bytes([a]) for a in alphabet]
    tokens += [bytes([a, b]) for a in alphabet for b in alphabet]
    rng = random.Random(7)
    tokens += [bytes(rng.choice(alphabet) for _ in range(rng.randint(3, 6))) for _ in range(40)]
    tokens += ["é".encode(), "é".encode()[:1], "é".encode()[1:], "日本".encode()]
    return Vocabulary.from_token_bytes(tokens, special_ids=SPECIAL, stop_ids=(STOP,),
                                       vocab_size=len(tokens) + padded)


@pytest.fixture(scope="module", params=CORES)
def core(request):
    return request.param


def compiler_for(vocab, core, _cache={}):
    key = (id(vocab), core)
    if key not in _cache:
        _cache[key] = (vocab, GrammarCompiler(vocab, core=core))
    return _cache[key][1]


def brute_force_mask(ref: Reference, vocab: Vocabulary, text: bytes, ids) -> set[int]:
    candidates = [t for t in ids if t not in vocab.special_ids and vocab.token_bytes[t]]
    ok = ref.prefixes_after(text, [vocab.token_bytes[t] for t in candidates])
    allowed = {t for t, good in zip(candidates, ok) if good}
    if ref.accepts(text):
        allowed |= {t for t in vocab.stop_ids if t in ids}
    return allowed


def check_walk(compiler, grammar: ir.Grammar, rng: random.Random, steps: int, ids=None, forced=None,
               oracle: dict | None = None):
    """Walk the grammar (random allowed tokens, or the `forced` sequence), comparing masks.
    `oracle`: the brute-force masks by text, kept across calls (a forced walk over the same grammar
    on another core asks the same questions: the slow Python oracle answers each once)."""
    vocab = compiler.vocab
    ids = range(vocab.vocab_size) if ids is None else ids
    ref = Reference(grammar)
    matcher = GrammarMatcher(compiler.compile_ir(grammar))
    text = b""
    sequence = list(forced) if forced is not None else None
    for step in range(steps if sequence is None else len(sequence) + 1):
        allowed = set(matcher.allowed_tokens())
        expected = oracle.get(text) if oracle is not None else None
        if expected is None:
            expected = brute_force_mask(ref, vocab, text, ids)
            if oracle is not None:
                oracle[text] = expected
        assert allowed & set(ids) == expected, f"step {step}, text {text!r}"
        assert matcher.can_terminate() == ref.accepts(text)
        # The mask and accept_token agree, and refusal leaves the state unchanged.
        for t in rng.sample(list(ids), min(5, len(ids))):
            if t not in allowed:
                assert not matcher.accept_token(t)
        if sequence is not None:
            if step == len(sequence):
                break
            choice = sequence[step]
            assert choice in allowed, f"step {step}: token {choice} not allowed after {text!r}"
        else:
            choices = sorted(allowed - set(vocab.stop_ids))
            if not choices:
                break
            choice = rng.choice(choices)
        assert matcher.accept_token(choice)
        text += vocab.token_bytes[choice]
    return matcher, text


# ---- random grammars over a small alphabet ------------------------------------------------

ALPHABET = b"abc("
NAMES = ["root", "r1", "r2", "r3"]


@st.composite
def automata(draw, alphabet: bytes = ALPHABET):
    """ir.Automaton: 1-4 states, runs that may overlap (nondeterministic) or leave bytes out."""
    n = draw(st.integers(1, 4))
    runs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(alphabet), st.integers(0, 2),
                                   st.integers(0, n - 1)), max_size=6))
    return ir.Automaton([(s, b, min(255, b + w), t) for s, b, w, t in runs], draw(st.lists(st.booleans(),
                                                                                       min_size=n, max_size=n)))


def machines(item):
    """ir.Machine: 1-4 states, 0-5 edges of `item` between any of them (loops included)."""
    return st.integers(1, 4).flatmap(lambda n: st.tuples(
        st.lists(st.tuples(st.integers(0, n - 1), item, st.integers(0, n - 1)), max_size=5),
        st.lists(st.booleans(), min_size=n, max_size=n))).map(lambda t: ir.Machine(*t))


def regular_leaves():
    return [st.binary(min_size=0, max_size=3).map(lambda b: ir.Bytes(bytes(ALPHABET[x % 4] for x in b))),
            st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=3).map(
                lambda bs: ir.byte_set([(b, b) for b in bs])),
            automata()]


def nested(leaf, sub, *more):
    """Sequences, choices and repetitions of `sub` beside `leaf` (and `more` kinds)."""
    return st.one_of(
        leaf,
        st.lists(sub, min_size=0, max_size=3).map(lambda xs: ir.Seq(tuple(xs))),
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: ir.Alt(tuple(xs))),
        st.tuples(sub, st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2))).map(
            lambda t: ir.Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])),
        *more)


def regular(depth: int):
    """Expressions an intersection may hold: no references, checks or regions."""
    leaf = st.one_of(*regular_leaves())
    return leaf if depth == 0 else nested(leaf, regular(depth - 1), machines(regular(depth - 1)))


def intersections(item):
    """ir.And of 1-3 items, the first wanted, escaped or not."""
    return st.tuples(st.lists(st.tuples(item, st.booleans()), min_size=1, max_size=3), st.booleans()).map(
        lambda t: ir.And(tuple(x for x, _ in t[0]), (True,) + tuple(w for _, w in t[0][1:]), t[1]))


def exprs(depth: int):
    leaf = st.one_of(*regular_leaves(), st.sampled_from(NAMES).map(ir.Ref),
                     st.just(ir.char_class([(0xE9, 0xE9), (0x65E5, 0x65E5)])))
    if depth == 0:
        return leaf
    sub = exprs(depth - 1)
    return nested(
        leaf, sub,
        sub.map(ir.Region),  # no check reads it: the core builds its body in place
        intersections(regular(depth - 1)),
        machines(sub))


grammars = st.lists(exprs(3), min_size=len(NAMES), max_size=len(NAMES)).map(
    lambda bodies: ir.Grammar(dict(zip(NAMES, bodies))))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(grammar=grammars, seed=st.integers(0, 10**6))
def test_random_grammars_match_brute_force(core, grammar, seed):
    vocab = small_vocab(ALPHABET)
    compiler = compiler_for(vocab, core)
    try:
        compiler.compile_ir(grammar)
    except GrammarError as e:
        assert "left recursion" in str(e), str(e)  # the only legitimate refusal
        assume(False)
    check_walk(compiler, grammar, random.Random(seed), steps=8)


def overlapping_ranges():
    """Alternatives that start with overlapping byte ranges (plus a few bytes each), repeated:
    determinization must split the ranges into the right stretches and merge their targets."""
    edges = sorted(ALPHABET)  # "(" then "abc": a range from "(" also covers bytes no token has
    one_range = st.tuples(st.sampled_from(edges), st.sampled_from(edges)).map(
        lambda t: ir.byte_set([(min(t), max(t))]))
    branch = st.tuples(one_range, st.binary(max_size=2)).map(
        lambda t: ir.Seq((t[0], ir.Bytes(bytes(ALPHABET[x % 4] for x in t[1])))))
    return st.lists(branch, min_size=2, max_size=5).map(
        lambda xs: ir.Grammar({"root": ir.Repeat(ir.Alt(tuple(xs)), 1, None)}))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(grammar=overlapping_ranges(), seed=st.integers(0, 10**6))
def test_overlapping_byte_ranges_match_brute_force(core, grammar, seed):
    compiler = compiler_for(small_vocab(ALPHABET), core)
    check_walk(compiler, grammar, random.Random(seed), steps=8)


# ---- regexes against Python's re ---------------------------------------------------------


def regexes(depth: int):
    leaf = st.sampled_from(["a", "b", "[ab]", "[^a]", "\\d", ".", "é", "c"])
    if depth == 0:
        return leaf
    sub = regexes(depth - 1)
    return st.one_of(
        leaf,
        st.lists(sub, min_size=2, max_size=3).map("".join),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
        st.tuples(sub, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{2,}"])).map(
            lambda t: "(?:" + t[0] + ")" + t[1]),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=regexes(3), texts=st.lists(st.text(alphabet="abcé1\n", max_size=8), max_size=12))
def test_regex_matches_python_re(core, pattern, texts):
    compiler = compiler_for(small_vocab(ALPHABET), core)
    compiled = compiler.compile_regex(pattern)
    python = re.compile(pattern)
    for text in texts:
        matcher = GrammarMatcher(compiled)
        full = matcher.accept_string(text) and matcher.can_terminate()
        assert full == bool(python.fullmatch(text)), (pattern, text)


# ---- the real SmolLM2 vocabulary -------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    return Vocabulary.smollm2()


def greedy_tokenize(vocab: Vocabulary, text: str) -> list[int]:
    """Longest-match tokenization: any valid tokenization serves a mask test."""
    by_bytes = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
    longest = max(len(b) for b in by_bytes)
    data, out, i = text.encode(), [], 0
    while i < len(data):
        for n in range(min(longest, len(data) - i), 0, -1):
            if data[i:i + n] in by_bytes:
                out.append(by_bytes[data[i:i + n]])
                i += n
                break
        else:
            raise AssertionError(f"no token for byte {data[i]}")
    return out


JSON_DOC = json.dumps({"name": "Hermione Granger", "age": 17, "house": "Gryffindor",
                       "wand": {"wood": "vine", "core": "dragon heartstring", "length": 10.75},
                       "tags": ["brave", "é\n\"q\"", None, True, -12.5, 3e-07]}, ensure_ascii=False)


_SAMPLED_ORACLE: dict = {}  # grammar name -> {text: brute-force mask}, shared by the cores' runs
# A string near its maxLength, a call of a one-character rule per position (and, for
# bounded_blocks, past the first 40 positions, of a 16-character rule per 16): positions far from
# the bound share their caches, those near it must still refuse a token too long for the rest.
BOUNDED_TEXT = ("Trellis bounds strings: " + "é" * 7 + " " + "word " * 30)[:116]


def bounded_string_grammar(called_chars):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_string_schema, "CALLED_CHARS", called_chars)
        return json_schema_to_grammar({"type": "string", "minLength": 2, "maxLength": 120})


# counted / searching regexes: the mask cache accepts whole trie subtrees there without walking them
@pytest.mark.parametrize("name", ["builtin_json", "webllm_ebnf", "arithmetic", "date_regex", "counted_regex",
                                  "search_regex", "bounded_string", "bounded_blocks"])
def test_smollm2_masks_match_brute_force_on_sampled_tokens(core, smollm2, name):
    grammar, doc = {
        "bounded_string": (bounded_string_grammar(_string_schema.CALLED_CHARS),
                           json.dumps(BOUNDED_TEXT, ensure_ascii=False)),
        "bounded_blocks": (bounded_string_grammar(40), json.dumps(BOUNDED_TEXT, ensure_ascii=False)),
        "builtin_json": (builtin_json_grammar(), JSON_DOC),
        "webllm_ebnf": (parse_ebnf(WEBLLM_JSON_EBNF), JSON_DOC),
        "arithmetic": (parse_ebnf(ARITHMETIC_EBNF), "(12+3)*45-(6/7)"),
        "date_regex": (parse_regex(r"\d{4}-\d{2}-\d{2}"), "2024-11-30"),
        "counted_regex": (parse_regex(r"[a-zA-Z ]{0,50}!"), "Hello world of counted grammars!"),
        "search_regex": (parse_regex(r"[a-z ]*qz[a-z ]*"), "find the qz in this text"),
    }[name]
    compiler = compiler_for(smollm2, core)
    rng = random.Random(name)
    sample = sorted(set(rng.sample(range(smollm2.vocab_size), 300)) | {2})
    tokens = greedy_tokenize(smollm2, doc)
    # Check every step on a sample of tokens plus the ones the document uses (and for the bound,
    # the longest ones).
    longest = sorted(range(smollm2.vocab_size), key=lambda i: -len(smollm2.token_bytes[i]))[:60]
    ids = sorted(set(sample) | set(tokens) | (set(longest) if name.startswith("bounded") else set()))
    matcher, text = check_walk(compiler, grammar, rng, 0, ids=ids, forced=tokens,
                               oracle=_SAMPLED_ORACLE.setdefault(name, {}))
    assert text == doc.encode()
    assert matcher.accept_token(2) and matcher.is_terminated()


def test_smollm2_mask_excludes_special_and_padding(core, smollm2):
    compiler = compiler_for(smollm2, core)
    matcher = GrammarMatcher(compiler.compile_regex(".*"))
    allowed = set(matcher.allowed_tokens())
    assert not allowed & (set(range(17)) - {0, 2})
    assert {0, 2} <= allowed  # empty text is a full match: stop tokens allowed
    assert max(allowed) < smollm2.vocab_size
    assert len(allowed) > 40000


# ---- the matcher API -----------------------------------------------------------------------


@pytest.fixture()
def tiny(core):
    return compiler_for(small_vocab(ALPHABET), core)


def token_id(vocab, text: bytes) -> int:
    return vocab.token_bytes.index(text)


def test_rollback_reset_and_termination(tiny):
    vocab = tiny.vocab
    m = GrammarMatcher(tiny.compile_grammar('root ::= "ab" [c]* "("'))
    initial = m.allowed_tokens()
    assert m.accept_token(token_id(vocab, b"ab"))
    assert m.accept_token(token_id(vocab, b"cc"))
    after = m.allowed_tokens()
    assert not m.accept_token(STOP)
    assert m.accept_token(token_id(vocab, b"("))
    assert m.can_terminate() and m.allowed_tokens() == [STOP]
    assert not m.accept_token(token_id(vocab, b"a"))
    assert m.accept_token(STOP) and m.is_terminated()
    assert m.allowed_tokens() == []
    m.rollback(2)
    assert not m.is_terminated() and m.allowed_tokens() == after
    with pytest.raises(CoreError):
        m.rollback(5)
    m.reset()
    assert m.allowed_tokens() == initial and m.history_length == 0


def test_jump_forward_and_accept_string(tiny):
    m = GrammarMatcher(tiny.compile_grammar('root ::= "a" ("bcé" | "bc(") "a"'))
    assert m.find_jump_forward_string() == "abc"
    assert m.accept_string("ab")
    assert not m.accept_string("x") and m.history_length == 1
    assert m.accept_string("cé".encode()[:2])  # a partial UTF-8 character
    assert m.find_jump_forward_string() == ""  # the forced bytes end mid-character
    assert m.accept_string(b"\xa9") and m.find_jump_forward_string() == "a"


@pytest.mark.parametrize("make", [
    lambda n: np.zeros(n, dtype=np.int32),
    lambda n: array("i", bytes(4 * n)),
    lambda n: memoryview(bytearray(4 * n)).cast("i"),
    lambda n: np.zeros(n + 3, dtype=np.uint32),
])
def test_bitmask_buffers(tiny, make):
    m = GrammarMatcher(tiny.compile_regex("a|b"))
    buf = make(tiny.bitmask_words)
    m.fill_next_token_bitmask(buf)
    words = np.frombuffer(memoryview(buf).cast("B"), dtype=np.uint32)
    got = [i for i in range(tiny.vocab.vocab_size) if words[i // 32] >> (i % 32) & 1]
    assert got == m.allowed_tokens() == [token_id(tiny.vocab, b"a"), token_id(tiny.vocab, b"b")]


def test_bitmask_buffer_errors(tiny):
    m = GrammarMatcher(tiny.compile_regex("a"))
    with pytest.raises(ValueError, match="needs"):
        m.fill_next_token_bitmask(np.zeros(tiny.bitmask_words - 1, dtype=np.int32))
    with pytest.raises(ValueError, match="32-bit"):
        m.fill_next_token_bitmask(np.zeros(tiny.bitmask_words, dtype=np.int64))
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(bytes(4 * tiny.bitmask_words))
    with pytest.raises(CoreError, match="out of range"):
        m.accept_token(tiny.vocab.vocab_size)


@pytest.mark.parametrize("ebnf", ['root ::= [^\\x00-\\U0010FFFF]', 'root ::= "x" root',
                                  'root ::= "a" b\nb ::= b "c"'])
def test_an_empty_language_compiles_and_refuses_everything(tiny, ebnf):
    grammar = tiny.compile_grammar(ebnf)
    assert grammar.is_empty
    m = GrammarMatcher(grammar)
    assert not m.allowed_tokens() and not m.can_terminate()
    m.fill_next_token_bitmask(mask := m.new_bitmask())
    assert not any(mask)
    assert not m.accept_string("a") and not m.accept_string("x") and m.shortest_completion() is None
    assert not tiny.compile_grammar('root ::= "a" | "b" root').is_empty


def test_grammar_errors_name_the_rule(tiny):
    with pytest.raises(GrammarError, match="left recursion") as err:
        tiny.compile_grammar('root ::= "a" | expr\nexpr ::= item "+"\nitem ::= expr | "b"')
    assert err.value.line in (2, 3)
    with pytest.raises(GrammarLimitError):
        tiny.compile_grammar('root ::= ("a"{1000}){1000}')
    with pytest.raises(GrammarLimitError, match="automaton states"):  # determinization blow-up
        tiny.compile_regex("(a|b)*a(a|b){20}")


ESCAPE_BYTES = b'a"\\\n\x01bnu01'  # bytes JSON escapes, and the letters and digits of their escapes


def escape_items(depth: int):
    leaf = st.one_of(
        st.binary(min_size=0, max_size=3).map(lambda b: ir.Bytes(bytes(b'a"\\\n\x01'[x % 5] for x in b))),
        st.lists(st.sampled_from(b'a"\\\n\x01'), min_size=1, max_size=3).map(
            lambda bs: ir.byte_set([(b, b) for b in bs])))
    if depth == 0:
        return leaf
    sub = escape_items(depth - 1)
    return st.one_of(leaf, st.lists(sub, min_size=0, max_size=3).map(lambda xs: ir.Seq(tuple(xs))),
                     st.lists(sub, min_size=1, max_size=3).map(lambda xs: ir.Alt(tuple(xs))),
                     sub.map(lambda x: ir.Repeat(x, 0, None)))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(wanted=escape_items(2), others=st.lists(st.tuples(escape_items(2), st.booleans()), max_size=2),
       seed=st.integers(0, 10**6))
def test_and_is_its_product(core, wanted, others, seed):
    """AND masks as the Python front-end's product automaton does (tests/grammar/reference.py),
    with the bytes JSON escapes written as their escapes: quote, backslash, newline, \\u0001."""
    vocab = small_vocab(ESCAPE_BYTES)
    node = ir.And((wanted, *(x for x, _ in others)), (True, *(w for _, w in others)), escaped=True)
    grammar = ir.Grammar({"root": ir.seq(ir.literal("["), node, ir.literal("]"))})
    check_walk(compiler_for(vocab, core), grammar, random.Random(seed), steps=8)


def test_and_json_escapes_and_searches(tiny):
    """A pattern searched for, a length and an excluded word, escaped: what JSON Schema gives it
    (only the canonical escapes: a newline is backslash-n, never \\u000a)."""
    star = ir.repeat(ir.byte_set([(0, 0xFF)]), 0, None)
    any_char = ir.repeat(ir.byte_set([(0, 0x7F)]), 0, None)
    node = ir.And((any_char, ir.seq(star, ir.literal('a"'), star), ir.repeat(ir.byte_set([(0, 0x7F)]), 2, 4),
                   ir.literal('a"\n')), (True, True, True, False), escaped=True)
    grammar = ir.Grammar({"root": ir.seq(ir.literal("<"), node, ir.literal(">"))})
    ref = Reference(grammar)
    for text, ok in ((rb'<a\">', True), (rb'<xa\"\u0001>', True), (rb'<a">', False), (rb'<a\"\n>', False),
                     (rb'<a\"\\>', True), (rb'<xxa\"y>', False), (rb'<a\"\u000a>', False), (rb'<a\"b>', True)):
        matcher = GrammarMatcher(tiny.compile_ir(grammar))
        assert (matcher.accept_string(text) and matcher.can_terminate()) == ok == ref.accepts(text), text


def test_and_validation(tiny):
    """Children must be regular, one wanted; flags known. Too large a product is a limit error
    naming the rule, and for a schema's rule its keyword and pointer."""
    a = ir.literal("a")
    bad = [ir.And((ir.Ref("root"),), (True,)), ir.And((ir.Region(a),), (True,)),
           ir.And((ir.Check(ir.UNIQUE_ITEM),), (True,))]
    for node in bad:
        words, _ = ir.serialize(ir.Grammar({"root": ir.seq(a, node)}))
        with pytest.raises(GrammarError, match="not regular"):
            tiny.core.grammar_compile(tiny._handle, words)
    words, _ = ir.serialize(ir.Grammar({"root": ir.And((a, a), (True, False))}))
    node = words[-1]  # the root's body (the rule table is last): AND 2, flags, child, 1, child, 0
    for at, value, message in ((4, 0, "no wanted child"), (6, 2, "neither wanted"), (2, 2, "flags")):
        broken = array("i", words)
        broken[node + at] = value
        with pytest.raises(GrammarError, match=message):
            tiny.core.grammar_compile(tiny._handle, broken)
    with pytest.raises(GrammarError):
        ir.And((a,), (False,))
    # 5,000 counts of any byte, searched for twice: refused, naming where
    digits = ir.repeat(ir.byte_set([(0x30, 0x39)]), 0, None)
    big = ir.And((ir.repeat(ir.byte_set([(0, 0x7F)]), 0, 5000), ir.seq(digits, ir.literal("x"), digits)),
                 (True, True))
    grammar = ir.Grammar({"root": ir.Ref("s"), "s": big}, positions={"s": ("pattern", "/properties/a")})
    with pytest.raises(SchemaLimitError, match="automaton states") as e:
        tiny.compile_ir(grammar)
    assert (e.value.keyword, e.value.pointer) == ("pattern", "/properties/a")


def test_automaton_node(tiny):
    """AUTOMATON: the strings from state 0 to an accepting state, nondeterminism allowed; its
    states, bytes and acceptance are validated."""
    # (ab)*a, and a second way to read "a" from state 0 that leads nowhere
    node = ir.Automaton([(0, 0x61, 0x61, 1), (1, 0x62, 0x62, 0), (0, 0x61, 0x61, 2)], [False, True, False])
    grammar = ir.Grammar({"root": ir.seq(ir.literal("("), node, ir.literal(")"))})
    for text, ok in ((b"(a)", True), (b"(aba)", True), (b"(ab)", False), (b"()", False), (b"(abab)", False)):
        matcher = GrammarMatcher(tiny.compile_ir(grammar))
        assert (matcher.accept_string(text) and matcher.can_terminate()) == ok, text
    words, _ = ir.serialize(ir.Grammar({"root": ir.Automaton([(0, 0x61, 0x62, 1)], [False, True])}))
    node = words[-1]  # the root's body (the rule table is last): AUTOMATON 2, 1, accept0, accept1, from, lo, hi, to
    for at, value, message in ((3, 2, "neither accepting"), (5, 2, "out of range"), (8, 5, "out of range"),
                               (6, 300, "out of range"), (7, 0x60, "out of range"), (2, -1, "truncated")):
        broken = array("i", words)
        broken[node + at] = value
        with pytest.raises(GrammarError, match=message):
            tiny.core.grammar_compile(tiny._handle, broken)


def test_machine_node(tiny):
    """MACHINE: an automaton whose edges are expressions (rules called, loops, empty edges,
    checks reading the enclosing region); its states, children and acceptance are validated."""
    # "(" then "a" or nothing, then a call of `b` (an optional "b": the edge may read nothing),
    # then any number of "c", then ")"
    item = ir.Machine([(0, ir.literal("a"), 1), (0, ir.EMPTY, 1), (1, ir.Ref("b"), 2), (2, ir.literal("c"), 2)],
                      [False, False, True])
    grammar = ir.Grammar({"root": ir.seq(ir.literal("("), item, ir.literal(")")),
                          "b": ir.repeat(ir.literal("b"), 0, 1)})
    for text, ok in ((b"()", True), (b"(a)", True), (b"(ab)", True), (b"(abccc)", True), (b"(bc)", True),
                     (b"(c)", True), (b"(ba)", False), (b"(aa)", False), (b"(bb)", False), (b"(cb)", False)):
        matcher = GrammarMatcher(tiny.compile_ir(grammar))
        assert (matcher.accept_string(text) and matcher.can_terminate()) == ok, text
    # an object of keys "a" and "b" whose check (on an edge) reads the region around the machine
    member = ir.seq(ir.literal('"'), ir.byte_set([(0x61, 0x62)]), ir.literal('"'), ir.Check(ir.DISTINCT_KEY),
                    ir.literal(":1"))
    members = ir.Machine([(0, member, 1), (1, ir.literal(","), 2), (2, member, 1)], [True, True, False])
    grammar = ir.Grammar({"root": ir.Region(ir.seq(ir.literal("{"), members, ir.literal("}")))})
    for text, ok in ((b'{}', True), (b'{"a":1}', True), (b'{"a":1,"b":1}', True), (b'{"a":1,"a":1}', False),
                     (b'{"a":1,}', False)):
        matcher = GrammarMatcher(tiny.compile_ir(grammar))
        assert (matcher.accept_string(text) and matcher.can_terminate()) == ok, text
    words, _ = ir.serialize(ir.Grammar({"root": ir.Machine([(0, ir.literal("a"), 1)], [False, True])}))
    node = words[-1]  # the root's body (the rule table is last): MACHINE 2, 1, accept0, accept1, from, child, to
    for at, value, message in ((3, 2, "neither accepting"), (5, 2, "out of range"), (7, -1, "out of range"),
                               (6, 0, "not an earlier node"), (6, node, "not an earlier node"), (2, -1, "truncated")):
        broken = array("i", words)
        broken[node + at] = value
        with pytest.raises(GrammarError, match=message):
            tiny.core.grammar_compile(tiny._handle, broken)
    # a machine of regular expressions is regular: an intersection may hold it, and it nothing else
    one_a = ir.Machine([(0, ir.literal("a"), 1)], [False, True])
    assert GrammarMatcher(tiny.compile_ir(ir.Grammar({"root": ir.And((one_a,), (True,))}))).accept_string(b"a")
    with pytest.raises(GrammarError, match="not regular"):
        tiny.compile_ir(ir.Grammar({"root": ir.And((ir.Machine([(0, ir.Ref("b"), 1)], [False, True]),), (True,)),
                                    "b": ir.literal("b")}))


def test_paths_that_join_share_a_state(tiny):
    """A DFA state is the set of NFA positions that do something (a byte, a call, the end):
    alternatives that end alike join in one state, not one per path that led there."""
    def states(branches):
        ebnf = 'root ::= (' + " | ".join(f'"{b}"' for b in branches) + ') "((" item\nitem ::= "a" item | "b"'
        grammar = tiny.compile_grammar(ebnf)
        for b in branches:
            assert GrammarMatcher(grammar).accept_string(f"{b}((aab".encode())
        return grammar.stats()["states"]

    one = states(["ab"])
    # each more branch adds the state after its first byte only ("ab", "bb" and "cb" end alike)
    assert states(["ab", "bb"]) == one + 1
    assert states(["ab", "bb", "cb"]) == one + 2


def test_malformed_ir_never_crashes(tiny):
    words, _ = ir.serialize(parse_ebnf('root ::= "ab" x*\nx ::= [a-c] | "(" root ")"'))
    rng = random.Random(3)
    outcomes = set()
    for _ in range(400):
        mutated = array("i", words)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.choice([-1, 0, 1, 2, 7, 255, 256, 2**31 - 1, rng.randint(-9, 40)])
        if rng.random() < 0.2:
            mutated = mutated[: rng.randrange(len(mutated))]
        try:
            handle = tiny.core.grammar_compile(tiny._handle, mutated)
            outcomes.add("compiled")
            tiny.core.free("grammar", handle)
        except GrammarError:
            outcomes.add("refused")
    assert "refused" in outcomes


def test_uncertain_tokens_kept_per_parent_agree_with_accept_token(core, smollm2):
    """Inside a string, the tokens its cache leaves to the real stack (`"}`, `"]`, `",`, `":`)
    are checked once per cache and parent, and the answer kept: the same string body under
    another parent (a key, an object's value, an array's item, a nested one) must get its own,
    and the answers stay right after a rollback and after a reset."""
    compiler = compiler_for(smollm2, core)
    quoted = [t for t, b in enumerate(smollm2.token_bytes) if b'"' in b and t not in smollm2.special_ids]
    m = GrammarMatcher(compiler.compile_builtin_json())

    def feed(text: str) -> None:
        for i, ch in enumerate(text):
            allowed = set(m.allowed_tokens())
            for t in quoted:
                ok = m.accept_token(t)
                if ok:
                    m.rollback(1)
                assert ok == (t in allowed), (text[:i], smollm2.token_bytes[t])
            assert m.accept_string(ch)

    doc = '{"key one": "a long value", "k": ["item one", "item two", {"x y": "z w", "v": ["deep"]}], "e": ""}'
    feed(doc)
    assert m.can_terminate()
    m.rollback(len(doc) - 3)  # back to `{"k`, then on through other frames
    feed('ey": ["x", {"y": ["z"]}], "w": "v"}')
    assert m.can_terminate()
    m.reset()
    feed(doc)
    assert m.can_terminate()


@lru_cache(maxsize=1)
def multilingual_vocab() -> Vocabulary:
    """Whole and cut UTF-8 characters of 1-4 bytes, alone and mixed with JSON's structure bytes
    (a token may begin inside a character, end inside one, or hold a quote after text)."""
    chars = ["a", "z", "i", "p", " ", "é", "日", "本", "€", "😀", "ß"]
    pieces = {c.encode()[i:j] for c in chars for i in range(len(c.encode())) for j in range(i + 1, len(c.encode()) + 1)}
    rng = random.Random(3)
    for _ in range(400):
        s = "".join(rng.choice(chars + ['"', ":", ",", "{", "}", "\\", "u", "0"]) for _ in range(rng.randint(2, 5)))
        i, j = sorted(rng.sample(range(len(s.encode()) + 1), 2))
        pieces.add(s.encode()[i:j] or s.encode())
    tokens = [b"", b""] + sorted(p for p in pieces if p)
    return Vocabulary.from_token_bytes(tokens, special_ids=SPECIAL, stop_ids=(STOP,), vocab_size=len(tokens))


MULTILINGUAL_SCHEMAS = [
    {"type": "object", "properties": {"zip": {"type": "string"}, "ab": {"type": "string"}}},
    {"type": "object", "properties": {"日本": {"type": "string"}, "é": {"type": "integer"}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"日本": {"type": "string"}, "日é": {"type": "string", "maxLength": 3}},
     "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "maxLength": 4}},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z日]*本?$"}},
    {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": {"enum": ["日本", "é"]}},
]


@pytest.mark.parametrize("index", range(len(MULTILINGUAL_SCHEMAS)))
def test_masks_over_multilingual_tokens_agree_with_accept_token(core, index):
    """A cache walk accepts a subtree of string text without visiting it, from the node where the
    rest is whole characters of a string body (a key's rest after its first character, a body
    called after a non-ASCII one): random walks where every token is tried against the mask."""
    compiler = compiler_for(multilingual_vocab(), core)
    n = compiler.vocab.vocab_size
    for seed in range(15):
        m = GrammarMatcher(compiler.compile_json_schema(MULTILINGUAL_SCHEMAS[index]))
        rng = random.Random(seed)
        for step in range(30):
            allowed = set(m.allowed_tokens())
            for t in range(2, n):
                ok = m.accept_token(t)
                if ok:
                    m.rollback(1)
                assert ok == (t in allowed), (seed, step, compiler.vocab.token_bytes[t])
            choices = sorted(allowed - {STOP})
            if not choices:
                break
            assert m.accept_token(rng.choice(choices))


def test_warm_caches_give_the_same_masks(core, smollm2):
    compiler = compiler_for(smollm2, core)
    cold, warm = compiler.compile_builtin_json(), compiler.compile_builtin_json()
    assert warm.warm() > 0 and warm.warm() == 0
    assert warm.stats()["mask_caches"] > cold.stats()["mask_caches"]
    a, b = GrammarMatcher(cold), GrammarMatcher(warm)
    for token in greedy_tokenize(smollm2, JSON_DOC)[:60]:
        assert a.allowed_tokens() == b.allowed_tokens()
        assert a.accept_token(token) and b.accept_token(token)

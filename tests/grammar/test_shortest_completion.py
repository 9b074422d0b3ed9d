"""GrammarMatcher.shortest_completion against a brute-force breadth-first search.

The returned bytes must be accepted and leave the matcher complete, and no shorter string may
do that: a BFS over bytes with the pure-Python Earley reference finds the true shortest length.
Runs once per core transport (TRELLIS_CORE_BACKENDS), on random grammars and hand cases.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.grammar.reference import Reference, _Set
from tests.grammar.test_core import ALPHABET, STOP, compiler_for, core, grammars, small_vocab  # noqa: F401
from trellis.errors import GrammarError, GrammarLimitError
from trellis.grammar import GrammarMatcher, Vocabulary, ir

BFS_LIMIT = 3000  # strings explored before the minimality check gives up on an example


def earley_step(ref: Reference, sets: list[_Set], byte: int) -> list[_Set] | None:
    """The reference's Earley sets after one more byte (earlier sets are never modified)."""
    advanced = [(p, d + 1, o) for term, (p, d, o) in sets[-1].scanning if ref.masks[term] >> byte & 1]
    if not advanced:
        return None
    out = sets + [_Set()]
    ref._close(out, advanced)
    return out


def next_bytes(ref: Reference, sets: list[_Set]) -> list[int]:
    mask = 0
    for term, _ in sets[-1].scanning:
        mask |= ref.masks[term]
    return [b for b in range(256) if mask >> b & 1]


def brute_force_length(ref: Reference, prefix: bytes, at_most: int) -> int | None:
    """Length of a shortest completion of `prefix` if it is at most `at_most` (else at_most + 1);
    None when the search grows past BFS_LIMIT configurations."""
    start = ref._run(prefix)
    assert start is not None, f"{prefix!r} is not a prefix"
    # Strings whose Earley sets agree past the prefix have the same futures: keep one of them.
    frontier = {(): start}
    explored = 0
    for length in range(at_most + 1):
        if any(ref._finished(sets[-1]) for sets in frontier.values()):
            return length
        if length == at_most:
            break
        grown = {}
        for key, sets in frontier.items():
            for b in next_bytes(ref, sets):
                nxt = earley_step(ref, sets, b)
                grown.setdefault(key + (frozenset(nxt[-1].items),), nxt)
        frontier = grown
        explored += len(frontier)
        if explored > BFS_LIMIT:
            return None
    return at_most + 1


def check(compiled, prefix: bytes) -> bytes:
    """shortest_completion after `prefix`: accepted, and it completes the text."""
    m = GrammarMatcher(compiled)
    assert m.accept_string(prefix)
    done = m.shortest_completion()
    assert done is not None
    assert m.history_length == 1  # a query: the state is unchanged
    fresh = GrammarMatcher(compiled)
    assert fresh.accept_string(prefix + done) and fresh.can_terminate(), (prefix, done)
    return done


# ---- random grammars against the brute force ---------------------------------------------


def nested(grammar: ir.Grammar) -> ir.Grammar:
    """Every rule opens with "(" and owes a literal tail: completions grow with the nesting."""
    return ir.Grammar({name: ir.Seq((ir.Bytes(b"("), body, ir.Bytes(b"c" * i)))
                       for i, (name, body) in enumerate(grammar.rules.items())})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(grammar=st.one_of(grammars, grammars.map(nested)), seed=st.integers(0, 10**6),
       steps=st.integers(0, 30))
def test_random_grammars_match_brute_force(core, grammar, seed, steps):
    compiler = compiler_for(small_vocab(ALPHABET), core)
    try:
        compiled = compiler.compile_ir(grammar)
    except GrammarError:
        assume(False)
    ref = Reference(grammar)
    rng = random.Random(seed)
    m = GrammarMatcher(compiled)
    if compiled.is_empty:  # no string matches: nothing completes it
        assert m.shortest_completion() is None and not ref.is_prefix(b"")
        return
    prefix = b""
    for _ in range(steps + 1):  # along a random walk, a byte at a time
        done = m.shortest_completion()
        assert done is not None and m.history_length == len(prefix)
        assert (done == b"") == m.can_terminate()
        assert ref.accepts(prefix + done), (prefix, done)
        probe = GrammarMatcher(compiled)
        assert probe.accept_string(prefix + done) and probe.can_terminate()
        shortest = brute_force_length(ref, prefix, len(done))
        assert shortest in (None, len(done)), f"after {prefix!r}: {done!r}, but {shortest} bytes suffice"
        choices = next_bytes(ref, ref._run(prefix))
        if not choices:
            break
        byte = bytes([rng.choice(choices)])
        assert m.accept_string(byte)
        prefix += byte
    if m.can_terminate():
        assert m.accept_token(STOP) and m.shortest_completion() is None


# ---- hand cases ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    return Vocabulary.smollm2()


@pytest.fixture()
def json_grammar(core, smollm2):
    return compiler_for(smollm2, core).compile_builtin_json()


@pytest.mark.parametrize("prefix, expected", [  # the bytes, or the length when there are ties
    (b'{"na', 4),                         # mid-key: close the key, then any one-digit value
    (b'{"name": "Herm', b'"}'),          # mid-string
    (b'[[1, [2, [', b']]]]'),            # nested arrays
    (b'{"a": [{"b": tr', b'ue}]}'),      # a literal's forced tail, then the nest
    (b'{"a": "x\\', 3),                  # mid-escape: any one-byte escape, then close
    (b'{"a": 1', b'}'),
    (b'-', 1),
])
def test_json(json_grammar, prefix, expected):
    done = check(json_grammar, prefix)
    assert (len(done) if isinstance(expected, int) else done) == expected
    json.loads(prefix + done)


def test_already_complete_and_terminated(json_grammar, tiny_compiler):
    m = GrammarMatcher(json_grammar)
    assert m.accept_string(b"[1, 2]") and m.shortest_completion() == b""
    assert m.accept_string(b" ") and m.shortest_completion() == b""  # trailing whitespace
    assert m.accept_token(2) and m.is_terminated()  # SmolLM2's <|im_end|> stops
    assert m.shortest_completion() is None
    m.rollback(1)
    assert m.shortest_completion() == b""
    m = GrammarMatcher(tiny_compiler.compile_grammar('root ::= "ab"*'))
    assert m.shortest_completion() == b""
    assert m.accept_string("a") and m.shortest_completion() == b"b"


@pytest.fixture()
def tiny_compiler(core):
    return compiler_for(small_vocab(ALPHABET), core)


@pytest.mark.parametrize("pattern, prefix, expected", [
    (r"\d{4}-\d{2}-\d{2}", b"2024-1", b"0-00"),  # regex with a required tail
    (r"(abc|a)*c", b"ab", b"cc"),
    (r"a+(bc)?\(", b"", b"a("),
    (r"[ab]*(c|\(\()", b"ab", b"c"),
    (r"é+x", b"", "éx".encode()),
    (r"é+x", "é".encode()[:1], "\xa9x".encode("latin-1")),  # mid-character
])
def test_regex(tiny_compiler, pattern, prefix, expected):
    compiled = tiny_compiler.compile_regex(pattern)
    assert check(compiled, prefix) == expected


@pytest.mark.parametrize("ebnf, prefix, expected", [
    # recursion: close every open parenthesis
    ('root ::= "a" | "(" root ")"', b"(((", b"a)))"),
    # nondeterminism: two live stacks, the shorter finishes through the other branch
    ('root ::= x "ccc" | x "b"\nx ::= "a" x | "a"', b"aaa", b"b"),
    # empty rules and a rule that only the long way can finish
    ('root ::= e "(" e t\ne ::= "" | "a"\nt ::= "b" t | "c" "c"', b"(", b"cc"),
    # a tail call (right recursion) under a non-tail call
    ('root ::= "(" list ")"\nlist ::= "a" | "a" "b" list', b"(ab", b"a)"),
])
def test_ebnf(tiny_compiler, ebnf, prefix, expected):
    assert check(tiny_compiler.compile_grammar(ebnf), prefix) == expected


def test_json_schema_fills_required_properties(core, smollm2):
    schema = {"type": "object", "required": ["name", "tags", "box"], "properties": {
        "name": {"type": "string", "minLength": 2},
        "tags": {"type": "array", "items": {"enum": ["alpha", "beta"]}, "minItems": 1},
        "box": {"type": "object", "required": ["w"], "properties": {"w": {"type": "integer"}}},
        "note": {"type": "string"}}}
    compiled = compiler_for(smollm2, core).compile_json_schema(schema)
    for prefix in [b"", b'{"name": "A', b'{"name": "Ab", "tags": ["al', b'{"name": "Ab", "tags": ["beta"], "box": {']:
        doc = json.loads(prefix + check(compiled, prefix))
        assert set(schema["required"]) <= set(doc) and len(doc["name"]) >= 2 and doc["tags"]


def test_long_completion_needs_a_bigger_buffer(tiny_compiler):
    # 300 bytes: longer than the binding's first buffer, so it asks again with the right size.
    compiled = tiny_compiler.compile_regex("a{300}b")
    assert check(compiled, b"aa") == b"a" * 298 + b"b"


def test_too_long_to_spell_out(tiny_compiler):
    # Each rule doubles the one below: the shortest string is 2**26 bytes.
    rules = [f"r{i} ::= r{i + 1} r{i + 1}" for i in range(26)] + ['r26 ::= "a"']
    ebnf = "root ::= r0\n" + "\n".join(rules)
    compiled = tiny_compiler.compile_grammar(ebnf)
    with pytest.raises(GrammarLimitError, match="too long"):
        GrammarMatcher(compiled).shortest_completion()


@pytest.mark.parametrize("count", [2**40, 2**63, 10**30])
def test_a_completion_beyond_any_length_is_too_long_not_missing(core, smollm2, count):
    """minItems 2**63 is satisfiable: its distances once saturated at "cannot complete", and the
    fuzz walk found no completion for a text the mask led to. Now they saturate at a finite
    length, which is too long to spell out."""
    compiled = compiler_for(smollm2, core).compile_json_schema({"type": "array", "minItems": count})
    m = GrammarMatcher(compiled)
    assert m.accept_string("[1, 2")
    with pytest.raises(GrammarLimitError, match="too long"):
        m.shortest_completion()
    # Rules doubling 70 times: 2**70 bytes, past any int64 sum.
    rules = [f"r{i} ::= r{i + 1} r{i + 1}" for i in range(70)] + ['r70 ::= "a"']
    huge = compiler_for(smollm2, core).compile_grammar("root ::= r0\n" + "\n".join(rules))
    with pytest.raises(GrammarLimitError, match="too long"):
        GrammarMatcher(huge).shortest_completion()

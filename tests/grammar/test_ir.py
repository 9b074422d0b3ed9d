"""The IR helpers: char_class against brute-force UTF-8, serialize against a decoder."""

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trellis.errors import GrammarError
from trellis.grammar import ir

# Code points where UTF-8 lengths, lead bytes or the surrogate gap change.
_EDGES = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xCFFF, 0xD000, 0xD7FF, 0xD800, 0xDBFF,
          0xDC00, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF]
_code_points = st.one_of(
    st.sampled_from(_EDGES).flatmap(
        lambda e: st.integers(max(0, e - 2), min(ir.MAX_CODE_POINT, e + 2))),
    st.integers(0, ir.MAX_CODE_POINT),
)
_ranges = st.lists(st.tuples(_code_points, _code_points).map(sorted).map(tuple), max_size=5)


def ends(expr, data, pos):
    """End positions of `expr` matched at data[pos:] (finite IR only: no Ref)."""
    if isinstance(expr, ir.Bytes):
        return {pos + len(expr.data)} if data.startswith(expr.data, pos) else set()
    if isinstance(expr, ir.ByteSet):
        ok = pos < len(data) and any(lo <= data[pos] <= hi for lo, hi in expr.ranges)
        return {pos + 1} if ok else set()
    if isinstance(expr, ir.Seq):
        here = {pos}
        for item in expr.items:
            here = {e for p in here for e in ends(item, data, p)}
        return here
    if isinstance(expr, ir.Alt):
        return {e for item in expr.items for e in ends(item, data, pos)}
    raise TypeError(expr)


def matches(expr, data: bytes) -> bool:
    return len(data) in ends(expr, data, 0)


def count(expr) -> int:
    """Number of strings if alternatives are disjoint (an overlap makes it too large)."""
    if isinstance(expr, ir.ByteSet):
        return sum(hi - lo + 1 for lo, hi in expr.ranges)
    if isinstance(expr, ir.Bytes):
        return 1
    if isinstance(expr, ir.Seq):
        n = 1
        for item in expr.items:
            n *= count(item)
        return n
    return sum(count(item) for item in expr.items)


def in_set(cp, ranges, negate):
    inside = any(lo <= cp <= hi for lo, hi in ranges)
    return inside != negate and not 0xD800 <= cp <= 0xDFFF


def single_code_point(data: bytes):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return ord(text) if len(text) == 1 else None


@settings(max_examples=150, deadline=None)
@given(_ranges, st.booleans(), st.randoms(use_true_random=False))
def test_char_class_matches_utf8_encoding(ranges, negate, rnd):
    expr = ir.char_class(ranges, negate)
    members = ir.negate_ranges(ranges, ir.MAX_CODE_POINT) if negate else ir.normalize_ranges(ranges)
    surrogates = lambda lo, hi: max(0, min(hi, 0xDFFF) - max(lo, 0xD800) + 1)  # noqa: E731
    total = sum(hi - lo + 1 - surrogates(lo, hi) for lo, hi in members)
    # Exactly as many strings as code points, and (below) every sampled one is right.
    assert count(expr) == total
    probes = {e + d for lo, hi in ranges for e in (lo, hi) for d in (-1, 0, 1)} | set(_EDGES)
    probes |= {rnd.randint(0, ir.MAX_CODE_POINT) for _ in range(30)}
    for cp in probes:
        if 0 <= cp <= ir.MAX_CODE_POINT and not 0xD800 <= cp <= 0xDFFF:
            assert matches(expr, chr(cp).encode()) == in_set(cp, ranges, negate), hex(cp)
    # Arbitrary bytes, including invalid UTF-8 (overlong, surrogates, stray continuations).
    for _ in range(40):
        data = bytes(rnd.randint(0, 255) for _ in range(rnd.randint(1, 4)))
        cp = single_code_point(data)
        assert matches(expr, data) == (cp is not None and in_set(cp, ranges, negate)), data


@pytest.mark.parametrize("ranges,negate", [
    ([(0x22, 0x22), (0x5C, 0x5C), (0, 0x1F)], True),   # JSON string character
    ([(0x80, 0x7FF)], False),
    ([(0x41, 0x5A), (0x3B1, 0x3C9)], False),
])
def test_char_class_exhaustive_up_to_two_bytes(ranges, negate):
    expr = ir.char_class(ranges, negate)
    for first in range(256):
        for data in [bytes([first])] + [bytes([first, b]) for b in range(0x80, 0xC0)] + [
            bytes([first, 0x41])
        ]:
            cp = single_code_point(data)
            assert matches(expr, data) == (cp is not None and in_set(cp, ranges, negate)), data


def test_char_class_ascii_is_one_byte_set():
    assert ir.char_class([(0x30, 0x39), (0x61, 0x66)]) == ir.ByteSet(((0x30, 0x39), (0x61, 0x66)))
    assert ir.char_class([]) == ir.NOTHING
    assert ir.char_class([(0xD800, 0xDFFF)]) == ir.NOTHING


# ---- serialize ------------------------------------------------------------------------


def deserialize(words, names):
    """Independent decoder of the documented word layout."""
    assert words[0] == ir.MAGIC and words[1] == ir.VERSION
    n_rules, root = words[2], words[3]

    def node(off):
        tag = words[off]
        if tag == ir.BYTES:
            return ir.Bytes(bytes(list(words[off + 2: off + 2 + words[off + 1]])))
        if tag == ir.BYTESET:
            flat = words[off + 2: off + 2 + 2 * words[off + 1]]
            return ir.ByteSet(tuple(zip(flat[0::2].tolist(), flat[1::2].tolist())))
        if tag in (ir.SEQ, ir.ALT):
            children = words[off + 2: off + 2 + words[off + 1]].tolist()
            assert all(c < off for c in children), "a child must precede its parent"
            items = tuple(node(c) for c in children)
            return ir.Seq(items) if tag == ir.SEQ else ir.Alt(items)
        if tag == ir.REPEAT:
            lo, hi, child = words[off + 1: off + 4]
            assert child < off
            return ir.Repeat(node(child), lo, None if hi == -1 else hi)
        if tag == ir.REF:
            return ir.Ref(names[words[off + 1]])
        if tag == ir.REGION:
            assert words[off + 1] < off
            return ir.Region(node(words[off + 1]))
        if tag == ir.AUTOMATON:
            n, m = words[off + 1: off + 3]
            flat = words[off + 3 + n: off + 3 + n + 4 * m].tolist()
            return ir.Automaton(list(zip(flat[0::4], flat[1::4], flat[2::4], flat[3::4])),
                                [bool(a) for a in words[off + 3: off + 3 + n]])
        if tag == ir.MACHINE:
            n, m = words[off + 1: off + 3]
            flat = words[off + 3 + n: off + 3 + n + 3 * m].tolist()
            assert all(c < off for c in flat[1::3])
            return ir.Machine([(a, node(c), b) for a, c, b in zip(flat[0::3], flat[1::3], flat[2::3])],
                              [bool(a) for a in words[off + 3: off + 3 + n]])
        if tag == ir.AND:
            n, escaped = words[off + 1: off + 3]
            pairs = words[off + 3: off + 3 + 2 * n].tolist()
            assert all(c < off for c in pairs[0::2])
            return ir.And(tuple(node(c) for c in pairs[0::2]), tuple(bool(w) for w in pairs[1::2]), bool(escaped))
        raise AssertionError(f"bad tag {tag} at {off}")

    table = len(words) - n_rules  # the rule table comes last
    rules = {names[i]: node(words[table + i]) for i in range(n_rules)}
    return ir.Grammar(rules, names[root])


def _assert_written(grammar: ir.Grammar, back: ir.Grammar) -> None:
    """What serialize writes, by definition: the rules the root reaches, each with its body
    unless another of them with an equal body keeps it (then a reference to that one); the
    others match nothing."""
    reached, todo = set(), [grammar.root]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        stack = [grammar.rules[name]]
        while stack:
            e = stack.pop()
            if isinstance(e, ir.Ref):
                todo.append(e.name)
            elif isinstance(e, (ir.Seq, ir.Alt)):
                stack.extend(e.items)
            elif isinstance(e, (ir.Repeat, ir.Region)):
                stack.append(e.item)
            elif isinstance(e, ir.And):
                stack.extend(e.items)
            elif isinstance(e, ir.Machine):
                stack.extend(x for _, x, _ in e.edges)
    assert back.root == grammar.root and list(back.rules) == list(grammar.rules)
    keepers: dict = {}
    for name, body in grammar.rules.items():
        if name not in reached:
            assert back.rules[name] == ir.Alt(()), name
        elif back.rules[name] == body:
            assert keepers.setdefault(body, name) == name, f"{name} and {keepers[body]} both kept {body}"
    for name in reached:
        if back.rules[name] != grammar.rules[name]:
            assert back.rules[name] == ir.Ref(keepers[grammar.rules[name]]), name


def test_serialize_round_trip():
    from trellis.grammar.builtin_json import builtin_json_grammar
    from trellis.grammar.ebnf import WEBLLM_JSON_EBNF, parse_ebnf

    extra = ir.Grammar({
        "start": ir.seq(ir.Ref("x"), ir.repeat(ir.literal("ab"), 2, 5), ir.EMPTY, ir.NOTHING,
                        ir.Machine([(0, ir.Ref("x"), 1), (1, ir.literal("ab"), 0), (1, ir.EMPTY, 1)], [False, True])),
        "x": ir.alt(ir.char_class([(0x100, 0x10FFFF)]), ir.repeat(ir.Ref("start"), 0, None)),
        "dead": ir.literal("d"), "y": ir.alt(ir.char_class([(0x100, 0x10FFFF)]), ir.repeat(ir.Ref("start"), 0, None)),
    }, root="start")
    for grammar in (parse_ebnf(WEBLLM_JSON_EBNF), builtin_json_grammar(), extra):
        words, names = grammar.serialize()
        assert words.typecode == "i" and names == list(grammar.rules)
        _assert_written(grammar, deserialize(words, names))
    back = deserialize(*extra.serialize())
    assert back.rules["dead"] == ir.Alt(()) and back.rules["y"] == ir.Alt(()) and back.rules["x"] == extra.rules["x"]


def test_serialize_writes_equal_rules_as_aliases():
    rules = {"root": ir.Seq((ir.Ref("x1"), ir.Ref("y1"), ir.Ref("y2"))), "dead": ir.Bytes(b"x"),
             "x1": ir.Bytes(b"x"), "x2": ir.Bytes(b"x"),
             "y1": ir.Seq((ir.Bytes(b"y"), ir.Ref("x1"))), "y2": ir.Seq((ir.Bytes(b"y"), ir.Ref("x2")))}
    back = deserialize(*ir.Grammar(rules).serialize())
    # x2 equals x1: an alias; y2 equals y1 only once x2 were renamed: kept apart; dead: not reached
    assert back.rules == {"root": rules["root"], "dead": ir.Alt(()), "x1": ir.Bytes(b"x"), "x2": ir.Ref("x1"),
                          "y1": rules["y1"], "y2": rules["y2"]}


def test_serialize_shares_equal_subtrees():
    a = ir.char_class([(0x4E00, 0x9FFF), (0x41, 0x41)])
    assert isinstance(a, ir.Alt)
    words, _ = ir.Grammar({"root": ir.Seq((a, a, a))}).serialize()
    single, _ = ir.Grammar({"root": a}).serialize()
    assert len(words) - len(single) == 2 + 3  # only the SEQ node is new


def test_prelude_rules_come_first_written_once(compiler):
    from tests.grammar.conftest import accepts

    ws = ir.repeat(ir.byte_set([(0x20, 0x20)]), 0, 3)
    value = ir.alt(ir.literal("v"), ir.seq(ir.literal("["), ir.Ref("p.value"), ir.Ref("ws"), ir.literal("]")))
    prelude = ir.Prelude(ir.literal("s"), rules={"ws": ws, "p.value": value})
    rules = {"root": ir.seq(ir.Ref("p.value"), ir.Ref("ws"), ir.Ref("same")), "same": ir.alt(ir.literal("v"), ir.seq(
        ir.literal("["), ir.Ref("p.value"), ir.Ref("ws"), ir.literal("]"))), "ws": ws, "p.value": value}
    words, names = ir.Grammar(rules, prelude=prelude).serialize()
    assert names == ["ws", "p.value", "root", "same"]
    alone, _ = ir.Grammar({"root": ir.Ref("p.value"), "ws": ws, "p.value": value}, prelude=prelude).serialize()
    body_end = max(words[-4:-2]) + 1  # the prelude's words are the same in every grammar that holds it
    assert words[4:body_end] == alone[4:body_end]
    back = deserialize(words, names)
    assert back.rules["p.value"] == value and back.rules["ws"] == ws and back.rules["same"] == ir.Ref("p.value")
    grammar = compiler.compile_ir(ir.Grammar(rules, prelude=prelude))
    assert accepts(grammar, "[[v ]  ] v") and not accepts(grammar, "[v")
    with pytest.raises(GrammarError, match="prelude"):  # an equal rule that is not the prelude's own
        ir.Grammar({**rules, "ws": ir.repeat(ir.byte_set([(0x20, 0x20)]), 0, 3)}, prelude=prelude).serialize()


def test_serialize_errors_are_grammar_errors():
    with pytest.raises(GrammarError):
        ir.Grammar({"root": ir.Ref("missing")}).serialize()
    with pytest.raises(GrammarError):
        ir.Grammar({"a": ir.EMPTY}).serialize()
    with pytest.raises(GrammarError, match="undefined rule 'missing'"):  # in a rule the root does not reach
        ir.Grammar({"root": ir.EMPTY, "dead": ir.seq(ir.literal("a"), ir.Ref("missing"))}).serialize()


def test_random_nested_trees_round_trip():
    rnd = random.Random(7)

    def tree(depth):
        kind = rnd.randrange(6 if depth else 3)
        if kind == 0:
            return ir.literal(bytes(rnd.randrange(256) for _ in range(rnd.randrange(4))))
        if kind == 1:
            return ir.byte_set([tuple(sorted((rnd.randrange(256), rnd.randrange(256))))])
        if kind == 2:
            return ir.Ref(rnd.choice("abc"))
        items = tuple(tree(depth - 1) for _ in range(rnd.randrange(4)))
        if kind == 3:
            return ir.Seq(items)
        if kind == 4:
            return ir.Alt(items)
        lo = rnd.randrange(3)
        return ir.Repeat(tree(depth - 1), lo, rnd.choice([None, lo, lo + 2]))

    for _ in range(50):
        grammar = ir.Grammar({name: tree(4) for name in "abc"}, root="b")
        _assert_written(grammar, deserialize(*grammar.serialize()))


def test_nodes_compare_by_structure_whatever_their_caches():
    a = ir.seq(ir.literal("x"), ir.repeat(ir.Ref("r"), 0, None))
    b = ir.Seq((ir.Bytes(b"x"), ir.Repeat(ir.Ref("r"), 0, None)))
    hash(a)  # fills a's hash cache
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert a != ir.Alt(a.items) and hash(ir.Seq(())) != hash(ir.Alt(()))
    # structural_tag rebuilds nodes with dataclasses.replace
    assert dataclasses.replace(a.items[1], item=ir.Ref("s")) == ir.Repeat(ir.Ref("s"), 0, None)
    assert ir.literal("ab") is ir.literal("ab") and ir.literal("") is ir.EMPTY

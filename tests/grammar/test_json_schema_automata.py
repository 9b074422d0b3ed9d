"""The JSON Schema front-end's string and number automata (json_schema/_dfa.py) against
independent oracles: Python's `re` for patterns, `fractions` for multipleOf, and the
character-level construction the byte-level searches replace (their minimal products with
valid UTF-8 must be the same automaton)."""

from __future__ import annotations

import random
import re
from decimal import Decimal
from fractions import Fraction

import pytest

from trellis.errors import UnsupportedSchemaError
from trellis.grammar import ir
from trellis.grammar.json_schema import _dfa, _numbers, _text

# Python's `re` reads these as ECMA-262 does (no classes or escapes that differ)
PATTERNS = ["nightly|beta|devedition|release|esr|unbranded-release", "^(http)|(https)://(.*)$", "é+b",
            "^[a-z0-9-]+:[a-z0-9.-]+$", "ab?c|^x", "[^a]é$", "(foo|bar)baz", "^$", "a.c"]
ALPHABET = ["a", "b", "c", "é", "x", "-", ":", "/", ".", "ht", "tp", "s", "foo", "bar", "baz", "beta", "esr", "日",
            "\U0001F600", "0"]


def _strings(seed, n=400, longest=8):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest))) for _ in range(n)]


def _char_level(pattern: str) -> _dfa.Dfa:
    """The search automaton with any *characters* around the match (the construction before)."""
    return _dfa.from_ir(_text.pattern_expr(pattern, ""))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_byte_level_searches_find_what_re_finds(pattern):
    dfa = _text.pattern_dfa(pattern, "")
    for s in _strings(pattern):
        assert dfa.matches(s.encode()) == bool(re.search(pattern, s)), (pattern, s)


def _any_string() -> _dfa.Dfa:
    return _dfa.from_ir(_text.ANY_STRING)


def _length(lo: int, hi: int | None, ascii: bool) -> _dfa.Dfa:
    """lo..hi characters (ASCII ones only with `ascii`)."""
    return _dfa.from_ir(ir.repeat(ir.ByteSet(((0, 0x7F),)) if ascii else _text.ANY_CHAR, lo, hi))


def test_a_search_for_several_words_stays_small():
    # each word found is one accepting state for all: the character-level subset construction
    # tracked every combination of words found (3601 states)
    assert len(_text.pattern_dfa(PATTERNS[0], "").trans) < 80


@pytest.mark.parametrize("pattern", ["beta|esr|rc"] + PATTERNS[1:])  # the first one is slow character-level
def test_byte_level_products_equal_the_character_level_ones(pattern):
    valid = _any_string()
    for wants in ([True, True], [True, False]):
        new = _dfa.minimize(_dfa.product([valid, _text.pattern_dfa(pattern, "")], wants))
        old = _dfa.minimize(_dfa.product([valid, _char_level(pattern)], wants))
        assert (new.trans, new.accept) == (old.trans, old.accept), (pattern, wants)


@pytest.mark.parametrize("lo,hi,ascii", [(0, 6, False), (3, None, False), (2, 5, True)])
def test_products_with_lengths_and_negations_against_re(lo, hi, ascii):
    want, refuse = PATTERNS[4], PATTERNS[5]
    comps = [_any_string(), _text.pattern_dfa(want, ""), _text.pattern_dfa(refuse, ""),
             _length(lo, hi, ascii)]
    d = _dfa.product(comps, [True, True, False, True])
    for s in _strings(f"{lo} {hi}", 800):
        ok = bool(re.search(want, s)) and not re.search(refuse, s) and lo <= len(s) and (hi is None or len(s) <= hi)
        ok = ok and (not ascii or s.isascii())
        assert d.matches(s.encode()) == ok, s


@pytest.mark.parametrize("m", ["256", "0.25", "7", "1000", "1.5"])
def test_multiple_automata_are_minimal_and_exact(m):
    m = Decimal(m)
    d = _numbers.multiple_dfa(m, "")
    assert len(_dfa.minimize(d).trans) == len(d.trans)
    rng = random.Random(str(m))
    for _ in range(1500):
        k = rng.randint(-3000, 3000)
        text = rng.choice([str(k), str(k * m), f"{k}.{rng.randint(0, 99)}", f"{k * m}0", f"{k}.0"])
        assert d.matches(text.encode()) == (Fraction(text) / Fraction(m) == int(Fraction(text) / Fraction(m))), text


def test_number_products_are_minimized():
    base = _dfa.from_ir(_numbers.decimal_range(Decimal(1024), True, None, True))
    d = _dfa.intersect([base, _numbers.multiple_dfa(Decimal(256), "")], "multipleOf")
    assert len(d.trans) < 100  # 764 states before minimizing
    for v in range(-600, 5000, 7):
        for text in (str(v), f"{v}.0", f"{v}.5"):
            assert d.matches(text.encode()) == (Fraction(text) >= 1024 and Fraction(text) % 256 == 0), text


def test_contradictory_multiples_are_found_empty_without_a_product():
    """no_common_multiple against the numbers counted one by one in steps of 1/20 (every multiple
    below has a denominator dividing 20), bounds inclusive or not, integers only or not."""
    rng = random.Random(7)
    choices = [Decimal(x) for x in ("1", "2", "3", "0.5", "0.25", "0.15", "7", "12", "0.1", "33")]
    for _ in range(3000):
        a, b = sorted(Fraction(rng.randint(-400, 400), 20) for _ in range(2))
        li, hinc, integer = rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.5
        multiples = rng.sample(choices, rng.randint(1, 3))
        found = any((li or x != a) and (hinc or x != b) and (not integer or x.denominator == 1)
                    and all((x / Fraction(m)).denominator == 1 for m in multiples)
                    for x in (a + Fraction(k, 20) for k in range(int((b - a) * 20) + 1)))
        lo, hi = Decimal(a.numerator) / a.denominator, Decimal(b.numerator) / b.denominator
        assert _numbers.no_common_multiple(lo, li, hi, hinc, multiples, integer) == (not found), (a, b, multiples)
    assert not _numbers.no_common_multiple(Decimal(-300), False, None, True, [Decimal(33), Decimal(101)], True)
    # 1,000 multiples of 999 digits: their lcm has about a million digits, so the step stops at
    # the range's width and the one multiple within is checked against the rest
    big = [Decimal(random.Random(k).randrange(10 ** 998, 10 ** 999) | 1) for k in range(1000)]
    assert _numbers.no_common_multiple(Decimal(1), True, Decimal(10) ** 998, True, big, True)
    assert not _numbers.no_common_multiple(Decimal(1), True, big[0], True, [big[0]] * 1000, True)


def test_products_keep_refusing_what_is_too_big():
    # "a" found or not yet, times 3001 counts: more than MAX_STATES
    with pytest.raises(UnsupportedSchemaError, match="automaton states"):
        _dfa.product([_any_string(), _text.pattern_dfa("a", ""), _length(0, 3000, True)],
                     [True, True, True])


def test_equal_string_constraints_share_one_automaton(compiler):
    # Three properties with one pattern and length, a fourth with another length: two
    # intersections (a rule each, whose product the core builds once), and every property still
    # checked on its own text.
    from tests.grammar.conftest import accepts
    from trellis.grammar.frontends import grammar_of

    same = {"type": "string", "pattern": "^a.*z$", "maxLength": 5}
    schema = {"type": "object", "properties": {"p": same, "q": same, "r": dict(same),
                                               "s": {**same, "maxLength": 3}},
              "required": ["p", "q", "r", "s"], "additionalProperties": False}
    rules = grammar_of("json_schema", schema).rules
    assert sum(isinstance(body, ir.And) for body in rules.values()) == 2
    g = compiler.compile_json_schema(schema)
    assert accepts(g, '{"p": "abz", "q": "az", "r": "a12z", "s": "a1z"}')
    for bad in ('{"p": "abz", "q": "a1234z", "r": "az", "s": "az"}', '{"p": "az", "q": "az", "r": "az", "s": "a12z"}',
                '{"p": "az", "q": "az", "r": "abc", "s": "az"}'):
        assert not accepts(g, bad), bad


@pytest.mark.parametrize("pattern", PATTERNS + ["a[ab]{5}$", "\\p{L}x"])
def test_lazy_searches_match_as_the_whole_automaton_does(pattern):
    # pattern_search builds only the states its texts reach; the answers are the full DFA's
    whole = _dfa.from_ir(_text.pattern_search_expr(pattern, ""), compact="\\p" in pattern)
    lazy = _dfa.LazyDfa(_text.pattern_search_expr(pattern, ""), compact="\\p" in pattern)
    for s in _strings(pattern, longest=16) + ["b" + "a" * 13, "a" * 13, "éx", "xx"]:
        assert lazy.matches(s.encode()) == whole.matches(s.encode()), (pattern, s)
        if "\\p" not in pattern:
            assert _text.pattern_search(pattern, s, "") == bool(re.search(pattern, s)), (pattern, s)


def test_values_are_tested_against_a_pattern_too_big_to_build_whole(compiler):
    # The search for `a[ab]{12}$` has 2^13 states, more than MAX_STATES: a grammar that needs it
    # whole is refused, but testing an enum's values against it takes a few of them.
    from tests.grammar.conftest import accepts
    with pytest.raises(UnsupportedSchemaError, match="automaton states"):
        _text.pattern_dfa("a[ab]{12}$", "")
    g = compiler.compile_json_schema({"enum": ["xa" + "b" * 12, "a" + "b" * 11, "zzab" + "a" * 11, 7],
                                      "pattern": "a[ab]{12}$"})
    assert accepts(g, '"xa' + "b" * 12 + '"') and accepts(g, '"zzab' + "a" * 11 + '"') and accepts(g, "7")
    assert not accepts(g, '"a' + "b" * 11 + '"')
    for s in _strings("big", longest=20) + ["b" + "a" * 13, "a" * 13]:
        assert _text.pattern_search("a[ab]{12}$", s, "") == bool(re.search("a[ab]{12}$", s)), s
    # A text that alone meets more states than the whole automaton may have is refused as the
    # whole automaton was: a long enough random text meets most of the 2^13.
    rng = random.Random(5)
    text = "".join(rng.choice("ab") for _ in range(60_000))
    with pytest.raises(UnsupportedSchemaError, match="automaton states") as e:
        compiler.compile_json_schema({"properties": {"p": {"enum": [text], "pattern": "a[ab]{12}$"}}})
    assert e.value.keyword == "pattern" and e.value.pointer == "/properties/p"

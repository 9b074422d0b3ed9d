"""Numbers for the JSON Schema front-end: exact digit-level languages for ranges and multiples.

Bounds and `multipleOf` are compared with exact decimal arithmetic (`decimal.Decimal` of the
number as written in the schema), never with floats. A bounded number is written without an
exponent (a restriction of the output, never a wrong acceptance); an unbounded one may use
any JSON number syntax. An integer may end in `.0`, `.00`, ... because 1.0 is an integer in
JSON Schema 2020-12.
"""

from __future__ import annotations

from functools import lru_cache

from decimal import Decimal
from fractions import Fraction
from math import gcd, lcm

from ...errors import UnsupportedSchemaError
from .. import ir
from . import _dfa

DIGIT = ir.byte_set([(0x30, 0x39)])
NONZERO = ir.byte_set([(0x31, 0x39)])
UINT = ir.alt(ir.literal("0"), ir.seq(NONZERO, ir.repeat(DIGIT, 0, None)))
FRAC = ir.seq(ir.literal("."), ir.repeat(DIGIT, 1, None))
EXP = ir.seq(ir.byte_set([(0x45, 0x45), (0x65, 0x65)]), ir.repeat(ir.byte_set([(0x2B, 0x2B), (0x2D, 0x2D)]), 0, 1),
             ir.repeat(DIGIT, 1, None))
MINUS = ir.repeat(ir.literal("-"), 0, 1)
NUMBER = ir.seq(MINUS, UINT, ir.repeat(FRAC, 0, 1), ir.repeat(EXP, 0, 1))
ZERO_FRAC = ir.repeat(ir.seq(ir.literal("."), ir.repeat(ir.literal("0"), 1, None)), 0, 1)
INTEGER = ir.seq(MINUS, UINT, ZERO_FRAC)
PLAIN_NUMBER = ir.seq(MINUS, UINT, ir.repeat(FRAC, 0, 1))  # no exponent
NON_INTEGER = ir.seq(MINUS, UINT, ir.literal("."), ir.repeat(DIGIT, 0, None), NONZERO, ir.repeat(DIGIT, 0, None))


def to_decimal(value, keyword: str, pointer: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnsupportedSchemaError(f"{keyword} must be a number", keyword, pointer)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise UnsupportedSchemaError(f"{keyword} must be finite", keyword, pointer)
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


# ---- digit strings -------------------------------------------------------------------------


def _digits(lo: str, hi: str) -> ir.Expr:
    return ir.byte_set([(ord(lo), ord(hi))])


def _same_length(a: str, b: str) -> ir.Expr:
    """Digit strings of len(a) == len(b) between a and b (inclusive, lexicographic)."""
    n = len(a)
    if n == 0:
        return ir.EMPTY
    if a == b:
        return ir.literal(a)
    if a[0] == b[0]:
        return ir.seq(ir.literal(a[0]), _same_length(a[1:], b[1:]))
    if a[1:] == "0" * (n - 1) and b[1:] == "9" * (n - 1):
        return ir.seq(_digits(a[0], b[0]), ir.repeat(DIGIT, n - 1, n - 1))
    parts = [ir.seq(ir.literal(a[0]), _same_length(a[1:], "9" * (n - 1)))]
    if ord(b[0]) - ord(a[0]) > 1:
        parts.append(ir.seq(_digits(chr(ord(a[0]) + 1), chr(ord(b[0]) - 1)), ir.repeat(DIGIT, n - 1, n - 1)))
    parts.append(ir.seq(ir.literal(b[0]), _same_length("0" * (n - 1), b[1:])))
    return ir.alt(*parts)


def uint_range(lo: int, hi: int | None) -> ir.Expr:
    """Non-negative integers in [lo, hi] (hi None: unbounded), no leading zeros."""
    if hi is not None and hi < lo:
        return ir.NOTHING
    parts = []
    top = len(str(lo)) if hi is None else len(str(hi))
    for n in range(len(str(lo)), top + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = 10 ** n - 1 if hi is None else min(hi, 10 ** n - 1)
        if a <= b:
            parts.append(_same_length(str(a).rjust(n, "0"), str(b)))
    if hi is None:
        parts.append(ir.seq(NONZERO, ir.repeat(DIGIT, top, None)))
    return ir.alt(*parts)


def integer_range(lo: int | None, hi: int | None) -> ir.Expr:
    """Integers in [lo, hi] (None: unbounded), as JSON integer text (no "-0")."""
    parts = []
    if hi is None or hi >= 0:
        parts.append(uint_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        top = -lo if lo is not None else None
        bottom = max(1, -hi) if hi is not None else 1
        if top is None or top >= bottom:
            parts.append(ir.seq(ir.literal("-"), uint_range(bottom, top)))
    return ir.alt(*parts)


# ---- decimals ---------------------------------------------------------------------------------


def _split(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    text = format(d, "f")
    whole, _, frac = text.partition(".")
    return int(whole), frac.rstrip("0")


class _Fractions:
    """Fraction digit strings D (0.D compared with the bounds), memoized by bound state."""

    def __init__(self):
        self.memo: dict = {}

    @staticmethod
    def empty_ok(lo, li, hi, hinc) -> bool:
        if lo is not None and (lo.strip("0") or not li):
            return False  # 0 is below a positive lower bound, or not above an exclusive 0
        if hi is not None and not hi.strip("0") and not hinc:
            return False
        return True

    def any_digits(self, lo, li, hi, hinc) -> ir.Expr:
        """D (possibly empty) within the bounds."""
        return ir.alt(*([ir.EMPTY] if self.empty_ok(lo, li, hi, hinc) else []), self.nonempty(lo, li, hi, hinc))

    def nonempty(self, lo, li, hi, hinc) -> ir.Expr:
        if lo == "" and li:
            lo = None
        key = (lo, li, hi, hinc)
        if key in self.memo:
            return self.memo[key]
        if lo is None and hi is None:
            out = ir.repeat(DIGIT, 1, None)
        elif lo == "" and hi is None:  # exclusive 0: some nonzero digit
            out = ir.seq(ir.repeat(ir.literal("0"), 0, None), NONZERO, ir.repeat(DIGIT, 0, None))
        elif hi == "":  # 0.D <= 0 (or < 0): only zeros, if the lower bound allows 0
            ok = hinc and (lo is None or (lo == "" and li))
            out = ir.repeat(ir.literal("0"), 1, None) if ok else ir.NOTHING
        else:
            groups: dict = {}
            for d in "0123456789":
                lo2 = hi2 = None
                if lo is not None:
                    l0 = lo[0] if lo else "0"
                    if d < l0:
                        continue
                    lo2 = lo[1:] if d == l0 else None
                if hi is not None:
                    h0 = hi[0] if hi else "0"
                    if d > h0:
                        continue
                    hi2 = hi[1:] if d == h0 else None
                groups.setdefault((lo2, hi2), []).append(ord(d))
            parts = []
            for (lo2, hi2), ds in groups.items():
                parts.append(ir.seq(ir.byte_set([(b, b) for b in ds]), self.any_digits(lo2, li, hi2, hinc)))
            out = ir.alt(*parts)
        self.memo[key] = out
        return out


def magnitude_range(lo: Decimal, li: bool, hi: Decimal | None, hinc: bool) -> ir.Expr:
    """Non-negative numbers m (text `uint(.digits)?`) with lo <(=) m <(=) hi; lo >= 0."""
    if hi is not None and (hi < lo or (hi == lo and not (li and hinc))):
        return ir.NOTHING
    fr = _Fractions()
    li_int, lf = _split(lo)
    parts = []

    def with_frac(int_expr, flo, fli, fhi, fhinc):
        frac = ir.alt(*([ir.EMPTY] if fr.empty_ok(flo, fli, fhi, fhinc) else []),
                      ir.seq(ir.literal("."), fr.nonempty(flo, fli, fhi, fhinc)))
        return ir.seq(int_expr, frac)

    if hi is None:
        parts.append(with_frac(ir.literal(str(li_int)), lf, li, None, True))
        parts.append(with_frac(uint_range(li_int + 1, None), None, True, None, True))
    else:
        hi_int, hf = _split(hi)
        if hi_int == li_int:
            parts.append(with_frac(ir.literal(str(li_int)), lf, li, hf, hinc))
        else:
            parts.append(with_frac(ir.literal(str(li_int)), lf, li, None, True))
            if hi_int - li_int > 1:
                parts.append(with_frac(uint_range(li_int + 1, hi_int - 1), None, True, None, True))
            parts.append(with_frac(ir.literal(str(hi_int)), None, True, hf, hinc))
    return ir.alt(*parts)


def decimal_range(lo: Decimal | None, li: bool, hi: Decimal | None, hinc: bool) -> ir.Expr:
    """Numbers (without exponent, no negative zero) in the interval."""
    parts = []
    zero = Decimal(0)
    # x >= 0, written without a sign
    if hi is None or hi > 0 or (hi == 0 and hinc):
        if lo is None or lo < 0:
            parts.append(magnitude_range(zero, True, hi, hinc))
        else:
            parts.append(magnitude_range(lo, li, hi, hinc))
    # x < 0, written "-m" with m > 0: -hi <(=) m <(=) -lo
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            m_lo, m_li = zero, False
        else:
            m_lo, m_li = -hi, hinc
        m_hi = None if lo is None else -lo
        parts.append(ir.seq(ir.literal("-"), magnitude_range(m_lo, m_li, m_hi, li)))
    return ir.alt(*parts)


# ---- multipleOf ------------------------------------------------------------------------------


def check_params(m: Decimal, pointer: str) -> tuple[int, int, int]:
    """The MULTIPLE_OF check's parameters for m > 0 (checks.h): P as two words, Q; m = P * 10^Q."""
    _, digits, exp = m.normalize().as_tuple()
    p = int("".join(map(str, digits)))
    if p >= 1 << 63 or not -(1 << 31) <= exp < 1 << 31:
        raise UnsupportedSchemaError(f"multipleOf {m} has too many digits", "multipleOf", pointer)
    hi, lo = p >> 32, p & 0xFFFFFFFF
    return hi, lo - (1 << 32) if lo >= 1 << 31 else lo, exp


def multiple_dfa(m: Decimal, pointer: str) -> _dfa.Dfa:
    """Number texts (digits, one '.', a leading '-') whose value is a multiple of m > 0.

    With m = p / 10^s: the digits of the integer part followed by the first s fraction digits
    (padded with zeros) form a multiple of p, and any later fraction digits are zeros.
    Minimized (a remainder modulo 256 needs few states: 10^8 is a multiple of it), which keeps
    its products with bounds small, and kept: the same multipleOf recurs.
    """
    sign, digits, exp = m.as_tuple()
    p = int("".join(map(str, digits)))
    s = -exp if exp < 0 else 0
    p *= 10 ** (exp if exp > 0 else 0)
    if p * (s + 2) > 3000:
        raise UnsupportedSchemaError(f"multipleOf {m} needs too many automaton states", "multipleOf", pointer)
    return _minimal_multiple_dfa(p, s)


@lru_cache(maxsize=64)
def _minimal_multiple_dfa(p: int, s: int) -> _dfa.Dfa:
    return _dfa.minimize(_multiple_dfa(p, s))


def _multiple_dfa(p: int, s: int) -> _dfa.Dfa:
    """Multiples of p / 10^s: the states read the remainders modulo p."""
    # states: ("i", r) integer part; ("f", k, r) k fraction digits read; ("z", r) trailing zeros
    index: dict = {}
    trans: list = []
    accept: list = []

    def state(key) -> int:
        if key not in index:
            index[key] = len(trans)
            trans.append([])
            kind, r = key[0], key[-1]
            k = key[1] if kind == "f" else (0 if kind == "i" else s)
            accept.append(kind != "start" and (r * 10 ** (s - k)) % p == 0)
        return index[key]

    start = state(("start", 0))
    todo = [("start", 0)]
    seen = {("start", 0)}
    while todo:
        key = todo.pop()
        src = index[key]
        edges = []
        kind, r = key[0], key[-1]
        if kind == "start":
            edges.append((0x2D, 0x2D, ("sign", 0)))
        if kind in ("start", "sign", "i"):
            for d in range(10):
                edges.append((0x30 + d, 0x30 + d, ("i", (r * 10 + d) % p)))
        if kind == "i":
            edges.append((0x2E, 0x2E, ("f", 0, r) if s else ("z", r)))
        if kind == "f":
            k = key[1]
            for d in range(10):
                nxt = ("f", k + 1, (r * 10 + d) % p) if k + 1 < s else ("z", (r * 10 + d) % p)
                edges.append((0x30 + d, 0x30 + d, nxt))
        if kind == "z":
            edges.append((0x30, 0x30, ("z", r)))
        for lo, hi, nxt in edges:
            t = state(nxt)
            trans[src].append((lo, hi, t))
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    # "sign" is not accepting; fix acceptance of the start/sign states
    for key, i in index.items():
        if key[0] in ("start", "sign"):
            accept[i] = False
    assert start == 0
    return _dfa.Dfa([_dfa._merge(sorted(t)) for t in trans], accept)


def is_multiple(value: Decimal, m: Decimal) -> bool:
    """Exact for any size (1e308 / 0.123456789 has more digits than a decimal context holds)."""
    return (Fraction(value) / Fraction(m)).denominator == 1


def common_step(multiples: list[Decimal], integer: bool = False, until: Fraction | None = None) -> tuple[Fraction, int]:
    """The least positive number (integer, when `integer`: a multiple of 1 too) that is a multiple
    of each of the first `used` of `multiples`: (it, used). For reduced fractions a/b the lcm is
    lcm(a)/gcd(b). All are used unless it passes `until` first (its digits can grow with every one)."""
    step = Fraction(1) if integer else Fraction(multiples[0])
    used = 0
    for m in multiples:
        if until is not None and step > until:
            break
        f = Fraction(m)
        step = Fraction(lcm(step.numerator, f.numerator), gcd(step.denominator, f.denominator))
        used += 1
    return step, used


def no_common_multiple(lo: Decimal | None, lo_inclusive: bool, hi: Decimal | None, hi_inclusive: bool,
                       multiples: list[Decimal], integer: bool) -> bool:
    """Whether no number (no integer, when `integer`) within the bounds is a multiple of every m
    in `multiples`: an early emptiness check that spares the automata products of contradictory
    multiples (each product explores its states before it finds none accepting). The common step
    is taken only until it passes the range's width; past it, one multiple of it at most lies
    within, checked against the multiples left (a thousand multiples of a thousand digits each
    would make a step of a million digits)."""
    if lo is None or hi is None or not multiples:
        return False  # multiples go on without end on an unbounded side
    low, high = Fraction(lo), Fraction(hi)
    step, used = common_step(multiples, integer, until=high - low)
    first = -(-low // step) * step  # the least multiple >= lo
    if first == low and not lo_inclusive:
        first += step
    rest = [Fraction(m) for m in multiples[used:]]
    return not any((x < high or (x == high and hi_inclusive)) and all((x / f).denominator == 1 for f in rest)
                   for x in (first, first + step))


def integer_bounds(lo: Decimal | None, lo_inclusive: bool, hi: Decimal | None,
                   hi_inclusive: bool) -> tuple[int | None, int | None]:
    """The integers within decimal bounds, as inclusive integer bounds (None: unbounded)."""
    ilo = ihi = None
    if lo is not None:
        ilo = int(lo.to_integral_value(rounding="ROUND_CEILING"))
        if not lo_inclusive and lo == lo.to_integral_value():
            ilo = int(lo) + 1
    if hi is not None:
        ihi = int(hi.to_integral_value(rounding="ROUND_FLOOR"))
        if not hi_inclusive and hi == hi.to_integral_value():
            ihi = int(hi) - 1
    return ilo, ihi


MAX_LISTED_MULTIPLES = 256


def checked_as_written(number: ir.Expr, checks: list[ir.Expr]) -> ir.Expr:
    """A number's expression (sequences, choices, repetitions of digits, '.', '-') with `checks`
    after each digit and point it writes (bounds may have thousands of digits: ir.rebuild)."""
    def byte_checked(b: int) -> ir.Expr:
        return ir.seq(ir.literal(chr(b)), *checks) if chr(b) in "0123456789." else ir.literal(chr(b))

    def build(e: ir.Expr, kids, new_kids) -> ir.Expr:
        t = type(e)
        if t is ir.Bytes:
            return ir.seq(*map(byte_checked, e.data))
        if t is ir.ByteSet:
            return ir.seq(e, *checks) if e.ranges and all(0x2E <= lo and hi <= 0x39 for lo, hi in e.ranges) else e
        if t is ir.Repeat:
            return ir.repeat(new_kids[0], e.min, e.max)
        if t is ir.Seq or t is ir.Alt:
            return (ir.seq if t is ir.Seq else ir.alt)(*new_kids)
        return e

    return ir.rebuild(number, build)


def checked_integer_multiples(ilo: int | None, ihi: int | None, multiples: list[Decimal],
                              pointer: str, zero_frac: ir.Expr = ZERO_FRAC) -> ir.Expr:
    """Integer texts in [ilo, ihi] that are multiples of every m of `multiples` (integers whose
    remainders are too many for an automaton), `zero_frac` (`.0+` or nothing) after them.

    The core checks the integer part when it ends. Digits can always extend an integer part
    towards an unbounded end to a multiple, so the check never leaves the text without a way on
    there. A side of zero with a bounded far end could: its multiples are listed when they are
    few; with more, a text ending close to the bound may still find no multiple to complete it.
    """
    checks = [ir.Check(ir.MULTIPLE_OF, check_params(m, pointer)) for m in multiples]
    step = int(common_step(multiples, integer=True)[0])

    def side(lo: int, hi: int | None, sign: str) -> ir.Expr:
        """Magnitudes lo..hi (lo >= 0), written after `sign`."""
        if hi is not None:
            if hi < lo:
                return ir.NOTHING
            first = -(-lo // step) * step
            if first > hi:
                return ir.NOTHING
            if (hi - first) // step < MAX_LISTED_MULTIPLES:
                return ir.alt(*(ir.literal(f"{sign}{v}") for v in range(first, hi + 1, step)))
        return ir.Region(ir.seq(ir.literal(sign), uint_range(lo, hi), *checks))

    parts = []
    if ihi is None or ihi >= 0:
        parts.append(side(max(ilo, 0) if ilo is not None else 0, ihi, ""))
    if ilo is None or ilo < 0:
        parts.append(side(max(1, -ihi) if ihi is not None else 1, -ilo if ilo is not None else None, "-"))
    if (ilo is None or ilo <= 0) and (ihi is None or ihi >= 0):
        parts.append(ir.literal("-0"))  # JSON's negative zero is zero, a multiple of anything
    return ir.seq(ir.alt(*parts), zero_frac)

"""The grammar of a context's numbers: its number keywords (`minimum`, `maximum`, exclusive bounds,
`multipleOf`, and the negated forms _negate.py writes) are gathered into NumberFacts, then built as
exact digit-level ranges (_numbers.py), automata products where a range meets multiples or
exclusions, or a check by the core where an automaton would need too many remainders. A mixin of
the Converter (it uses its options, const_expr and intersection)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal

from ...errors import UnsupportedSchemaError
from .. import ir
from . import _dfa, _numbers
from ._keywords import NUMBER_KEYWORDS
from ._negate import NOT_CONST, NOT_MULTIPLE
from ._validate import atom_of


@dataclass
class NumberFacts:
    """The number keywords of a context's subschemas together: the tightest bounds (None: none),
    the multiples required and excluded, and the numeric values excluded (`not: {const: 3}`)."""
    lo: Decimal | None = None
    lo_inclusive: bool = True
    hi: Decimal | None = None
    hi_inclusive: bool = True
    multiples: list[Decimal] = field(default_factory=list)
    not_multiples: list[Decimal] = field(default_factory=list)
    excluded: list = field(default_factory=list)
    pointer: str = ""  # where errors point (no nodes: any value, e.g. an item no keyword constrains)


def number_facts(nodes) -> NumberFacts:
    f = NumberFacts(pointer=nodes[0].pointer if nodes else "")
    for n in nodes:
        s = n.schema
        for key in NUMBER_KEYWORDS:
            if key not in s:
                continue
            if isinstance(s[key], bool):
                raise UnsupportedSchemaError("boolean exclusive bounds (draft-04) are not supported", key,
                                             n.pointer)
            d = _numbers.to_decimal(s[key], key, n.pointer)
            if key == "multipleOf":
                if d <= 0:
                    raise UnsupportedSchemaError("multipleOf must be positive", key, n.pointer)
                f.multiples.append(d)
            elif key in ("minimum", "exclusiveMinimum"):
                inc = key == "minimum"
                if f.lo is None or d > f.lo or (d == f.lo and not inc):
                    f.lo, f.lo_inclusive = d, inc
            else:
                inc = key == "maximum"
                if f.hi is None or d < f.hi or (d == f.hi and not inc):
                    f.hi, f.hi_inclusive = d, inc
    for n in nodes:
        if NOT_MULTIPLE in n.schema:
            f.not_multiples.append(_numbers.to_decimal(n.schema[NOT_MULTIPLE], "multipleOf", n.pointer))
    f.excluded = [v for n in nodes if NOT_CONST in n.schema for v in [n.schema[NOT_CONST]]
                  if atom_of(v) in ("int", "frac")]
    return f


class NumberSchema:
    def number(self, nodes, atoms) -> ir.Expr:
        """The numbers of `atoms` (int, frac) that the number keywords of `nodes` allow. Equal
        keywords in several places (a price's bounds and multipleOf, for each price) are one
        grammar: the products behind multipleOf cost milliseconds each."""
        facts = number_facts(nodes)
        # As written: Python hashes numbers alike modulo 2^61 - 1 (a flood of colliding bounds)
        key = (str(facts.lo), facts.lo_inclusive, str(facts.hi), facts.hi_inclusive, *map(str, facts.multiples), "/",
               *map(str, facts.not_multiples), "/", *map(json.dumps, facts.excluded), frozenset(atoms))
        known = self._numbers.get(key)
        if known is None:
            known = self._numbers[key] = self._number(facts, atoms)
        return known

    def _number(self, facts: NumberFacts, atoms) -> ir.Expr:
        lo, li, hi, hinc = facts.lo, facts.lo_inclusive, facts.hi, facts.hi_inclusive
        multiples, not_multiples, excluded = facts.multiples, facts.not_multiples, facts.excluded
        integer_only = "frac" not in atoms
        frac_only = "int" not in atoms
        bounded = lo is not None or hi is not None
        if _numbers.no_common_multiple(lo, li, hi, hinc, multiples, integer_only):
            return ir.NOTHING
        if frac_only or excluded or not_multiples:
            # exact via automata over exponent-free numbers
            ptr = facts.pointer
            comps = [(_numbers.decimal_range(lo, li, hi, hinc), True)]
            if frac_only:
                comps.append((_numbers.NON_INTEGER, True))
            if integer_only:
                comps.append((self.opt.integer, True))
            comps += [(_dfa.as_expr(_numbers.multiple_dfa(m, ptr)), True) for m in multiples]
            comps += [(_dfa.as_expr(_numbers.multiple_dfa(m, ptr)), False) for m in not_multiples]
            if excluded:
                comps.append((ir.alt(*(self.const_expr(v) for v in excluded)), False))
            return self.intersection([c for c, _ in comps], [w for _, w in comps], "not", ptr, escaped=False)
        if not integer_only and not multiples and bounded and ((lo == 0 and hi is None) or (hi == 0 and lo is None)):
            # a sign constraint alone: exponents are allowed (1e-06 >= 0)
            positive = ir.seq(ir.alt(ir.seq(_numbers.NONZERO, ir.repeat(_numbers.DIGIT, 0, None),
                                            ir.repeat(_numbers.FRAC, 0, 1)),
                                     ir.seq(ir.literal("0."), ir.repeat(ir.literal("0"), 0, None), _numbers.NONZERO,
                                            ir.repeat(_numbers.DIGIT, 0, None))),
                              ir.repeat(_numbers.EXP, 0, 1))
            zero = ir.seq(ir.literal("0"), ir.repeat(ir.seq(ir.literal("."), ir.repeat(ir.literal("0"), 1, None)), 0, 1),
                          ir.repeat(_numbers.EXP, 0, 1))
            inclusive = li if lo is not None else hinc
            magnitude = ir.alt(positive, zero) if inclusive else positive
            if lo is not None:
                return magnitude
            return ir.alt(ir.seq(ir.literal("-"), positive), *([zero] if inclusive else []))
        if integer_only:
            ilo, ihi = _numbers.integer_bounds(lo, li, hi, hinc)
            if ilo is not None and ihi is not None and ihi < ilo:
                return ir.NOTHING
            expr = ir.seq(_numbers.integer_range(ilo, ihi), self.opt.zero_frac) if bounded else self.opt.integer
        else:
            expr = _numbers.decimal_range(lo, li, hi, hinc) if bounded else None
        if not multiples:
            return expr if expr is not None else _numbers.NUMBER
        base = expr if expr is not None else _numbers.PLAIN_NUMBER
        ptr = facts.pointer
        try:
            dfas = [_dfa.from_ir(base, "multipleOf", ptr)] + [_numbers.multiple_dfa(m, ptr) for m in multiples]
            return _dfa.as_expr(_dfa.intersect(dfas, "multipleOf", ptr))
        except UnsupportedSchemaError as e:
            if e.keyword != "multipleOf":
                raise
        # Too many remainders for an automaton: the core divides the number's text when it ends.
        if all(m == m.to_integral_value() for m in multiples):
            # Only integers are multiples: checking the integer part keeps a '.' from leading
            # into a text that no digit can complete.
            return _numbers.checked_integer_multiples(*_numbers.integer_bounds(lo, li, hi, hinc), multiples, ptr,
                                                      self.opt.zero_frac)
        # Each digit and point checked as it comes: a multiple of m has at most m's decimals
        # significant, and the ones left may be too few to reach a multiple (bounds or not).
        params = [_numbers.check_params(m, ptr) for m in multiples]
        base = _numbers.checked_as_written(base, [ir.Check(ir.MULTIPLE_OF_PREFIX, p) for p in params])
        return ir.Region(ir.seq(base, *(ir.Check(ir.MULTIPLE_OF, p) for p in params)))

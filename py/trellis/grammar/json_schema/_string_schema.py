"""The grammar of a context's strings: its string keywords (`minLength`, `maxLength`, `pattern`,
`format`, draft-07's content keywords, and the negated forms _negate.py writes) are gathered into
StringFacts, then built as a counted character class, one pattern or format as it is, or the
intersection of their languages (ir.And, whose product automaton the core builds). Also the
character counts other places share (property names, long strings). A mixin of the Converter
(it uses its rules, fresh, ref and intersection)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import UnsupportedSchemaError
from .. import ir
from ..builtin_json import json_text_rules
from . import _text
from ._keywords import count_bounds
from ._negate import NOT_CONST, NOT_FORMAT, NOT_PATTERN

# A string with a larger maxLength is generated with at most this many characters.
MAX_STRING_LENGTH = 100_000
# Character counts up to FLAT_CHARS are written out; up to CALLED_CHARS, one call per character
# (see StringSchema.char_count).
FLAT_CHARS = 64
CALLED_CHARS = 1024


@dataclass
class StringFacts:
    """The string keywords of a context's subschemas together: the length bounds (characters) and
    the languages the string must be in, or (kind "not...") must not be in: (kind, value, pointer)
    with kind "pattern", "format", "regex", "json", "notpattern", "notformat" or "notliteral"."""
    lo: int = 0
    hi: int | None = None
    parts: list = field(default_factory=list)


class StringSchema:
    def char_count(self, lo: int, hi: int | None, char: ir.Expr = _text.JSON_CHAR) -> ir.Expr:
        """lo..hi JSON string characters (each one `char`). A short count is written out; a long
        one calls a rule of one character per position (one automaton state each instead of a
        character's dozens), and past CALLED_CHARS a rule of 16 characters per 16 positions.
        One call per character keeps the core's token-mask caches few: the positions that lie
        more than a token's length from both bounds are one cache class, while a 16-character
        block's 16 positions each need their own cache (a new walk of the vocabulary)."""
        if (hi is None or hi <= FLAT_CHARS) and lo <= FLAT_CHARS:
            return ir.repeat(char, lo, hi)
        if hi is None:
            return ir.seq(self.char_count(lo, lo, char), ir.repeat(char, 0, None))
        one = self.char_rule(char, 1)
        if hi <= CALLED_CHARS:
            return ir.repeat(one, lo, hi)
        block = self.char_rule(char, 16)

        def exactly(n):
            return ir.seq(ir.repeat(block, n // 16, n // 16), ir.repeat(one, n % 16, n % 16))

        def up_to(m):
            q = m // 16
            if q == 0:
                return ir.repeat(one, 0, m)
            return ir.alt(ir.seq(ir.repeat(block, 0, q - 1), ir.repeat(one, 0, 15)),
                          ir.seq(ir.repeat(block, q, q), ir.repeat(one, 0, m % 16)))

        # Strings shorter than CALLED_CHARS, or CALLED_CHARS characters and then the rest (the
        # core's automaton for the rule shares the two's positions).
        rest_lo = max(lo - CALLED_CHARS, 0)
        longer = ir.seq(ir.repeat(one, CALLED_CHARS, CALLED_CHARS), exactly(rest_lo),
                        up_to(hi - CALLED_CHARS - rest_lo))
        if lo >= CALLED_CHARS:
            return longer
        return ir.alt(ir.repeat(one, lo, CALLED_CHARS - 1), longer)

    def char_rule(self, char: ir.Expr, n: int) -> ir.Expr:
        """A reference to the rule of `n` characters `char`, one per (char, n)."""
        name = self.char_rules.get((char, n))
        if name is None:
            hint = f"chars{n}"
            name = self.char_rules[char, n] = hint if char is _text.JSON_CHAR else self.fresh(hint)
            self.rules[name] = ir.repeat(char, n, n)
        return self.ref(name)

    def string_facts(self, nodes) -> StringFacts:
        """The string keywords of `nodes` (draft-07 asserts contentMediaType / contentEncoding)."""
        lo, hi, exprs = 0, None, []
        for n in nodes:
            s = n.schema
            lo, hi = count_bounds(n, "minLength", "maxLength", lo, hi)
            if "pattern" in s:
                exprs.append(("pattern", s["pattern"], n.pointer))
            if self.draft7 and "contentMediaType" in s:  # an assertion in draft-07 (an annotation after)
                if s["contentMediaType"] != "application/json":
                    raise UnsupportedSchemaError("only the application/json contentMediaType is enforced",
                                                 "contentMediaType", n.pointer)
                exprs.append(("json", None, n.pointer))
            if self.draft7 and "contentEncoding" in s:
                if s["contentEncoding"] != "base64":
                    raise UnsupportedSchemaError("only the base64 contentEncoding is enforced", "contentEncoding",
                                                 n.pointer)
                exprs.append(("regex", _text.BASE64, n.pointer))
            if "format" in s:
                if s["format"] == "regex" or _text.format_expr(s["format"], n.pointer) is not None:
                    exprs.append(("format", s["format"], n.pointer))
            if NOT_PATTERN in s:
                exprs.append(("notpattern", s[NOT_PATTERN], n.pointer))
            if NOT_FORMAT in s and _text.format_expr(s[NOT_FORMAT], n.pointer) is not None:
                exprs.append(("notformat", s[NOT_FORMAT], n.pointer))
            if NOT_CONST in s and isinstance(s[NOT_CONST], str):
                exprs.append(("notliteral", s[NOT_CONST], n.pointer))
        return StringFacts(lo, hi, exprs)

    def string_parts(self, lo, hi, exprs, pointer) -> tuple[list[ir.Expr], list[bool]]:
        """The languages a decoded string must be in (wanted) or not be in, for an ir.And: any
        string, each of `exprs` (a pattern as its search), and the length bounds."""
        items, wants = [_text.ANY_STRING], [True]
        for kind, value, ptr in exprs:
            negated = kind.startswith("not")
            items.append(self.string_part(kind[3:] if negated else kind, value, ptr, search=True))
            wants.append(not negated)
        if lo > 0 or hi is not None:
            if hi is not None and hi > 500:
                raise UnsupportedSchemaError("maxLength above 500 together with a pattern or format is not supported",
                                             "maxLength", pointer)
            items.append(_text.length_expr(lo, hi))
            wants.append(True)
        return items, wants

    @staticmethod
    def string_part(kind, value, ptr, search=False) -> ir.Expr:
        """A string keyword's language; `search`: a pattern as the strings it matches anywhere in,
        over bytes (what an intersection needs: the other parts keep it to characters)."""
        if kind == "pattern":
            return _text.pattern_search_expr(value, ptr) if search else _text.pattern_expr(value, ptr)
        if kind == "format":
            return _text.format_expr(value, ptr)
        if kind == "literal":
            return ir.literal(value)
        return _text.full_regex_expr(value)

    def string(self, nodes) -> ir.Expr:
        facts = self.string_facts(nodes)
        lo, hi, exprs = facts.lo, facts.hi, facts.parts
        quote = ir.literal('"')
        if hi is not None and hi < lo:
            return ir.NOTHING
        if not exprs:
            return ir.seq(quote, self.capped_count(lo, hi, nodes[0].pointer if nodes else ""), quote)
        if any(kind == "json" for kind, _, _ in exprs):
            return self.json_content(lo, hi, exprs)
        if len(exprs) == 1 and exprs[0][0] == "format" and exprs[0][1] in _text.CHECKED_FORMATS and lo == 0 and (
                hi is None):
            expr, rules = _text.checked_format(exprs[0][1])
            self.rules.update(rules)
            return expr
        if len(exprs) == 1 and not exprs[0][0].startswith("not"):
            expr = self.string_part(*exprs[0])
            rlo, rhi = _text.regex_min_max_length(expr)
            one_class = type(expr) is ir.Repeat and _text.regex_min_max_length(expr.item) == (1, 1)
            if rlo >= lo and (hi is None or (rhi is not None and rhi <= hi)):
                if one_class:  # a long count as a maxLength's (char_count)
                    return ir.seq(quote, self.char_count(expr.min, expr.max, _text.json_escape(expr.item)), quote)
                return ir.seq(quote, _text.json_escape(expr), quote)
            if one_class:
                # One character class repeated (`^[a-z0-9-]+$`): the length bounds are count bounds,
                # counted by the core, where a product automaton would need a state per count.
                return ir.seq(quote, self.counted_class(expr, lo, hi, nodes[0].pointer), quote)
        # The same constraints on several properties (a `pattern` and a length spelled again and
        # again) are one product automaton and one set of rules.
        key = (lo, hi, tuple((kind, value) for kind, value, _ in exprs))
        if not all(value is None or type(value) is str for _, value in key[2]):
            key = None  # refused below, with the keyword and pointer
        known = self.strings.get(key)
        if known is None:
            items, wants = self.string_parts(lo, hi, exprs, nodes[0].pointer)
            known = ir.seq(quote, self.intersection(items, wants, "pattern", nodes[0].pointer), quote)
            if key is not None:
                self.strings[key] = known
        return known

    def json_content(self, lo, hi, exprs) -> ir.Expr:
        """A string holding a JSON document (contentMediaType application/json), maybe in base64:
        the document's grammar under the string's escapes, or base64 checked when it ends."""
        pointer = next(ptr for kind, _, ptr in exprs if kind == "json")
        base64 = ("regex", _text.BASE64) in [(kind, value) for kind, value, _ in exprs]
        if lo > 0 or hi is not None or len(exprs) > 1 + base64:
            raise UnsupportedSchemaError("contentMediaType together with other string constraints is not supported",
                                         "contentMediaType", pointer)
        quote = ir.literal('"')
        if base64:
            body = _text.json_escape(_text.full_regex_expr(_text.BASE64))
            return ir.seq(ir.Region(ir.seq(quote, body, ir.Check(ir.BASE64_JSON))), quote)
        if "content-root" not in self.rules:
            # JSON whitespace, bounded (compact: at most one space, as between members), escaped below
            if self.opt.any_whitespace:
                ws = ir.repeat(ir.byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0, self.opt.max_whitespace)
            else:
                ws = ir.repeat(ir.literal(" "), 0, 1)
            self.rules.update({k: _text.json_escape(v) for k, v in json_text_rules("content-", ws).items()})
        return ir.seq(quote, self.ref("content-root"), quote)

    def counted_class(self, expr: ir.Repeat, lo: int, hi: int | None, pointer: str) -> ir.Expr:
        lo = max(lo, expr.min)
        hi = expr.max if hi is None else hi if expr.max is None else min(hi, expr.max)
        if hi is not None and hi < lo:
            return ir.NOTHING
        return self.capped_count(lo, hi, pointer, _text.json_escape(expr.item))

    def capped_count(self, lo: int, hi: int | None, pointer: str, char: ir.Expr = _text.JSON_CHAR) -> ir.Expr:
        """char_count within MAX_STRING_LENGTH: a longer minimum is refused, a longer maximum cut."""
        if lo > MAX_STRING_LENGTH:
            raise UnsupportedSchemaError(f"minLength above {MAX_STRING_LENGTH} is not supported", "minLength", pointer)
        if hi is not None and hi > MAX_STRING_LENGTH:
            hi = MAX_STRING_LENGTH  # a restriction
        return self.char_count(lo, hi, char)

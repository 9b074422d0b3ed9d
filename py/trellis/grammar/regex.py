"""Regex front-end: an ECMA-262 (JSON Schema `pattern`) subset, compiled to one IR rule.

The whole string must match, so `^` at the very start and `$` at the very end are
accepted and ignored. Constructs a grammar cannot express, or that we do not support
(lookaround, backreferences, lazy/possessive quantifiers, inline flags, \\b), are errors
rather than silently approximated. Semantics are the `u`-flag ones (code points, strict
escapes), except that a `{` which does not start a quantifier is a literal (Annex B).
"""

from __future__ import annotations

from ..errors import GrammarError
from . import ir

_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
# ECMA WhiteSpace (TAB VT FF SP NBSP ZWNBSP + Zs) and LineTerminator (LF CR LS PS).
_SPACE = [
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
    (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
]
_LINE_TERMINATORS = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_CLASS_ESCAPES = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CONTROL_ESCAPES = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
_SYNTAX = set("^$\\.*+?()[]{}|/")
_HEX = set("0123456789abcdefABCDEF")
_DIGITS = set("0123456789")


def _negated(ranges):
    return ir.negate_ranges(ranges, ir.MAX_CODE_POINT)


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.depth = 0
        self.group_names: set[str] = set()

    def error(self, message: str, at: int | None = None) -> GrammarError:
        return GrammarError(message, 1, (self.i if at is None else at) + 1)

    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.p[j] if j < len(self.p) else ""

    # ---- structure ----------------------------------------------------------------

    def parse(self) -> ir.Expr:
        if self.peek() == "^":
            self.i += 1
        expr = self.disjunction()
        if self.i < len(self.p):  # only a stray ')' stops the top level early
            raise self.error("unmatched ')'")
        return expr

    def disjunction(self) -> ir.Expr:
        items = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            items.append(self.alternative())
        return ir.alt(*items)

    def alternative(self) -> ir.Expr:
        items: list[ir.Expr] = []
        while self.i < len(self.p) and self.peek() not in "|)":
            if self.peek() == "$":
                if self.i == len(self.p) - 1 and self.depth == 0:
                    self.i += 1
                    break
                raise self.error("'$' is only supported at the very end of the pattern")
            if self.peek() == "^":
                raise self.error("'^' is only supported at the very start of the pattern")
            atom = self.atom()
            items.append(self.quantified(atom))
        return ir.seq(*_merge_literals(items))

    def quantified(self, atom: ir.Expr) -> ir.Expr:
        start = self.i
        bounds = self.quantifier()
        if bounds is None:
            return atom
        lo, hi = bounds
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier", start)
        if self.peek() == "?":
            raise self.error("lazy quantifiers are not supported")
        if self.peek() == "+":
            raise self.error("possessive quantifiers are not supported")
        return ir.repeat(atom, lo, hi)

    def quantifier(self) -> tuple[int, int | None] | None:
        """Consume a quantifier if one starts here."""
        ch = self.peek()
        simple = {"*": (0, None), "+": (1, None), "?": (0, 1)}
        if ch in simple:
            self.i += 1
            return simple[ch]
        if ch == "{":
            braced = self.braced()
            if braced is not None:
                bounds, end = braced
                self.i = end
                return bounds
        return None

    def braced(self) -> tuple[tuple[int, int | None], int] | None:
        """Parse `{m}`, `{m,}`, `{m,n}` at self.i without consuming; None if not one."""
        p, j = self.p, self.i + 1
        k = j
        while k < len(p) and p[k] in _DIGITS:
            k += 1
        if k == j:
            return None
        lo, hi = int(p[j:k]), None
        if k < len(p) and p[k] == "}":
            return (lo, lo), k + 1
        if k >= len(p) or p[k] != ",":
            return None
        m = k + 1
        while m < len(p) and p[m] in _DIGITS:
            m += 1
        if m >= len(p) or p[m] != "}":
            return None
        if m > k + 1:
            hi = int(p[k + 1 : m])
        return (lo, hi), m + 1

    # ---- atoms ----------------------------------------------------------------------

    def atom(self) -> ir.Expr:
        ch, start = self.peek(), self.i
        if ch in "*+?" or (ch == "{" and self.braced() is not None):
            raise self.error("nothing to repeat")
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == ".":
            self.i += 1
            return ir.char_class(_LINE_TERMINATORS, negate=True)
        if ch == "\\":
            item = self.escape(in_class=False)
            return item if isinstance(item, ir.Expr) else _code_point(item)
        self.i += 1
        return _code_point(self._literal_cp(ch, start))

    def _literal_cp(self, ch: str, at: int) -> int:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            raise self.error("lone surrogate in pattern", at)
        return cp

    def group(self) -> ir.Expr:
        start = self.i
        self.i += 1
        if self.peek() == "?":
            self.group_prefix(start)
        self.depth += 1
        inner = self.disjunction()
        self.depth -= 1
        if self.peek() != ")":
            raise self.error("missing ')' for this group", start)
        self.i += 1
        return inner

    def group_prefix(self, start: int) -> None:
        """Consume what follows '(?'; only non-capturing and named groups are allowed."""
        two = self.p[self.i : self.i + 3]
        if two.startswith("?:"):
            self.i += 2
            return
        if two in ("?<=", "?<!") or two[:2] in ("?=", "?!"):
            raise self.error("lookaround assertions are not supported", start)
        if two.startswith("?P="):
            raise self.error("backreferences are not supported", start)
        if two.startswith("?<") or two.startswith("?P<"):
            self.i += 2 if two.startswith("?<") else 3
            end = self.p.find(">", self.i)
            name = self.p[self.i : end] if end >= 0 else ""
            if not name.replace("$", "_").isidentifier():
                raise self.error("invalid group name", start)
            if name in self.group_names:
                raise self.error(f"duplicate group name {name!r}", start)
            self.group_names.add(name)
            self.i = end + 1
            return
        raise self.error("inline flags and other '(?' groups are not supported", start)

    def char_class(self) -> ir.Expr:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        self.i += negate
        ranges: list[tuple[int, int]] = []
        while True:
            if self.i >= len(self.p):
                raise self.error("unterminated character class", start)
            if self.peek() == "]":
                self.i += 1
                return ir.char_class(ranges, negate)
            at = self.i
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_atom()
                if isinstance(lo, list) or isinstance(hi, list):
                    raise self.error("a class escape cannot bound a range", at)
                if hi < lo:
                    raise self.error("range out of order in character class", at)
                ranges.append((lo, hi))
            elif isinstance(lo, list):
                ranges.extend(lo)
            else:
                ranges.append((lo, lo))

    def class_atom(self) -> int | list[tuple[int, int]]:
        """A code point, or the ranges of a class escape like \\d."""
        ch = self.peek()
        if ch == "\\":
            if self.peek(1) == "b":  # backspace inside a class
                self.i += 2
                return 0x08
            if self.peek(1) == "-":
                self.i += 2
                return ord("-")
            item = self.escape(in_class=True)
            return item
        self.i += 1
        return self._literal_cp(ch, self.i - 1)

    # ---- escapes --------------------------------------------------------------------

    def escape(self, in_class: bool):
        """Parse a backslash escape: a code point (int), class ranges (list), or an Expr."""
        start = self.i
        key = self.peek(1)
        self.i += 2
        if key == "":
            raise self.error("pattern ends with a backslash", start)
        if key in _CLASS_ESCAPES or key.lower() in _CLASS_ESCAPES:
            ranges = _CLASS_ESCAPES[key.lower()]
            ranges = ranges if key.islower() else _negated(ranges)
            return ranges if in_class else ir.char_class(ranges)
        if key in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[key]
        if key == "0":
            if self.peek() in _DIGITS:
                raise self.error("octal escapes are not supported", start)
            return 0
        if key in _DIGITS or (key == "k" and self.peek() == "<"):
            raise self.error("backreferences are not supported", start)
        if key in "bB":
            raise self.error("word boundary assertions are not supported", start)
        if key in "pP":
            raise self.error("Unicode property escapes are not supported", start)
        if key == "c":
            letter = self.peek()
            if not (letter.isascii() and letter.isalpha()):
                raise self.error("\\c must be followed by a letter", start)
            self.i += 1
            return ord(letter) % 32
        if key == "x":
            return self.hex_digits(2, start)
        if key == "u":
            return self.unicode_escape(start)
        if key in _SYNTAX or (key.isascii() and not key.isalnum() and key.isprintable()):
            return ord(key)  # escaped punctuation stands for itself
        raise self.error(f"unknown escape '\\{key}'", start)

    def hex_digits(self, n: int, start: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or not set(digits) <= _HEX:
            raise self.error(f"escape needs exactly {n} hex digits", start)
        self.i += n
        return int(digits, 16)

    def unicode_escape(self, start: int) -> int:
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            digits = self.p[self.i + 1 : end] if end > 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > ir.MAX_CODE_POINT:
                raise self.error("invalid \\u{...} escape", start)
            self.i = end + 1
            cp = int(digits, 16)
        else:
            cp = self.hex_digits(4, start)
            # A \uD8xx\uDCxx pair is one code point, as in the u-flag.
            if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                low = self.hex_digits(4, save) if self.peek() != "{" else -1
                if 0xDC00 <= low <= 0xDFFF:
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                self.i = save
        if 0xD800 <= cp <= 0xDFFF:
            raise self.error("a lone surrogate has no UTF-8 encoding", start)
        return cp


def _code_point(cp: int) -> ir.Expr:
    return ir.literal(chr(cp))


def _merge_literals(items: list[ir.Expr]) -> list[ir.Expr]:
    """Join adjacent byte literals so `abc` becomes one Bytes node."""
    out: list[ir.Expr] = []
    for item in items:
        if out and isinstance(item, ir.Bytes) and isinstance(out[-1], ir.Bytes):
            out[-1] = ir.Bytes(out[-1].data + item.data)
        else:
            out.append(item)
    return out


def parse_regex(pattern: str) -> ir.Grammar:
    """Compile a full-match regex to a one-rule grammar; GrammarError(msg, 1, column)."""
    expr = _Parser(pattern).parse()
    return ir.Grammar({"root": expr}, "root", {"root": (1, 1)})

"""Regex front-end: an ECMA-262 (JSON Schema `pattern`) subset, compiled to an IR rule (plus one
rule per large repeated item, see _outline_repeated).

The whole string must match, so `^` at the very start and `$` at the very end are
accepted and ignored. Constructs a grammar cannot express, or that we do not support
(lookaround, backreferences, lazy/possessive quantifiers, inline flags, \\b), are errors
rather than silently approximated. Semantics are the `u`-flag ones (code points, strict
escapes), except that a `{` which does not start a quantifier is a literal (Annex B).
Property escapes `\\p{..}`/`\\P{..}` follow the Unicode version of the running Python (`unicodedata.unidata_version`).
Quantifier bounds above ir.MAX_COUNT (2**31 - 1) are a GrammarLimitError; groups may nest as deep
as the core allows (its expressions nest at most 2,000 deep).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from itertools import groupby

from ..errors import GrammarError, GrammarLimitError
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


# ---- Unicode properties -------------------------------------------------------------------
# General_Category values: the short name first, then its aliases (Unicode PropertyValueAliases.txt).
_GC_VALUES = """
    C Other; Cc Control cntrl; Cf Format; Cn Unassigned; Co Private_Use; Cs Surrogate;
    L Letter; LC Cased_Letter; Ll Lowercase_Letter; Lm Modifier_Letter; Lo Other_Letter;
    Lt Titlecase_Letter; Lu Uppercase_Letter; M Mark Combining_Mark; Mc Spacing_Mark; Me Enclosing_Mark;
    Mn Nonspacing_Mark; N Number; Nd Decimal_Number digit; Nl Letter_Number; No Other_Number;
    P Punctuation punct; Pc Connector_Punctuation; Pd Dash_Punctuation; Pe Close_Punctuation;
    Pf Final_Punctuation; Pi Initial_Punctuation; Po Other_Punctuation; Ps Open_Punctuation;
    S Symbol; Sc Currency_Symbol; Sk Modifier_Symbol; Sm Math_Symbol; So Other_Symbol;
    Z Separator; Zl Line_Separator; Zp Paragraph_Separator; Zs Space_Separator"""
_GC_NAMES = {alias: names.split()[0] for names in _GC_VALUES.split(";") for alias in names.split()}
# Binary properties (ECMA-262 names -> short aliases) whose code points Python's own tables give exactly.
_BINARY = {
    "Any": "Any", "ASCII": "ASCII", "Assigned": "Assigned", "ASCII_Hex_Digit": "AHex", "Lowercase": "Lower",
    "Uppercase": "Upper", "XID_Start": "XIDS", "XID_Continue": "XIDC", "Noncharacter_Code_Point": "NChar",
}
_BINARY_NAMES = {**{short: short for short in _BINARY.values()}, **{name: short for name, short in _BINARY.items()}}
# CPython sets these from DerivedCoreProperties.txt: islower/isupper of one character are its
# Lowercase/Uppercase, and isidentifier tests XID_Start (or '_') then XID_Continue.
_PREDICATES = {
    "Lower": str.islower, "Upper": str.isupper,
    "XIDS": lambda c: c != "_" and c.isidentifier(), "XIDC": lambda c: ("a" + c).isidentifier(),
}
# Planes 4-13 have no assigned code point up to Unicode 17.0: one value for all, not 655k lookups.
_EMPTY_PLANES = (0x40000, 0xDFFFF)


def _property_key(name: str) -> tuple[str, str] | None:
    """("gc", short value) or ("binary", short name) for a `\\p{name}`; None if not supported."""
    prop, eq, value = name.partition("=")
    if eq:
        return ("gc", _GC_NAMES[value]) if prop in ("General_Category", "gc") and value in _GC_NAMES else None
    if name in _GC_NAMES:
        return "gc", _GC_NAMES[name]
    return ("binary", _BINARY_NAMES[name]) if name in _BINARY_NAMES else None


def _key_ranges(key: tuple[str, str]) -> list[tuple[int, int]]:
    """Shared and cached: callers must not change the list."""
    kind, value = key
    return _gc_ranges(value) if kind == "gc" else _binary_ranges(value)


@lru_cache(maxsize=None)  # keyed by canonical names only: a bounded set
def _gc_ranges(value: str) -> list[tuple[int, int]]:
    table = _category_table()
    if value == "LC":
        members = ["Ll", "Lt", "Lu"]
    elif len(value) == 1:  # a group: the union of the two-letter values it starts
        members = [v for v in table if v[0] == value]
    else:
        members = [value]
    return ir.normalize_ranges(r for v in members for r in table.get(v, ()))


@lru_cache(maxsize=None)
def _binary_ranges(key: str) -> list[tuple[int, int]]:
    if key == "Any":
        return [(0, ir.MAX_CODE_POINT)]
    if key == "ASCII":
        return [(0, 0x7F)]
    if key == "AHex":
        return [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]
    if key == "Assigned":
        return _negated(_gc_ranges("Cn"))
    if key == "NChar":  # fixed forever by Unicode's stability policy
        return [(0xFDD0, 0xFDEF)] + [(p << 16 | 0xFFFE, p << 16 | 0xFFFF) for p in range(17)]
    return ir.normalize_ranges((lo, hi) for value, lo, hi in _runs(_PREDICATES[key]) if value)


@lru_cache(maxsize=1)
def _category_table() -> dict[str, list[tuple[int, int]]]:
    """The ranges of each two-letter General_Category, from one pass over all code points."""
    table: dict[str, list[tuple[int, int]]] = {}
    for value, lo, hi in _runs(unicodedata.category):
        table.setdefault(value, []).append((lo, hi))
    return {value: ir.normalize_ranges(ranges) for value, ranges in table.items()}


def _scan_pieces() -> list[tuple[int, int]]:
    """All code points in pieces; _EMPTY_PLANES is a piece of its own when known to be empty."""
    if tuple(int(x) for x in unicodedata.unidata_version.split(".")) > (17, 0, 0):
        return [(0, ir.MAX_CODE_POINT)]  # a newer Unicode might assign something there
    return [(0, _EMPTY_PLANES[0] - 1), _EMPTY_PLANES, (_EMPTY_PLANES[1] + 1, ir.MAX_CODE_POINT)]


def _runs(func):
    """(value, lo, hi) for runs of code points with one value of func(chr(cp)); C-level iteration."""
    for lo, hi in _scan_pieces():
        if (lo, hi) == _EMPTY_PLANES:  # all unassigned: every property has its default value
            yield func(chr(lo)), lo, hi
            continue
        for value, run in groupby(map(func, map(chr, range(lo, hi + 1)))):
            n = sum(1 for _ in run)
            yield value, lo, lo + n - 1
            lo += n


@lru_cache(maxsize=None)
def _property_class(key: tuple[str, str], negate: bool) -> ir.Expr:
    """One expression per property: large classes are built once and shared between grammars."""
    return _factored(ir.char_class(_key_ranges(key), negate))


@lru_cache(maxsize=1024)  # char_class's are shared: a pattern may spell `[\p{L}\d]` 5,000 times
def _factored(expr: ir.Expr) -> ir.Expr:
    """A char_class expression (byte-set sequences) as a trie sharing leading byte sets: the core
    compiles `\\p{L}` about ten times faster so. Only for classes with property escapes, so that
    every other pattern keeps its grammar."""
    items = expr.items if type(expr) is ir.Alt else (expr,)
    return _trie([x.items if type(x) is ir.Seq else (x,) for x in items])


def _trie(seqs: list[tuple[ir.Expr, ...]]) -> ir.Expr:
    groups: dict[ir.Expr, list] = {}
    for s in seqs:
        groups.setdefault(s[0], []).append(s[1:])
    # sequences with one lead byte set have one length (char_class splits by encoded length)
    return ir.alt(*(ir.seq(first, _trie(tails)) if tails[0] else first for first, tails in groups.items()))


class _Group:
    """A disjunction being parsed: the whole pattern (start None) or a group opened at `start`."""

    def __init__(self, start: int | None):
        self.start = start
        self.alternatives: list[ir.Expr] = []
        self.items: list[ir.Expr] = []

    def end_alternative(self) -> None:
        self.alternatives.append(ir.seq(*_merge_literals(self.items)))
        self.items = []

    def expr(self) -> ir.Expr:
        self.end_alternative()
        return ir.alt(*self.alternatives)


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.group_names: set[str] = set()
        self.properties = 0  # property escapes seen so far

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
        """The pattern up to its end or a stray ')'. Groups are parsed with a stack of their own,
        not by recursion: how deep they nest is the user's choice."""
        stack = [_Group(None)]
        while True:
            group, ch = stack[-1], self.peek()
            if self.i >= len(self.p) or (ch == ")" and len(stack) == 1):
                if len(stack) > 1:
                    raise self.error("missing ')' for this group", group.start)
                return group.expr()
            if ch == "|":
                self.i += 1
                group.end_alternative()
            elif ch == ")":
                self.i += 1
                stack.pop()
                stack[-1].items.append(self.quantified(group.expr()))
            elif ch == "(":
                start = self.i
                self.i += 1
                if self.peek() == "?":
                    self.group_prefix(start)
                stack.append(_Group(start))
            elif ch == "$":
                if self.i != len(self.p) - 1 or len(stack) > 1:
                    raise self.error("'$' is only supported at the very end of the pattern")
                self.i += 1
            elif ch == "^":
                raise self.error("'^' is only supported at the very start of the pattern")
            else:
                group.items.append(self.quantified(self.atom()))

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
        return ir.folded_repeat(atom, lo, hi)

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
        lo, hi = self.count(p[j:k]), None
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
            hi = self.count(p[k + 1 : m])
        return (lo, hi), m + 1

    def count(self, digits: str) -> int:
        """A quantifier's bound, at most ir.MAX_COUNT (checked before int(): Python refuses to
        convert more than 4300 digits)."""
        significant = digits.lstrip("0") or "0"  # leading zeros count against Python's limit too
        if len(significant) > len(str(ir.MAX_COUNT)) or int(significant) > ir.MAX_COUNT:
            shown = digits if len(digits) <= 20 else f"{digits[:10]}...({len(digits)} digits)"
            raise GrammarLimitError(f"quantifier bound {shown} exceeds the limit {ir.MAX_COUNT}", 1, self.i + 1)
        return int(significant)

    # ---- atoms ----------------------------------------------------------------------

    def atom(self) -> ir.Expr:
        ch, start = self.peek(), self.i
        if ch in "*+?" or (ch == "{" and self.braced() is not None):
            raise self.error("nothing to repeat")
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
        start, properties = self.i, self.properties
        self.i += 1
        negate = self.peek() == "^"
        self.i += negate
        ranges: list[tuple[int, int]] = []
        while True:
            if self.i >= len(self.p):
                raise self.error("unterminated character class", start)
            if self.peek() == "]":
                self.i += 1
                expr = ir.char_class(ranges, negate)
                return _factored(expr) if self.properties > properties else expr
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
            return self.property_escape(key, start, in_class)
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

    def property_escape(self, key: str, start: int, in_class: bool):
        end = self.p.find("}", self.i) if self.peek() == "{" else -1
        if end < 0:
            raise self.error(f"\\{key} must be followed by {{name}}", start)
        name = self.p[self.i + 1 : end]
        self.i = end + 1
        self.properties += 1
        prop = _property_key(name)
        if prop is None:
            raise self.error(f"Unicode property {name!r} is not supported (only General_Category values "
                             f"and {', '.join(_BINARY)})", start)
        if not in_class:
            return _property_class(prop, key == "P")
        ranges = _key_ranges(prop)
        return ranges if key == "p" else _negated(ranges)

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


# Unbounded repetitions one inside (or beside) another are folded into one, by language identities
# that hold for any X: (X{a,}){b,c} = X{ab,} (b >= 1: any count >= ab splits into b runs of >= a),
# (X{a,}){0,c} = (X{a,})?, and X{a,b} X{c,} = X{a+c,}. Left nested, the parser would keep a frame
# per way of splitting the text so far (fuzzing found masks of `(?:.{16,})+` taking seconds).
def _merge_literals(items: list[ir.Expr]) -> list[ir.Expr]:
    """Join adjacent byte literals so `abc` becomes one Bytes node, and adjacent repetitions of
    one item when one is unbounded (X{a,b} X{c,} = X{a+c,}, and X X{c,} = X{c+1,}: see
    ir.folded_repeat)."""
    out: list[ir.Expr] = []
    for item in items:
        last = out[-1] if out else None
        if isinstance(item, ir.Bytes) and isinstance(last, ir.Bytes):
            out[-1] = ir.Bytes(last.data + item.data)
            continue
        one, two = _counted(last), _counted(item)
        if (one and two and one[0] == two[0] and None in (one[2], two[2])
                and (type(item) is ir.Repeat or type(last) is ir.Repeat) and one[1] + two[1] <= ir.MAX_COUNT):
            out[-1] = ir.repeat(one[0], one[1] + two[1], None)
        else:
            out.append(item)
    return out


def _counted(e: ir.Expr | None):
    """(item, min, max) of a repetition, or of one copy of anything else."""
    if e is None:
        return None
    return (e.item, e.min, e.max) if type(e) is ir.Repeat else (e, 1, 1)


def parse_regex(pattern: str) -> ir.Grammar:
    """Compile a full-match regex to a grammar; GrammarError(msg, 1, column), GrammarLimitError
    for a quantifier bound beyond ir.MAX_COUNT."""
    items: dict[str, ir.Expr] = {}
    expr = regex_expr(pattern)
    with ir.nesting_guard("the pattern", ir.NESTING_FRAMES):  # ir.nullable walks the nesting
        root = _outline_repeated(expr, items)
    return ir.Grammar({"root": root, **items}, "root", {"root": (1, 1)})


def regex_expr(pattern: str) -> ir.Expr:
    """The full-match language of `pattern` as one expression without rule references (for the
    front-ends that combine patterns as automata); errors as parse_regex."""
    if not isinstance(pattern, str):
        raise GrammarError(f"a regular expression must be a string, got {type(pattern).__name__}")
    with ir.nesting_guard("the pattern"):
        return _Parser(pattern).parse()


# A repeated item whose copies would cost the core more than this many nodes becomes a rule of
# its own, which every copy calls: `[\p{L}\p{N} ]{0,200}` is then one automaton for the class and
# a chain of 200 calls, where inlined copies would need hundreds of thousands of states. So does
# an item the pattern spells again and again (`[\p{L}\d]` 500 times: one shared expression).
OUTLINE_NODES = 20_000


def _uses(top: ir.Expr) -> dict[int, int]:
    """How many times each distinct node of `top` is an item of another (by id)."""
    uses: dict[int, int] = {}
    for e in ir.distinct_nodes(top):
        for k in ir.children(e):
            uses[id(k)] = uses.get(id(k), 0) + 1
    return uses


def _outline_repeated(top: ir.Expr, rules: dict[str, ir.Expr]) -> ir.Expr:
    """`top` with large repeated or reused items moved into rules (added to `rules`); each
    distinct item is sized and outlined once (ir.rebuild)."""
    uses = _uses(top)
    sizes: dict[int, int] = {}

    def build(e: ir.Expr, kids, new_kids) -> ir.Expr:
        size = 1 + sum(sizes[id(k)] for k in kids) + (len(e.data) if type(e) is ir.Bytes else 0)
        if type(e) is ir.Repeat:
            copies = max(e.min, 1) + 1 if e.max is None else e.max
            item = new_kids[0]
            low = e.min
            if copies > 1 and sizes[id(e.item)] * copies > OUTLINE_NODES and type(item) is not ir.Ref:
                # Called copies of a nullable item would chain empty calls, up to e.max of them at
                # every position: the rule takes the item without its empty string, and no copy is needed.
                plus = ir.nonempty(item) if ir.nullable(item) else item
                item, low = (item, low) if plus is None else (plus, 0 if plus is not item else low)
                name = f"item{len(rules)}"
                rules[name] = item
                item = ir.Ref(name)
            out = ir.Repeat(item, low, e.max) if item is not e.item else e
            size = sizes[id(e.item)] * copies if type(item) is not ir.Ref else copies + 2
        elif kids and any(a is not b for a, b in zip(new_kids, kids)):
            out = type(e)(tuple(new_kids))
        else:
            out = e
        used = uses.get(id(e), 0)
        if used > 1 and kids and size * used > OUTLINE_NODES:
            name = f"item{len(rules)}"
            rules[name] = out
            out, size = ir.Ref(name), 1
        sizes[id(e)] = size
        return out

    return ir.rebuild(top, build)

"""Grammar IR: the one format every front-end produces and the C++ core consumes.

A grammar is a set of named rules over *bytes*; each rule body is an expression tree of
byte literals, byte sets, sequences, choices, bounded repetitions and rule references.
Unicode character classes are lowered here to UTF-8 byte sequences, so the core never
needs to know about code points.

`serialize` flattens a grammar into int32 words (layout below, mirrored in
kernels/grammar/src/ir.cpp):

    [MAGIC, VERSION, n_rules, root_index, nodes ..., body_offset[0..n_rules)]
    node BYTES:   1, n, b_0 .. b_{n-1}
    node BYTESET: 2, n, lo_0, hi_0, .. lo_{n-1}, hi_{n-1}   (inclusive byte ranges)
    node SEQ:     3, n, child_offset_0 ..                   (n == 0: the empty string)
    node ALT:     4, n, child_offset_0 ..                   (n == 0: matches nothing)
    node REPEAT:  5, min, max (-1 = unbounded), child_offset
    node REF:     6, rule_index
    node CHECK:   7, kind, n, param_0 .. param_{n-1}         (zero-width: a predicate holds)
    node REGION:  8, child_offset                          (where checks start reading)
    node AND:     9, n, escaped, (child_offset, wanted) * n
    node AUTOMATON: 10, n_states, n_runs, accept_0 .. accept_{n_states-1}, (from, lo, hi, to) * n_runs
    node MACHINE: 11, n_states, n_edges, accept_0 .. accept_{n_states-1}, (from, child_offset, to) * n_edges

A CHECK matches the empty string when its predicate (kernels/grammar/src/checks.h) holds on
the text of the nearest enclosing REGION so far: the values that no grammar can describe
(unique array items, regular expressions with backreferences) are decided on their text.

AND is the strings every wanted child matches and no other child does (And: a string's pattern,
format and length together), JSON-escaped when `escaped` is 1; the core builds it as one
product automaton (kernels/grammar/src/intersection.h). AUTOMATON is the strings that lead from
state 0 to an accepting one (Automaton: one a front-end built, e.g. remainders for multipleOf).
MACHINE is the same with an expression on each edge (Machine: a counting automaton's states,
such as an object's members in schema order, in one node instead of a rule per state).

Offsets index the word array; a child always precedes its parent, so the tree is acyclic
by construction and the core can validate it in one pass. The rule table comes last so that
the first nodes sit at the same offsets in every grammar: a front-end's Prelude (the
expressions nearly all its grammars hold) is written once and its words reused.
"""

from __future__ import annotations

import sys
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from ..errors import GrammarError, GrammarLimitError

MAGIC = 0x54524C31  # "TRL1"
VERSION = 6
BYTES, BYTESET, SEQ, ALT, REPEAT, REF, CHECK, REGION, AND, AUTOMATON, MACHINE = range(1, 12)
# Check kinds (kernels/grammar/src/checks.h).
UNIQUE_ITEM, DISTINCT_KEY, LEAP_SECOND, REGEX, MULTIPLE_OF, BASE64_JSON, REGEX_PREFIX, MULTIPLE_OF_PREFIX = range(1, 9)
MAX_CODE_POINT = 0x10FFFF
# Every number in the IR is an int32 word: repetition bounds above this cannot be written.
MAX_COUNT = 2**31 - 1
# The recursion limit while a front-end whose nesting is the user's runs (see nesting_guard). On
# CPython 3.11 frames reached through C cost C stack: chains of about 17,000 such frames overflowed
# an 8 MiB stack here, so this keeps a wide margin.
NESTING_FRAMES = 10_000


class Expr:
    """Base of the expression nodes: hashable, comparable, and never changed once built.

    Nodes are built by the thousand for each grammar, so they are plain slotted dataclasses
    with hand-written constructors (a frozen dataclass costs several times as much to build);
    nothing assigns to a node's fields after construction. Inner nodes cache their `_hash`
    (hashing walks the whole subtree, and a DAG shares subtrees).
    """

    __slots__ = ()


def _cache():
    return field(default=None, init=False, repr=False, compare=False)


@dataclass(slots=True)
class Bytes(Expr):
    data: bytes

    def __init__(self, data: bytes):
        self.data = data

    def __hash__(self):
        return hash((Bytes, self.data))


@dataclass(slots=True)
class ByteSet(Expr):
    ranges: tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive

    def __init__(self, ranges: tuple[tuple[int, int], ...]):
        self.ranges = ranges

    def __hash__(self):
        return hash((ByteSet, self.ranges))


class _Items(Expr):
    """Seq and Alt: a tuple of items, and a hash computed once."""

    __slots__ = ()

    def __init__(self, items: tuple[Expr, ...]):
        self.items = items
        self._hash = None

    def _items_hash(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((type(self), self.items))
        return h


@dataclass(slots=True, init=False)
class Seq(_Items):
    items: tuple[Expr, ...]
    _hash: int | None = _cache()
    __hash__ = _Items._items_hash


@dataclass(slots=True, init=False)
class Alt(_Items):
    items: tuple[Expr, ...]
    _hash: int | None = _cache()
    __hash__ = _Items._items_hash


@dataclass(slots=True)
class Repeat(Expr):
    item: Expr
    min: int
    max: int | None  # None: unbounded
    _hash: int | None = _cache()

    def __init__(self, item: Expr, min: int, max: int | None):
        self.item, self.min, self.max = item, min, max
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((Repeat, self.item, self.min, self.max))
        return h


@dataclass(slots=True)
class Ref(Expr):
    name: str

    def __init__(self, name: str):
        self.name = name

    def __hash__(self):
        return hash((Ref, self.name))


@dataclass(slots=True)
class Check(Expr):
    kind: int
    params: tuple[int, ...] = ()

    def __init__(self, kind: int, params: tuple[int, ...] = ()):
        self.kind, self.params = kind, tuple(params)

    def __hash__(self):
        return hash((Check, self.kind, self.params))


@dataclass(slots=True)
class Region(Expr):
    item: Expr
    _hash: int | None = _cache()

    def __init__(self, item: Expr):
        self.item = item
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((Region, self.item))
        return h


EMPTY = Seq(())
NOTHING = Alt(())


@dataclass(slots=True)
class And(Expr):
    """The strings that every item with `wants[k]` True matches and no other item does. Items are
    regular (bytes, byte sets, and sequences, choices and repetitions of them; no references,
    checks or regions) and one at least is wanted. `escaped`: each byte of such a string is
    written as a JSON string writes it (a control byte, quote or backslash as its escape)."""

    items: tuple[Expr, ...]
    wants: tuple[bool, ...]
    escaped: bool = False
    _hash: int | None = _cache()

    def __init__(self, items: tuple[Expr, ...], wants: tuple[bool, ...], escaped: bool = False):
        if len(items) != len(wants) or not any(wants):
            raise GrammarError("an intersection needs a wanted item and a want per item")
        self.items, self.wants, self.escaped = tuple(items), tuple(bool(w) for w in wants), bool(escaped)
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((And, self.items, self.wants, self.escaped))
        return h


@dataclass(slots=True)
class Automaton(Expr):
    """The strings that lead from state 0 to a state in `accept`: `runs` are transitions
    (state, lo, hi, next) on the bytes lo..hi (overlapping runs make it nondeterministic)."""

    runs: tuple[tuple[int, int, int, int], ...]
    accept: tuple[bool, ...]
    _hash: int | None = _cache()

    def __init__(self, runs, accept):
        self.runs, self.accept = tuple(runs), tuple(bool(a) for a in accept)
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((Automaton, self.runs, self.accept))
        return h


@dataclass(slots=True)
class Machine(Expr):
    """The strings that lead from state 0 to a state in `accept` along `edges` (state, expr,
    next): each edge reads a string of its expression."""

    edges: tuple[tuple[int, Expr, int], ...]
    accept: tuple[bool, ...]
    _hash: int | None = _cache()

    def __init__(self, edges, accept):
        self.edges, self.accept = tuple(edges), tuple(bool(a) for a in accept)
        self._hash = None

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((Machine, self.edges, self.accept))
        return h


@dataclass
class Grammar:
    """Named rules plus the name of the start rule."""

    rules: dict[str, Expr]
    root: str = "root"
    # Where rules come from, for error messages: (line, column) in a source text, or for a
    # schema's rules (keyword, JSON pointer).
    positions: dict[str, tuple] = field(default_factory=dict)
    prelude: Prelude | None = None  # written first (serialization speed only)

    def serialize(self) -> tuple[array, list[str]]:
        return serialize(self)


# ---- constructors -------------------------------------------------------------------


def literal(text: str | bytes) -> Expr:
    if type(text) is str:
        return _text_literal(text)
    data = bytes(text)
    return Bytes(data) if data else EMPTY


@lru_cache(maxsize=4096)
def _text_literal(text: str) -> Expr:
    # Front-ends spell the same punctuation and keys again and again: one shared node each.
    return Bytes(text.encode("utf-8")) if text else EMPTY


def seq(*items: Expr) -> Expr:
    for item in items:
        if type(item) is Seq:
            break
    else:  # nothing to flatten (the common case, kept cheap)
        return items[0] if len(items) == 1 else Seq(items)
    flat: list[Expr] = []
    for item in items:
        if type(item) is Seq:
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    for item in items:
        if type(item) is Alt:
            break
    else:
        return items[0] if len(items) == 1 else Alt(items)
    flat: list[Expr] = []
    for item in items:
        if type(item) is Alt:
            flat.extend(item.items)
        else:
            flat.append(item)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Expr, lo: int, hi: int | None) -> Expr:
    if lo < 0 or (hi is not None and hi < lo):
        raise GrammarError(f"bad repetition bounds {{{lo},{hi}}}")
    if max(lo, hi or 0) > MAX_COUNT:  # front-ends check first, to say where
        raise GrammarLimitError(f"repetition bound {max(lo, hi or 0)} exceeds the limit {MAX_COUNT}")
    return Repeat(item, lo, hi)


def nullable(e: Expr) -> bool | None:
    """Whether e matches the empty string; None where that is not known here (references, checks)."""
    t = type(e)
    if t is Bytes:
        return not e.data
    if t is ByteSet:
        return False
    if t is Repeat:
        return True if e.min == 0 else nullable(e.item)
    if t is Seq or t is Alt:
        known = [nullable(x) for x in e.items]
        if None in known:
            return None
        return all(known) if t is Seq else any(known)
    return None


MAX_NONEMPTY_SEQ = 8  # a nullable sequence's non-empty part is one choice per item


def nonempty(e: Expr) -> Expr | None:
    """e's language without the empty string (NOTHING if that leaves nothing), or None where it cannot
    be written here."""
    if nullable(e) is False:
        return e
    t = type(e)
    if t is Bytes:
        return NOTHING
    if t is Repeat:
        if e.max == 0:
            return NOTHING
        if nullable(e.item):  # (Y{lo,hi}) with Y nullable is (Y without ε){0,hi}
            item = nonempty(e.item)
            return None if item is None else NOTHING if item == NOTHING else repeat(item, 1, e.max)
        return repeat(e.item, 1, e.max)
    if t is Alt:
        items = [nonempty(x) for x in e.items]
        return None if None in items else alt(*[x for x in items if x != NOTHING]) if any(
            x != NOTHING for x in items) else NOTHING
    if t is Seq and len(e.items) <= MAX_NONEMPTY_SEQ:  # all items nullable: the first non-empty one starts it
        options = []
        for i, x in enumerate(e.items):
            first = nonempty(x)
            if first is None:
                return None
            if first != NOTHING:
                options.append(seq(first, *e.items[i + 1:]))
        return alt(*options) if options else NOTHING
    return None


def folded_repeat(atom: Expr, lo: int, hi: int | None) -> Expr:
    """(X{a,b}){lo,hi} as one repetition of X where the counts of X it allows form one range (nested
    repetitions cost the core a parse frame per split point): k copies write k*a..k*b Xs, and the
    ranges of consecutive k meet once k*(b - a) >= a - 1, always when b is unbounded. With lo = 0 and
    a > 1 the empty text stands apart: (X{lo*a..})?. A nullable X repeats as X without the empty
    text, from 0: the same strings (empty copies pad any count up to hi), and a parser that does not
    open every copy at once (`(a|b*){16,100001}` opened 100,001 before its first byte: seconds per
    mask). For the front-ends' quantifiers (regex, EBNF)."""
    if hi != 0 and nullable(atom):
        body = nonempty(atom)
        if body is not None:
            if body == NOTHING:  # only the empty text
                return EMPTY
            atom, lo = body, 0
    if type(atom) is not Repeat or hi == 0:
        return repeat(atom, lo, hi)
    a, b = atom.min, atom.max
    first = max(lo, 1)  # the fewest copies that write an X
    if b is None or hi == first or first * (b - a) >= a - 1:
        least, most = a * first, b if b in (None, 0) else None if hi is None else hi * b
        if least <= MAX_COUNT and (most is None or most <= MAX_COUNT):
            if lo > 0:
                return repeat(atom.item, least, most)
            if a <= 1:
                return repeat(atom.item, 0, most)
            return repeat(repeat(atom.item, least, most), 0, 1)
    return repeat(atom, lo, hi)


@contextmanager
def nesting_guard(what: str, frames: int = 0):
    """Around a front-end whose nesting is the user's: a recursion limit of at least `frames` for
    the parts that recurse (walks bounded by a front-end's documented depth limit; guards inside
    guards do not add up), and a RecursionError that still happens ends as a GrammarLimitError
    rather than escaping untyped. The limit is process-wide: raised for the duration, put back."""
    old = sys.getrecursionlimit()
    raised = max(old, frames)
    if raised != old:
        sys.setrecursionlimit(raised)
    try:
        yield
    except RecursionError:
        raise GrammarLimitError(f"{what} nests too deeply to compile") from None
    finally:
        if raised != old and sys.getrecursionlimit() == raised:
            sys.setrecursionlimit(old)


def normalize_ranges(ranges) -> list[tuple[int, int]]:
    """Sort and merge inclusive integer ranges."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def negate_ranges(ranges, top: int) -> list[tuple[int, int]]:
    """Complement of `ranges` within [0, top]."""
    out, start = [], 0
    for lo, hi in normalize_ranges(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= top:
        out.append((start, top))
    return out


def byte_set(ranges) -> Expr:
    ranges = normalize_ranges(ranges)
    return ByteSet(tuple(ranges)) if ranges else NOTHING


_SURROGATES = (0xD800, 0xDFFF)
_UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CODE_POINT))


def char_class(ranges, negate: bool = False) -> Expr:
    """A set of Unicode code points (inclusive ranges) as an expression over UTF-8 bytes.

    Surrogates are never included: they have no UTF-8 encoding.
    """
    return _char_class(tuple(normalize_ranges(ranges)), negate)


@lru_cache(maxsize=4096)  # a pattern may spell `.` or `\w` thousands of times; nodes are immutable
def _char_class(ranges: tuple, negate: bool) -> Expr:
    if negate:
        ranges = negate_ranges(ranges, MAX_CODE_POINT)
    ranges = [r for lo, hi in ranges for r in _split_out(lo, hi, *_SURROGATES)]
    alternatives: list[Expr] = []
    for lo, hi in ranges:
        for blo, bhi in _UTF8_BOUNDS:  # one encoded length at a time
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                alternatives.extend(_utf8_sequences(a, b))
    if not alternatives:
        return NOTHING
    # Merge the single-byte alternatives into one byte set (keeps ASCII classes compact).
    singles = [r for e in alternatives if isinstance(e, ByteSet) for r in e.ranges]
    rest = [e for e in alternatives if not isinstance(e, ByteSet)]
    parts = ([byte_set(singles)] if singles else []) + rest
    return alt(*parts)


def _split_out(lo: int, hi: int, cut_lo: int, cut_hi: int):
    if hi < cut_lo or lo > cut_hi:
        return [(lo, hi)]
    return [r for r in ((lo, cut_lo - 1), (cut_hi + 1, hi)) if r[0] <= r[1]]


def _utf8_sequences(lo: int, hi: int) -> list[Expr]:
    """Code points [lo, hi] of one encoded length as sequences of byte ranges."""
    a, b = chr(lo).encode(), chr(hi).encode()
    n = len(a)
    if n == 1:
        return [ByteSet(((a[0], b[0]),))]
    # Split until every position is a contiguous byte range: [lo, hi] is "rectangular"
    # when all continuation bytes after the first differing byte span 0x80..0xBF.
    for i in range(n - 1, 0, -1):
        mask = (1 << (6 * (n - i))) - 1
        if lo & ~mask != hi & ~mask:
            if lo & mask != 0:
                return _utf8_sequences(lo, lo | mask) + _utf8_sequences((lo | mask) + 1, hi)
            if hi & mask != mask:
                return _utf8_sequences(lo, (hi & ~mask) - 1) + _utf8_sequences(hi & ~mask, hi)
    return [seq(*(ByteSet(((x, y),)) for x, y in zip(a, b)))]


# ---- serialization ------------------------------------------------------------------


class _Written(NamedTuple):
    """A prelude as written: the words (a list, and as int32), the writer's tables, and the offsets
    of its rules' bodies."""

    words: list
    leaves: dict
    nodes: dict
    by_id: dict
    bodies: list
    int32: array


class Prelude:
    """What nearly every grammar of a front-end holds, written once: expressions (JSON's string
    characters and numbers) and rules (a JSON Schema's "any value" for one set of options).
    serialize starts a grammar that names this prelude from their words, at the same offsets in
    every grammar (the rule table comes last), and from the writer's tables, so that each costs
    one lookup instead of a walk. The expressions hold no rule reference; the rules refer to each
    other only, and are the grammar's first rules, in this order, with these very bodies."""

    def __init__(self, *exprs: Expr, rules: dict[str, Expr] | None = None):
        self.exprs = exprs  # kept alive: the writer's tables know them by id
        self.rules = dict(rules or {})
        self._start: _Written | None = None

    def start(self) -> _Written:
        """The prelude written; built once, then shared."""
        if self._start is None:
            writer = _Writer({name: i for i, name in enumerate(self.rules)})
            for e in self.exprs:
                if any(type(x) is Ref for x in distinct_nodes(e)):
                    raise ValueError(f"a prelude expression refers to a rule: {e!r}")
                writer.emit(e)
            bodies = _write_rules(writer, list(self.rules), self.rules, range(len(self.rules)), {})
            self._start = _Written(writer.words, writer.leaves, writer.nodes, writer.by_id, bodies,
                                   array("i", writer.words))
        return self._start

    def fits(self, grammar: Grammar) -> bool:
        """Whether the grammar holds this prelude's rules as they are (the same objects)."""
        return all(grammar.rules.get(name) is body for name, body in self.rules.items())


def serialize(grammar: Grammar) -> tuple[array, list[str]]:
    """Flatten to int32 words (see module doc) plus the rule names by index.

    Rules are written as the root reaches them; a rule it never reaches matches nothing there
    (its references are still checked), and a rule whose body is written already, as an
    earlier rule's, becomes a reference to that rule (the core inlines it): equal bodies are
    equal words, so the core builds each automaton once. A prelude's rules come first, written
    already."""
    prelude = grammar.prelude
    if prelude is not None and prelude.rules and not prelude.fits(grammar):
        raise GrammarError("a grammar's rules differ from its prelude's")
    fixed = prelude.rules if prelude is not None else {}
    names = [*fixed, *(name for name in grammar.rules if name not in fixed)]
    index = {name: i for i, name in enumerate(names)}
    if grammar.root not in index:
        raise GrammarError(f"the start rule {grammar.root!r} is not defined")
    start = prelude.start() if prelude is not None else None
    writer = _Writer(index, start)
    words = writer.words
    words[2], words[3] = len(names), index[grammar.root]
    bodies = [-1] * len(names)  # the rule table, written after the nodes
    first_with: dict[int, str] = {}  # body offset -> the first rule written with that body
    for i, name in enumerate(fixed):
        bodies[i] = start.bodies[i]
        first_with.setdefault(bodies[i], name)
        writer.marked[i] = 1
    writer.reach(index[grammar.root])
    with nesting_guard("the grammar"):
        _write_rules(writer, names, grammar.rules, writer.reached, first_with, bodies)
        if len(fixed) + len(writer.reached) < len(names):
            nothing = writer.leaf(ByteSet(()), ByteSet)  # the empty choice
            for i, name in enumerate(names):
                if not writer.marked[i]:
                    _check_refs(grammar.rules[name], index)
                    bodies[i] = nothing
    words += bodies
    try:
        if start is None:
            return array("i", words), names
        out = start.int32[:]  # the prelude's words as int32 already (converting each int costs ~17 ns)
        out.fromlist(words[len(out):])
        out[2], out[3] = words[2], words[3]
        return out, names
    except OverflowError:  # a check parameter; repetition bounds are checked where they are written
        raise GrammarLimitError(f"a number in the grammar exceeds the IR's limit {MAX_COUNT}") from None


def _write_rules(writer: _Writer, names: list[str], rules: dict, order, first_with: dict, bodies=None) -> list:
    """Writes the rules `order` gives (indices into names; a list may grow while they are
    written, as references reach rules), each body once: a rule whose body is an earlier rule's
    becomes a reference to that rule. Returns `bodies`, the offsets by rule index."""
    if bodies is None:
        bodies = [-1] * len(names)
    k = 0
    while k < len(order):
        i = order[k]
        k += 1
        name = names[i]
        at = writer.emit(rules[name])
        first = first_with.setdefault(at, name)
        bodies[i] = at if first == name else writer.leaf(Ref(first), Ref)
    return bodies


def _check_refs(top: Expr, index: dict[str, int]) -> None:
    """GrammarError for a reference to no rule in a rule the root does not reach."""
    for e in distinct_nodes(top):
        if type(e) is Ref and e.name not in index:
            raise GrammarError(f"undefined rule {e.name!r}")


def children(e: Expr) -> tuple:
    """An expression's subexpressions (a machine's: its edges' items)."""
    t = type(e)
    if t is Seq or t is Alt or t is And:
        return e.items
    if t is Repeat or t is Region:
        return (e.item,)
    if t is Machine:
        return tuple([x for _, x, _ in e.edges])
    return ()


def distinct_nodes(top: Expr):
    """Each expression object under `top` once (expressions are DAGs), depth first, without
    recursion (nesting is the user's)."""
    stack, seen = [top], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(children(e))


def rebuild(top: Expr, build) -> Expr:
    """`top` rebuilt bottom-up through its sequences, choices and repetitions (other expressions
    are leaves here), without recursion: `build(e, kids, new_kids)` gives the replacement of
    each distinct expression `e` from its subexpressions `kids` and their replacements."""
    done: dict[int, Expr] = {}
    stack = [top]
    while stack:
        e = stack[-1]
        if id(e) in done:
            stack.pop()
            continue
        t = type(e)
        kids = e.items if t is Seq or t is Alt else (e.item,) if t is Repeat else ()
        pending = [k for k in kids if id(k) not in done]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        done[id(e)] = build(e, kids, [done[id(k)] for k in kids])
    return done[id(top)]


_LEAVES = frozenset({Ref, Bytes, ByteSet})  # written by their contents, with no children


class _Writer:
    """Writes expressions as IR nodes, children first, without recursion (nesting is the user's).

    Equal subtrees are written once: leaves are looked up by their plain contents, inner nodes
    by their words (which name their children's offsets, so equal words mean equal subtrees and
    no expression is ever hashed or compared in depth); `by_id` skips objects already written
    (expressions are DAGs)."""

    def __init__(self, index: dict[str, int], start: _Written | None = None):
        """`start`: a written prelude, whose words and tables are copied (this grammar's nodes join
        them); else the header alone, n_rules and the root for serialize to fill in."""
        self.index = index
        words, leaves, nodes, by_id = ((MAGIC, VERSION, 0, 0), {}, {}, {}) if start is None else (
            start.words, start.leaves, start.nodes, start.by_id)
        self.words, self.leaves, self.nodes, self.by_id = list(words), dict(leaves), dict(nodes), dict(by_id)
        self.reached: list[int] = []  # rule indices referred to so far, in order
        self.marked = bytearray(len(index))

    def reach(self, rule: int) -> None:
        if not self.marked[rule]:
            self.marked[rule] = 1
            self.reached.append(rule)

    def emit(self, top: Expr) -> int:
        by_id, leaf, inner = self.by_id, self.leaf, self.inner
        stack = [top]
        pop = stack.pop
        while stack:
            expr = stack[-1]
            if id(expr) in by_id:  # written while it waited
                pop()
                continue
            t = type(expr)
            if t in _LEAVES:
                pop()
                by_id[id(expr)] = leaf(expr, t)
                continue
            # The children's offsets, leaves written on the way; children that are inner nodes and
            # not written yet go first (pushed last to first), then this node is looked at again.
            offsets, waiting = [], None
            for item in (expr.items if t is Seq or t is Alt else children(expr)):
                at = by_id.get(id(item))
                if at is None:
                    ti = type(item)
                    if ti in _LEAVES:
                        at = by_id[id(item)] = leaf(item, ti)
                    else:
                        if waiting is None:
                            waiting = []
                        waiting.append(item)
                        continue
                offsets.append(at)
            if waiting is not None:
                stack.extend(reversed(waiting))
                continue
            pop()
            by_id[id(expr)] = inner(expr, t, offsets)
        return by_id[id(top)]

    def leaf(self, expr: Expr, t) -> int:
        key = expr.name if t is Ref else expr.data if t is Bytes else expr.ranges
        known = self.leaves.get(key)
        if known is None:
            words = self.words
            known = self.leaves[key] = len(words)
            if t is Ref:
                at = self.index.get(key)
                if at is None:
                    raise GrammarError(f"undefined rule {key!r}")
                self.reach(at)
                words.extend((REF, at))
            elif t is ByteSet and not key:  # no byte at all: the empty choice
                words.extend((ALT, 0))
            else:
                words.extend((BYTES if t is Bytes else BYTESET, len(key)))
                words.extend(key if t is Bytes else [v for r in key for v in r])
        return known

    def inner(self, expr: Expr, t, kids: list[int]) -> int:
        """The offset of an inner node, from its children's offsets (in `children` order)."""
        if t is Seq or t is Alt:
            node = (SEQ if t is Seq else ALT, len(kids), *kids)
        elif t is Repeat:
            for bound in (expr.min, expr.max or 0):
                if bound > MAX_COUNT:
                    raise GrammarLimitError(f"repetition bound {bound} exceeds the limit {MAX_COUNT}")
            node = (REPEAT, expr.min, -1 if expr.max is None else expr.max, kids[0])
        elif t is Check:
            node = (CHECK, expr.kind, len(expr.params), *expr.params)
        elif t is Region:
            node = (REGION, kids[0])
        elif t is Automaton:
            node = (AUTOMATON, len(expr.accept), len(expr.runs), *map(int, expr.accept),
                    *[w for run in expr.runs for w in run])
        elif t is Machine:
            node = (MACHINE, len(expr.accept), len(expr.edges), *map(int, expr.accept),
                    *[w for (a, _, b), x in zip(expr.edges, kids) for w in (a, x, b)])
        elif t is And:
            node = (AND, len(expr.items), int(expr.escaped),
                    *[w for x, want in zip(kids, expr.wants) for w in (x, int(want))])
        else:
            raise TypeError(f"not an IR expression: {expr!r}")
        known = self.nodes.get(node)
        if known is None:
            known = self.nodes[node] = len(self.words)
            self.words.extend(node)
        return known

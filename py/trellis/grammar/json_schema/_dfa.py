"""Small byte-level DFAs for the JSON Schema front-end (pure Python, runs under Pyodide).

A string's constraints together are an ir.And, whose product the core builds. The automata
here are the ones the front-end needs while it converts: the remainders of `multipleOf`
(_numbers.py), products whose size decides between an automaton and a check (multipleOf), the
matching of instances against `pattern` and `format` (_validate.py), and, in the tests, the
independent product that ir.And is checked against. A DFA goes into the IR whole, as an
ir.Automaton (as_expr).
"""

from __future__ import annotations

from ...errors import UnsupportedSchemaError
from .. import ir

MAX_STATES = 4000  # per DFA; beyond this the schema is refused rather than compiled slowly


class Dfa:
    """`trans[s]` is a sorted list of (lo, hi, target) byte ranges; `accept[s]` a bool; start 0."""

    __slots__ = ("trans", "accept", "_cuts", "trimmed")

    def __init__(self, trans: list[list[tuple[int, int, int]]], accept: list[bool], trimmed: bool = False):
        self.trans, self.accept = trans, accept
        self._cuts = None
        self.trimmed = trimmed  # known to have only reachable states that can reach acceptance

    def cuts(self) -> frozenset:
        """Every byte where a range of some transition starts or ends + 1 (kept: DFAs are shared)."""
        if self._cuts is None:
            self._cuts = frozenset(x for row in self.trans for lo, hi, _ in row for x in (lo, hi + 1))
        return self._cuts

    def step(self, state: int, byte: int) -> int:
        for lo, hi, t in self.trans[state]:
            if lo <= byte <= hi:
                return t
        return -1

    def matches(self, data: bytes) -> bool:
        s = 0
        for b in data:
            s = self.step(s, b)
            if s < 0:
                return False
        return self.accept[s]


def _too_big(what: str, keyword: str, pointer: str):
    return UnsupportedSchemaError(f"{what} needs more than {MAX_STATES} automaton states", keyword, pointer)


# ---- IR -> NFA -> DFA ------------------------------------------------------------------


class _Nfa:
    def __init__(self, share_ends: bool = False):
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        # The alternatives of an Alt end in its one end state rather than each in its own: after
        # any of the hundreds of sequences of a `\\p{L}` class the automaton is in one state.
        self.share_ends = share_ends

    def new(self) -> int:
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, expr: ir.Expr, start: int, budget: list[int], end: int | None = None) -> int:
        """Add expr from `start`; returns its end state: `end` when given (shared ends only)."""
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        if isinstance(expr, ir.Bytes) and expr.data:
            cur = start
            for k, b in enumerate(expr.data):
                nxt = end if end is not None and k == len(expr.data) - 1 else self.new()
                self.edges[cur].append((b, b, nxt))
                cur = nxt
            return cur
        if isinstance(expr, ir.ByteSet):
            target = self.new() if end is None else end
            for lo, hi in expr.ranges:
                self.edges[start].append((lo, hi, target))
            return target
        if isinstance(expr, ir.Seq) and expr.items:
            cur = start
            for k, item in enumerate(expr.items):
                cur = self.build(item, cur, budget, end if k == len(expr.items) - 1 else None)
            return cur
        if isinstance(expr, ir.Alt):
            target = self.new() if end is None else end
            for item in expr.items:
                s = self.new()
                self.eps[start].append(s)
                if self.share_ends:
                    self.build(item, s, budget, target)
                else:
                    self.eps[self.build(item, s, budget)].append(target)
            return target
        cur = self.build_other(expr, start, budget)
        if end is None:
            return cur
        self.eps[cur].append(end)
        return end

    def build_other(self, expr: ir.Expr, start: int, budget: list[int]) -> int:
        if isinstance(expr, (ir.Bytes, ir.Seq)):  # empty
            return start
        if isinstance(expr, (ir.Automaton, ir.Machine)):  # a node per state and one end
            budget[0] -= len(expr.accept)
            if budget[0] < 0:
                raise OverflowError
            states = [self.new() for _ in expr.accept]
            end = self.new()
            self.eps[start].append(states[0])
            for s, accepting in enumerate(expr.accept):
                if accepting:
                    self.eps[states[s]].append(end)
            if isinstance(expr, ir.Automaton):
                for s, lo, hi, t in expr.runs:
                    self.edges[states[s]].append((lo, hi, states[t]))
            else:
                for s, item, t in expr.edges:
                    self.eps[self.build(item, states[s], budget)].append(states[t])
            return end
        if isinstance(expr, ir.Repeat):
            cur = start
            for _ in range(expr.min):
                cur = self.build(expr.item, cur, budget)
            if expr.max is None:
                loop = self.new()
                self.eps[cur].append(loop)
                self.eps[self.build(expr.item, loop, budget)].append(loop)
                return loop
            end = self.new()
            for _ in range(expr.max - expr.min):
                self.eps[cur].append(end)
                cur = self.build(expr.item, cur, budget)
            self.eps[cur].append(end)
            return end
        raise TypeError(f"cannot build an automaton from {type(expr).__name__}")

    def closure(self, states) -> frozenset:
        seen, todo = set(states), list(states)
        while todo:
            s = todo.pop()
            for t in self.eps[s]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


def _partition(edges):
    """Split overlapping (lo, hi, x) ranges into disjoint pieces with the set of x's, in order."""
    if len(edges) == 1:
        lo, hi, x = edges[0]
        return [(lo, hi, {x})]
    if len(edges) > 64:  # many ranges (a big character class): a sweep over the range ends
        return _sweep(edges)
    # few ranges: cut the bytes at every range end and fill the pieces each range covers
    points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
    where = {p: i for i, p in enumerate(points)}
    sets: list = [None] * (len(points) - 1)
    for lo, hi, x in edges:
        for i in range(where[lo], where[hi + 1]):
            if sets[i] is None:
                sets[i] = {x}
            else:
                sets[i].add(x)
    return [(points[i], points[i + 1] - 1, xs) for i, xs in enumerate(sets) if xs is not None]


def _sweep(edges):
    events: dict[int, list] = {}
    for lo, hi, x in edges:
        events.setdefault(lo, []).append((x, 1))
        events.setdefault(hi + 1, []).append((x, -1))
    points = sorted(events)
    active: dict = {}
    out = []
    for a, b in zip(points, points[1:]):
        for x, d in events[a]:
            n = active.get(x, 0) + d
            if n:
                active[x] = n
            else:
                del active[x]
        if active:
            out.append((a, b - 1, set(active)))
    return out


class _Subsets:
    """What both subset constructions (from_ir, LazyDfa) start from: the NFA of an expression,
    its end, and the collapse of sets that hold a universal state. A set holding a state from
    which every string is accepted (after the match of an unanchored pattern) accepts everything
    too: all such sets are one DFA state, which keeps the searches for several words from
    tracking every combination of words found so far."""

    def __init__(self, expr: ir.Expr, keyword: str, pointer: str, compact: bool):
        self.nfa = nfa = _Nfa(share_ends=compact)
        start = nfa.new()
        try:
            self.end = nfa.build(expr, start, [200_000])
        except OverflowError:
            raise _too_big("this string constraint", keyword, pointer) from None
        self.universal = _universal_states(nfa, self.end)
        self.everything = nfa.closure([min(self.universal)]) if self.universal else None
        self.first = self.settled(nfa.closure([start]))

    def settled(self, states: frozenset) -> frozenset:
        return self.everything if self.universal and not self.universal.isdisjoint(states) else states


def from_ir(expr: ir.Expr, keyword: str = "pattern", pointer: str = "", compact: bool = False) -> Dfa:
    """The subset construction. `compact` (for expressions with huge character classes): shared
    Alt ends (see _Nfa) and memoized closures, then minimized; other callers keep their automata."""
    sets = _Subsets(expr, keyword, pointer, compact)
    nfa, end, first = sets.nfa, sets.end, sets.first
    closure = _memoized(nfa.closure) if compact else nfa.closure
    index = {first: 0}
    order = [first]
    trans: list[list[tuple[int, int, int]]] = []
    accept: list[bool] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        accept.append(end in cur)
        row = []
        for lo, hi, targets in _partition([e for s in cur for e in nfa.edges[s]]):
            nxt = sets.settled(closure(targets))
            if nxt not in index:
                if len(order) >= MAX_STATES:
                    raise _too_big("this string constraint", keyword, pointer)
                index[nxt] = len(order)
                order.append(nxt)
            row.append((lo, hi, index[nxt]))
        trans.append(_merge(row))
    return minimize(Dfa(trans, accept)) if compact else Dfa(trans, accept)


class LazyDfa:
    """The subset construction of from_ir, done only for the steps that strings being matched
    take: a property name or an enum value tested against a pattern meets a few of the states
    that the whole automaton of the search has (a search for one of 18 words: hundreds).

    Shared by the compiles of a process (and their threads): its states and steps are a cache,
    which starts again when full (a race recomputes a step). A text that alone meets more than
    MAX_STATES states raises OverflowError: the whole automaton, too big, was refused before."""

    MAX_STEPS = 100_000

    def __init__(self, expr: ir.Expr, keyword: str = "pattern", pointer: str = "", compact: bool = False):
        self.sets = _Subsets(expr, keyword, pointer, compact)
        self.states: set[frozenset] = set()
        self.steps: dict = {}

    def matches(self, data: bytes) -> bool:
        sets, steps = self.sets, self.steps
        cur, edges, closure = sets.first, sets.nfa.edges, sets.nfa.closure
        met = 0  # states this text met first
        for b in data:
            if cur is sets.everything:
                return True
            nxt = steps.get((cur, b))
            if nxt is None:
                nxt = sets.settled(closure([t for s in cur for lo, hi, t in edges[s] if lo <= b <= hi]))
                if nxt not in self.states:
                    met += 1
                    if met > MAX_STATES:
                        raise OverflowError
                    if len(self.states) >= MAX_STATES or len(steps) >= self.MAX_STEPS:
                        self.states.clear()
                        steps.clear()
                    self.states.add(nxt)
                steps[cur, b] = nxt
            if not nxt:
                return False
            cur = nxt
        return sets.end in cur


def _universal_states(nfa: _Nfa, end: int) -> set[int]:
    """States from which every byte string leads to `end`: the target t of an edge on every
    byte from a state s, when t's closure holds `end` and s (so that it can loop)."""
    out = set()
    for s, edges in enumerate(nfa.edges):
        for lo, hi, t in edges:
            if lo == 0 and hi == 0xFF and t not in out:
                reach = nfa.closure([t])
                if end in reach and s in reach:
                    out.add(t)
    return out


def _memoized(closure):
    memo: dict[frozenset, frozenset] = {}

    def cached(targets) -> frozenset:
        key = frozenset(targets)
        known = memo.get(key)
        if known is None:
            known = memo[key] = closure(key)
        return known

    return cached


def minimize(d: Dfa) -> Dfa:
    """The equivalent DFA with the fewest states (Moore's refinement), numbered breadth-first."""
    starts = _cuts([d])
    rows = [_expand(row, starts) for row in d.trans]
    # block[-1] (the last entry) is the dead state's: a missing transition reads it
    block = [int(a) for a in d.accept] + [-1]
    count = len(set(d.accept))
    while True:  # split blocks by where their bytes lead until nothing splits
        keys: dict[tuple, int] = {}
        at = block.__getitem__
        block = [keys.setdefault((block[s], tuple(map(at, row))), len(keys)) for s, row in enumerate(rows)]
        block.append(-1)
        if len(keys) == count:
            break
        count = len(keys)
    block.pop()
    first = {}
    for s, b in enumerate(block):
        first.setdefault(b, s)
    number = {block[0]: 0}
    order = [block[0]]
    trans, accept = [], []
    for b in order:  # grows while it is walked
        row = []
        for lo, hi, t in d.trans[first[b]]:
            j = number.get(block[t])
            if j is None:
                j = number[block[t]] = len(order)
                order.append(block[t])
            row.append((lo, hi, j))
        trans.append(_merge(row))
        accept.append(d.accept[first[b]])
    return Dfa(trans, accept, d.trimmed)  # merging states keeps them reachable and live


def _merge(row):
    out = []
    for lo, hi, t in sorted(row):
        if out and out[-1][2] == t and out[-1][1] + 1 == lo:
            out[-1] = (out[-1][0], hi, t)
        else:
            out.append((lo, hi, t))
    return out


# ---- combinations -------------------------------------------------------------------------


def product(dfas: list[Dfa], wants: list[bool], keyword: str = "pattern", pointer: str = "") -> Dfa:
    """The strings accepted by the components with `wants[k]` True and rejected by the others
    (a product automaton, trimmed). A missing transition is the dead state (-1) of that
    component.

    States that cannot lead to acceptance are not built (trimming would drop them, and all
    that they lead to): those where a wanted component is dead, and those where an unwanted
    component accepts everything the first wanted one still can (e.g. the rest of "^a.*" once
    the string starts with "a"). So contradictory constraints cost little."""
    n = len(dfas)
    required = [k for k in range(n) if wants[k]]
    guard = required[0] if required else None
    negated = [k for k in range(n) if not wants[k]] if guard is not None else []
    covered: dict[int, dict] = {k: {} for k in negated}

    def hopeless(state) -> bool:
        if any(state[k] < 0 for k in required):
            return True
        return any(state[k] >= 0 and _covers(dfas[k], state[k], dfas[guard], state[guard], covered[k])
                   for k in negated)

    start = tuple(0 for _ in dfas)
    if hopeless(start):
        return Dfa([[]], [False])
    # The bytes cut at every range end of every component: within one piece each component
    # has one target, so a product row is the components' rows zipped piece by piece.
    starts = _cuts(dfas)
    ends = [x - 1 for x in starts[1:]] + [255]
    nowhere = (-1,) * len(starts)
    expanded: list[dict] = [{} for _ in dfas]

    def pieces_of(k: int, s: int):
        if s < 0:
            return nowhere
        row = expanded[k].get(s)
        if row is None:
            row = expanded[k][s] = _expand(dfas[k].trans[s], starts)
        return row

    index = {start: 0, (-1,) * n: -1}
    order = [start]
    trans, accept = [], []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        accept.append(all((s >= 0 and d.accept[s]) == w for d, s, w in zip(dfas, cur, wants)))
        targets = list(zip(*[pieces_of(k, s) for k, s in enumerate(cur)]))
        js = list(map(index.get, targets))  # the common case, all known, without a Python loop
        if None in js:
            for x, j in enumerate(js):
                if j is None:
                    nxt = targets[x]
                    j = index.get(nxt)  # seen earlier in this row
                    if j is None:
                        if hopeless(nxt):
                            j = index[nxt] = -1
                        else:
                            if len(order) >= MAX_STATES:
                                raise _too_big("this combination of string constraints", keyword, pointer)
                            j = index[nxt] = len(order)
                            order.append(nxt)
                    js[x] = j
        row = []
        last = -1
        for x, j in enumerate(js):
            if j != last:
                if j >= 0:
                    row.append([starts[x], ends[x], j])
                last = j
            elif j >= 0:
                row[-1][1] = ends[x]
        trans.append([tuple(r) for r in row])
    d = trim(Dfa(trans, accept), reachable=True)  # every state was reached to be built
    return minimize(d) if keyword in _NUMBER_KEYWORDS else d


# The keywords whose products are over number texts (converter: multipleOf, and `not` for numbers):
# bounds and remainders overlap there, so they shrink when minimized (764 states to 66 for
# multipleOf 256 with minimum 1024), and every state saved is a rule the core need not compile.
# String products (a pattern and a length) are about minimal already, and Moore's refinement
# would take a round per character of their length.
_NUMBER_KEYWORDS = ("multipleOf", "not")


def _cuts(dfas: list[Dfa]) -> list[int]:
    """The first byte of every piece when bytes are cut at each range end of each DFA."""
    points = {0}
    for d in dfas:
        points |= d.cuts()
    points.discard(256)
    return sorted(points)


def _expand(row, starts) -> tuple:
    """A state's targets, one per piece (-1: none); every piece lies within a range or outside all."""
    out = []
    j, n = 0, len(row)
    for a in starts:
        while j < n and row[j][1] < a:
            j += 1
        out.append(row[j][2] if j < n and row[j][0] <= a else -1)
    return tuple(out)


def _covers(d: Dfa, q: int, g: Dfa, u: int, memo: dict) -> bool:
    """Whether d accepts from state q every string that g accepts from state u (a search of
    the pairs reachable from (q, u) for one where g accepts or moves and d does not)."""
    start = (q, u)
    known = memo.get(start)
    if known is not None:
        return known
    seen = {start}
    todo = [start]
    while todo:
        pair = todo.pop()
        known = memo.get(pair)
        if known is True:
            continue
        q1, u1 = pair
        if known is False or (g.accept[u1] and not d.accept[q1]):
            memo[start] = False
            return False
        row = d.trans[q1]
        i = 0
        for lo, hi, u2 in g.trans[u1]:
            x = lo
            while x <= hi:
                while i < len(row) and row[i][1] < x:
                    i += 1
                if i == len(row) or row[i][0] > x:
                    memo[start] = False
                    return False
                nxt = (row[i][2], u2)
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
                x = row[i][1] + 1
    for pair in seen:
        memo[pair] = True
    return True


def intersect(dfas: list[Dfa], keyword="pattern", pointer="") -> Dfa:
    if len(dfas) == 1:
        return dfas[0]
    return product(dfas, [True] * len(dfas), keyword, pointer)


def _reachable(d: Dfa) -> set[int]:
    seen, todo = {0}, [0]
    while todo:
        s = todo.pop()
        for _, _, t in d.trans[s]:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def trim(d: Dfa, reachable: bool = False) -> Dfa:
    """Drop states that are unreachable or cannot reach acceptance (state 0 stays first);
    `reachable`: every state is known to be reachable."""
    if d.trimmed:
        return d
    reach = range(len(d.trans)) if reachable else _reachable(d)
    back: list[list[int]] = [[] for _ in d.trans]
    for s in reach:
        for _, _, t in d.trans[s]:
            back[t].append(s)
    live = {s for s in reach if d.accept[s]}
    todo = list(live)
    while todo:
        s = todo.pop()
        for p in back[s]:
            if p not in live:
                live.add(p)
                todo.append(p)
    if 0 not in live:
        return Dfa([[]], [False], True)
    order = [0] + sorted(live - {0})
    index = {s: i for i, s in enumerate(order)}
    # rows stay merged: dropping transitions and renumbering states joins no two ranges
    trans = [[(lo, hi, index[t]) for lo, hi, t in d.trans[s] if t in live] for s in order]
    return Dfa(trans, [d.accept[s] for s in order], True)


# ---- DFA -> IR ------------------------------------------------------------------------------


def as_expr(d: Dfa) -> ir.Expr:
    """The DFA as one IR node (the core writes its states into the automaton of the rule that
    holds it), trimmed; NOTHING for the empty language."""
    d = trim(d)
    if not d.accept[0] and not d.trans[0]:
        return ir.NOTHING
    return ir.Automaton([(s, lo, hi, t) for s, row in enumerate(d.trans) for lo, hi, t in row], d.accept)

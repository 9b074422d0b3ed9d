"""A slow, obviously-correct recognizer over the grammar IR: the oracle for the C++ core.

The IR is lowered to a plain context-free grammar whose terminals are byte sets, and an
Earley recognizer runs over the input bytes. Earley handles left recursion and
ambiguity for free; empty rules are handled the Aycock–Horspool way (predicting a
nullable symbol also steps over it). Non-productive symbols are removed first, so every
item that survives in the last Earley set lies on a derivation that can still be
completed: "the set is non-empty" is exactly "the input is a prefix of the language".
"""

from __future__ import annotations

from trellis.errors import GrammarError
from trellis.grammar import ir
from trellis.grammar.json_schema import _dfa
from trellis.grammar.json_schema._text import escape_byte

# Symbols are ints: a nonterminal is >= 0; a terminal is ~k (< 0), k indexing _Cfg.masks,
# where a mask is a 256-bit int with bit b set when byte b matches.


class _Cfg:
    """Productions `lhs -> rhs` built from the IR, fresh nonterminals for Alt and Repeat."""

    def __init__(self, grammar: ir.Grammar):
        self.lhs: list[int] = []
        self.rhs: list[tuple[int, ...]] = []
        self.masks: list[int] = []
        self._mask_ids: dict[int, int] = {}
        self._memo: dict[ir.Expr, tuple[int, ...]] = {}
        self.n_nonterminals = 0
        self.rule_nt = {name: self._fresh() for name in grammar.rules}
        if grammar.root not in self.rule_nt:
            raise GrammarError(f"the root rule {grammar.root!r} is not defined")
        self.start = self._fresh()
        self._add(self.start, (self.rule_nt[grammar.root],))
        for name, body in grammar.rules.items():
            self._add(self.rule_nt[name], self._symbols(body))

    def _fresh(self) -> int:
        self.n_nonterminals += 1
        return self.n_nonterminals - 1

    def _add(self, lhs: int, rhs: tuple[int, ...]) -> None:
        self.lhs.append(lhs)
        self.rhs.append(rhs)

    def _terminal(self, mask: int) -> int:
        if mask not in self._mask_ids:
            self._mask_ids[mask] = len(self.masks)
            self.masks.append(mask)
        return ~self._mask_ids[mask]

    def _symbols(self, expr: ir.Expr) -> tuple[int, ...]:
        if expr not in self._memo:
            self._memo[expr] = self._lower(expr)
        return self._memo[expr]

    def _lower(self, expr: ir.Expr) -> tuple[int, ...]:
        if isinstance(expr, ir.Bytes):
            return tuple(self._terminal(1 << b) for b in expr.data)
        if isinstance(expr, ir.ByteSet):
            mask = 0
            for lo, hi in expr.ranges:
                mask |= ((1 << (hi - lo + 1)) - 1) << lo
            return (self._terminal(mask),)
        if isinstance(expr, ir.Seq):
            return tuple(s for item in expr.items for s in self._symbols(item))
        if isinstance(expr, ir.Alt):
            n = self._fresh()
            for item in expr.items:  # no items: n has no production, matches nothing
                self._add(n, self._symbols(item))
            return (n,)
        if isinstance(expr, ir.Repeat):
            body = self._symbols(expr.item)
            if expr.max is None:  # rest -> ε | body rest
                tail = self._fresh()
                self._add(tail, ())
                self._add(tail, body + (tail,))
            else:  # opt_k -> ε | body opt_{k-1}: at most max-min more copies
                if expr.max < expr.min:
                    raise GrammarError(f"repeat bounds out of order: {expr.min} > {expr.max}")
                tail = None
                for _ in range(expr.max - expr.min):
                    opt = self._fresh()
                    self._add(opt, ())
                    self._add(opt, body + ((tail,) if tail is not None else ()))
                    tail = opt
            return body * expr.min + ((tail,) if tail is not None else ())
        if isinstance(expr, ir.Region):  # marks where checks read the text: the oracle has no checks
            return self._symbols(expr.item)
        if isinstance(expr, ir.And):
            return self._automaton(_product(expr), expr.escaped)
        if isinstance(expr, ir.Automaton):
            rows = [[] for _ in expr.accept]
            for s, lo, hi, t in expr.runs:
                rows[s].append((lo, hi, t))
            return self._automaton(_dfa.Dfa(rows, list(expr.accept)), False)
        if isinstance(expr, ir.Machine):  # a nonterminal per state: `state -> edge's symbols next`
            nts = [self._fresh() for _ in expr.accept]
            for s, accepting in enumerate(expr.accept):
                if accepting:
                    self._add(nts[s], ())
            for s, item, t in expr.edges:
                self._add(nts[s], self._symbols(item) + (nts[t],))
            return (nts[0],)
        if isinstance(expr, ir.Ref):
            if expr.name not in self.rule_nt:
                raise GrammarError(f"undefined rule {expr.name!r}")
            return (self.rule_nt[expr.name],)
        raise TypeError(f"not an IR expression: {expr!r}")


    def _automaton(self, d, escaped: bool) -> tuple[int, ...]:
        """An automaton as productions: a nonterminal per state, `state -> byte next` per transition
        (escaped: a byte JSON escapes is its escape's bytes) and `state -> ε` where it accepts."""
        nts = [self._fresh() for _ in d.trans]
        for s, row in enumerate(d.trans):
            if d.accept[s]:
                self._add(nts[s], ())
            for lo, hi, t in row:
                for b in range(lo, hi + 1):
                    spelled = escape_byte(b) if escaped else None
                    data = spelled.encode() if spelled else bytes([b])
                    self._add(nts[s], tuple(self._terminal(1 << x) for x in data) + (nts[t],))
        return (nts[0],)


def _product(e: ir.And):
    """The Python front-end's own product construction (independent of the core's)."""
    return _dfa.product([_dfa.from_ir(item) for item in e.items], list(e.wants))


def _fixpoint(cfg: _Cfg, ok_terminal) -> set[int]:
    """Nonterminals with a production made only of ok terminals and found nonterminals."""
    found: set[int] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in zip(cfg.lhs, cfg.rhs):
            if lhs not in found and all(
                (s in found) if s >= 0 else ok_terminal(cfg.masks[~s]) for s in rhs
            ):
                found.add(lhs)
                changed = True
    return found


class _Set:
    """One Earley set: its items, and indexes of the items waiting on each symbol."""

    __slots__ = ("items", "waiting", "scanning", "predicted")

    def __init__(self):
        self.items: set[tuple[int, int, int]] = set()
        self.waiting: dict[int, list[tuple[int, int, int]]] = {}
        self.scanning: list[tuple[int, tuple[int, int, int]]] = []
        self.predicted: set[int] = set()


class Reference:
    """`Reference(grammar).accepts(data)` / `.is_prefix(data)` over bytes."""

    def __init__(self, grammar: ir.Grammar):
        cfg = _Cfg(grammar)
        productive = _fixpoint(cfg, lambda mask: mask != 0)
        self.nullable = _fixpoint(cfg, lambda mask: False)
        self.masks = cfg.masks
        self.start = cfg.start
        self.empty_language = cfg.start not in productive
        # Keep only productions whose every symbol can derive some byte string.
        self.lhs, self.rhs, self.by_lhs = [], [], {}
        for lhs, rhs in zip(cfg.lhs, cfg.rhs):
            if all((s in productive) if s >= 0 else cfg.masks[~s] != 0 for s in rhs):
                if lhs in productive:
                    self.by_lhs.setdefault(lhs, []).append(len(self.lhs))
                    self.lhs.append(lhs)
                    self.rhs.append(rhs)

    # ---- public ---------------------------------------------------------------------

    def is_prefix(self, data: bytes) -> bool:
        """True when some continuation of `data` (possibly none) is in the language."""
        return self._run(bytes(data)) is not None

    def prefixes_after(self, data: bytes, continuations) -> list[bool]:
        """is_prefix(data + c) for each c, parsing `data` once (the brute-force masks ask this
        for every token after the same text)."""
        sets = self._run(bytes(data))
        return [sets is not None and self._extend(list(sets), c) is not None for c in continuations]

    def accepts(self, data: bytes) -> bool:
        """True when `data` itself is in the language."""
        sets = self._run(bytes(data))
        return sets is not None and self._finished(sets[-1])

    def next_bytes(self, data: bytes) -> set[int]:
        """The bytes b for which data + b is still a prefix (empty if data is not one)."""
        sets = self._run(bytes(data))
        if sets is None:
            return set()
        mask = 0
        for term, _ in sets[-1].scanning:
            mask |= self.masks[term]
        return {b for b in range(256) if mask >> b & 1}

    # ---- Earley ---------------------------------------------------------------------

    def _finished(self, s: _Set) -> bool:
        return any(self.lhs[p] == self.start and d == len(self.rhs[p]) and o == 0
                   for p, d, o in s.items)

    def _run(self, data: bytes) -> list[_Set] | None:
        """All Earley sets for `data`, or None as soon as one is empty."""
        if self.empty_language:
            return None
        sets = [_Set()]
        self._close(sets, [(p, 0, 0) for p in self.by_lhs[self.start]])
        return self._extend(sets, data)

    def _extend(self, sets: list[_Set], data: bytes) -> list[_Set] | None:
        """`sets` extended by `data`'s bytes (appended in place: a closed set never changes, so
        callers may share the sets before them)."""
        for byte in data:
            advanced = [(p, d + 1, o) for term, (p, d, o) in sets[-1].scanning
                        if self.masks[term] >> byte & 1]
            if not advanced:
                return None
            sets.append(_Set())
            self._close(sets, advanced)
        return sets

    def _close(self, sets: list[_Set], seeds: list[tuple[int, int, int]]) -> None:
        """Predict and complete in the last set until nothing new appears."""
        here = len(sets) - 1
        s = sets[here]
        agenda: list[tuple[int, int, int]] = []

        def add(item):
            if item not in s.items:
                s.items.add(item)
                agenda.append(item)

        for item in seeds:
            add(item)
        while agenda:
            item = agenda.pop()
            p, dot, origin = item
            rhs = self.rhs[p]
            if dot == len(rhs):  # complete: advance everyone at `origin` waiting on lhs
                # Copy: when origin == here the list may grow; Aycock–Horspool covers those.
                for q, d, o in list(sets[origin].waiting.get(self.lhs[p], ())):
                    add((q, d + 1, o))
                continue
            sym = rhs[dot]
            if sym < 0:
                s.scanning.append((~sym, item))
                continue
            s.waiting.setdefault(sym, []).append(item)
            if sym not in s.predicted:
                s.predicted.add(sym)
                for q in self.by_lhs.get(sym, ()):
                    add((q, 0, here))
            if sym in self.nullable:
                add((p, dot + 1, origin))

"""Counting automata as grammar rules: one rule per state, named on first mention and built later
from a worklist (uniqueItems over a finite set, contains counts, objects' property counts)."""

from __future__ import annotations

from .. import ir

# States of one counting automaton (contains counts, min/maxProperties, tracked keys): at most this many.
MAX_ORDERED_STATES = 6000


class StateRules:
    """The rules of a counting automaton's states (uniqueItems, contains, objects): `ref(*key)`
    names the rule of the state `key` at once, and `body(*key)` (which refers to the states that
    follow through `ref`) is built later from a worklist, so that chains of thousands of states
    need no recursion. `start` / `start_with` build every state reachable from the first."""

    def __init__(self, conv, hint: str, body):  # conv: the Converter (its fresh, ref and rules)
        self.conv, self.hint, self.body = conv, hint, body
        self.names: dict = {}
        self.todo: list = []

    def ref(self, *key) -> ir.Ref:
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = self.conv.fresh(self.hint)
            self.todo.append(key)
        return self.conv.ref(name)

    def start(self, *key) -> ir.Ref:
        return self.start_with(self.ref(*key))

    def start_with(self, expr: ir.Expr) -> ir.Expr:
        """`expr` (which refers to the first states), once every state is built."""
        while self.todo:
            key = self.todo.pop()
            self.conv.rules[self.names[key]] = self.body(*key)
        self.body = None  # the body closes over this object: a cycle broken now, not by the collector
        return expr

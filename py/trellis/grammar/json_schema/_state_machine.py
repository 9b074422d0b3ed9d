"""Counting automata (uniqueItems over a finite set, contains counts, objects' members and property
counts): states numbered on first mention, their edges built later from a worklist (chains of
thousands of states need no recursion), written as one ir.Machine, or when large as a rule per
state."""

from __future__ import annotations

from .. import ir

# States of one counting automaton (contains counts, min/maxProperties, tracked keys): at most this many.
MAX_ORDERED_STATES = 6000
# Past this many states an automaton is a rule per state instead of one machine: a machine's
# chains of optional steps (an object's optional members) make each of its core DFA states hold
# the rest of the chain, a square in the number of states; calls between rules do not.
MACHINE_STATES = 64
ACCEPT = -1  # an edge's target: the automaton ends after the edge's expression


class StateMachine:
    """The states of a counting automaton: `state(*key)` numbers the state `key` at once, and
    `body(*key)` (which numbers the states that follow through `state`) gives its edges later,
    as (expression, next state's number or ACCEPT) pairs. `start(*key)` builds every state
    reachable from the first and returns the automaton's expression."""

    def __init__(self, conv, hint: str, body):  # conv: the Converter (its fresh, ref and rules)
        self.conv, self.hint, self.body = conv, hint, body
        self.numbers: dict = {}
        self.keys: list = []

    def state(self, *key) -> int:
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = len(self.keys)
            self.keys.append(key)
        return number

    def start(self, *key) -> ir.Expr:
        self.state(*key)
        edges = []  # per state, its (expression, next) pairs
        while len(edges) < len(self.keys):  # the list of keys grows while bodies are built
            edges.append([(e, t) for e, t in self.body(*self.keys[len(edges)]) if e != ir.NOTHING])
        self.body = None  # the body closes over this object: a cycle broken now, not by the collector
        return automaton(self.conv, self.hint, edges)


def automaton(conv, hint: str, edges: list) -> ir.Expr:
    """The expression of a counting automaton from its states' edges (state 0 first; each a list
    of (expression, next state's number or ACCEPT) pairs)."""
    n = len(edges)
    if n <= MACHINE_STATES:
        return ir.Machine([(s, e, n if t == ACCEPT else t) for s, out in enumerate(edges) for e, t in out],
                          [False] * n + [True])
    names = [conv.fresh(hint) for _ in range(n)]
    for name, out in zip(names, edges):
        conv.rules[name] = ir.alt(*(e if t == ACCEPT else ir.seq(e, conv.ref(names[t])) for e, t in out))
    return conv.ref(names[0])

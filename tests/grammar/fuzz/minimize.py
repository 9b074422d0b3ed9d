"""Cheap minimisation of a failing case: delta debugging for texts, tree shrinking for JSON values.

`reproduces(case) -> bool` says whether a candidate still shows the same finding; both passes stop
at a time budget or a number of tries, keeping the smallest candidate found so far.
"""

from __future__ import annotations

import time

from tests.grammar.fuzz.cases import Case


class _Budget:
    def __init__(self, seconds: float, tries: int):
        self.deadline, self.tries = time.monotonic() + seconds, tries

    def spend(self) -> bool:
        self.tries -= 1
        return self.tries >= 0 and time.monotonic() < self.deadline


def minimize(case: Case, reproduces, seconds: float = 20.0, tries: int = 300) -> Case:
    budget = _Budget(seconds, tries)
    if isinstance(case.payload, str):
        return case.with_payload(shrink_text(case.payload, lambda t: reproduces(case.with_payload(t)), budget))
    return case.with_payload(shrink_tree(case.payload, lambda v: reproduces(case.with_payload(v)), budget))


def shrink_text(text: str, keeps, budget: _Budget) -> str:
    """ddmin over characters: remove chunks, halving their size when no removal keeps the failure."""
    chunks = 2
    while len(text) >= 2:
        size = max(1, len(text) // chunks)
        removed = False
        for start in range(0, len(text), size):
            candidate = text[:start] + text[start + size:]
            if not budget.spend():
                return text
            if keeps(candidate):
                text, removed = candidate, True
                break
        if removed:
            chunks = max(chunks - 1, 2)
        elif size == 1:
            break
        else:
            chunks = min(len(text), chunks * 2)
    return text


def shrink_tree(value, keeps, budget: _Budget):
    """Repeatedly take the first smaller variant that keeps the failure: a deep chain cut in half,
    a member or item removed, a container replaced by one of its children, a string shortened."""
    while True:
        for candidate in _variants(value):
            if not budget.spend():
                return value
            if keeps(candidate):
                value = candidate
                break
        else:
            return value


def _variants(value):
    path = _deepest_path(value)
    for cut in (len(path) // 2, len(path) // 4):  # long nests first: halve them
        if cut >= 2:
            yield _get(value, path[:cut])
            yield _get(value, path[: cut + 1])
    yield from _local_variants(value)


def _local_variants(value):
    """Variants that change one node, the shallowest nodes first."""
    if isinstance(value, dict):
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
        for key, child in value.items():
            if isinstance(child, (dict, list)):
                yield child
        for key, child in value.items():
            for smaller in _local_variants(child):
                yield {**value, key: smaller}
    elif isinstance(value, list):
        for i in range(len(value)):
            yield value[:i] + value[i + 1:]
        for child in value:
            if isinstance(child, (dict, list)):
                yield child
        for i, child in enumerate(value):
            for smaller in _local_variants(child):
                yield value[:i] + [smaller] + value[i + 1:]
    elif isinstance(value, str) and len(value) > 1:
        yield value[: len(value) // 2]
        yield value[len(value) // 2:]


def _deepest_path(value) -> list:
    """Keys from the root to the deepest container (iteratively: nests may be thousands deep)."""
    best: list = []
    stack = [(value, [])]
    while stack:
        node, path = stack.pop()
        if len(path) > len(best):
            best = path
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, path + [key]))
    return best


def _get(value, path):
    for key in path:
        value = value[key]
    return value


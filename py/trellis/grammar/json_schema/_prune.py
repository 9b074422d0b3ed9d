"""The last pass of the JSON Schema front-end: drop unused rules, merge equal rules.

Rules with equal bodies become one, so that the core builds each automaton once. Parts that
can match nothing (a reference to a rule that never ends, a sequence with an empty choice) are
left to the core, which keeps only the states from which a rule can still complete; a root
that matches nothing is the empty language, which the core reports (`CompiledGrammar.is_empty`).

Cost: this runs for every schema before the first mask, so the common case is made cheap.
Every node caches the rule names its subtree refers to (`_facts`, see `facts`): constant
subtrees (character classes, number grammars) are walked once per process.
"""

from __future__ import annotations

from .. import ir

NO_REFS: frozenset = frozenset()


def facts(e: ir.Expr) -> frozenset:
    """The names of the rules e refers to, cached on the node."""
    known = e._facts
    if known is not None:
        return known
    t = type(e)
    if t is ir.Seq or t is ir.Alt:
        known = NO_REFS
        for x in e.items:
            r = x._facts
            if r is None:
                r = facts(x)
            if r and r is not known:
                known = r if not known else known if r <= known else known | r
    elif t is ir.Ref:
        known = frozenset((e.name,))
    elif t is ir.Repeat or t is ir.Region:
        known = facts(e.item)
    else:  # Bytes, ByteSet, Check
        known = NO_REFS
    e._facts = known
    return known


def prune(rules: dict[str, ir.Expr], root: str) -> dict[str, ir.Expr]:
    """The rules reachable from `root`, with equal rules merged."""
    return _merge_equal_rules({name: rules[name] for name in _reachable(rules, root)})


def _reachable(rules: dict[str, ir.Expr], root: str) -> list[str]:
    """The defined rules reachable from root: root first, the others in their order in `rules`
    (the walk itself goes through sets, whose order changes from run to run)."""
    todo = [root]
    seen = {root}
    while todo:
        for ref in facts(rules[todo.pop()]):
            if ref not in seen and ref in rules:
                seen.add(ref)
                todo.append(ref)
    return [root, *(name for name in rules if name in seen and name != root)]


def _merge_equal_rules(rules: dict[str, ir.Expr]) -> dict[str, ir.Expr]:
    """Rules with equal bodies become one (many properties share one string or number rule): the
    first keeps its body, the others refer to it (the core inlines such a rule). Bodies are
    compared by their cached structural hashes (and equality where those agree). Bodies that
    would become equal once these references were renamed are left apart: renaming rewrites every
    body that refers to a merged rule, which cost more than the core spends on them."""
    first: dict[ir.Expr, str] = {}
    merged = {}
    for name, body in rules.items():
        keep = first.setdefault(body, name)
        merged[name] = body if keep == name else ir.Ref(keep)
    return merged

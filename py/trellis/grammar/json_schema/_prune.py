"""The last pass of the JSON Schema front-end: drop dead parts and unused rules, merge equal rules.

A rule is *productive* when it matches some string. Parts of a grammar that can match
nothing (a reference to an unproductive rule, a sequence with an empty choice in it) would
offer the matcher dead ends, so they are cut out; then rules with equal bodies become one,
so that the core builds each automaton once.

Cost: this runs for every schema before the first mask, so the common case is made cheap.
Every node caches facts about its subtree that depend on nothing else (`_facts`, see `facts`):
the rule names it refers to, and whether it can match a string with all those rules dead or
all of them productive. Constant subtrees (character classes, number grammars) are thus
analysed once per process, a rule that matches something without any reference is productive
at once, and a grammar without dead parts is left untouched.
"""

from __future__ import annotations

from .. import ir

NO_REFS: frozenset = frozenset()
# Flags of `facts`: the subtree matches a string with every referenced rule dead (LIVE_ALONE),
# with every referenced rule productive (LIVE), and every node in it is LIVE (CLEAN).
LIVE_ALONE, LIVE, CLEAN = 1, 2, 4
MERGE_ROUNDS = 2

_LEAF_FACTS = (NO_REFS, LIVE_ALONE | LIVE | CLEAN)
_DEAD_FACTS = (NO_REFS, 0)


def facts(e: ir.Expr) -> tuple[frozenset, int]:
    """(names of the rules e refers to, flags), cached on the node."""
    known = e._facts
    if known is not None:
        return known
    t = type(e)
    if t is ir.Seq or t is ir.Alt:
        refs = NO_REFS
        all_flags, any_flags = LIVE_ALONE | LIVE | CLEAN, 0
        for x in e.items:
            r, f = x._facts or facts(x)
            all_flags &= f
            any_flags |= f
            if r and r is not refs:
                refs = r if not refs else refs if r <= refs else refs | r
        flags = all_flags if t is ir.Seq else any_flags & (LIVE_ALONE | LIVE) | all_flags & CLEAN
        known = refs, (flags if flags & LIVE else flags & ~CLEAN)
    elif t is ir.Bytes:
        known = _LEAF_FACTS
    elif t is ir.Ref:
        known = frozenset((e.name,)), LIVE | CLEAN
    elif t is ir.ByteSet:
        known = _LEAF_FACTS if e.ranges else _DEAD_FACTS
    else:  # Repeat
        refs, flags = facts(e.item)
        known = refs, (flags & CLEAN | LIVE_ALONE | LIVE if e.min == 0 else flags)
    e._facts = known
    return known


def prune(rules: dict[str, ir.Expr], root: str) -> dict[str, ir.Expr] | None:
    """The rules reachable from `root`, without what can match no string (so no mask ever
    offers a dead end) and with equal rules merged; None when the root matches nothing."""
    names = _reachable(rules, root)
    productive = _productive(rules, names)
    if root not in productive:
        return None
    out = {name: rules[name] for name in names}
    if len(productive) < len(names) or any(not facts(body)[1] & CLEAN for body in out.values()):
        memo: dict = {}
        cut = {name: _simplify(rules[name], productive, memo) for name in names if name in productive}
        out = {name: cut[name] for name in _reachable(cut, root)}
    return _merge_equal_rules(out)


def _reachable(rules: dict[str, ir.Expr], root: str) -> list[str]:
    """The defined rules reachable from root: root first, the others in their order in `rules`
    (the walk itself goes through sets, whose order changes from run to run)."""
    todo = [root]
    seen = {root}
    while todo:
        for ref in facts(rules[todo.pop()])[0]:
            if ref not in seen and ref in rules:
                seen.add(ref)
                todo.append(ref)
    return [root, *(name for name in rules if name in seen and name != root)]


def _productive(rules: dict[str, ir.Expr], names: list[str]) -> set[str]:
    """The least fixpoint: the rules whose bodies match something given the productive rules.

    Rules that match something on their own are productive at once. Each other rule is judged
    with the rules known productive so far, and judged again whenever a rule it refers to turns
    productive (a worklist, not a recursion: chains of rules run thousands long, as in the digit
    automata of multipleOf)."""
    productive: set[str] = set()
    pending = []
    for name in names:
        flags = facts(rules[name])[1]
        if flags & LIVE_ALONE:
            productive.add(name)
        elif flags & LIVE:
            pending.append(name)
    users: dict[str, list[str]] = {}  # rule -> the pending rules that refer to it
    for name in pending:
        for ref in facts(rules[name])[0]:
            users.setdefault(ref, []).append(name)
    judge = _Judge(productive)
    todo = pending[::-1]
    while todo:
        name = todo.pop()
        if name not in productive and judge.live(rules[name]):
            productive.add(name)
            todo.extend(user for user in users.get(name, ()) if user not in productive)
    return productive


class _Judge:
    """Whether an expression matches something, given the productive rules (a set that only grows,
    so what is found live stays live)."""

    def __init__(self, productive: set[str]):
        self.productive = productive
        self.live_ids: set[int] = set()

    def live(self, e: ir.Expr) -> bool:
        refs, flags = e._facts or facts(e)
        if flags & LIVE_ALONE:
            return True
        if not flags & LIVE:
            return False
        if refs <= self.productive or id(e) in self.live_ids:
            return True
        t = type(e)
        if t is ir.Ref:
            return False  # not productive yet
        if t is ir.Seq:
            out = all(self.live(x) for x in e.items)
        elif t is ir.Alt:
            out = any(self.live(x) for x in e.items)
        else:  # Repeat with min > 0 (else it would live alone)
            out = self.live(e.item)
        if out:
            self.live_ids.add(id(e))
        return out


def _simplify(e: ir.Expr, productive: set[str], memo: dict) -> ir.Expr:
    """e without references to unproductive rules and what they make impossible; clean parts
    are kept as they are."""
    refs, flags = facts(e)
    if flags & CLEAN and refs <= productive:
        return e
    known = memo.get(id(e))
    if known is not None:
        return known[0]
    out = e
    t = type(e)
    if t is ir.Ref:
        if e.name not in productive:
            out = ir.NOTHING
    elif t is ir.ByteSet:  # not clean: no byte at all
        out = ir.NOTHING
    elif t is ir.Seq:
        items = [_simplify(x, productive, memo) for x in e.items]
        if any(type(x) is ir.Alt and not x.items for x in items):
            out = ir.NOTHING
        elif any(x is not y for x, y in zip(items, e.items)):
            out = ir.seq(*items)
    elif t is ir.Alt:
        items = [x for x in (_simplify(x, productive, memo) for x in e.items) if type(x) is not ir.Alt or x.items]
        if not items:
            out = ir.NOTHING
        elif len(items) != len(e.items) or any(x is not y for x, y in zip(items, e.items)):
            out = ir.alt(*items)
    elif t is ir.Repeat:
        item = _simplify(e.item, productive, memo)
        if type(item) is ir.Alt and not item.items:
            out = ir.EMPTY if e.min == 0 else ir.NOTHING
        elif item is not e.item:
            out = ir.Repeat(item, e.min, e.max)
    memo[id(e)] = (out, e)  # e kept alive so that its id is not reused
    return out


def _merge_equal_rules(rules: dict[str, ir.Expr]) -> dict[str, ir.Expr]:
    """Rules with equal bodies become one (many properties share one string or number rule).
    The first rule (the root) keeps its name. Merging can make more bodies equal (they
    referred to rules now merged): another round.

    Bodies are compared by their cached structural hashes (and equality where those agree);
    renaming rewrites only the parts that refer to a merged rule."""
    for _ in range(MERGE_ROUNDS):
        first: dict[ir.Expr, str] = {}
        alias = {}
        for name, body in rules.items():
            keep = first.setdefault(body, name)
            if keep != name:
                alias[name] = keep
        if not alias:
            break
        merged = frozenset(alias)
        memo: dict = {}
        rules = {name: _rename(body, alias, merged, memo) for name, body in rules.items() if name not in alias}
    return rules


def _rename(e: ir.Expr, alias: dict, merged: frozenset, memo: dict) -> ir.Expr:
    """e with references renamed through `alias`; parts that refer to no merged rule are kept."""
    if facts(e)[0].isdisjoint(merged):
        return e
    known = memo.get(id(e))
    if known is not None:
        return known[0]
    t = type(e)
    if t is ir.Ref:
        out = ir.Ref(alias[e.name])
    elif t is ir.Repeat:
        out = ir.Repeat(_rename(e.item, alias, merged, memo), e.min, e.max)
    else:
        out = t(tuple(_rename(x, alias, merged, memo) for x in e.items))
    memo[id(e)] = (out, e)
    return out

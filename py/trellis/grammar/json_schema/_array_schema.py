"""The grammar of a context's arrays: its array keywords (`prefixItems` / array-form `items`, `items`,
`additionalItems`, `minItems`, `maxItems`, `contains` with its counts, `uniqueItems`) are gathered
into ArrayFacts, then built with `unevaluatedItems` and strict mode as the items in order, exact
item counts (base-16 block rules for large ones), a counting automaton for `contains`, and
`uniqueItems` as states over a small finite set of values or a check by the core on each item.
A mixin of the Converter (it uses its value, child, const_expr, shared, negation and the
type analysis)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import SchemaLimitError, UnsupportedSchemaError
from .. import ir
from ._keywords import ATOMS, count_bounds
from ._refs import Node
from ._state_machine import ACCEPT, MAX_ORDERED_STATES, StateMachine
from ._validate import canon

# Item counts (minItems, maxItems) above this go through block rules (ArraySchema.counted).
COUNT_BLOCKS_FROM = 256
# Checked on the text by the core (ir.Check): an item equal to an earlier one.
UNIQUE_ITEM = ir.Check(ir.UNIQUE_ITEM)


@dataclass
class ArrayFacts:
    """The array keywords of a context's subschemas together: item count bounds, each subschema's
    (node, prefix item schemas, schema of the items after them), the contains keywords
    (node, minContains, maxContains) and the subschema with `uniqueItems: true` (or None)."""
    lo: int = 0
    hi: int | None = None
    prefixes: list = field(default_factory=list)
    contains: list = field(default_factory=list)
    unique_at: Node | None = None


class ArraySchema:
    def array_facts(self, nodes) -> ArrayFacts:
        """The array keywords of `nodes` (draft-07: array-form items and additionalItems)."""
        lo, hi = 0, None
        prefixes: list[tuple[Node, list[Node], Node | None]] = []  # (node, prefix schemas, rest schema)
        contains = []
        unique_at = None
        for n in nodes:
            s = n.schema
            lo, hi = count_bounds(n, "minItems", "maxItems", lo, hi)
            items = s.get("items")
            prefix: list[Node] = []
            rest = None
            if "prefixItems" in s and not self.draft7:
                prefix = [self.child(n, "prefixItems", i) for i in range(len(s["prefixItems"]))]
                if isinstance(items, (dict, bool)):
                    rest = self.child(n, "items")
            elif isinstance(items, list):
                prefix = [self.child(n, "items", i) for i in range(len(items))]
                if "additionalItems" in s:
                    rest = self.child(n, "additionalItems")
            elif isinstance(items, (dict, bool)):
                rest = self.child(n, "items")
            if prefix or rest is not None:
                prefixes.append((n, prefix, rest))
            if "contains" in s:
                mn = s.get("minContains", 1)
                mx = s.get("maxContains")
                contains.append((n, mn, mx))
            elif "maxContains" in s or "minContains" in s:
                pass  # without contains they do nothing
            if s.get("uniqueItems") is True:
                unique_at = n
        return ArrayFacts(lo, hi, prefixes, contains, unique_at)

    def array(self, nodes) -> ir.Expr:
        facts = self.array_facts(nodes)
        lo, hi, prefixes, contains = facts.lo, facts.hi, facts.prefixes, facts.contains
        unique_at = facts.unique_at
        if hi is not None and hi < lo:
            return ir.NOTHING
        unique = unique_at is not None and (hi is None or hi > 1)
        width = max((len(p) for _, p, _ in prefixes), default=0)
        if hi is not None:
            width = min(width, hi)

        # unevaluatedItems: items past every in-place prefix get x's schema
        uneval = []  # (schema node, number of evaluated leading items)
        for x, evaluating in self.unevaluated(nodes, "unevaluatedItems"):
            if any(isinstance(n.schema.get("items"), (dict, bool)) for n in evaluating) or any(
                    "additionalItems" in n.schema and isinstance(n.schema.get("items"), list) for n in evaluating) or any(
                    n is not x and "unevaluatedItems" in n.schema for n in evaluating):
                continue  # every item is evaluated
            if any("contains" in n.schema for n in evaluating):
                raise UnsupportedSchemaError("unevaluatedItems together with contains is not supported",
                                             "unevaluatedItems", x.pointer)
            count = 0
            for n in evaluating:
                if "prefixItems" in n.schema and not self.draft7:
                    count = max(count, len(n.schema["prefixItems"]))
                elif isinstance(n.schema.get("items"), list):
                    count = max(count, len(n.schema["items"]))
            uneval.append((self.child(x, "unevaluatedItems"), count))
            width = max(width, count) if hi is None else min(max(width, count), hi)
        tuple_key = "items" if self.draft7 else "prefixItems"
        closed = self.strict_close(nodes, tuple_key, None, ("items", "additionalItems", "unevaluatedItems"))
        if closed is not None:
            count = max(len(n.schema[tuple_key]) for n in nodes
                        if isinstance(n.schema, dict) and isinstance(n.schema.get(tuple_key), list))
            uneval.append((closed, count))
            width = max(width, count) if hi is None else min(max(width, count), hi)

        def position_nodes(i):
            out = []
            for _, prefix, rest in prefixes:
                if i < len(prefix):
                    out.append(prefix[i])
                elif rest is not None:
                    out.append(rest)
            out += [u for u, count in uneval if i >= count]
            return out

        rest_nodes = [rest for _, prefix, rest in prefixes if rest is not None] + [u for u, _ in uneval]
        contains = [(n, mn, mx) for n, mn, mx in contains if not (mn == 0 and mx is None)]
        item_end = ir.EMPTY
        if unique:  # before contains: array_unique counts the contained values itself
            positions = [position_nodes(i) for i in range(width)] + [rest_nodes]
            try:
                return self.array_unique(positions, contains, lo, hi, unique_at)
            except UnsupportedSchemaError as e:
                if e.keyword != "uniqueItems":
                    raise
            # Items from an open set: each is checked against the ones before it when it ends.
            item_end = UNIQUE_ITEM
        if contains:
            out = self.array_contains(nodes, contains, width, rest_nodes, lo, hi, item_end)
        else:
            elems = [ir.seq(self.value(position_nodes(i)), item_end) for i in range(width)]
            rest = ir.seq(self.value(rest_nodes), item_end)
            out = self.array_shape(elems, rest, lo, hi)
        return ir.Region(out) if item_end is UNIQUE_ITEM else out

    def array_unique(self, positions, contains, lo, hi, at: Node) -> ir.Expr:
        """uniqueItems when every item comes from a small finite set of values: the grammar's state
        is (position, values used so far). `positions` lists the nodes of each prefix position, then
        those of every later item. Distinct values make contains a count over the used set."""
        index: dict = {}  # canonical value -> its number in `values`
        values: list = []
        choices = []  # per position: the numbers of the values allowed there
        for nodes in positions:
            choices.append([])
            for v in self.unique_candidates(nodes, at):
                i = index.setdefault(canon(v), len(values))
                if i == len(values):
                    values.append(v)
                choices[-1].append(i)
        if len(values) > 8:
            raise UnsupportedSchemaError("uniqueItems is only supported for items from a small finite set",
                                         "uniqueItems", at.pointer)
        counted = []  # (numbers of the values the contains subschema accepts, min, max)
        for n, mn, mx in contains:
            cnode = self.child(n, "contains")
            counted.append(({i for i, v in enumerate(values) if self.validator.holds(v, cnode)},
                            *self.contains_bounds(n, mn, mx)))
        exprs = [self.const_expr(v, depth=self.depth + 1) for v in values]
        last = len(positions) - 1
        close = ir.literal("]")

        def fits(used: frozenset, closing: bool) -> bool:
            for hits, mn, mx in counted:
                k = len(used & hits)
                if (mx is not None and k > mx) or (closing and k < mn):
                    return False
            return True

        def state(pos: int, used: frozenset) -> list:
            out = []
            if len(used) >= lo and fits(used, True):
                out.append((ir.seq(self.close_ws, close) if used else close, ACCEPT))
            if hi is None or len(used) < hi:
                sep = self.sep if used else self.first
                out += [(ir.seq(sep, exprs[i]), states.state(min(pos + 1, last), used | {i}))
                        for i in choices[pos] if i not in used and fits(used | {i}, False)]
            return out

        states = StateMachine(self, "uniq", state)
        return ir.seq(ir.literal("["), self.ws, states.start(0, frozenset()))

    @staticmethod
    def contains_bounds(n: Node, mn, mx) -> tuple:
        """minContains and maxContains as integers (a float with no fraction counts); else refused."""
        mn = int(mn) if isinstance(mn, float) and mn.is_integer() else mn
        mx = int(mx) if isinstance(mx, float) and mx.is_integer() else mx
        for key, v in (("minContains", mn), ("maxContains", mx)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise UnsupportedSchemaError(f"{key} must be a non-negative integer", key, n.pointer)
        return mn, mx

    def unique_candidates(self, nodes, at: Node) -> list:
        """The values an item with `nodes` may take, when they are few and known; else refused."""
        expanded = self.expand(nodes)
        if expanded is None:
            return []
        values = self.finite_values(expanded)
        if values is None:
            atoms = self.static_atoms(expanded)
            if atoms <= {"null", "boolean"} and all(self.type_only(n) is not None for n in expanded):
                values = [v for v, a in ((None, "null"), (True, "boolean"), (False, "boolean")) if a in atoms]
        values = None if values is None else [v for v in values if all(self.validator.holds(v, n) for n in expanded)]
        if values is None or len(values) > 8:
            raise UnsupportedSchemaError("uniqueItems is only supported for items from a small finite set",
                                         "uniqueItems", at.pointer)
        return values

    def array_shape(self, elems, rest, lo, hi) -> ir.Expr:
        n = len(elems)
        if n:
            content = ir.seq(elems[0], self.array_tail(elems, rest, lo, hi))
        else:
            if hi == 0:
                content = ir.NOTHING
            else:
                more = self.counted(ir.seq(self.sep, rest), max(0, lo - 1), None if hi is None else hi - 1)
                content = ir.seq(rest, more)
        open_, close = ir.literal("["), ir.literal("]")
        full = ir.seq(open_, self.ws, self.first, content, self.close_ws, close)
        if lo == 0:
            return ir.alt(ir.seq(open_, self.ws, close), full)
        return full

    def array_tail(self, elems, rest, lo, hi) -> ir.Expr:
        """The items after the first, each preceded by a separator: the prefix items elems[1:],
        then items of `rest`. Built from the end without recursion (prefixItems can be long), with
        a rule every 8 items so that no expression nests deeply."""
        n = len(elems)
        mn = max(0, lo - n)
        mx = None if hi is None else hi - n
        if mx is not None and mx < mn:
            expr = ir.NOTHING
        elif mx == 0:
            expr = ir.EMPTY
        else:
            expr = self.counted(ir.seq(self.sep, rest), mn, mx)
        for i in range(n - 1, 0, -1):
            step = ir.seq(self.sep, elems[i], expr)
            expr = step if i < lo else ir.alt(ir.EMPTY, step)
            if (n - i) % 8 == 0 and i > 1:
                expr = self.shared(expr, "items")
        return expr

    def counted(self, unit: ir.Expr, lo: int, hi: int | None) -> ir.Expr:
        """lo..hi copies of `unit` (hi None: unbounded), exactly. Counts beyond COUNT_BLOCKS_FROM
        are written in base 16 over block rules (block j is 16**j units), so the grammar grows with
        the number of digits of the count rather than with the count (maxItems: 50000 is a few
        dozen states where 50000 copies of an item would exceed the core's state limit)."""
        if max(lo, hi or 0) <= COUNT_BLOCKS_FROM:
            return ir.repeat(unit, lo, hi)
        blocks = [unit]  # blocks[j]: exactly 16**j units
        while 16 ** len(blocks) <= max(lo, hi or 0):
            blocks.append(self.shared(ir.repeat(blocks[-1], 16, 16), "block"))

        def digits(n):  # base 16, lowest first
            return [(n >> (4 * j)) & 15 for j in range(len(blocks))]

        exactly = ir.seq(*(ir.repeat(blocks[j], d, d) for j, d in reversed(list(enumerate(digits(lo)))) if d))
        if hi is None:
            return ir.seq(exactly, ir.repeat(unit, 0, None))
        # up to m = d_j 16^j + r: fewer than d_j blocks j and then any count below 16^j, or d_j of
        # them and then up to r; built from the lowest digit up
        up_to, below = ir.EMPTY, ir.EMPTY  # below: any count under 16**j
        for j, d in enumerate(digits(hi - lo)):
            if d:
                up_to = ir.alt(ir.seq(ir.repeat(blocks[j], 0, d - 1), below), ir.seq(ir.repeat(blocks[j], d, d), up_to))
                up_to = self.shared(up_to, "upto")
            below = self.shared(ir.seq(ir.repeat(blocks[j], 0, 15), below), "below")
        return ir.seq(exactly, up_to)

    def array_contains(self, nodes, contains, width, rest_nodes, lo, hi, item_end=ir.EMPTY) -> ir.Expr:
        at = contains[0][0]
        if len(contains) > 1:
            raise UnsupportedSchemaError("more than one contains in one place is not supported", "contains",
                                         contains[1][0].pointer)
        if width:
            raise UnsupportedSchemaError("contains together with prefixItems is not supported", "contains",
                                         at.pointer)
        n, mn, mx = contains[0]
        mn, mx = self.contains_bounds(n, mn, mx)
        cnode = self.child(n, "contains")
        hit = self.value(rest_nodes + [cnode])
        if mx is not None:
            cond = self.type_only(cnode)
            if cond is not None:
                miss = self.value(rest_nodes, frozenset(ATOMS - cond))
            else:
                miss = self.value(rest_nodes + [self.negation(cnode)])
            exact = True
        else:
            miss = self.value(rest_nodes)
            exact = False
        if mx is not None and mx < mn:
            return ir.NOTHING
        hit, miss = ir.seq(hit, item_end), ir.seq(miss, item_end)
        # states (t items so far, c hits so far), both capped
        t_cap = hi if hi is not None else max(lo, mn, 1)
        c_cap = mx if exact else mn
        if (t_cap + 1) * (c_cap + 1) > MAX_ORDERED_STATES:
            raise SchemaLimitError(f"contains with these counts needs {(t_cap + 1) * (c_cap + 1)} states, more than "
                                   f"the limit {MAX_ORDERED_STATES}", "contains", n.pointer)

        def state(t, c) -> list:
            out = []
            if t >= lo and c >= mn:
                out.append((ir.seq(self.close_ws, ir.literal("]")) if t else ir.literal("]"), ACCEPT))
            if hi is None or t < hi:
                sep = self.sep if t else self.first
                nt = min(t + 1, t_cap) if hi is None else t + 1
                if not exact or c < mx:
                    out.append((ir.seq(sep, hit), states.state(nt, min(c + 1, c_cap) if not exact else c + 1)))
                out.append((ir.seq(sep, miss), states.state(nt, c)))
            return out

        states = StateMachine(self, "arr", state)
        return ir.seq(ir.literal("["), self.ws, states.start(0, 0))

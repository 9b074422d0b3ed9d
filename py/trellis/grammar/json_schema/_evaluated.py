"""Which subschemas' annotations an `unevaluatedProperties` / `unevaluatedItems` keyword reads (the
ones applied in place to the same instance), and strict mode's closing of the places that name
members. A mixin of the Converter: it uses the Converter's child, resolver and options."""

from __future__ import annotations

from ._keywords import REF_KEYWORDS
from ._refs import Node


class Evaluation:
    def in_place(self, x: Node) -> set:
        """Keys of the subschemas applied to the same instance as x (allOf, anyOf, oneOf, if,
        then, else, dependentSchemas, $ref, $dynamicRef, transitively): their annotations count as x's."""
        known = self._in_place.get(x.key)
        if known is not None:
            return known
        seen = {x.key}
        todo = [x]
        while todo:
            n = todo.pop()
            s = n.schema
            if not isinstance(s, dict):
                continue
            subs = []
            for comb in ("allOf", "anyOf", "oneOf"):
                if isinstance(s.get(comb), list):
                    subs += [self.child(n, comb, i) for i in range(len(s[comb]))]
            for key in ("if", "then", "else"):
                if key in s:
                    subs.append(self.child(n, key))
            for k in s.get("dependentSchemas", {}) if isinstance(s.get("dependentSchemas"), dict) else ():
                subs.append(self.child(n, "dependentSchemas", k))
            subs += [self.resolver.follow(n, key) for key in REF_KEYWORDS if key in s]
            for sub in subs:
                if sub.key not in seen:
                    seen.add(sub.key)
                    todo.append(sub)
        self._in_place[x.key] = seen
        return seen

    def feeds_unevaluated(self, nodes, n: Node) -> bool:
        """Whether what `n`'s subschemas evaluate matters to a constraining unevaluated* keyword."""
        return any(n.key in self.in_place(x) for keyword in ("unevaluatedProperties", "unevaluatedItems")
                   for x, _ in self.unevaluated(nodes, keyword))

    def unevaluated(self, nodes, keyword: str):
        """(x, evaluating subschemas in the context) for each x with a constraining `keyword`."""
        out = []
        for x in nodes:
            if keyword in x.schema and x.schema[keyword] is not True:
                reach = self.in_place(x)
                out.append((x, [n for n in nodes if n.key in reach]))
        return out

    def strict_close(self, nodes, naming: str, naming_too: str | None, opening: tuple) -> Node | None:
        """Strict mode (web-xgrammar's strictMode, OpenAI's strict): where the subschemas of one
        place name members (`naming`) and none says what others may be (`opening`), nothing else
        is generated, as if `unevaluated*: false` stood there: the False node that says so.
        Unnamed places (`{"type": "object"}`, `{}`) stay open."""
        if not self.opt.strict:
            return None
        named = [n for n in nodes if isinstance(n.schema, dict) and
                 (naming in n.schema or (naming_too is not None and naming_too in n.schema))]
        if naming == "items":  # draft-07's tuple form only
            named = [n for n in named if isinstance(n.schema.get("items"), list)]
        if not named or any(k in n.schema for n in nodes if isinstance(n.schema, dict) for k in opening
                            if not (k == "items" and isinstance(n.schema.get(k), list))):
            return None
        first = named[0]
        return Node(False, first.base, first.pointer + "/unevaluated", first.dyn)

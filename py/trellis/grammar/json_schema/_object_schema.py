"""The grammar of a context's objects: its object keywords (`properties`, `required`,
`patternProperties`, `additionalProperties`, `propertyNames`, `min/maxProperties`, the dependency
keywords) are gathered into ObjectFacts, then built with `unevaluatedProperties`, strict mode and
the witnesses of negations as members in schema order (a counting automaton when counts or
dependencies must be tracked) or in any order (required and dependent keys tracked as sets); a
key the schema does not name is "none of the known names" (a check on the key's text, or an
automata product with patterns and propertyNames). A mixin of the Converter (it uses its value,
child, shared, fresh, intersection, string_facts and the type analysis)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ...errors import SchemaLimitError, UnsupportedSchemaError
from .. import ir
from . import _text
from ._keywords import ANNOTATIONS, ATOMS, NUMBER_KEYWORDS, REF_KEYWORDS, STRING_KEYWORDS, count_bounds
from ._negate import WITNESS
from ._refs import Node
from ._state_machine import ACCEPT, MAX_ORDERED_STATES, StateMachine, automaton

MAX_TRACKED_KEYS = 8  # required/dependent keys tracked as subsets when properties come in any order
# Known properties of one object in schema order: each costs the core about 30 states (3,000
# optional integer properties: 89,386 of its 131,072).
MAX_ORDERED_PROPERTIES = 3000
# Checked on the text by the core (ir.Check): a key equal to an earlier one.
DISTINCT_KEY = ir.Check(ir.DISTINCT_KEY)
_CLOSE_QUOTE = ir.literal('"')
_ANY_KEY = ir.seq(ir.literal('"'), ir.repeat(_text.JSON_CHAR, 0, None), _CLOSE_QUOTE)


def distinct_key(known) -> ir.Check:
    """The check that a key is none of the keys before it and none of `known` (their UTF-8 as
    the parameters (length, byte*)*). Excluding known keys by a check rather than by the key's
    automaton keeps that automaton one string's: an exclusion trie cost the core ~30 IR words
    per key byte (half of a Kubernetes schema's core compile time)."""
    if not known:
        return DISTINCT_KEY
    params = []
    for k in known:
        b = k.encode()
        params.append(len(b))
        params += b
    return ir.Check(ir.DISTINCT_KEY, params)


@dataclass
class ObjectFacts:
    """The object keywords of a context's subschemas together: required keys (in order), count
    bounds, the known keys in schema order (then required, forbidden and dependency keys), the
    dependencies (key -> keys it requires), keys a dependent schema forbids, the patterns
    (node, pattern) and the propertyNames subschemas."""
    required: list = field(default_factory=list)
    min_p: int = 0
    max_p: int | None = None
    order: list = field(default_factory=list)
    deps: dict = field(default_factory=dict)
    forbidden: set = field(default_factory=set)
    patterns: list = field(default_factory=list)
    name_nodes: list = field(default_factory=list)


class ObjectSchema:
    def object_facts(self, nodes) -> ObjectFacts:
        """The object keywords of `nodes`; dependent schemas that are a type or a required list
        become `forbidden` keys or `deps` (the others were distributed by body())."""
        required: list[str] = []
        min_p, max_p = 0, None
        order: list[str] = []
        deps: dict[str, set] = {}
        forbidden: set[str] = set()
        patterns: list[tuple[Node, str]] = []
        name_nodes: list[Node] = []
        for n in nodes:
            s = n.schema
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise UnsupportedSchemaError("properties must be an object", "properties", n.pointer)
            for k in props:
                if k not in order:
                    order.append(k)
            req = s.get("required", [])
            if not isinstance(req, list) or not all(isinstance(k, str) for k in req):
                raise UnsupportedSchemaError("required must be an array of strings", "required", n.pointer)
            for k in req:
                if k not in required:
                    required.append(k)
            min_p, max_p = count_bounds(n, "minProperties", "maxProperties", min_p, max_p)
            for p in s.get("patternProperties", {}):
                _text.pattern_expr(p, n.pointer + "/patternProperties", "patternProperties")
                patterns.append((n, p))
            if "propertyNames" in s:
                name_nodes.append(self.child(n, "propertyNames"))
            dep_req = dict(s.get("dependentRequired", {}))
            if self.draft7 or "dependencies" in s:
                for k, d in s.get("dependencies", {}).items():
                    if isinstance(d, list):
                        dep_req[k] = d
            for k, names in dep_req.items():
                deps.setdefault(k, set()).update(names)
            for where, k, dnode in self.dependent_schemas(n):
                simple = self.simple_dependency(dnode)
                if simple == "forbid":
                    forbidden.add(k)
                elif simple is not None:
                    deps.setdefault(k, set()).update(simple)
                # other dependent schemas were distributed by body()
        for k in [*required, *sorted(forbidden)]:
            if k not in order:
                order.append(k)
        for k, names in deps.items():
            for x in [k, *sorted(names)]:
                if x not in order:
                    order.append(x)
        return ObjectFacts(required, min_p, max_p, order, deps, forbidden, patterns, name_nodes)

    def object(self, nodes) -> ir.Expr:
        pointer = nodes[0].pointer if nodes else ""  # no nodes: any object
        facts = self.object_facts(nodes)
        required, min_p, max_p, order = facts.required, facts.min_p, facts.max_p, facts.order
        deps, forbidden, patterns, name_nodes = facts.deps, facts.forbidden, facts.patterns, facts.name_nodes
        # unevaluatedProperties: keys no in-place subschema of x evaluates get x's schema
        uneval = []  # (schema node, evaluated names, evaluating (node, pattern) pairs)
        for x, evaluating in self.unevaluated(nodes, "unevaluatedProperties"):
            if any("additionalProperties" in n.schema or (n is not x and "unevaluatedProperties" in n.schema)
                   for n in evaluating):
                continue  # every property is evaluated
            names = {k for n in evaluating for k in n.schema.get("properties", {})}
            pats = {(n.key, p) for n in evaluating for p in n.schema.get("patternProperties", {})}
            uneval.append((self.child(x, "unevaluatedProperties"), names, pats))
        closed = self.strict_close(nodes, "properties", "patternProperties",
                                   ("additionalProperties", "unevaluatedProperties"))
        if closed is not None:
            names = {k for n in nodes for k in n.schema.get("properties", {})}
            pats = {(n.key, p) for n in nodes for p in n.schema.get("patternProperties", {})}
            uneval.append((closed, names, pats))
        # the schema of each known key, and whether it may appear at all
        members: dict[str, ir.Expr] = {}
        values: dict[str, ir.Expr] = {}
        key_nodes: dict[str, list] = {}
        for k in order:
            knodes = [x for n in nodes for x in self.member_nodes(n, k)]
            for unode, names, pats in uneval:
                if k not in names and not any(
                        _text.pattern_search(p, k, unode.pointer, "patternProperties") for _, p in pats):
                    knodes.append(unode)
            ok = k not in forbidden and all(self.validator.holds(k, pn) for pn in name_nodes)
            key_nodes[k] = knodes
            value = self.value(knodes) if ok else ir.NOTHING
            if value == ir.NOTHING:
                if k in required:
                    return ir.NOTHING
                continue
            values[k] = value
            members[k] = self.shared(ir.seq(_text.string_literal(k), self.colon, value), "member")
        for k in list(deps):
            if k not in members:
                del deps[k]  # the key can never appear
            elif any(x not in members for x in deps[k]):
                # k would require a key that cannot appear: k cannot appear either
                del members[k]
                del deps[k]
                if k in required:
                    return ir.NOTHING
        # One key per object: a key the schema does not name is checked against the keys before
        # it (known keys, in schema order, cannot repeat; they differ from the others by the
        # check, or the key automaton where patterns or propertyNames shape it). The object is a
        # region, so that the check reads its text.
        additional = self.shared(self.additional_member(nodes, order, patterns, name_nodes, uneval), "extra")
        # witnesses ("some property in a region has a value valid against X", from negations):
        # each is a pseudo-key that must be seen
        for i, n in enumerate(n for n in nodes if WITNESS in n.schema):
            spec = n.schema[WITNESS]
            wnode = self.child(n, WITNESS, "schema")

            def in_region(k):
                return (k not in spec["exclude"] and (spec["match"] is None or _text.pattern_search(
                    spec["match"], k, n.pointer)) and not any(_text.pattern_search(q, k, n.pointer)
                                                              for q in spec["notMatch"]))

            parts = [ir.seq(_text.string_literal(k), DISTINCT_KEY, self.colon, self.value(key_nodes[k] + [wnode]))
                     for k in order if k in members and in_region(k)]
            parts.append(self.additional_member(nodes, order + [k for k in spec["exclude"] if k not in order],
                                                patterns, name_nodes, uneval, [wnode], spec["match"],
                                                spec["notMatch"]))
            witness = self.shared(ir.alt(*parts), "witness")
            if witness == ir.NOTHING:
                return ir.NOTHING
            pseudo = f"\x00witness{i}"
            members[pseudo] = witness
            required.append(pseudo)
        eff_min = min_p if min_p > len([k for k in required if not k.startswith("\x00")]) else 0
        tracked = list(dict.fromkeys([*required, *[x for k, v in deps.items() for x in [k, *sorted(v)]]]))
        # Witnesses are pseudo-keys, found wherever they come: only the any-order form tracks them.
        witnessed = any(k.startswith("\x00") for k in required)
        if (self.opt.property_order == "any" or witnessed) and eff_min == 0 and len(tracked) <= MAX_TRACKED_KEYS and (
                max_p is None or (2 ** len(tracked)) * (max_p + 1) <= 4096):
            # In any order a known key could come again too: each is checked.
            checked = {k: (self.shared(ir.seq(_text.string_literal(k), DISTINCT_KEY, self.colon, values[k]), "member")
                           if k in values else m) for k, m in members.items()}
            return ir.Region(self.object_any_order(checked, additional, required, deps, tracked, max_p))
        if witnessed:
            raise UnsupportedSchemaError("a negated additionalProperties together with min/maxProperties or many "
                                         "required keys is not supported", "additionalProperties", pointer)
        if len({x for k, v in deps.items() for x in [k, *v]}) > MAX_TRACKED_KEYS:
            raise UnsupportedSchemaError("dependentRequired over more than 6 keys together with min/maxProperties "
                                         "or many required keys is not supported", "dependentRequired",
                                         pointer)
        if additional == ir.NOTHING:
            return self.object_ordered(members, additional, set(required), eff_min, max_p, pointer, deps)
        return ir.Region(self.object_ordered(members, additional, set(required), eff_min, max_p, pointer, deps,
                                             distinct=True))

    def dependent_schemas(self, n: Node):
        s = n.schema
        out = [("dependentSchemas", k, self.child(n, "dependentSchemas", k)) for k in s.get("dependentSchemas", {})]
        if self.draft7 or "dependencies" in s:
            out += [("dependencies", k, self.child(n, "dependencies", k))
                    for k, d in s.get("dependencies", {}).items() if not isinstance(d, list)]
        return out

    def simple_dependency(self, dnode: Node):
        """"forbid" (the key cannot appear), a list of required keys, or None (general)."""
        t = self.type_only(dnode)
        if t is not None:
            return [] if "object" in t else "forbid"
        ds = dnode.schema
        if isinstance(ds, dict) and set(ds) - ANNOTATIONS <= {"required"} and isinstance(ds.get("required"), list):
            return list(ds["required"])
        return None

    def additional(self, n: Node) -> Node | None:
        s = n.schema
        if "additionalProperties" in s:
            return self.child(n, "additionalProperties")
        return None

    def additional_member(self, nodes, known: list[str], patterns, name_nodes, uneval=(), value_extra=(),
                          match=None, not_match=()) -> ir.Expr:
        """Members whose key is not a known property: one alternative per pattern region.

        value_extra / match / not_match narrow it (a witness of a negated additionalProperties).
        Each key is checked to differ from the keys before it (the object is a region)."""
        if len(patterns) > 4:
            raise UnsupportedSchemaError("more than 4 patternProperties in one place are not supported",
                                         "patternProperties", patterns[4][0].pointer)
        names_lo, names_hi, names_exprs, names_finite = 0, None, [], None
        if name_nodes:
            expanded = self.expand(name_nodes)
            if expanded is None:
                return ir.NOTHING
            atoms = set(ATOMS)
            for n in expanded:
                atoms &= self.type_atoms(n)
                for key in n.schema:
                    if key in self.KNOWN and key not in ("type", *REF_KEYWORDS, "allOf", *STRING_KEYWORDS, "enum",
                                                          "const", *NUMBER_KEYWORDS, "items", "prefixItems",
                                                          "minItems", "maxItems", "properties", "required",
                                                          "minProperties", "maxProperties",
                                                          "additionalProperties"):
                        raise UnsupportedSchemaError(f"{key} inside propertyNames is not supported",
                                                     "propertyNames", n.pointer)
            if "string" not in atoms:
                return ir.NOTHING
            finite = self.finite_values(expanded)
            if finite is not None:
                names_finite = [v for v in finite if isinstance(v, str)
                                and all(self.validator.holds(v, n) for n in expanded)]
            names = self.string_facts(expanded)
            names_lo, names_hi, names_exprs = names.lo, names.hi, names.parts
        parts = []
        for mask in range(1 << len(patterns)):
            chosen = [patterns[i] for i in range(len(patterns)) if mask >> i & 1]
            vnodes = []
            for n in nodes:
                mine = [p for m, p in chosen if m is n]
                if mine:
                    vnodes += [self.child(n, "patternProperties", p) for p in mine]
                else:
                    addl = self.additional(n)
                    if addl is not None:
                        vnodes.append(addl)
            for unode, _, pats in uneval:
                if not any((m.key, p) in pats for m, p in chosen):
                    vnodes.append(unode)
            value = self.value(vnodes + list(value_extra))
            if value == ir.NOTHING:
                continue
            if not patterns and not name_nodes and match is None and not not_match:
                parts.append(ir.seq(_ANY_KEY, distinct_key(known), self.colon, value))
                continue
            sig = (tuple(known), tuple(p for _, p in patterns), mask, names_lo, names_hi,
                   tuple((k, json.dumps(v)) for k, v, _ in names_exprs),
                   None if names_finite is None else tuple(names_finite), bool(name_nodes), match,
                   tuple(not_match))
            body = self.key_cache.get(sig)
            if body is None:
                items, wants = [_text.ANY_STRING], [True]
                if known:
                    items.append(ir.alt(*(ir.literal(k) for k in known)))
                    wants.append(False)
                for i, (n, p) in enumerate(patterns):
                    items.append(_text.pattern_search_expr(p, n.pointer, "patternProperties"))
                    wants.append(bool(mask >> i & 1))
                if match is not None:
                    items.append(_text.pattern_search_expr(match, nodes[0].pointer, "patternProperties"))
                    wants.append(True)
                for q in not_match:
                    items.append(_text.pattern_search_expr(q, nodes[0].pointer, "patternProperties"))
                    wants.append(False)
                if name_nodes:
                    if names_finite is not None:
                        items.append(ir.alt(*(ir.literal(v) for v in names_finite)) if names_finite
                                     else ir.NOTHING)
                        wants.append(True)
                    else:
                        more, more_wants = self.string_parts(names_lo, names_hi, names_exprs,
                                                             name_nodes[0].pointer)
                        items += more[1:]  # past ANY_STRING, here already
                        wants += more_wants[1:]
                body = ir.seq(self.intersection(items, wants, "patternProperties", nodes[0].pointer), _CLOSE_QUOTE)
                self.key_cache[sig] = body
            if body == ir.NOTHING:
                continue
            parts.append(ir.seq(ir.literal('"'), body, DISTINCT_KEY, self.colon, value))
        return ir.alt(*parts)

    def object_any_order(self, members, additional, required, deps, tracked, max_p=None) -> ir.Expr:
        """Members in any order; the required and dependency keys seen so far are tracked, and
        with maxProperties the number of members (a repeated key only lowers the real count)."""
        open_, close = ir.literal("{"), ir.literal("}")
        others = self.shared(ir.alt(*[m for k, m in members.items() if k not in tracked], additional), "others")
        if not tracked and max_p is None:
            member = ir.alt(*members.values(), additional)
            if member == ir.NOTHING:
                return ir.seq(open_, self.ws, close)
            more = ir.repeat(ir.seq(self.sep, member), 0, None)
            return ir.seq(open_, self.ws, ir.repeat(ir.seq(self.first, member, more, self.close_ws), 0, 1), close)
        tracked = [k for k in tracked if k in members]
        if any(k not in members for k in required):
            return ir.NOTHING

        def satisfied(seen: frozenset) -> bool:
            return all(k in seen for k in required) and all(x in seen for k in seen for x in deps.get(k, ()))

        ws_close = ir.seq(self.close_ws, close)  # one node for every state that may close

        def after(seen: frozenset, c: int, started: bool) -> list:
            out = [(ws_close if started else close, ACCEPT)] if satisfied(seen) else []
            if max_p is None or c < max_p:
                nc = c + 1 if max_p is not None else 0
                sep = self.sep if started else self.first
                out += [(ir.seq(sep, members[k]), states.state(seen | {k}, nc, True)) for k in tracked]
                if others != ir.NOTHING:
                    out.append((ir.seq(sep, others), states.state(seen, nc, True)))
            return out

        states = StateMachine(self, "obj", after)
        return ir.seq(open_, self.ws, states.start(frozenset(), 0, False))

    def object_ordered(self, members, additional, required, eff_min, max_p, pointer, deps=None,
                       distinct=False) -> ir.Expr:
        """Known properties in schema order (each at most once), then additional ones.

        Counts: `c` counts every member (for maxProperties: a repeated key only lowers the real
        count); `m` counts members certainly distinct (for minProperties): known keys, and the
        first additional one (additional keys may repeat each other, but differ from known keys),
        or every additional one when they are checked to be `distinct`.
        """
        keys = list(members)
        if len(keys) > MAX_ORDERED_PROPERTIES:
            raise SchemaLimitError(f"{len(keys)} properties in one object, more than the limit {MAX_ORDERED_PROPERTIES}",
                                   "properties", pointer)
        if max_p is None and not eff_min and not deps:
            return self.members_in_order(keys, members, additional, required)
        deps = deps or {}
        watched = {x for k, v in deps.items() for x in [k, *v]}
        c_cap = max_p if max_p is not None else 0
        counted = (c_cap + 1) * (eff_min + 1) * 2 ** len(watched)
        if counted > 1 and (len(keys) + 1) * counted * 4 > MAX_ORDERED_STATES:
            keyword = "maxProperties" if max_p is not None else "minProperties" if eff_min else "dependentRequired"
            raise SchemaLimitError(f"{keyword} over {len(keys)} properties needs about {(len(keys) + 1) * counted * 4} "
                                   f"states, more than the limit {MAX_ORDERED_STATES}", keyword, pointer)
        close = ir.literal("}")

        def state(i, c, m, started, extra, seen) -> list:
            sep = self.sep if started else self.first
            out = []
            room = max_p is None or c < max_p
            nc = c + 1 if max_p is not None else 0
            if i < len(keys):
                k = keys[i]
                if k not in required:
                    out.append((ir.EMPTY, states.state(i + 1, c, m, started, extra, seen)))
                if room:
                    now = seen | {k} if k in watched else seen
                    out.append((ir.seq(sep, members[k]),
                                states.state(i + 1, nc, min(m + 1, eff_min), True, extra, now)))
            else:
                if m >= eff_min and all(set(deps[k]) <= seen for k in seen if k in deps):
                    out.append((ir.seq(self.close_ws, close) if started else close, ACCEPT))
                if additional != ir.NOTHING and room:
                    nm = m if extra and not distinct else min(m + 1, eff_min)
                    out.append((ir.seq(sep, additional), states.state(i, nc, nm, True, True, seen)))
            return out

        states = StateMachine(self, "obj", state)
        return ir.seq(ir.literal("{"), self.ws, states.start(0, 0, 0, False, False, frozenset()))

    def members_in_order(self, keys, members, additional, required) -> ir.Expr:
        """object_ordered's automaton where nothing is counted (no min/maxProperties, no
        dependencies: most objects), built without its general states: the same states, numbered
        in the same order, and the same edges. A state is (i, started): the next known key's index
        (len(keys) + 1: after an additional member) and whether a member came."""
        n = len(keys)
        sep, first = self.sep, self.first
        close = ir.literal("}")
        ws_close = ir.seq(self.close_ws, close)
        after_sep = [ir.seq(sep, members[k]) for k in keys]
        more = ir.seq(sep, additional) if additional != ir.NOTHING else None
        numbers = {(0, False): 0}
        order = [(0, False)]

        def number(state) -> int:
            known = numbers.get(state)
            if known is None:
                known = numbers[state] = len(order)
                order.append(state)
            return known

        edges = []
        while len(edges) < len(order):
            i, started = order[len(edges)]
            if i < n:
                k = keys[i]
                out = [] if k in required else [(ir.EMPTY, number((i + 1, started)))]
                out.append((after_sep[i] if started else ir.seq(first, members[k]), number((i + 1, True))))
            else:
                out = [(ws_close if started else close, ACCEPT)]
                if more is not None:
                    out.append((more if started else ir.seq(first, additional), number((n + 1, True))))
            edges.append(out)
        return ir.seq(ir.literal("{"), self.ws, automaton(self, "obj", edges))

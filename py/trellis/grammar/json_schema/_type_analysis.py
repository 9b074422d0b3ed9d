"""What a context admits, read from its keywords without building it: the atoms (`type`, type-only
`not` / `anyOf` / `oneOf`), the finite candidate values (`enum`, `const`), and whether the
branches of a `oneOf` are disjoint (then it is an `anyOf`). A mixin of the Converter: it uses the
Converter's expand, child and validator."""

from __future__ import annotations

import itertools

from ...errors import GrammarError, UnsupportedSchemaError
from ._keywords import ANNOTATIONS, ATOMS, NUMBER_KEYWORDS, REF_KEYWORDS, REFUSED_KEYWORDS, STRING_KEYWORDS, TYPE_ATOMS
from . import _dfa, _text
from ._negate import INTERNAL, NOT_CONST
from ._refs import Node
from ._validate import atom_of, canon


# Patterns compared per schema, counted as the product of their automata's sizes (what a product
# can hold; about 0.3 us each as measured, at most a few): oneOf branches are compared pairwise,
# and a schema with hundreds of them must not spend seconds here. Seventeen branches told apart by
# 15-state patterns take 37,000.
MAX_PATTERN_WORK = 100_000


class TypeAnalysis:
    def type_atoms(self, node: Node, keyword="type") -> set:
        t = node.schema.get("type")
        if t is None:
            return set(ATOMS)
        types = t if isinstance(t, list) else [t]
        out = set()
        for x in types:
            if x not in TYPE_ATOMS:
                raise UnsupportedSchemaError(f"unknown type {x!r}", "type", node.pointer)
            out |= TYPE_ATOMS[x]
        return out

    def type_only(self, node: Node, depth: int = 0) -> set | None:
        """The atoms a schema admits, when it constrains nothing but the type; else None. Memoized:
        every level of a deep chain of `not`s asks about the levels below it."""
        key = (node.key, depth)
        if key not in self._type_only:
            self._type_only[key] = self._type_only_uncached(node, depth)
        known = self._type_only[key]
        return None if known is None else set(known)

    def _type_only_uncached(self, node: Node, depth: int) -> set | None:
        if depth > 20:
            return None
        expanded = self.expand([node])
        if expanded is None:
            return set()
        atoms = set(ATOMS)
        for n in expanded:
            s = n.schema
            for key in s:
                if key in ANNOTATIONS or key in ("type", "allOf", *REF_KEYWORDS, "not", "anyOf", "oneOf"):
                    continue
                if key in ("then", "else") and "if" not in s:
                    continue
                if key in self.KNOWN_ALL:
                    return None
            atoms &= self.type_atoms(n)
            if "not" in s:
                inner = self.type_only(self.child(n, "not"), depth + 1)
                if inner is None:
                    return None
                atoms -= inner
            for comb in ("anyOf", "oneOf"):
                if comb in s:
                    sets = [self.type_only(self.child(n, comb, i), depth + 1) for i in range(len(s[comb]))]
                    if any(x is None for x in sets):
                        return None
                    if comb == "anyOf":
                        atoms &= set().union(*sets)
                    else:
                        atoms &= {a for a in ATOMS if sum(a in x for x in sets) == 1}
        return atoms

    KNOWN = frozenset({"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", *REF_KEYWORDS,
                       *NUMBER_KEYWORDS, *STRING_KEYWORDS, "items", "prefixItems", "additionalItems", "contains",
                       "minContains", "maxContains", "minItems", "maxItems", "uniqueItems", "properties",
                       "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
                       "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
                       "unevaluatedItems", "unevaluatedProperties", *REFUSED_KEYWORDS})
    KNOWN_ALL = KNOWN | INTERNAL
    IGNORED_IN_NEGATION = ANNOTATIONS

    def static_atoms(self, nodes, depth=0) -> set:
        """An over-approximation of the atoms a context admits (for oneOf disjointness)."""
        expanded = self.expand(nodes)
        if expanded is None:
            return set()
        atoms = set(ATOMS)
        for n in expanded:
            s = n.schema
            atoms &= self.type_atoms(n)
            for key in ("const", "enum"):
                if key in s:
                    values = [s["const"]] if key == "const" else (s["enum"] if isinstance(s["enum"], list) else [])
                    atoms &= {atom_of(v) for v in values}
            if "not" in s:
                inner = self.type_only(self.child(n, "not"))
                if inner is not None:
                    atoms -= inner
            if depth < 8:
                for comb in ("anyOf", "oneOf"):
                    if isinstance(s.get(comb), list):
                        atoms &= set().union(*[self.static_atoms([self.child(n, comb, i)], depth + 1)
                                               for i in range(len(s[comb]))])
        return atoms

    def finite_values(self, nodes):
        """The enum/const candidate list of a context, or None when it is not finite."""
        expanded = self.expand(nodes)
        if expanded is None:
            return []
        cands = None
        for n in expanded:
            s = n.schema
            for key in ("const", "enum"):
                if key not in s:
                    continue
                if key == "enum" and not isinstance(s["enum"], list):
                    raise UnsupportedSchemaError("enum must be an array", "enum", n.pointer)
                values = [s["const"]] if key == "const" else s["enum"]
                if cands is None:
                    seen = {}
                    for v in values:
                        seen.setdefault(canon(v), v)
                    cands = list(seen.values())
                else:
                    keys = {canon(v) for v in values}
                    cands = [c for c in cands if canon(c) in keys]
        return cands

    def disjoint_atoms(self, nodes, branches, atoms) -> set:
        """The atoms of `atoms` on which no value satisfies two of the branches (in this context):
        there oneOf is anyOf. Objects may be told apart where other atoms are not (branches about
        properties alone all hold for a string)."""
        branch_atoms = [self.static_atoms(nodes + [b]) & atoms for b in branches]
        finite: dict = {}
        shapes: dict = {}

        def fin(k):  # a branch's candidates by JSON equality (canon), or None when not finite
            if k not in finite:
                values = self.finite_values([branches[k]])
                finite[k] = None if values is None else {canon(v) for v in values}
            return finite[k]

        def shape(k):
            if k not in shapes:
                shapes[k] = self.object_shape(nodes + [branches[k]])
            return shapes[k]

        clear = set(atoms)
        for i, j in itertools.combinations(range(len(branches)), 2):
            shared = branch_atoms[i] & branch_atoms[j] & clear
            if not shared:
                continue
            if fin(i) is not None and fin(j) is not None:
                if fin(i).isdisjoint(fin(j)):
                    continue
                clear -= shared
            elif "object" in shared and self.objects_disjoint(shape(i), shape(j)):
                clear -= shared - {"object"}
            else:
                clear -= shared
        return clear

    def object_impossible(self, expanded: list[Node]) -> bool:
        """Whether no object satisfies the (expanded) context, seen cheaply: a key it requires has
        no value that all of its `properties` entries admit (by type, enum/const and excluded
        constants). True is certain; False may be wrong (the body then finds out)."""
        facts = [self.required_facts(n) for n in expanded]
        required = set().union(*[req for req, _ in facts])
        for k in required:
            entries = tuple(props[k] for _, props in facts if k in props)
            if entries and self.no_value(entries):
                return True
        return False

    def required_facts(self, n: Node) -> tuple:
        """(the keys n requires, {key: n's `properties` entry}), remembered per node: the cases a
        context splits into ask about the nodes they share again and again."""
        known = self._required_facts.get(n.key)
        if known is None:
            req = n.schema.get("required")
            props = n.schema.get("properties")
            known = self._required_facts[n.key] = (
                frozenset(k for k in req if type(k) is str) if type(req) is list else frozenset(),
                {k: self.child(n, "properties", k) for k in props} if type(props) is dict else {})
        return known

    def no_value(self, nodes: tuple[Node, ...]) -> bool:
        """Whether no value satisfies every node, seen cheaply (True is certain). Remembered: the
        cases one context splits into ask again about the entries they share."""
        key = tuple(n.key for n in nodes)
        known = self._no_value.get(key)
        if known is None:
            expanded = self.expand(nodes)
            if expanded is None or not self.static_atoms(expanded):
                known = True
            else:
                cands = self.finite_values(expanded)
                excluded = {canon(n.schema[NOT_CONST]) for n in expanded if NOT_CONST in n.schema}
                for n in expanded:
                    excluded |= self.names_excluded(n)
                known = cands is not None and all(canon(c) in excluded for c in cands)
            self._no_value[key] = known
        return known

    def names_excluded(self, n: Node) -> set:
        """The strings n's `not` refuses by name (`not: {enum: [...]}`, perhaps with `type:
        string`: the "any other value" branch beside a discriminator's), by canon; else none."""
        inner = n.schema.get("not")
        if type(inner) is not dict or not {"enum", "const"} & inner.keys() or any(
                k not in ("enum", "const", "type") and k not in ANNOTATIONS for k in inner):
            return set()
        node = self.child(n, "not")
        if "string" not in self.type_atoms(node):
            return set()
        values = self.finite_values([node]) or []
        return {canon(v) for v in values if type(v) is str}

    def object_shape(self, nodes: list[Node]):
        """(required keys, expanded nodes) of a context: a branch with the context it is in (a key
        the context requires tells branches apart by their values for it, as a discriminator at
        the parent's level does)."""
        expanded = self.expand(nodes) or []
        required = set()
        for n in expanded:
            required |= self.required_facts(n)[0]
        return required, expanded

    def member_nodes(self, n: Node, k: str) -> list[Node]:
        """The schemas of n a value for key k meets: its `properties` entry and the
        `patternProperties` that match k, else its `additionalProperties`."""
        s = n.schema
        out = []
        props = s.get("properties")
        if type(props) is dict and k in props:
            out.append(self.child(n, "properties", k))
        pats = s.get("patternProperties")
        if type(pats) is dict:
            out += [self.child(n, "patternProperties", p) for p in pats
                    if _text.pattern_search(p, k, n.pointer, "patternProperties")]
        if not out and "additionalProperties" in s:
            out.append(self.child(n, "additionalProperties"))
        return out

    def key_entries(self, expanded: list[Node], k: str) -> list[Node] | None:
        """The schemas a value for key k must satisfy in a context (member_nodes of each node);
        None where a pattern cannot be read (then nothing is claimed)."""
        try:
            return [x for n in expanded for x in self.member_nodes(n, k)]
        except (UnsupportedSchemaError, GrammarError, UnicodeError):
            return None

    def objects_disjoint(self, a, b) -> bool:
        """Whether no object satisfies both shapes: a key one requires has no value that both
        admit (by type, enum/const, `false`, or patterns no string matches together). Properties
        an `unevaluatedProperties` adds are left out: fewer constraints, so a True stays certain."""
        (req_a, exp_a), (req_b, exp_b) = a, b
        for k in req_a | req_b:
            ea, eb = self.key_entries(exp_a, k), self.key_entries(exp_b, k)
            if ea is None or eb is None:
                continue
            if self.no_value(tuple(ea + eb)) or (ea and eb and self.patterns_disjoint(ea, eb)):
                return True
        return False

    def patterns_disjoint(self, a: list[Node], b: list[Node]) -> bool:
        """Whether no string matches the patterns of both contexts, where each admits strings
        alone and has a pattern (a file name ending in ".js" and one in ".css"): the product of
        their automata is empty. Remembered per pair of pattern lists."""
        sides = []
        for nodes in (a, b):
            expanded = self.expand(nodes)
            if expanded is None:
                return True
            patterns = tuple(sorted({n.schema["pattern"] for n in expanded if type(n.schema.get("pattern")) is str}))
            if not patterns or self.static_atoms(expanded) - {"string"}:
                return False
            sides.append(patterns)
        key = tuple(sorted(sides))
        known = self._patterns_disjoint.get(key)
        if known is None:
            known = False  # unless shown: the cases are then split as if the branches could overlap
            try:
                dfas = [_text.pattern_dfa(p, "") for side in key for p in side]
                work = 1
                for d in dfas:
                    work *= len(d.accept)
                if self._pattern_work + work <= MAX_PATTERN_WORK:
                    self._pattern_work += work
                    known = not any(_dfa.intersect(dfas).accept)
            except (UnsupportedSchemaError, GrammarError):  # unsupported or too large: the bodies that
                pass  # build them say so, with their pointers
            self._patterns_disjoint[key] = known
        return known

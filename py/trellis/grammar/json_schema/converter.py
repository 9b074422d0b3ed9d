"""JSON Schema -> grammar IR. Every keyword is enforced exactly or refused.

How a schema becomes rules
--------------------------
A *context* is the conjunction of all the subschemas that apply to one JSON value (the
schema itself, its `allOf` members, `$ref` targets, the `then` branch that applies, ...),
plus the set of JSON value kinds ("atoms") still possible: null, boolean, int, frac (a
number that is not an integer), string, array, object. Each distinct context becomes one
grammar rule (named after the pointer of its first subschema), so `$ref` recursion becomes
rule recursion (a subschema is also told apart by its dynamic scope when a `$dynamicRef` can
depend on it, see _refs.py). A context is compiled by:

1. intersecting the atoms with every `type` and every type-only `not`;
2. splitting on type-only `if` (per atom, `then` or `else` joins the context);
3. if any subschema has `enum`/`const`: the finite set of candidates, each checked
   against the whole context by the exact validator, becomes the grammar;
4. distributing `anyOf` and `oneOf` (the latter only when its branches are provably
   disjoint: per atom at most one branch admits the atom, or the overlapping branches are
   finite sets of distinct values); an `anyOf` whose annotations an `unevaluated*` keyword
   reads distributes over the non-empty sets of its branches, every branch that holds counting;
5. per atom, the keywords of that atom from every subschema together (numbers: exact
   digit-level ranges and multiples; strings: pattern/format/length intersected as DFAs;
   arrays: prefix items, counts, contains; objects: properties in any order with required
   tracking, or in schema order when counts must be tracked; an additional key is "none of
   the known names", a trie built directly, or a DFA product with patterns/propertyNames).

Cost: time to first mask includes this conversion, so it is kept linear in the grammar's
size: walks over expressions are memoized by object identity (expressions are DAGs),
string automata are cached and their products skip hopeless states (_dfa.product), the
last pass (_prune) reads the references cached on the nodes (dead parts are the core's to
cut: it prunes them anyway), and the cyclic garbage collector is paused during the
conversion (see to_grammar).
References are one object per rule name (`ref`) and literals are shared (ir.literal), so
that the passes after the conversion meet fewer distinct nodes.

Refused (UnsupportedSchemaError naming keyword and pointer): see `REFUSED_KEYWORDS` and the
cases the individual builders refuse. Unknown keywords are ignored, as the specification
says; `ANNOTATIONS` lists the known annotation keywords.
"""

from __future__ import annotations

import gc
import itertools
import json
import re
from decimal import Decimal

from ...errors import GrammarLimitError, InvalidRequestError, SchemaLimitError, UnsupportedSchemaError
from .. import ir
from ..builtin_json import json_text_rules
from . import _dfa, _numbers, _text
from ._negate import INTERNAL, NOT_CONST, NOT_FORMAT, NOT_MULTIPLE, NOT_PATTERN, WITNESS, Negator
from ._dialect import draft6_forms, dynamic_forms, format_is_annotation, is_draft4, without_formats
from ._prune import prune
from ._refs import Node, Resolver, escape_pointer
from ._validate import Validator, atom_of, canon, json_equal

ATOMS = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
TYPE_ATOMS = {"null": {"null"}, "boolean": {"boolean"}, "integer": {"int"}, "number": {"int", "frac"},
              "string": {"string"}, "array": {"array"}, "object": {"object"}}

# Accepted and ignored: they do not constrain instances.
ANNOTATIONS = frozenset({
    "title", "description", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly",
    "contentEncoding", "contentMediaType", "contentSchema", "$schema", "$id", "$anchor", "$dynamicAnchor",
    "$recursiveAnchor", "$defs", "definitions", "$vocabulary",
})
# Refused when present: 2019-09's $recursiveRef is rewritten into $dynamicRef (_dialect.py) except
# under draft-07 semantics, where it is no keyword and cannot mean what its author meant.
REFUSED_KEYWORDS = frozenset({"$recursiveRef"})
REF_KEYWORDS = ("$ref", "$dynamicRef")
NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")

_NOT_ALNUM = re.compile(r"[\W_]")  # \w is str.isalnum() and "_"
DEFAULT_MAX_WHITESPACE = 20
MAX_TRACKED_KEYS = 8  # required/dependent keys tracked as subsets when properties come in any order
MAX_ORDERED_STATES = 6000
# Known properties of one object in schema order: each costs the core about 40 states (3,200
# optional integer properties: 127,481 of its 131,072).
MAX_ORDERED_PROPERTIES = 3000
MAX_RULES = 15000
MAX_CONTEXTS = 800  # anyOf/oneOf/if distributions in one schema
# An anyOf under a constraining unevaluatedProperties/Items distributes over the sets of its branches
# that hold (2^n - 1 of them): at most this many branches.
MAX_EVALUATED_BRANCHES = 4
# A string with a larger maxLength is generated with at most this many characters.
MAX_STRING_LENGTH = 100_000
# Item counts (minItems, maxItems) above this go through block rules (Converter.counted).
COUNT_BLOCKS_FROM = 256
# Checks decided on the text by the core (ir.Check): an item equal to an earlier one, a key
# equal to an earlier one.
UNIQUE_ITEM = ir.Check(ir.UNIQUE_ITEM)
DISTINCT_KEY = ir.Check(ir.DISTINCT_KEY)


PROPERTY_ORDERS = ("schema", "any")


_CLOSE_QUOTE = ir.literal('"')


class Options:
    def __init__(self, any_whitespace: bool, strict: bool, max_whitespace: int, property_order: str = "schema",
                 canonical_integers: bool = False):
        if property_order not in PROPERTY_ORDERS:
            raise InvalidRequestError(f"must be one of {PROPERTY_ORDERS}, got {property_order!r}", "property_order")
        if isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int) or not 0 <= max_whitespace <= 1000:
            raise InvalidRequestError(f"must be an integer from 0 to 1000, got {max_whitespace!r}", "max_whitespace")
        self.any_whitespace, self.strict, self.max_whitespace = any_whitespace, strict, max_whitespace
        self.property_order = property_order
        # Integers as written for generation: no ".0" (validation takes what JSON Schema does)
        self.zero_frac = ir.EMPTY if canonical_integers else _numbers.ZERO_FRAC
        # Constants compare as numbers in every draft (draft-04's enum [1] takes 1.0), so a constant's
        # integral value keeps its ".0" forms unless generation asks for canonical integers.
        self.const_zero_frac = self.zero_frac

    @property
    def integer(self) -> ir.Expr:
        return ir.seq(_numbers.MINUS, _numbers.UINT, self.zero_frac)

    def integers_without_fraction(self):
        self.zero_frac = ir.EMPTY


class Converter:
    def __init__(self, schema, options: Options, draft7: bool):
        self.opt = options
        self.resolver = Resolver(schema, draft7=draft7)
        self.draft7 = draft7
        self.validator = Validator(self.resolver)
        self.rules: dict[str, ir.Expr] = {}
        self.names: dict = {}
        self.counter = itertools.count()
        if options.any_whitespace:
            # One rule that every place calls: the bound costs its states once, not at each place.
            self.rules["ws"] = ir.repeat(ir.byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0,
                                         options.max_whitespace)
            ws = self.ws = ir.Ref("ws")
            self.sep = ir.seq(ws, ir.literal(","), ws)
            self.colon = ir.seq(ws, ir.literal(":"), ws)
        else:  # compact, but json.dumps' default ", " and ": " are accepted
            space = ir.repeat(ir.literal(" "), 0, 1)
            self.ws = ir.EMPTY
            self.sep = ir.seq(ir.literal(","), space)
            self.colon = ir.seq(ir.literal(":"), space)
        self.synthetic: dict = {}
        self._refs: dict[str, ir.Ref] = {}
        self._in_place: dict = {}
        self.key_cache: dict = {}
        self.char_blocks: dict = {}  # one JSON string character's expression -> its 16-block rule
        self.contexts = 0
        self.negator = Negator(self)
        self.bodies: list = []  # value rules named but not built yet (see value)
        self._type_only: dict = {}

    # ---- entry ---------------------------------------------------------------------------

    def grammar(self) -> ir.Grammar:
        root = self.value([self.resolver.root])
        self.build_bodies()
        self.rules["root"] = root
        # When no JSON value is valid, this is the empty language: the core says so (is_empty).
        return ir.Grammar(prune(self.rules, "root"), "root")

    def fresh(self, hint: str) -> str:
        n = next(self.counter)
        if n > MAX_RULES:
            raise SchemaLimitError(f"the schema expands to more than {MAX_RULES} grammar rules (a limit)", None, "")
        return f"{hint}_{n}"

    def dfa_rules(self, d: _dfa.Dfa, hint: str, transform=None) -> ir.Expr:
        heavy = _text.HEAVY if transform is _text.json_escape else None
        expr = _dfa.to_rules(d, self.fresh(hint), self.rules, transform, heavy)
        if len(self.rules) > MAX_RULES:
            raise SchemaLimitError(f"the schema expands to more than {MAX_RULES} grammar rules (a limit)", None, "")
        return expr

    def distribute(self, keyword: str, at: Node, ways: int = 2) -> None:
        """Count the contexts that splitting on combinators creates (it can multiply)."""
        self.contexts += ways
        if self.contexts > MAX_CONTEXTS:
            raise SchemaLimitError(f"{keyword} combinations multiply beyond {MAX_CONTEXTS} cases here (a limit)",
                                   keyword, at.pointer)

    def ref(self, name: str) -> ir.Ref:
        """The reference to a rule: one object per name, so it is analysed and hashed once."""
        known = self._refs.get(name)
        if known is None:
            known = self._refs[name] = ir.Ref(name)
        return known

    def shared(self, expr: ir.Expr, hint: str) -> ir.Expr:
        """A rule for an expression used in many places (the core inlines it only if small)."""
        if expr == ir.NOTHING or isinstance(expr, (ir.Ref, ir.Bytes)):
            return expr
        name = self.fresh(hint)
        self.rules[name] = expr
        return self.ref(name)

    def synth(self, node: Node, tag: str, value) -> Node:
        """A synthetic subschema (e.g. a negation) with a stable identity."""
        ptr = f"{node.pointer}/~{tag}"
        known = self.synthetic.get((node.base, ptr, node.dyn))
        if known is None:
            known = self.synthetic[(node.base, ptr, node.dyn)] = Node(value, node.base, ptr, node.dyn)
        return known

    def negation(self, node: Node) -> Node:
        ptr = f"{node.pointer}/~not"
        known = self.synthetic.get((node.base, ptr, node.dyn))
        if known is None:
            # a negation is rebuilt from pieces: a $dynamicRef in it cannot know its dynamic scope
            dyn = self.resolver.unknown_scope(node.dyn)
            known = self.synthetic[(node.base, ptr, node.dyn)] = Node(self.negator.negate(node), node.base, ptr, dyn)
        return known

    # ---- contexts -------------------------------------------------------------------------

    def expand(self, nodes) -> list[Node] | None:
        """Flatten allOf, $ref and $dynamicRef; None when some subschema is `false`."""
        out: list[Node] = []
        seen: set = set()
        todo = list(nodes)
        while todo:
            node = todo.pop(0)
            if node.key in seen:
                continue
            seen.add(node.key)
            s = node.schema
            if s is True:
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise UnsupportedSchemaError("a schema must be an object or a boolean", None, node.pointer)
            if "$ref" in s:
                target = self.resolver.follow(node, "$ref")
                if self.draft7:  # draft-07: siblings of $ref are ignored
                    todo.insert(0, target)
                    continue
                todo.append(target)
            if "$dynamicRef" in s:
                todo.append(self.resolver.follow(node, "$dynamicRef"))
            for key in s:
                if key in REFUSED_KEYWORDS and not (key.startswith("unevaluated") and s[key] is True):
                    raise UnsupportedSchemaError(f"{key} is not supported", key, node.pointer)
            out.append(node)
            if isinstance(s.get("allOf"), list):
                todo.extend(self.child(node, "allOf", i) for i in range(len(s["allOf"])))
        return out

    def child(self, node: Node, key: str, *more) -> Node:
        ptr = node.pointer + "/" + escape_pointer(key) + "".join("/" + escape_pointer(str(m)) for m in more)
        known = self.resolver.by_pointer.get(ptr)
        if known is not None and node.dyn is None:
            return known
        value = node.schema[key]
        for m in more:
            value = value[m]
        return self.resolver.child(node, ptr, value)

    def value(self, nodes, atoms=ATOMS, done=frozenset()) -> ir.Expr:
        expanded = self.expand(nodes)
        if expanded is None or not atoms:
            return ir.NOTHING
        key = (frozenset(n.key for n in expanded), frozenset(atoms), done)
        name = self.names.get(key)
        if name is None:
            hint = "v" + _NOT_ALNUM.sub("_", (expanded[0].pointer if expanded else "any")[-40:])
            name = self.fresh(hint)
            self.names[key] = name
            self.rules[name] = ir.NOTHING  # placeholder until the body is built
            self.bodies.append((name, expanded, frozenset(atoms), done))
        return self.ref(name)

    def build_bodies(self) -> None:
        """Builds the value rules named so far, and those their bodies name, depth first. A body
        only refers to the values inside it, so they are built after it, from a stack rather
        than by recursion: how deep schemas nest (and $ref chains go) is the user's choice."""
        stack: list = []
        while self.bodies or stack:
            stack.extend(reversed(self.bodies))  # the first named is built first
            self.bodies.clear()
            name, nodes, atoms, done = stack.pop()
            self.rules[name] = self.body(nodes, atoms, done)

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

    def body(self, nodes: list[Node], atoms: frozenset, done: frozenset) -> ir.Expr:
        atoms = set(atoms)
        for n in nodes:
            atoms &= self.type_atoms(n)
            if "not" in n.schema:
                inner = self.type_only(self.child(n, "not"))
                if inner is not None:
                    atoms -= inner
        if not atoms:
            return ir.NOTHING
        # enum / const: a finite set, each value checked against the whole context
        cands = self.finite_values(nodes)
        if cands is not None:
            keep = [v for v in cands if atom_of(v) in atoms and all(self.validator.valid(v, n) for n in nodes)]
            return ir.alt(*(self.const_expr(v, integer="frac" not in atoms) for v in keep))
        # if / then / else: per atom when the condition is about the type alone, else
        # (if ∧ then) ∨ (¬if ∧ else)
        for n in nodes:
            s = n.schema
            marker = (n.key, "if")
            if "if" in s and marker not in done and ("then" in s or "else" in s or any(
                    k in m.schema for m in nodes for k in ("unevaluatedProperties", "unevaluatedItems"))):
                self.distribute("if", n)
                cond = self.type_only(self.child(n, "if"))
                parts = []
                if cond is not None:
                    for branch, sub_atoms in (("then", atoms & cond), ("else", atoms - cond)):
                        extra = [self.child(n, branch)] if branch in s else []
                        if sub_atoms:
                            parts.append(self.value(nodes + extra, frozenset(sub_atoms), done | {marker}))
                    return ir.alt(*parts)
                yes = [self.child(n, "if")] + ([self.child(n, "then")] if "then" in s else [])
                no = [self.negation(self.child(n, "if"))] + ([self.child(n, "else")] if "else" in s else [])
                return ir.alt(self.value(nodes + yes, frozenset(atoms), done | {marker}),
                              self.value(nodes + no, frozenset(atoms), done | {marker}))
        # anyOf / oneOf: distribute
        for n in nodes:
            s = n.schema
            for comb in ("anyOf", "oneOf"):
                marker = (n.key, comb)
                if comb in s and marker not in done:
                    if not isinstance(s[comb], list) or not s[comb]:
                        raise UnsupportedSchemaError(f"{comb} must be a non-empty array", comb, n.pointer)
                    branches = [self.child(n, comb, i) for i in range(len(s[comb]))]
                    self.distribute(comb, n, len(branches))
                    if comb == "anyOf" and len(branches) > 1 and self.feeds_unevaluated(nodes, n):
                        # The keys (items) every branch that holds evaluates count, so one alternative
                        # per non-empty set of branches, each holding all of its set: a term that omits
                        # a branch which also holds is stricter, never wrong, and its own set's term
                        # accepts what it rejects.
                        if len(branches) > MAX_EVALUATED_BRANCHES:
                            raise UnsupportedSchemaError(
                                f"anyOf with more than {MAX_EVALUATED_BRANCHES} branches under "
                                "unevaluatedProperties/unevaluatedItems is not supported", comb, n.pointer)
                        sets = [list(c) for r in range(1, len(branches) + 1)
                                for c in itertools.combinations(branches, r)]
                        return ir.alt(*(self.value(nodes + c, frozenset(atoms), done | {marker}) for c in sets))
                    if comb == "oneOf" and not self.disjoint(nodes, branches, atoms):
                        # exactly one: bᵢ ∧ ⋀ⱼ≠ᵢ ¬bⱼ
                        negs = [self.negation(b) for b in branches]
                        return ir.alt(*(self.value(nodes + [b] + negs[:i] + negs[i + 1:], frozenset(atoms),
                                                   done | {marker}) for i, b in enumerate(branches)))
                    return ir.alt(*(self.value(nodes + [b], frozenset(atoms), done | {marker}) for b in branches))
        # a `not` that is not about types alone: its negation joins the context
        for n in nodes:
            marker = (n.key, "not")
            if "not" in n.schema and marker not in done and self.type_only(self.child(n, "not")) is None:
                return self.value(nodes + [self.negation(self.child(n, "not"))], frozenset(atoms), done | {marker})
        # dependentSchemas that are more than a type or a required list: key absent, or
        # key present and the dependent schema holds
        if "object" in atoms:
            for n in nodes:
                for where, k, dnode in self.dependent_schemas(n):
                    marker = (n.key, "dep", k)
                    if marker in done or self.simple_dependency(dnode) is not None:
                        continue
                    absent = self.synth(n, f"absent/{escape_pointer(k)}", {"properties": {k: False}})
                    present = self.synth(n, f"present/{escape_pointer(k)}", {"required": [k]})
                    rest = frozenset(atoms - {"object"})
                    obj = frozenset({"object"})
                    return ir.alt(self.value(nodes, rest, done | {marker}) if rest else ir.NOTHING,
                                  self.value(nodes + [absent], obj, done | {marker}),
                                  self.value(nodes + [present, dnode], obj, done | {marker}))
        excluded = [n.schema[NOT_CONST] for n in nodes if NOT_CONST in n.schema]
        for v in excluded:
            if isinstance(v, (list, dict)) and atom_of(v) in atoms:
                raise UnsupportedSchemaError("excluding an array or object value (not const/enum) is not supported",
                                             "not", nodes[0].pointer)
        parts = []
        if "null" in atoms and not any(v is None for v in excluded):
            parts.append(ir.literal("null"))
        if "boolean" in atoms:
            parts += [ir.literal(json.dumps(b)) for b in (True, False) if not any(v is b for v in excluded)]
        if "int" in atoms or "frac" in atoms:
            parts.append(self.number(nodes, atoms))
        if "string" in atoms:
            parts.append(self.string(nodes))
        if "array" in atoms:
            parts.append(self.array(nodes))
        if "object" in atoms:
            parts.append(self.object(nodes))
        return ir.alt(*parts)

    def disjoint(self, nodes, branches, atoms) -> bool:
        """Whether no value can satisfy two of the branches (in this context): then oneOf is anyOf."""
        branch_atoms = [self.static_atoms(nodes + [b]) & atoms for b in branches]
        finite: dict = {}
        shapes: dict = {}

        def fin(k):
            if k not in finite:
                finite[k] = self.finite_values([branches[k]])
            return finite[k]

        def shape(k):
            if k not in shapes:
                shapes[k] = self.object_shape(branches[k])
            return shapes[k]

        for i, j in itertools.combinations(range(len(branches)), 2):
            shared = branch_atoms[i] & branch_atoms[j]
            if not shared:
                continue
            if fin(i) is not None and fin(j) is not None:
                if not any(json_equal(a, b) for a in fin(i) for b in fin(j)):
                    continue
                return False
            if shared == {"object"} and self.objects_disjoint(shape(i), shape(j)):
                continue
            return False
        return True

    def object_shape(self, branch: Node):
        """(required keys, closed key set or None, {key: [property schema nodes]}) of a branch."""
        expanded = self.expand([branch]) or []
        required, props = set(), {}
        closed = None
        for n in expanded:
            s = n.schema
            req = s.get("required", [])
            if isinstance(req, list):
                required.update(k for k in req if isinstance(k, str))
            for k in s.get("properties", {}) if isinstance(s.get("properties"), dict) else ():
                props.setdefault(k, []).append(self.child(n, "properties", k))
            if s.get("additionalProperties") is False and not s.get("patternProperties"):
                names = set(s.get("properties", {}))
                closed = names if closed is None else closed & names
        return required, closed, props

    def objects_disjoint(self, a, b) -> bool:
        for (req1, _, props1), (_, closed2, props2) in ((a, b), (b, a)):
            for k in req1:
                if closed2 is not None and k not in closed2:
                    return True  # required in one, not allowed in the other
                if any(n.schema is False for n in props2.get(k, ())):
                    return True
        req_a, _, props_a = a
        req_b, _, props_b = b
        for k in req_a & req_b:
            if k in props_a and k in props_b:
                va, vb = self.finite_values(props_a[k]), self.finite_values(props_b[k])
                if va is not None and vb is not None and not any(json_equal(x, y) for x in va for y in vb):
                    return True
                if not (self.static_atoms(props_a[k]) & self.static_atoms(props_b[k])):
                    return True
        return False

    # ---- constants -----------------------------------------------------------------------------

    def const_expr(self, v, integer: bool = False) -> ir.Expr:
        """The texts of the constant `v`; `integer`: where only integers are allowed (draft-04's
        integers have no fraction, so `1.0` is not spelled there)."""
        if v is None:
            return ir.literal("null")
        if v is True:
            return ir.literal("true")
        if v is False:
            return ir.literal("false")
        if isinstance(v, (int, float)):
            zero_frac = self.opt.zero_frac if integer else self.opt.const_zero_frac
            forms = []
            if isinstance(v, int) or v.is_integer():
                forms.append(ir.seq(ir.literal(str(int(v))), zero_frac))
            if isinstance(v, float) and (zero_frac is not ir.EMPTY or not v.is_integer()):  # 1.0 spelled as itself
                text = repr(v)
                if "e" not in text and "." in text:
                    forms.append(ir.seq(ir.literal(text), ir.repeat(ir.literal("0"), 0, None)))
                elif text not in ("inf", "-inf", "nan"):
                    forms.append(ir.literal(text))
            return ir.alt(*forms)
        if isinstance(v, str):
            return _text.string_literal(v)
        if isinstance(v, list):
            if not v:
                return ir.seq(ir.literal("["), self.ws, ir.literal("]"))
            items = [self.const_expr(x) for x in v]
            inner = [items[0]]
            for x in items[1:]:
                inner += [self.sep, x]
            return ir.seq(ir.literal("["), self.ws, *inner, self.ws, ir.literal("]"))
        if isinstance(v, dict):
            if not v:
                return ir.seq(ir.literal("{"), self.ws, ir.literal("}"))
            members = [ir.seq(_text.string_literal(k), self.colon, self.const_expr(x)) for k, x in v.items()]
            orders = itertools.permutations(members) if len(members) <= 4 else [members]
            alts = []
            for order in orders:
                inner = [order[0]]
                for m in order[1:]:
                    inner += [self.sep, m]
                alts.append(ir.seq(*inner))
            return ir.seq(ir.literal("{"), self.ws, ir.alt(*alts), self.ws, ir.literal("}"))
        raise UnsupportedSchemaError(f"unsupported constant {v!r}", "const", None)

    # ---- numbers --------------------------------------------------------------------------------

    def number(self, nodes, atoms) -> ir.Expr:
        lo = hi = None
        li = hinc = True
        multiples: list[Decimal] = []
        not_multiples: list[Decimal] = []
        for n in nodes:
            s = n.schema
            for key in NUMBER_KEYWORDS:
                if key not in s:
                    continue
                if isinstance(s[key], bool):
                    raise UnsupportedSchemaError("boolean exclusive bounds (draft-04) are not supported", key,
                                                 n.pointer)
                d = _numbers.to_decimal(s[key], key, n.pointer)
                if key == "multipleOf":
                    if d <= 0:
                        raise UnsupportedSchemaError("multipleOf must be positive", key, n.pointer)
                    multiples.append(d)
                elif key in ("minimum", "exclusiveMinimum"):
                    inc = key == "minimum"
                    if lo is None or d > lo or (d == lo and not inc):
                        lo, li = d, inc
                else:
                    inc = key == "maximum"
                    if hi is None or d < hi or (d == hi and not inc):
                        hi, hinc = d, inc
        for n in nodes:
            if NOT_MULTIPLE in n.schema:
                not_multiples.append(_numbers.to_decimal(n.schema[NOT_MULTIPLE], "multipleOf", n.pointer))
        excluded = [v for n in nodes if NOT_CONST in n.schema for v in [n.schema[NOT_CONST]]
                    if atom_of(v) in ("int", "frac")]
        integer_only = "frac" not in atoms
        frac_only = "int" not in atoms
        bounded = lo is not None or hi is not None
        if frac_only or excluded or not_multiples:
            # exact via automata over exponent-free numbers
            ptr = _where(nodes)
            base = _numbers.decimal_range(lo, li, hi, hinc)
            comps = [(_dfa.from_ir(base, "multipleOf", ptr), True)]
            if frac_only:
                comps.append((_dfa.from_ir(_numbers.NON_INTEGER, "not", ptr), True))
            if integer_only:
                comps.append((_dfa.from_ir(self.opt.integer, "type", ptr), True))
            comps += [(_numbers.multiple_dfa(m, ptr), True) for m in multiples]
            comps += [(_numbers.multiple_dfa(m, ptr), False) for m in not_multiples]
            if excluded:
                comps.append((_dfa.from_ir(ir.alt(*(self.const_expr(v) for v in excluded)), "not", ptr), False))
            d = _dfa.product([c for c, _ in comps], [w for _, w in comps], "not", ptr)
            return self.dfa_rules(d, "num")
        if not integer_only and not multiples and bounded and ((lo == 0 and hi is None) or (hi == 0 and lo is None)):
            # a sign constraint alone: exponents are allowed (1e-06 >= 0)
            positive = ir.seq(ir.alt(ir.seq(_numbers.NONZERO, ir.repeat(_numbers.DIGIT, 0, None),
                                            ir.repeat(_numbers.FRAC, 0, 1)),
                                     ir.seq(ir.literal("0."), ir.repeat(ir.literal("0"), 0, None), _numbers.NONZERO,
                                            ir.repeat(_numbers.DIGIT, 0, None))),
                              ir.repeat(_numbers.EXP, 0, 1))
            zero = ir.seq(ir.literal("0"), ir.repeat(ir.seq(ir.literal("."), ir.repeat(ir.literal("0"), 1, None)), 0, 1),
                          ir.repeat(_numbers.EXP, 0, 1))
            inclusive = li if lo is not None else hinc
            magnitude = ir.alt(positive, zero) if inclusive else positive
            if lo is not None:
                return magnitude
            return ir.alt(ir.seq(ir.literal("-"), positive), *([zero] if inclusive else []))
        if integer_only:
            ilo, ihi = _numbers.integer_bounds(lo, li, hi, hinc)
            if ilo is not None and ihi is not None and ihi < ilo:
                return ir.NOTHING
            expr = ir.seq(_numbers.integer_range(ilo, ihi), self.opt.zero_frac) if bounded else self.opt.integer
        else:
            expr = _numbers.decimal_range(lo, li, hi, hinc) if bounded else None
        if not multiples:
            return expr if expr is not None else _numbers.NUMBER
        base = expr if expr is not None else _numbers.PLAIN_NUMBER
        ptr = _where(nodes)
        try:
            dfas = [_dfa.from_ir(base, "multipleOf", ptr)] + [_numbers.multiple_dfa(m, ptr) for m in multiples]
            d = _dfa.intersect(dfas, "multipleOf", ptr)
            return self.dfa_rules(d, "mult")
        except UnsupportedSchemaError as e:
            if e.keyword != "multipleOf":
                raise
        # Too many remainders for an automaton: the core divides the number's text when it ends.
        if all(m == m.to_integral_value() for m in multiples):
            # Only integers are multiples: checking the integer part keeps a '.' from leading
            # into a text that no digit can complete.
            return _numbers.checked_integer_multiples(*_numbers.integer_bounds(lo, li, hi, hinc), multiples, ptr,
                                                      self.opt.zero_frac)
        return ir.Region(ir.seq(base, *(ir.Check(ir.MULTIPLE_OF, _numbers.check_params(m, ptr)) for m in multiples)))

    # ---- strings --------------------------------------------------------------------------------

    def char_count(self, lo: int, hi: int | None, char: ir.Expr = _text.JSON_CHAR) -> ir.Expr:
        """lo..hi JSON string characters (each one `char`). Long counts go through a shared
        16-character block rule, so the core's automaton grows with hi/16 calls instead of hi
        copies of a char."""
        if (hi is None or hi <= 64) and lo <= 64:
            return ir.repeat(char, lo, hi)
        name = self.char_blocks.get(char)
        if name is None:
            name = self.char_blocks[char] = "chars16" if char is _text.JSON_CHAR else self.fresh("chars16")
            self.rules[name] = ir.repeat(char, 16, 16)
        block = self.ref(name)

        def exactly(n):
            return ir.seq(ir.repeat(block, n // 16, n // 16), ir.repeat(char, n % 16, n % 16))

        def up_to(m):
            q = m // 16
            if q == 0:
                return ir.repeat(char, 0, m)
            return ir.alt(ir.seq(ir.repeat(block, 0, q - 1), ir.repeat(char, 0, 15)),
                          ir.seq(ir.repeat(block, q, q), ir.repeat(char, 0, m % 16)))

        rest = ir.repeat(char, 0, None) if hi is None else up_to(hi - lo)
        return ir.seq(exactly(lo), rest)

    def string_constraints(self, nodes):
        lo, hi, exprs = 0, None, []
        for n in nodes:
            s = n.schema
            lo, hi = _count_bounds(n, "minLength", "maxLength", lo, hi)
            if "pattern" in s:
                exprs.append(("pattern", s["pattern"], n.pointer))
            if self.draft7 and "contentMediaType" in s:  # an assertion in draft-07 (an annotation after)
                if s["contentMediaType"] != "application/json":
                    raise UnsupportedSchemaError("only the application/json contentMediaType is enforced",
                                                 "contentMediaType", n.pointer)
                exprs.append(("json", None, n.pointer))
            if self.draft7 and "contentEncoding" in s:
                if s["contentEncoding"] != "base64":
                    raise UnsupportedSchemaError("only the base64 contentEncoding is enforced", "contentEncoding",
                                                 n.pointer)
                exprs.append(("regex", _text.BASE64, n.pointer))
            if "format" in s:
                if s["format"] == "regex" or _text.format_expr(s["format"], n.pointer) is not None:
                    exprs.append(("format", s["format"], n.pointer))
            if NOT_PATTERN in s:
                exprs.append(("notpattern", s[NOT_PATTERN], n.pointer))
            if NOT_FORMAT in s and _text.format_expr(s[NOT_FORMAT], n.pointer) is not None:
                exprs.append(("notformat", s[NOT_FORMAT], n.pointer))
            if NOT_CONST in s and isinstance(s[NOT_CONST], str):
                exprs.append(("notliteral", s[NOT_CONST], n.pointer))
        return lo, hi, exprs

    def string_dfa(self, lo, hi, exprs, pointer) -> _dfa.Dfa:
        comps = [(self.any_string_dfa(), True)]
        for kind, value, ptr in exprs:
            negated = kind.startswith("not")
            comps.append((self.string_part(kind[3:] if negated else kind, value, ptr, dfa=True), not negated))
        if lo > 0 or hi is not None:
            if hi is not None and hi > 500:
                raise UnsupportedSchemaError("maxLength above 500 together with a pattern or format is not supported",
                                             "maxLength", pointer)
            ascii = any(want and c.ascii_only() for c, want in comps[1:])
            try:
                comps.append((_text.length_dfa(lo, hi, ascii), True))
            except UnsupportedSchemaError as e:
                raise UnsupportedSchemaError(e.message, "maxLength", pointer) from None
        return _dfa.product([c for c, _ in comps], [w for _, w in comps], "pattern", pointer)

    @staticmethod
    def string_part(kind, value, ptr, dfa=False):
        if kind == "pattern":
            return _text.pattern_dfa(value, ptr) if dfa else _text.pattern_expr(value, ptr)
        if kind == "format":
            return _text.format_dfa(value, ptr) if dfa else _text.format_expr(value, ptr)
        if kind == "literal":
            return _dfa.literal_set([value.encode("utf-8")])
        return _text.full_regex_dfa(value) if dfa else _text.full_regex_expr(value)

    @staticmethod
    def any_string_dfa() -> _dfa.Dfa:
        return _text.any_string_dfa()

    def string(self, nodes) -> ir.Expr:
        lo, hi, exprs = self.string_constraints(nodes)
        quote = ir.literal('"')
        if hi is not None and hi < lo:
            return ir.NOTHING
        if not exprs:
            return ir.seq(quote, self.capped_count(lo, hi, nodes[0].pointer if nodes else ""), quote)
        if any(kind == "json" for kind, _, _ in exprs):
            return self.json_content(lo, hi, exprs)
        if len(exprs) == 1 and exprs[0][0] == "format" and exprs[0][1] in _text.CHECKED_FORMATS and lo == 0 and (
                hi is None):
            expr, rules = _text.checked_format(exprs[0][1])
            self.rules.update(rules)
            return expr
        if len(exprs) == 1 and not exprs[0][0].startswith("not"):
            expr = self.string_part(*exprs[0])
            rlo, rhi = _text.regex_min_max_length(expr)
            if rlo >= lo and (hi is None or (rhi is not None and rhi <= hi)):
                return ir.seq(quote, _text.json_escape(expr), quote)
            if type(expr) is ir.Repeat and _text.regex_min_max_length(expr.item) == (1, 1):
                # One character class repeated (`^[a-z0-9-]+$`): the length bounds are count bounds,
                # counted by the core, where a product automaton would need a state per count.
                return ir.seq(quote, self.counted_class(expr, lo, hi, nodes[0].pointer), quote)
        d = self.string_dfa(lo, hi, exprs, nodes[0].pointer)
        return ir.seq(quote, self.dfa_rules(d, "str", _text.json_escape), quote)

    def json_content(self, lo, hi, exprs) -> ir.Expr:
        """A string holding a JSON document (contentMediaType application/json), maybe in base64:
        the document's grammar under the string's escapes, or base64 checked when it ends."""
        pointer = next(ptr for kind, _, ptr in exprs if kind == "json")
        base64 = ("regex", _text.BASE64) in [(kind, value) for kind, value, _ in exprs]
        if lo > 0 or hi is not None or len(exprs) > 1 + base64:
            raise UnsupportedSchemaError("contentMediaType together with other string constraints is not supported",
                                         "contentMediaType", pointer)
        quote = ir.literal('"')
        if base64:
            body = _text.json_escape(_text.full_regex_expr(_text.BASE64))
            return ir.seq(ir.Region(ir.seq(quote, body, ir.Check(ir.BASE64_JSON))), quote)
        if "content-root" not in self.rules:
            # JSON whitespace, bounded (compact: at most one space, as between members), escaped below
            if self.opt.any_whitespace:
                ws = ir.repeat(ir.byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0, self.opt.max_whitespace)
            else:
                ws = ir.repeat(ir.literal(" "), 0, 1)
            self.rules.update({k: _text.json_escape(v) for k, v in json_text_rules("content-", ws).items()})
        return ir.seq(quote, self.ref("content-root"), quote)

    def counted_class(self, expr: ir.Repeat, lo: int, hi: int | None, pointer: str) -> ir.Expr:
        lo = max(lo, expr.min)
        hi = expr.max if hi is None else hi if expr.max is None else min(hi, expr.max)
        if hi is not None and hi < lo:
            return ir.NOTHING
        return self.capped_count(lo, hi, pointer, _text.json_escape(expr.item))

    def capped_count(self, lo: int, hi: int | None, pointer: str, char: ir.Expr = _text.JSON_CHAR) -> ir.Expr:
        """char_count within MAX_STRING_LENGTH: a longer minimum is refused, a longer maximum cut."""
        if lo > MAX_STRING_LENGTH:
            raise UnsupportedSchemaError(f"minLength above {MAX_STRING_LENGTH} is not supported", "minLength", pointer)
        if hi is not None and hi > MAX_STRING_LENGTH:
            hi = MAX_STRING_LENGTH  # a restriction
        return self.char_count(lo, hi, char)

    # ---- arrays ---------------------------------------------------------------------------------

    def array(self, nodes) -> ir.Expr:
        lo, hi = 0, None
        prefixes: list[tuple[Node, list[Node], Node | None]] = []  # (node, prefix schemas, rest schema)
        contains = []
        unique_at = None
        for n in nodes:
            s = n.schema
            lo, hi = _count_bounds(n, "minItems", "maxItems", lo, hi)
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
            counted.append(({i for i, v in enumerate(values) if self.validator.valid(v, cnode)},
                            *self.contains_bounds(n, mn, mx)))
        exprs = [self.const_expr(v) for v in values]
        last = len(positions) - 1
        close = ir.literal("]")

        def fits(used: frozenset, closing: bool) -> bool:
            for hits, mn, mx in counted:
                k = len(used & hits)
                if (mx is not None and k > mx) or (closing and k < mn):
                    return False
            return True

        def state(pos: int, used: frozenset) -> ir.Expr:
            opts = []
            if len(used) >= lo and fits(used, True):
                opts.append(ir.seq(self.ws, close) if used else close)
            if hi is None or len(used) < hi:
                sep = self.sep if used else ir.EMPTY
                opts += [ir.seq(sep, exprs[i], states.ref(min(pos + 1, last), used | {i}))
                         for i in choices[pos] if i not in used and fits(used | {i}, False)]
            return ir.alt(*opts)

        states = StateRules(self, "uniq", state)
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
        values = None if values is None else [v for v in values if all(self.validator.valid(v, n) for n in expanded)]
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
        full = ir.seq(open_, self.ws, content, self.ws, close)
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

        def state(t, c):
            opts = []
            if t >= lo and c >= mn:
                opts.append(ir.seq(self.ws, ir.literal("]")) if t else ir.literal("]"))
            if hi is None or t < hi:
                sep = self.sep if t else ir.EMPTY
                nt = min(t + 1, t_cap) if hi is None else t + 1
                if not exact or c < mx:
                    opts.append(ir.seq(sep, hit, states.ref(nt, min(c + 1, c_cap) if not exact else c + 1)))
                opts.append(ir.seq(sep, miss, states.ref(nt, c)))
            return ir.alt(*opts)

        states = StateRules(self, "arr", state)
        return ir.seq(ir.literal("["), self.ws, states.start(0, 0))

    # ---- objects -------------------------------------------------------------------------------

    def object(self, nodes) -> ir.Expr:
        pointer = nodes[0].pointer if nodes else ""  # no nodes: any object
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
            min_p, max_p = _count_bounds(n, "minProperties", "maxProperties", min_p, max_p)
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
            knodes = []
            for n in nodes:
                s = n.schema
                hit = False
                if k in s.get("properties", {}):
                    knodes.append(self.child(n, "properties", k))
                    hit = True
                for p in s.get("patternProperties", {}):
                    if _text.pattern_search(p, k, n.pointer, "patternProperties"):
                        knodes.append(self.child(n, "patternProperties", p))
                        hit = True
                if not hit:
                    addl = self.additional(n)
                    if addl is not None:
                        knodes.append(addl)
            for unode, names, pats in uneval:
                if k not in names and not any(
                        _text.pattern_search(p, k, unode.pointer, "patternProperties") for _, p in pats):
                    knodes.append(unode)
            ok = k not in forbidden and all(self.validator.valid(k, pn) for pn in name_nodes)
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
        # key automaton). The object is a region, so that the check reads its text.
        additional = self.shared(self.additional_member(nodes, order, patterns, name_nodes, uneval,
                                                        key_end=DISTINCT_KEY), "extra")
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
                                                spec["notMatch"], key_end=DISTINCT_KEY))
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

    def additional_member(self, nodes, known: list[str], patterns, name_nodes, uneval=(), value_extra=(),
                          match=None, not_match=(), key_end=ir.EMPTY) -> ir.Expr:
        """Members whose key is not a known property: one alternative per pattern region.

        value_extra / match / not_match narrow it (a witness of a negated additionalProperties);
        key_end follows each key (a check that it differs from the keys before it)."""
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
                                and all(self.validator.valid(v, n) for n in expanded)]
            names_lo, names_hi, names_exprs = self.string_constraints(expanded)
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
            simple = not patterns and not name_nodes and not known and match is None and not not_match
            if simple:
                key = ir.seq(ir.literal('"'), ir.repeat(_text.JSON_CHAR, 0, None), ir.literal('"'))
            else:
                sig = (tuple(known), tuple(p for _, p in patterns), mask, names_lo, names_hi,
                       tuple((k, json.dumps(v)) for k, v, _ in names_exprs),
                       None if names_finite is None else tuple(names_finite), bool(name_nodes), match,
                       tuple(not_match))
                body = self.key_cache.get(sig)
                if body is None and not patterns and not name_nodes and match is None and not not_match:
                    body = self.key_cache[sig] = self.unknown_key(known)  # its closing quote within
                if body is None:
                    comps = [(self.any_string_dfa(), True), (_dfa.literal_set([k.encode() for k in known]), False)]
                    for i, (n, p) in enumerate(patterns):
                        comps.append((_text.pattern_dfa(p, n.pointer, "patternProperties"), bool(mask >> i & 1)))
                    if match is not None:
                        comps.append((_text.pattern_dfa(match, nodes[0].pointer, "patternProperties"), True))
                    for q in not_match:
                        comps.append((_text.pattern_dfa(q, nodes[0].pointer, "patternProperties"), False))
                    if name_nodes:
                        if names_finite is not None:
                            comps.append((_dfa.literal_set([v.encode() for v in names_finite]), True))
                        else:
                            comps.append((self.string_dfa(names_lo, names_hi, names_exprs, name_nodes[0].pointer),
                                          True))
                    d = _dfa.product([c for c, _ in comps], [w for _, w in comps], "patternProperties",
                                     nodes[0].pointer)
                    body = ir.NOTHING if d.is_empty() else ir.seq(self.dfa_rules(d, "key", _text.json_escape),
                                                                  _CLOSE_QUOTE)
                    self.key_cache[sig] = body
                if body == ir.NOTHING:
                    continue
                key = ir.seq(ir.literal('"'), body)
            parts.append(ir.seq(key, key_end, self.colon, value))
        return ir.alt(*parts)

    def unknown_key(self, known) -> ir.Expr:
        """The JSON string bodies, closing quote included, of the keys that are none of `known`
        (the usual additional property), built directly: a trie of the known keys over
        characters, where leaving the trie at any point leads to any rest of the string (two
        rules of its own)."""
        trie: dict = {}
        for k in known:
            node = trie
            for ch in k:
                node = node.setdefault(ch, {})
            node[None] = True  # a known key ends here
        names = self.fresh("keyrest"), self.fresh("keyheavy")
        self.rules.update(_text.rest_rules(*names))
        rest, heavy = self.ref(names[0]), self.ref(names[1])
        leave: dict = {}  # children -> the way out of the trie (shared by the nodes)
        # bottom-up without recursion (keys can be long); a rule every 8 levels keeps the
        # expressions shallow (cheap to hash and serialize), every 64 past 64 (the core inlines
        # a rule used once, and counts a chain of them quadratically)
        order, stack = [], [(trie, 1)]
        while stack:
            node, depth = entry = stack.pop()
            order.append(entry)
            for ch, child in node.items():
                if ch is not None:
                    stack.append((child, depth + 1))
        done: dict[int, ir.Expr] = {}
        for node, depth in reversed(order):  # one trie node per known character: kept lean
            items, chars = [], []
            for ch, child in node.items():
                if ch is not None:
                    chars.append(ch)
                    then = done.pop(id(child))
                    lit = _text.char_literal(ch)
                    items.append(ir.seq(lit, then) if type(then) is ir.Seq else ir.Seq((lit, then)))
            chars = frozenset(chars)
            way_out = leave.get(chars)
            if way_out is None:  # as the choices it adds (what ir.alt would flatten)
                out = _text.leave_trie(chars, rest, heavy)
                way_out = leave[chars] = out.items if type(out) is ir.Alt else (out,)
            items += way_out
            if None not in node:
                items.append(_CLOSE_QUOTE)  # a proper prefix of known keys is itself unknown
            out = items[0] if len(items) == 1 else ir.Alt(tuple(items))
            if depth % (8 if depth <= 64 else 64) == 0:
                name = self.fresh("key")
                self.rules[name] = out
                out = self.ref(name)
            done[id(node)] = out
        return done[id(trie)]

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
            return ir.seq(open_, self.ws, ir.repeat(ir.seq(member, more, self.ws), 0, 1), close)
        tracked = [k for k in tracked if k in members]
        if any(k not in members for k in required):
            return ir.NOTHING

        def satisfied(seen: frozenset) -> bool:
            return all(k in seen for k in required) and all(x in seen for k in seen for x in deps.get(k, ()))

        ws_close = ir.seq(self.ws, close)  # one node for every state that may close

        def after(seen: frozenset, c: int) -> ir.Expr:
            opts = [ws_close] if satisfied(seen) else []
            if max_p is None or c < max_p:
                nc = c + 1 if max_p is not None else 0
                choices = [ir.seq(members[k], states.ref(seen | {k}, nc)) for k in tracked]
                if others != ir.NOTHING:
                    choices.append(ir.seq(others, states.ref(seen, nc)))
                opts.append(ir.seq(self.sep, ir.alt(*choices)))  # one separator for all choices
            return ir.alt(*opts)

        states = StateRules(self, "obj", after)
        empty = frozenset()
        first = [close] if satisfied(empty) else []
        if max_p is None or max_p > 0:
            for k in tracked:
                first.append(ir.seq(members[k], states.ref(frozenset({k}), 1 if max_p is not None else 0)))
            if others != ir.NOTHING:
                first.append(ir.seq(others, states.ref(empty, 1 if max_p is not None else 0)))
        return ir.seq(open_, self.ws, states.start_with(ir.alt(*first)))

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
        deps = deps or {}
        watched = {x for k, v in deps.items() for x in [k, *v]}
        c_cap = max_p if max_p is not None else 0
        counted = (c_cap + 1) * (eff_min + 1) * 2 ** len(watched)
        if counted > 1 and (len(keys) + 1) * counted * 4 > MAX_ORDERED_STATES:
            keyword = "maxProperties" if max_p is not None else "minProperties" if eff_min else "dependentRequired"
            raise SchemaLimitError(f"{keyword} over {len(keys)} properties needs about {(len(keys) + 1) * counted * 4} "
                                   f"states, more than the limit {MAX_ORDERED_STATES}", keyword, pointer)
        close = ir.literal("}")

        def state(i, c, m, started, extra, seen) -> ir.Expr:
            sep = self.sep if started else ir.EMPTY
            opts = []
            room = max_p is None or c < max_p
            nc = c + 1 if max_p is not None else 0
            if i < len(keys):
                k = keys[i]
                if k not in required:
                    opts.append(states.ref(i + 1, c, m, started, extra, seen))
                if room:
                    now = seen | {k} if k in watched else seen
                    opts.append(ir.seq(sep, members[k], states.ref(i + 1, nc, min(m + 1, eff_min), True, extra, now)))
            else:
                if m >= eff_min and all(set(deps[k]) <= seen for k in seen if k in deps):
                    opts.append(ir.seq(self.ws, close) if started else close)
                if additional != ir.NOTHING and room:
                    nm = m if extra and not distinct else min(m + 1, eff_min)
                    opts.append(ir.seq(sep, additional, states.ref(i, nc, nm, True, True, seen)))
            return ir.alt(*opts)

        states = StateRules(self, "obj", state)
        return ir.seq(ir.literal("{"), self.ws, states.start(0, 0, 0, False, False, frozenset()))


class StateRules:
    """The rules of a counting automaton's states (uniqueItems, contains, objects): `ref(*key)`
    names the rule of the state `key` at once, and `body(*key)` (which refers to the states that
    follow through `ref`) is built later from a worklist, so that chains of thousands of states
    need no recursion. `start` / `start_with` build every state reachable from the first."""

    def __init__(self, conv: Converter, hint: str, body):
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


KNOWN_METASCHEMAS = ("json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
                     "json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema",
                     "json-schema.org/draft-04/schema", "json-schema.org/schema")


def detect_draft7(schema) -> bool:
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        uri = schema["$schema"]
        return any(d in uri for d in ("draft-07", "draft-06", "draft-04"))
    return False


def to_grammar(schema, *, any_whitespace=True, strict=False, max_whitespace=DEFAULT_MAX_WHITESPACE,
               property_order: str = "schema", draft: str | None = None,
               canonical_integers: bool = False, format_assertion: bool | None = None) -> ir.Grammar:
    # The walks that still recurse (validating candidate values, writing constants, negations)
    # go as deep as the schema nests, which _keywords bounds (MAX_NESTING): room for them, and
    # a RecursionError all the same ends as a limit.
    try:
        with ir.nesting_guard("the schema", ir.NESTING_FRAMES):
            return _to_grammar(schema, Options(any_whitespace, strict, max_whitespace, property_order,
                                               canonical_integers), draft, format_assertion)
    except GrammarLimitError as e:
        if isinstance(e, SchemaLimitError):
            raise
        raise SchemaLimitError(e.message, None, "") from None


def _to_grammar(schema, options: Options, draft, format_assertion: bool | None) -> ir.Grammar:
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise UnsupportedSchemaError(f"the schema is not valid JSON: {e}", None, "") from None
    if not isinstance(schema, (dict, bool)):
        raise UnsupportedSchemaError("a schema must be an object or a boolean", None, "")
    if isinstance(schema, dict) and "$schema" in schema:
        uri = schema["$schema"]
        if not isinstance(uri, str) or not any(m in uri for m in KNOWN_METASCHEMAS):
            raise UnsupportedSchemaError(f"unknown meta-schema {uri!r} (its vocabularies are unknown)", "$schema", "")
    draft7 = detect_draft7(schema) if draft is None else draft in ("draft7", "draft-07", "draft6", "draft4")
    if (is_draft4(schema) if draft is None else draft == "draft4"):
        schema = draft6_forms(schema)
        options.integers_without_fraction()  # 1.0 is a number, not an integer, in draft-04
    if not draft7:
        schema = dynamic_forms(schema)
    if format_assertion is None:  # generation wants the format; the full language is the dialect's
        format_assertion = options.strict or not format_is_annotation(schema)
    if not format_assertion:
        schema = without_formats(schema)
    conv = Converter(schema, options, draft7)
    # The conversion allocates many small objects that live until it ends (expressions, memo
    # tables, automata) and makes little cyclic garbage: the cyclic collector's passes over that
    # growing heap cost as much as the conversion itself on large schemas. Paused meanwhile.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return conv.grammar()
    finally:
        conv.negator = None  # Converter <-> Negator: freed now with its tables, not by the collector
        if enabled:
            gc.enable()


def _where(nodes) -> str:
    """The pointer to name for a context (no nodes: any value, e.g. an item no keyword constrains)."""
    return nodes[0].pointer if nodes else ""


def _count_bounds(n, lo_key: str, hi_key: str, lo: int, hi: int | None) -> tuple[int, int | None]:
    """Tighten (lo, hi) by a node's min*/max* count keywords (non-negative integers, 2.0 == 2)."""
    for key in (lo_key, hi_key):
        if key in n.schema:
            v = n.schema[key]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise UnsupportedSchemaError(f"{key} must be a non-negative integer", key, n.pointer)
            if key == lo_key:
                lo = max(lo, v)
            else:
                hi = v if hi is None else min(hi, v)
    return lo, hi

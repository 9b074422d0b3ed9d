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
4. any other `not` joins the context as its negation (_negate.py);
5. splitting into cases on `if` ((if ∧ then) ∨ (¬if ∧ else)), `anyOf` and `oneOf`: a oneOf is
   an anyOf on the atoms where no two branches can both hold (told apart by type, by distinct
   finite values, or, for objects, by a key the context requires: its values, types or
   patterns), and bᵢ ∧ ⋀ⱼ≠ᵢ ¬bⱼ on the others; an `anyOf` whose annotations an `unevaluated*`
   keyword reads distributes over the non-empty sets of its branches, every branch that holds
   counting. A case that contradicts itself on a required key is empty at once: no body, and
   no splitting below it. A case holds what its split added (the branch, the negation, the
   `then`), not the subschemas that split spent (an `anyOf`, an `if` alone), and is named by
   the splits of the subschemas still in it: a branch met under many parents is one context;
6. per atom, the keywords of that atom from every subschema together (numbers: exact
   digit-level ranges and multiples; strings: pattern/format/length intersected (ir.And);
   arrays: prefix items, counts, contains; objects: properties in any order with required
   tracking, or in schema order when counts must be tracked; an additional key is "none of
   the known names", a check on its text, or a DFA product with patterns/propertyNames).

Where: this module holds the contexts (expand, value, body: steps 1-5) and the rules;
_type_analysis.py what a context admits without building it (atoms, finite values, oneOf
disjointness, contradictions); _evaluated.py what unevaluated* keywords read and strict mode's
closing; step 6 per atom in _number_schema.py, _string_schema.py, _array_schema.py and _object_schema.py (each
gathers the keywords of its type into a facts record, then builds from it), mixins of the
Converter; _state_machine.py the counting automata they share.

Cost: time to first mask includes this conversion, so it is kept linear in the grammar's
size: walks over expressions are memoized by object identity (expressions are DAGs),
automata products are the core's (ir.And: a string's pattern, format and lengths; number
constraints with `not`), there is no pass after the conversion (ir.serialize writes only the rules the root reaches, equal
bodies once; dead parts are the core's to cut), and the cyclic garbage collector is paused
during the conversion (see to_grammar).
References are one object per rule name (`ref`) and literals are shared (ir.literal), so
that serialization meets fewer distinct nodes. Subschemas that say the same thing (a normalized
schema writes its definitions out in place) are one node in contexts (Resolver.canonical), so
their contexts are built once.

Refused (UnsupportedSchemaError naming keyword and pointer): see `REFUSED_KEYWORDS` and the
cases the individual builders refuse. Unknown keywords are ignored, as the specification
says; `ANNOTATIONS` lists the known annotation keywords.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque

from ...errors import GrammarLimitError, InvalidRequestError, SchemaLimitError, UnsupportedSchemaError
from .. import ir
from ..gc_pause import gc_paused
from ..layout_options import check_indent, check_separators
from . import _numbers, _text
from ._array_schema import ArraySchema
from ._dialect import draft6_forms, dynamic_forms, format_is_annotation, is_draft4, without_formats
from ._evaluated import Evaluation
from ._keywords import ANNOTATIONS, ATOMS, NOTES, REF_KEYWORDS, REFUSED_KEYWORDS, VALUE_LIST
from ._layout import Layouts
from ._negate import NOT_CONST, Negator
from ._number_schema import NumberSchema
from ._object_schema import ObjectSchema
from ._refs import Node, Resolver, escape_pointer
from ._string_schema import StringSchema
from ._type_analysis import TypeAnalysis
from ._validate import Validator, atom_of, canon, json_equal

__all__ = ["ANNOTATIONS", "DEFAULT_MAX_WHITESPACE", "REFUSED_KEYWORDS", "Converter", "Options",
           "to_grammar"]

_NOT_ALNUM = re.compile(r"[\W_]")  # \w is str.isalnum() and "_"

DEFAULT_MAX_WHITESPACE = 20
MAX_RULES = 15000
# The rules of any JSON value (additional properties, `items: true`, ...) per conversion options:
# built once, then reused by every conversion with those options (most schemas allow additional
# properties, and each built that value again: about 0.05 ms of a typical schema's 0.5). Their
# names start with ANY_PREFIX, which no other rule name has; they are the prelude of the grammars
# that hold them (written once: 40 of a typical grammar's 160 us of serialization). At most
# ANY_VALUE_OPTIONS sets of options are kept (separators are the caller's strings: a server must
# not grow without bound).
_ANY_VALUE: dict = {}
ANY_VALUE_OPTIONS = 64
ANY_PREFIX = "any."
_ANY_CONTEXT = (frozenset(), frozenset(ATOMS), frozenset(), None)  # value()'s key for it
# Written once for every schema's grammar (ir.Prelude): a string's characters and numbers,
# which nearly every grammar holds (a typical schema's serialization: 0.25 ms,
# 0.15 ms with these).
PRELUDE = ir.Prelude(_text.JSON_CHAR, _text.ANY_STRING, _numbers.NUMBER, _numbers.INTEGER,
                     _numbers.NON_INTEGER, ir.EMPTY)
MAX_CONTEXTS = 800  # anyOf/oneOf/if distributions in one schema
# An anyOf under a constraining unevaluatedProperties/Items distributes over the sets of its branches
# that hold (2^n - 1 of them): at most this many branches.
MAX_EVALUATED_BRANCHES = 4
PROPERTY_ORDERS = ("schema", "any")
# With an indent, a container's text depends on its depth, which a grammar can only count up to
# a bound: arrays and objects nest at most this many levels (deeper values are not generated).
MAX_INDENT_DEPTH = 32
CONTAINERS = frozenset({"array", "object"})


_TYPE_ONLY = {"type"}
# The keywords a split carries whole once its marker is in `done` (body): its case holds the
# branch, the negation or the then/else that it chose.
_SPLIT_KEYWORDS = {"if": ("if", "then", "else"), "anyOf": ("anyOf",), "oneOf": ("oneOf",), "not": ("not",)}
_UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")
MAX_KEY_TRIES = 8  # keys tried as a oneOf's discriminator (split_on_key), each a disjointness test


def _key_test(cond):
    """(key, its values, whether required) where an `if` holds for an object exactly when the key
    is absent (unless required) or its value is one of a few scalars; else None."""
    if type(cond) is not dict or not cond.keys() - NOTES <= {"properties", "required"}:
        return None
    props = cond.get("properties")
    if type(props) is not dict or len(props) != 1:
        return None
    (key, sub), = props.items()
    if type(sub) is not dict or not sub.keys() - NOTES or not sub.keys() - NOTES <= {"const", "enum"}:
        return None
    values = [sub["const"]] if "const" in sub else []
    if "enum" in sub:
        if type(sub["enum"]) is not list or ("const" in sub and not any(json_equal(values[0], x) for x in sub["enum"])):
            return None
        values = [x for x in sub["enum"] if not values or json_equal(values[0], x)]
    if not all(x is None or type(x) in (bool, int, float, str) for x in values):
        return None
    required = cond.get("required", [])
    if required not in ([], [key]):
        return None
    return key, values, bool(required)


class Options:
    def __init__(self, any_whitespace: bool, strict: bool, max_whitespace: int, property_order: str = "schema",
                 canonical_integers: bool = False, indent: int | None = None, separators=None):
        if property_order not in PROPERTY_ORDERS:
            raise InvalidRequestError(f"must be one of {PROPERTY_ORDERS}, got {property_order!r}", "property_order")
        if isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int) or not 0 <= max_whitespace <= 1000:
            raise InvalidRequestError(f"must be an integer from 0 to 1000, got {max_whitespace!r}", "max_whitespace")
        self.any_whitespace, self.strict, self.max_whitespace = any_whitespace, strict, max_whitespace
        self.property_order = property_order
        self.indent, self.separators = check_indent(indent), check_separators(separators)
        # Integers as written for generation: no ".0" (validation takes what JSON Schema does)
        self.zero_frac = ir.EMPTY if canonical_integers else _numbers.ZERO_FRAC
        # Constants compare as numbers in every draft (draft-04's enum [1] takes 1.0), so a constant's
        # integral value keeps its ".0" forms unless generation asks for canonical integers.
        self.const_zero_frac = self.zero_frac

    @property
    def integer(self) -> ir.Expr:
        return _numbers.INTEGER if self.zero_frac is _numbers.ZERO_FRAC else ir.seq(_numbers.MINUS, _numbers.UINT)

    def integers_without_fraction(self):
        self.zero_frac = ir.EMPTY


class Converter(TypeAnalysis, Evaluation, NumberSchema, StringSchema, ArraySchema, ObjectSchema):
    """One schema's conversion: the rules, the contexts named so far and the memo tables. The
    mixins build what their modules say; they reach each other through `self` only."""

    def __init__(self, schema, options: Options, draft7: bool):
        self.opt = options
        self.resolver = Resolver(schema, draft7=draft7)
        self.draft7 = draft7
        # A subschema with none of these (references followed) constrains nothing in a context;
        # draft-07 asserts its content keywords (_string_schema.py), later drafts only note them.
        self.constraining = self.KNOWN_ALL.difference(REF_KEYWORDS).union(
            ("contentMediaType", "contentEncoding") if draft7 else ())
        self.validator = Validator(self.resolver)
        self.rules: dict[str, ir.Expr] = {}
        self.names: dict = {}
        self._empty: set = set()  # value()'s keys of contexts found empty before a body
        self.counter = itertools.count()
        self.layouts = Layouts(options.any_whitespace, options.max_whitespace, options.indent,
                               options.separators, self.rules)
        # Containers' whitespace at the depth of the value being built (at(): self.ws after an
        # opening bracket, self.first before the first item, self.sep between items, self.close_ws
        # before the closing bracket, self.colon after a key), and the depth of the values
        # named now (None unless the layout depends on the depth: see value()).
        self.at(0)
        self.value_depth = 0 if self.layouts.by_depth else None
        self._nests: dict = {}  # indented: whether a context may hold arrays or objects (static_atoms)
        self._built: set = set()  # indented: the contexts built at some depth
        self.copy = False  # whether the body being built is such a context's copy at another depth
        self.synthetic: dict = {}
        self._refs: dict[str, ir.Ref] = {}
        self._in_place: dict = {}
        self.key_cache: dict = {}
        self.char_rules: dict = {}  # (a string character's expression, n) -> the rule of n of them
        self.strings: dict = {}  # (lo, hi, ((kind, value), ...)) -> a constrained string's expression (strings)
        self.sites: dict[str, tuple[str, str]] = {}  # rule -> (keyword, pointer) for the core's limit errors
        self.contexts = 0
        self.negator = Negator(self)
        self.bodies: list = []  # value rules named but not built yet (see value)
        self._type_only: dict = {}
        self._no_value: dict = {}  # no_value's answers
        self._spent_after: dict = {}  # spent_after's answers by the nodes' keys
        self._steps: dict = {}  # _step's answers by the nodes' keys
        self._required_facts: dict = {}  # required_facts' answers
        self._patterns_disjoint: dict = {}  # patterns_disjoint's answers
        self._pattern_work = 0  # counted against MAX_PATTERN_WORK
        self._expanded: dict = {}  # expand's answers by the nodes' keys
        self._numbers: dict = {}  # number()'s answers by what the number keywords say
        self._shared: dict = {}  # shared()'s rules by their expression
        self._type_nodes: dict = {}  # type_node()'s answers by the type's names
        self.prefix = ""  # of every rule name made here (ANY_PREFIX while building any value)
        self.prelude = PRELUDE  # any_value's, with its rules, once they are used

    # ---- entry ---------------------------------------------------------------------------

    def grammar(self) -> ir.Grammar:
        root = self.value([self.resolver.root])
        self.build_bodies()
        self.rules["root"] = root
        # When no JSON value is valid, this is the empty language: the core says so (is_empty).
        # Rules the root does not reach, and equal bodies, are ir.serialize's to leave out.
        return ir.Grammar(self.rules, "root", self.sites, self.prelude)

    def fresh(self, hint: str) -> str:
        n = next(self.counter)
        if n > MAX_RULES:
            self.too_many_rules()
        return f"{self.prefix}{hint}_{n}"

    def too_many_rules(self):
        why = (f" (with an indent, the values that hold arrays or objects have rules per nesting depth, up to "
               f"{MAX_INDENT_DEPTH} levels)" if self.layouts.by_depth else "")
        raise SchemaLimitError(f"the schema expands to more than {MAX_RULES} grammar rules (a limit){why}", None, "")

    def distribute(self, keyword: str, at: Node, ways: int = 2) -> None:
        """Count the contexts that splitting on combinators creates (it can multiply); a
        context's copies at other depths (indented) add rules, counted by MAX_RULES, not cases."""
        if self.copy:
            return
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
        """A rule for an expression used in many places (the core inlines it only if small); one
        rule for equal expressions (contexts that combinators distribute repeat the same members)."""
        if expr == ir.NOTHING or isinstance(expr, (ir.Ref, ir.Bytes)):
            return expr
        known = self._shared.get(expr)
        if known is None:
            name = self.fresh(hint)
            self.rules[name] = expr
            known = self._shared[expr] = self.ref(name)
        return known

    def intersection(self, items: list, wants: list, keyword: str, pointer: str, escaped: bool = True) -> ir.Ref:
        """A rule for the texts in every wanted language of `items` and in no other, JSON-escaped
        (ir.And: the core builds the product; too large, its error names keyword and pointer)."""
        name = self.fresh("and")
        self.rules[name] = ir.And(tuple(items), tuple(wants), escaped)
        self.sites[name] = (keyword, pointer)
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
        """Flatten allOf, $ref and $dynamicRef; None when some subschema is `false`. Asked for
        the same contexts many times over (once per analysis): answered once each; callers
        never change the list."""
        key = tuple(n.key for n in nodes)
        known = self._expanded.get(key, self)
        if known is self:
            known = self._expanded[key] = self._expand(nodes)
        return known

    def _expand(self, nodes) -> list[Node] | None:
        out: list[Node] = []
        seen: set = set()
        kept: set = set()
        todo = deque(nodes)
        steps = self._steps
        while todo:
            node = todo.popleft()
            if node.key in seen:
                continue
            seen.add(node.key)
            step = steps.get(node.key)
            if step is None:
                step = steps[node.key] = self._step(node)
            if step is False:
                return None
            first, then, said = step
            if first is not None:  # draft-07: a $ref's siblings are ignored
                todo.appendleft(first)
                continue
            if said is not None and said.key not in kept:  # allOf: [A, a copy of A]
                kept.add(said.key)
                out.append(said)
            todo.extend(then)
        return out

    def _step(self, node: Node):
        """What expanding meets at `node` (the same in every context, so asked once): False where
        it is `false`; else (the one subschema to go on with instead, or None; the subschemas it
        brings in, in order; the node it adds to the context, or None)."""
        s = node.schema
        if s is True:
            return None, (), None
        if s is False:
            return False
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("a schema must be an object or a boolean", None, node.pointer)
        then = []
        if "$ref" in s:
            target = self.resolver.follow(node, "$ref")
            if self.draft7:
                return target, (), None
            then.append(target)
        if "$dynamicRef" in s:
            then.append(self.resolver.follow(node, "$dynamicRef"))
        if not REFUSED_KEYWORDS.isdisjoint(s):
            for key in s:
                if key in REFUSED_KEYWORDS and not (key.startswith("unevaluated") and s[key] is True):
                    raise UnsupportedSchemaError(f"{key} is not supported", key, node.pointer)
        # A subschema of notes alone (beside a reference: Kubernetes' `{"$ref": ..., "description":
        # ...}`) is left out, and one of a type alone (the schema walk checked its names) is the
        # conversion's one such subschema: every use of a definition, every `{"type": "string",
        # "description": ...}`, is one context, built once.
        said = self.constraining.intersection(s)
        if said == _TYPE_ONLY:
            said = self.type_node(s["type"])
        elif said:
            said = node = self.resolver.canonical(node)
        else:
            said = None
        if isinstance(s.get("allOf"), list):
            then.extend(self.child(node, "allOf", i) for i in range(len(s["allOf"])))
        return None, then, said

    def unspent(self, nodes: list[Node], done: frozenset) -> list[Node]:
        """`nodes` less those that constrain nothing the splits in `done` have not carried: an
        if/then chain's case then holds the subschemas it picked, not the whole chain (a
        125-way chain was 125 x 125 subschemas to look through). Where an unevaluated* keyword
        reads what subschemas evaluate, every node stays."""
        keep = []
        for n in nodes:
            markers = self.spent_after(n)
            if markers is None or not all((n.key, m) in done for m in markers):
                keep.append(n)
        if len(keep) < len(nodes) and not any(k in n.schema for n in nodes for k in _UNEVALUATED):
            return keep
        return nodes

    def spent_after(self, n: Node) -> tuple | None:
        """The splits (done's markers) after which `n` constrains nothing more, or None where it
        says more than splits do (allOf counts as said: expand flattened it)."""
        known = self._spent_after.get(n.key, self)
        if known is self:
            said = self.constraining.intersection(n.schema).difference(("allOf",))
            markers = tuple(m for m, words in _SPLIT_KEYWORDS.items() if words[0] in said)
            if markers and said.issubset(w for m in markers for w in _SPLIT_KEYWORDS[m]):
                known = markers
            else:
                known = None
            self._spent_after[n.key] = known
        return known

    def type_node(self, types) -> Node:
        """The conversion's one subschema of nothing but `"type": types` (a name, or a list
        known by its text)."""
        key = types if type(types) is str else json.dumps(types)
        known = self._type_nodes.get(key)
        if known is None:
            known = self._type_nodes[key] = self.synth(self.resolver.root, "type/" + json.dumps(types),
                                                       {"type": types})
        return known

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
        """The rule of the values valid against all of `nodes` among `atoms`, at the depth of the
        values named now (value_depth: the body's own, its items' inside nested())."""
        expanded = self.expand(nodes)
        if expanded is None or not atoms:
            return ir.NOTHING
        split = bool(done)
        if split:
            expanded = self.unspent(expanded, done)
        keys = frozenset(n.key for n in expanded)
        # The context is named by the splits of subschemas still in it: a branch split off under
        # different parents is one context. Its body still knows every split made (a subschema
        # dropped as spent and met again stays spent); what the spent ones said, the subschemas
        # they added say in every context of this name.
        splits = frozenset([m for m in done if m[0] in keys]) if split else done
        depth = self.value_depth
        if depth is not None:  # indented: a rule per depth where arrays or objects may come
            nests = self._nests.get(keys)
            if nests is None:
                nests = self._nests[keys] = bool(CONTAINERS & self.static_atoms(expanded))
            if not (nests and CONTAINERS & atoms):
                depth = None  # scalars read the same at every depth: one rule
            elif depth >= MAX_INDENT_DEPTH:
                atoms, depth = frozenset(atoms) - CONTAINERS, None
                if not atoms:
                    return ir.NOTHING
        key = (keys, frozenset(atoms), splits, depth)
        name = self.names.get(key)
        if name is None and key == _ANY_CONTEXT and not self.layouts.by_depth and not self.prefix:
            name = self.names[key] = self.any_value()
        elif name is None:
            if split and "object" in atoms and self.object_impossible(expanded):
                # A case a combinator split off contradicts itself on a required key: no objects
                # here, and no splitting below it (n exclusive if/then pairs would split 2^n ways
                # before each case found itself empty in its body).
                atoms = frozenset(atoms) - {"object"}
                if not atoms:
                    self._empty.add(key)
            if key in self._empty:
                return ir.NOTHING
            hint = "v" + _NOT_ALNUM.sub("_", (expanded[0].pointer if expanded else "any")[-40:])
            name = self.fresh(hint if depth is None else f"{hint}_d{depth}")
            self.names[key] = name
            self.rules[name] = ir.NOTHING  # placeholder until the body is built
            self.bodies.append((name, expanded, frozenset(atoms), done, depth))
        return self.ref(name)

    def any_value(self) -> str:
        """The rule of any JSON value under these options, its rules added (see _ANY_VALUE)."""
        opt = self.opt
        key = (type(self), self.draft7, opt.any_whitespace, opt.strict, opt.max_whitespace, opt.property_order,
               opt.zero_frac, opt.const_zero_frac, opt.indent, opt.separators)
        known = _ANY_VALUE.get(key)
        if known is None:
            conv = type(self)(True, opt, self.draft7)
            conv.prefix = ANY_PREFIX
            root = conv.value([]).name
            conv.build_bodies()
            conv.negator = None
            # Its rules and the layout's it refers to (equal to this conversion's), written once as
            # a prelude of every grammar that holds them.
            known = (root, ir.Prelude(*PRELUDE.exprs, rules=conv.rules))
            if len(_ANY_VALUE) < ANY_VALUE_OPTIONS:
                _ANY_VALUE[key] = known
        self.rules.update(known[1].rules)
        self.prelude = known[1]
        return known[0]

    def at(self, depth: int) -> None:
        """Containers built from now on are at `depth` (see __init__)."""
        lay = self.layouts.at(depth)
        self.depth = depth
        self.ws, self.first, self.sep, self.close_ws, self.colon = lay.open, lay.first, lay.sep, lay.close, lay.colon

    def nested(self, build, nodes) -> ir.Expr:
        """build(nodes) (array or object) with the values it names one level deeper."""
        if self.value_depth is None:
            return build(nodes)
        self.value_depth = self.depth + 1
        try:
            return build(nodes)
        finally:
            self.value_depth = self.depth

    def build_bodies(self) -> None:
        """Builds the value rules named so far, and those their bodies name, depth first. A body
        only refers to the values inside it, so they are built after it, from a stack rather
        than by recursion: how deep schemas nest (and $ref chains go) is the user's choice."""
        stack: list = []
        while self.bodies or stack:
            stack.extend(reversed(self.bodies))  # the first named is built first
            self.bodies.clear()
            name, nodes, atoms, done, depth = stack.pop()
            if self.value_depth is not None:  # depth None: a scalar's (no container in it)
                self.at(depth or 0)
                self.value_depth = depth or 0
                context = (frozenset(n.key for n in nodes), atoms, done)
                self.copy = context in self._built  # the same context at another depth
                self._built.add(context)
            self.rules[name] = self.body(nodes, atoms, done)

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
            # A subschema of nothing but enum, const and type holds for every string candidate of
            # an allowed type (a candidate is in each enum): only the others are asked (an enum of
            # 28,000 names was half a schema's conversion), and one that excludes a value (a negated
            # enum's, one each) is a set look-up.
            excluded, asked = set(), []
            for n in nodes:
                if len(n.schema) == 1 and NOT_CONST in n.schema:
                    excluded.add(canon(n.schema[NOT_CONST]))
                elif not VALUE_LIST.issuperset(n.schema):
                    asked.append(n)
            strings, integer = "string" in atoms, "frac" not in atoms
            keep = []
            for v in cands:
                if type(v) is str:
                    if strings and canon(v) not in excluded and (
                            not asked or all(self.validator.holds(v, n) for n in asked)):
                        keep.append(_text.string_literal(v, shared=False))
                elif atom_of(v) in atoms and all(self.validator.holds(v, n) for n in nodes):
                    keep.append(self.const_expr(v, integer=integer))
            return ir.alt(*keep)
        # a `not` that is not about types alone: its negation joins the context first
        # (one case, no split; what it requires is seen when combinators split the context below)
        for n in nodes:
            marker = (n.key, "not")
            if "not" in n.schema and marker not in done and self.type_only(self.child(n, "not")) is None:
                return self.value(nodes + [self.negation(self.child(n, "not"))], frozenset(atoms), done | {marker})
        switch = self.if_switch(nodes, atoms, done)
        if switch is not None:
            return switch
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
                    clear = frozenset(atoms if comb == "anyOf" else self.disjoint_atoms(nodes, branches, atoms))
                    if "object" in atoms - clear and (n.key, "oneOf", "key") not in done:
                        by_key = self.split_on_key(n, nodes, branches, atoms, done)
                        if by_key is not None:
                            return by_key
                    parts = [self.value(nodes + [b], clear, done | {marker}) for b in branches] if clear else []
                    if clear != atoms:  # exactly one: bᵢ ∧ ⋀ⱼ≠ᵢ ¬bⱼ, where branches may overlap
                        negs = [self.negation(b) for b in branches]
                        parts += [self.value(nodes + [b] + negs[:i] + negs[i + 1:], frozenset(atoms - clear),
                                             done | {marker}) for i, b in enumerate(branches)]
                    return ir.alt(*parts)
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
            parts.append(self.nested(self.array, nodes))
        if "object" in atoms:
            parts.append(self.nested(self.object, nodes))
        return ir.alt(*parts)

    def split_on_key(self, n: Node, nodes, branches, atoms, done) -> ir.Expr | None:
        """A oneOf whose object branches differ in one key's value where the key is there (a
        discriminator the schema does not require): the objects with the key, where the oneOf is
        an anyOf, and those without it, where exactly one branch must hold by the rest (no key
        tells them apart: None)."""
        names = None  # the keys every branch names, in the first one's order
        for b in branches:
            here = dict.fromkeys(k for x in self.expand([b]) or () if type(x.schema.get("properties")) is dict
                                 for k in x.schema["properties"])
            names = list(here) if names is None else [k for k in names if k in here]
        obj = frozenset({"object"})
        for k in names[:MAX_KEY_TRIES]:
            present = self.synth(n, f"oneOf/has/{escape_pointer(k)}", {"required": [k]})
            if "object" not in self.disjoint_atoms(nodes + [present], branches, obj):
                continue
            absent = self.synth(n, f"oneOf/lacks/{escape_pointer(k)}", {"properties": {k: False}})
            self.distribute("oneOf", n)
            after = done | {(n.key, "oneOf", "key")}
            rest = frozenset(atoms - obj)
            return ir.alt(self.value(nodes, rest, after) if rest else ir.NOTHING,
                          self.value(nodes + [present], obj, after), self.value(nodes + [absent], obj, after))
        return None

    def if_switch(self, nodes, atoms, done) -> ir.Expr | None:
        """if/then pairs that test one key's value (a discriminator written as ifs: `if:
        {properties: {kind: {const: "a"}}}`), split once: a case per value they name, one where
        the key is absent and one for any other value, each holding the `then`s or `else`s that
        follow. Split one `if` at a time, n of them made about n^2/2 cases (each "yes" case goes on
        through the later ifs while the key may be absent). None where fewer than two test one key."""
        groups: dict = {}
        for n in nodes:
            s = n.schema
            if "if" in s and (n.key, "if") not in done and ("then" in s or "else" in s):
                test = _key_test(s["if"])
                if test is not None:
                    groups.setdefault(test[0], []).append((n, *test[1:]))
        key, group = max(groups.items(), key=lambda kv: len(kv[1]), default=(None, []))
        if len(group) < 2 or any(k in m.schema for m in nodes for k in ("unevaluatedProperties", "unevaluatedItems")):
            return None  # (where unevaluated* reads what an `if` evaluates, the general split keeps it)
        first = group[0][0]
        named = list({canon(v): v for _, values, _ in group for v in values}.values())
        done = done | {(n.key, "if") for n, _, _ in group}

        branches = [tuple(self.child(n, b) if b in n.schema else None for b in ("then", "else")) for n, _, _ in group]
        naming: dict = {}  # a value's canon -> the ifs that name it
        for i, (_, values, _) in enumerate(group):
            for x in values:
                naming.setdefault(canon(x), set()).add(i)

        def outcome(holds) -> list:  # the then or else of each if, as holds(i, required) says
            picked = [branches[i][0 if holds(i, required) else 1] for i, (_, _, required) in enumerate(group)]
            return [b for b in picked if b is not None]

        k = escape_pointer(key)
        cases = []
        if atoms - {"object"}:  # not an object: `properties` and `required` hold
            cases.append((nodes + outcome(lambda i, required: True), frozenset(atoms - {"object"})))
        if "object" in atoms:
            obj = frozenset({"object"})
            absent = self.synth(first, f"switch/{k}/absent", {"properties": {key: False}})
            cases.append((nodes + [absent] + outcome(lambda i, required: not required), obj))
            for v in named:
                tag = escape_pointer(json.dumps(v))
                is_v = self.synth(first, f"switch/{k}/is/{tag}", {"required": [key], "properties": {key: {"const": v}}})
                named_by = naming[canon(v)]
                cases.append((nodes + [is_v] + outcome(lambda i, required: i in named_by), obj))
            tag = escape_pointer(json.dumps(named))
            other = self.synth(first, f"switch/{k}/other/{tag}",
                               {"required": [key], "properties": {key: {"not": {"enum": named}}}})
            cases.append((nodes + [other] + outcome(lambda i, required: False), obj))
        self.distribute("if", first, len(cases))
        return ir.alt(*(self.value(c, a, done) for c, a in cases))

    # ---- constants -----------------------------------------------------------------------------

    def const_expr(self, v, integer: bool = False, depth: int | None = None) -> ir.Expr:
        """The texts of the constant `v` at `depth` (None: the containers' now); `integer`: where
        only integers are allowed (draft-04's integers have no fraction, so `1.0` is not spelled there)."""
        if type(v) is str:
            return _text.string_literal(v)
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
        if depth is None:
            depth = self.depth
        lay = self.layouts.at(depth)
        if isinstance(v, list):
            if not v:
                return ir.seq(ir.literal("["), lay.open, ir.literal("]"))
            items = [self.const_expr(x, depth=depth + 1) for x in v]
            inner = [items[0]]
            for x in items[1:]:
                inner += [lay.sep, x]
            return ir.seq(ir.literal("["), lay.open, lay.first, *inner, lay.close, ir.literal("]"))
        if isinstance(v, dict):
            if not v:
                return ir.seq(ir.literal("{"), lay.open, ir.literal("}"))
            members = [ir.seq(_text.string_literal(k), lay.colon, self.const_expr(x, depth=depth + 1))
                       for k, x in v.items()]
            orders = itertools.permutations(members) if len(members) <= 4 else [members]
            alts = []
            for order in orders:
                inner = [order[0]]
                for m in order[1:]:
                    inner += [lay.sep, m]
                alts.append(ir.seq(*inner))
            return ir.seq(ir.literal("{"), lay.open, lay.first, ir.alt(*alts), lay.close, ir.literal("}"))
        raise UnsupportedSchemaError(f"unsupported constant {v!r}", "const", None)


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
               canonical_integers: bool = False, format_assertion: bool | None = None, indent: int | None = None,
               separators=None) -> ir.Grammar:
    # The walks that still recurse (validating candidate values, writing constants, negations)
    # go as deep as the schema nests, which _keywords bounds (MAX_NESTING): room for them, and
    # a RecursionError all the same ends as a limit.
    try:
        with ir.nesting_guard("the schema", ir.NESTING_FRAMES):
            return _to_grammar(schema, Options(any_whitespace, strict, max_whitespace, property_order,
                                               canonical_integers, indent, separators), draft, format_assertion)
    except GrammarLimitError as e:
        if isinstance(e, SchemaLimitError):
            raise
        raise SchemaLimitError(e.message, None, "") from None


def _to_grammar(schema, options: Options, draft, format_assertion: bool | None) -> ir.Grammar:
    text = schema if isinstance(schema, str) else None  # where the dialects' keywords are looked for
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
        schema, text = draft6_forms(schema, text), None  # (the text is in the old forms)
        options.integers_without_fraction()  # 1.0 is a number, not an integer, in draft-04
    if not draft7:
        schema = dynamic_forms(schema, text)
    if format_assertion is None:  # generation wants the format; the full language is the dialect's
        format_assertion = options.strict or not format_is_annotation(schema)
    if not format_assertion:
        schema = without_formats(schema)
    conv = Converter(schema, options, draft7)
    try:
        with gc_paused():  # many small objects that live until the conversion ends (gc_pause.py)
            return conv.grammar()
    finally:
        conv.negator = None  # Converter <-> Negator: freed now with its tables, not by the collector

"""A small exact validator over `Node`s, for finite sets of candidate values.

Used where the grammar is built from a list of concrete values (`enum`, `const`, property
names checked against `propertyNames`, `patternProperties`): each candidate is kept only if
it validates against the whole schema context. Keywords it cannot evaluate raise
UnsupportedSchemaError, like everywhere else in the front-end.
"""

from __future__ import annotations

from decimal import Decimal

from ...errors import UnsupportedSchemaError
from . import _text
from ._keywords import VALUE_LIST
from ._numbers import is_multiple, to_decimal
from ._refs import Node, Resolver, escape_pointer

REFUSED = {"$recursiveRef", "unevaluatedItems", "unevaluatedProperties"}


def json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(type(v))


def atom_of(v) -> str:
    if type(v) is str:  # most candidates (enums of names)
        return "string"
    t = json_type(v)
    return {"integer": "int", "number": "frac"}.get(t, t)


def json_equal(a, b) -> bool:
    ta, tb = json_type(a), json_type(b)
    if ta in ("integer", "number") and tb in ("integer", "number"):
        return Decimal(a) == Decimal(b) if isinstance(a, int) and isinstance(b, int) else \
            _dec(a) == _dec(b)
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def canon(v):
    """A hashable key with JSON equality: canon(a) == canon(b) iff json_equal(a, b)."""
    if type(v) is str:
        return ("s", v)
    t = json_type(v)
    if t in ("integer", "number"):
        d = _dec(v)
        return ("n", d.normalize() if d else Decimal(0))
    if t == "array":
        return ("a", tuple(canon(x) for x in v))
    if t == "object":
        return ("o", tuple(sorted((k, canon(x)) for k, x in v.items())))
    return (t[0], v)


_ENUM_SETS: dict = {}


def enum_set(values: list) -> frozenset:
    key = id(values)
    hit = _ENUM_SETS.get(key)
    if hit is None or hit[0] is not values:
        hit = _ENUM_SETS[key] = (values, frozenset(canon(x) for x in values))
    return hit[1]


def _dec(v) -> Decimal:
    return Decimal(v) if isinstance(v, int) else Decimal(repr(v))


def _is_type(v, t: str) -> bool:
    jt = json_type(v)
    if t == "number":
        return jt in ("integer", "number")
    return jt == t


class Validator:
    def __init__(self, resolver: Resolver, depth_limit: int = 200):
        self.resolver = resolver
        self.depth_limit = depth_limit
        self._children: dict = {}  # (schema's id, node's key, keyword, index...) -> the subschema's node
        self._held: dict = {}  # holds()'s answers
        self._listed: dict = {}  # _memo's: allOf's excluded values, oneOf/anyOf's values by branch count

    def holds(self, v, node: Node) -> bool:
        """valid(v, node), remembered for scalars: the converter asks about an enum's candidates
        against the same nodes in every case that combinators split off."""
        if type(v) is list or type(v) is dict:
            return self.valid(v, node)
        key = (node.key, type(v), v)
        known = self._held.get(key)
        if known is None:
            known = self._held[key] = self.valid(v, node)
        return known

    def valid(self, v, node: Node, depth: int = 0) -> bool:
        s = node.schema
        if s is True:
            return True
        if s is False:
            return False
        if not isinstance(s, dict):
            raise UnsupportedSchemaError("a schema must be an object or a boolean", None, node.pointer)
        if depth > self.depth_limit:
            raise UnsupportedSchemaError("schema recursion too deep to evaluate", "$ref", node.pointer)
        p = node.pointer

        def sub(key, *more):  # asked again and again for the candidates of an enum: remembered
            at = (id(s), node.key, key, *more)
            known = self._children.get(at)
            if known is None:
                ptr = p + "/" + escape_pointer(key) + "".join("/" + escape_pointer(str(m)) for m in more)
                value = s[key]
                for m in more:
                    value = value[m]
                known = self._children[at] = self.resolver.child(node, ptr, value)
            return known

        for key in s:
            if key in REFUSED and not (key.startswith("unevaluated") and s[key] is True):
                raise UnsupportedSchemaError(f"{key} is not supported", key, p)
        if "$ref" in s:
            if not self.valid(v, self.resolver.follow(node, "$ref"), depth + 1):
                return False
            if self.resolver.draft7:
                return True
        if "$dynamicRef" in s and not self.valid(v, self.resolver.follow(node, "$dynamicRef"), depth + 1):
            return False
        t = s.get("type")
        if t is not None:
            types = t if isinstance(t, list) else [t]
            if not any(_is_type(v, x) for x in types):
                return False
        if "const" in s and not json_equal(v, s["const"]):
            return False
        if "enum" in s and canon(v) not in enum_set(s["enum"]):
            return False
        if "$trellis:notConst" in s and json_equal(v, s["$trellis:notConst"]):
            return False
        if isinstance(v, str):
            if "$trellis:notPattern" in s and _text.pattern_search(s["$trellis:notPattern"], v, p):
                return False
            if "$trellis:notFormat" in s:
                dfa = _text.format_dfa(s["$trellis:notFormat"], p)
                if dfa is not None and dfa.matches(v.encode("utf-8")):
                    return False
        if "$trellis:notMultipleOf" in s and json_type(v) in ("integer", "number"):
            if is_multiple(_dec(v), to_decimal(s["$trellis:notMultipleOf"], "multipleOf", p)):
                return False
        jt = json_type(v)
        if jt in ("integer", "number"):
            d = _dec(v)
            for key, ok in (("minimum", lambda b: d >= b), ("maximum", lambda b: d <= b),
                            ("exclusiveMinimum", lambda b: d > b), ("exclusiveMaximum", lambda b: d < b)):
                if key in s:
                    if isinstance(s[key], bool):
                        raise UnsupportedSchemaError("boolean exclusive bounds (draft-04) are not supported", key, p)
                    if not ok(to_decimal(s[key], key, p)):
                        return False
            if "multipleOf" in s and not is_multiple(d, to_decimal(s["multipleOf"], "multipleOf", p)):
                return False
        if jt == "string":
            n = len(v)
            if "minLength" in s and n < s["minLength"]:
                return False
            if "maxLength" in s and n > s["maxLength"]:
                return False
            if "pattern" in s and not _text.pattern_search(s["pattern"], v, p):
                return False
            if "format" in s:
                dfa = _text.format_dfa(s["format"], p)
                if dfa is not None and not dfa.matches(v.encode("utf-8")):
                    return False
        if jt == "array":
            if not self._array(v, s, node, sub, depth):
                return False
        if jt == "object":
            if not self._object(v, s, node, sub, depth):
                return False
        if "allOf" in s:
            excluded, others = self._all_of_parts(node)
            if canon(v) in excluded or not all(self.valid(v, sub("allOf", i), depth + 1) for i in others):
                return False
        if "anyOf" in s:
            listed = self._listed_values(node, "anyOf")
            if not (listed.get(canon(v), 0) >= 1 if listed is not None else
                    any(self.valid(v, sub("anyOf", i), depth + 1) for i in range(len(s["anyOf"])))):
                return False
        if "oneOf" in s:
            listed = self._listed_values(node, "oneOf")
            if (listed.get(canon(v), 0) if listed is not None else
                    sum(self.valid(v, sub("oneOf", i), depth + 1) for i in range(len(s["oneOf"])))) != 1:
                return False
        if "not" in s and self.valid(v, sub("not"), depth + 1):
            return False
        if "if" in s:
            if self.valid(v, sub("if"), depth + 1):
                if "then" in s and not self.valid(v, sub("then"), depth + 1):
                    return False
            elif "else" in s and not self.valid(v, sub("else"), depth + 1):
                return False
        return True

    def _memo(self, node: Node, keyword: str, build):
        """build(the keyword's value), once per schema object (its node's key alone could name a
        negation's rebuilt schema too; the object is kept, so its id is not reused)."""
        key = (id(node.schema), node.key, keyword)
        known = self._listed.get(key)
        if known is None or known[0] is not node.schema:
            known = self._listed[key] = (node.schema, build(node.schema[keyword]))
        return known[1]

    def _all_of_parts(self, node: Node) -> tuple[frozenset, list[int]]:
        """An allOf's excluded values (canon; the `not: {enum: [...]}` that _negate.py writes as
        one `$trellis:notConst` branch per value) and the indices of its other branches."""
        def build(branches):
            excluded, others = set(), []
            for i, b in enumerate(branches):
                if isinstance(b, dict) and len(b) == 1 and "$trellis:notConst" in b:
                    excluded.add(canon(b["$trellis:notConst"]))
                else:
                    others.append(i)
            return frozenset(excluded), others
        return self._memo(node, "allOf", build)

    def _listed_values(self, node: Node, comb: str) -> dict | None:
        """When every branch of the combinator is a list of values (enum, const, type and notes
        alone), how many branches hold each value (by canon): an enum's candidates checked
        against a oneOf of n such branches cost n validations each, quadratic in the values.
        None otherwise. (The schema walk checked the keywords' shapes: enum is a list, type names.)"""
        def build(branches):
            counts: dict = {}
            for b in branches:
                if not isinstance(b, dict) or not VALUE_LIST.issuperset(b) or ("enum" not in b and "const" not in b):
                    return None
                t = b.get("type")
                types = t if isinstance(t, list) else None if t is None else [t]
                values = b["enum"] if "enum" in b else [b["const"]]
                held = {canon(x) for x in values if types is None or any(_is_type(x, y) for y in types)}
                if "enum" in b and "const" in b:
                    held &= {canon(b["const"])}
                for c in held:
                    counts[c] = counts.get(c, 0) + 1
            return counts
        return self._memo(node, comb, build)

    def _array(self, v, s, node, sub, depth) -> bool:
        n = len(v)
        if "minItems" in s and n < s["minItems"]:
            return False
        if "maxItems" in s and n > s["maxItems"]:
            return False
        items = s.get("items")
        if "prefixItems" in s:
            prefix = len(s["prefixItems"])
            for i in range(min(n, prefix)):
                if not self.valid(v[i], sub("prefixItems", i), depth + 1):
                    return False
            if isinstance(items, (dict, bool)):
                if any(not self.valid(x, sub("items"), depth + 1) for x in v[prefix:]):
                    return False
        elif isinstance(items, list):
            for i in range(min(n, len(items))):
                if not self.valid(v[i], sub("items", i), depth + 1):
                    return False
            if "additionalItems" in s:
                if any(not self.valid(x, sub("additionalItems"), depth + 1) for x in v[len(items):]):
                    return False
        elif items is not None:
            if any(not self.valid(x, sub("items"), depth + 1) for x in v):
                return False
        if "contains" in s:
            count = sum(self.valid(x, sub("contains"), depth + 1) for x in v)
            lo = s.get("minContains", 1)
            if count < lo:
                return False
            if "maxContains" in s and count > s["maxContains"]:
                return False
        if s.get("uniqueItems") is True:
            for i in range(n):
                for j in range(i):
                    if json_equal(v[i], v[j]):
                        return False
        return True

    def _object(self, v, s, node, sub, depth) -> bool:
        if "minProperties" in s and len(v) < s["minProperties"]:
            return False
        if "maxProperties" in s and len(v) > s["maxProperties"]:
            return False
        if any(k not in v for k in s.get("required", [])):
            return False
        props = s.get("properties", {})
        pats = s.get("patternProperties", {})
        for k, x in v.items():
            matched = False
            if k in props:
                matched = True
                if not self.valid(x, sub("properties", k), depth + 1):
                    return False
            for pat in pats:
                if _text.pattern_search(pat, k, node.pointer, "patternProperties"):
                    matched = True
                    if not self.valid(x, sub("patternProperties", pat), depth + 1):
                        return False
            if not matched and "additionalProperties" in s:
                if not self.valid(x, sub("additionalProperties"), depth + 1):
                    return False
            if "propertyNames" in s and not self.valid(k, sub("propertyNames"), depth + 1):
                return False
        w = s.get("$trellis:someProperty")
        if w is not None:
            def in_region(k):
                return (k not in w["exclude"] and (w["match"] is None or _text.pattern_search(w["match"], k, node.pointer))
                        and not any(_text.pattern_search(q, k, node.pointer) for q in w["notMatch"]))
            if not any(in_region(k) and self.valid(x, sub("$trellis:someProperty", "schema"), depth + 1)
                       for k, x in v.items()):
                return False
        deps = dict(s.get("dependentRequired", {}))
        dschemas = {k: ("dependentSchemas", k) for k in s.get("dependentSchemas", {})}
        for k, d in s.get("dependencies", {}).items():
            if isinstance(d, list):
                deps[k] = d
            else:
                dschemas[k] = ("dependencies", k)
        for k, names in deps.items():
            if k in v and any(n not in v for n in names):
                return False
        for k, where in dschemas.items():
            if k in v and not self.valid(v, sub(*where), depth + 1):
                return False
        return True

"""Exact negation of a subschema, as a new (synthetic) subschema.

`not`, a general `if` (if ∧ then ∨ ¬if ∧ else), overlapping `oneOf` branches
(bᵢ ∧ ⋀ⱼ≠ᵢ ¬bⱼ), `dependentSchemas` and `maxContains` all reduce to conjunctions and
disjunctions once a subschema can be negated. ¬(k₁ ∧ … ∧ kₙ) = ¬k₁ ∨ … ∨ ¬kₙ, and each
keyword has an exact negation that only constrains the values the keyword applies to, e.g.
¬{minimum: 5} = {type: number, exclusiveMaximum: 5}, ¬{required: [a]} = {type: object,
properties: {a: false}}, ¬{items: S} = {type: array, contains: ¬S}.

Some negations need keywords JSON Schema does not have; they are internal and start with
"$trellis:" (notConst, notPattern, notFormat, notMultipleOf). Keywords whose negation is not
expressible (uniqueItems, propertyNames, additionalProperties, if, oneOf, ...) raise
UnsupportedSchemaError naming the keyword.

The negation is a schema placed at the negated node's base, but the pieces of it that are
subschemas as they are (of `not`, `if`, `oneOf`) may come from other schema resources, through
`$ref`. A piece is inlined only where that cannot change what its `$ref`s resolve to; else the
negation refers to it by an absolute URI, so it keeps its own base.
"""

from __future__ import annotations

from urllib.parse import quote

from ...errors import UnsupportedSchemaError
from ._refs import DEFAULT_BASE

NOT_CONST, NOT_PATTERN, NOT_FORMAT, NOT_MULTIPLE = ("$trellis:notConst", "$trellis:notPattern",
                                                    "$trellis:notFormat", "$trellis:notMultipleOf")
# "some property whose name is not in `exclude`, matches `match` (if set) and none of
# `notMatch`, has a value valid against `schema`"
WITNESS = "$trellis:someProperty"
INTERNAL = frozenset({NOT_CONST, NOT_PATTERN, NOT_FORMAT, NOT_MULTIPLE, WITNESS})
ALL_TYPES = ["null", "boolean", "number", "string", "array", "object"]
MAX_DEPTH = 12


def _refuse(keyword: str, pointer: str, why: str = "its negation is not supported"):
    return UnsupportedSchemaError(f"{keyword}: {why}", keyword, pointer)


def _mentions(schema) -> tuple[bool, bool]:
    """Whether a $ref or $dynamicRef, and whether an $id, occur anywhere in schema (data included)."""
    refs = ids = False
    todo = [schema]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            refs = refs or "$ref" in v or "$dynamicRef" in v
            ids = ids or "$id" in v
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return refs, ids


class Negator:
    def __init__(self, converter):
        self.conv = converter
        self.host = DEFAULT_BASE  # the base of the negated node, where the negation is placed

    def negate(self, node):
        """The negation of node's schema, as a schema value (dict or bool) to be placed at node's base."""
        self.host = node.base
        return self.neg(node)

    def neg(self, node, depth: int = 0):
        s = node.schema
        if s is True:
            return False
        if s is False:
            return True
        if depth > MAX_DEPTH:
            raise _refuse("not", node.pointer, "negation nested too deeply (recursive schema)")
        conv = self.conv
        if "$ref" in s and conv.draft7:
            return self.neg(conv.resolver.follow(node, "$ref"), depth + 1)
        parts = []
        p = node.pointer
        for key, v in s.items():
            if key in conv.IGNORED_IN_NEGATION or key not in conv.KNOWN_ALL:
                continue
            part = self.keyword(node, key, v, depth)
            if part is not None:
                parts.append(part)
        if not parts:
            return False
        return parts[0] if len(parts) == 1 else {"anyOf": parts}

    def sub(self, node, key, *more):
        return self.conv.child(node, key, *more)

    def piece(self, node, key, *more):
        """node's subschema at key, as it is, for the negation: inlined where its meaning does not
        depend on its base (no $ref in it), or its base is the negation's and no $id in it changes it;
        else referred to by an absolute URI that resolves to exactly it."""
        child = self.sub(node, key, *more)
        if isinstance(child.schema, bool):
            return child.schema
        refs, ids = _mentions(child.schema)
        if not refs or (child.base == self.host and not ids):
            return child.schema
        resolver = self.conv.resolver
        # relative to its own resource (the subschema with its $id), else to the document root
        for uri in (child.base, DEFAULT_BASE):
            res = resolver.resources.get(uri)
            if res is None or not (child.pointer + "/").startswith(res.pointer + "/"):
                continue
            ref = uri + "#" + quote(child.pointer[len(res.pointer):], safe="/?:@!$&'()*+,;=")
            try:
                target = resolver.resolve(child, ref)
            except UnsupportedSchemaError:
                continue
            if target.schema is child.schema and target.base == child.base and target.pointer == child.pointer:
                return {"$ref": ref}
        raise _refuse(key, node.pointer, "its negation reuses a subschema that cannot be referred to")

    def keyword(self, node, key, v, depth):
        p = node.pointer
        s = node.schema
        conv = self.conv
        if key in ("$ref", "$dynamicRef"):
            # in node's dynamic scope; a $dynamicRef in a rebuilt subschema (scope unknown) is refused
            return self.neg(conv.resolver.follow(node, key), depth + 1)
        if key == "type":
            types = v if isinstance(v, list) else [v]
            if "number" in types:
                types = [*types, "integer"]
            rest = [t for t in ALL_TYPES if t not in types and not (t == "number" and "integer" in types)]
            if "integer" in types and "number" not in types:
                # non-integer numbers: numbers that are not integers
                return {"anyOf": [{"type": rest}, {"type": "number", "not": {"type": "integer"}}]}
            return {"type": rest} if rest else False
        if key == "const":
            return {NOT_CONST: v}
        if key == "enum":
            if not isinstance(v, list):
                raise UnsupportedSchemaError("enum must be an array", "enum", p)
            return {"allOf": [{NOT_CONST: x} for x in v]} if v else True
        if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            flip = {"minimum": "exclusiveMaximum", "maximum": "exclusiveMinimum",
                    "exclusiveMinimum": "maximum", "exclusiveMaximum": "minimum"}[key]
            return {"type": "number", flip: v}
        if key == "multipleOf":
            return {"type": "number", NOT_MULTIPLE: v}
        if key == "minLength":
            return {"type": "string", "maxLength": v - 1} if v > 0 else False
        if key == "maxLength":
            return {"type": "string", "minLength": v + 1}
        if key == "pattern":
            return {"type": "string", NOT_PATTERN: v}
        if key == "format":
            from . import _text
            if _text.format_expr(v, p) is None:
                return None
            return {"type": "string", NOT_FORMAT: v}
        if key == WITNESS:
            raise _refuse("additionalProperties", p)
        if key in (NOT_CONST, NOT_PATTERN, NOT_FORMAT, NOT_MULTIPLE):
            back = {NOT_CONST: "const", NOT_PATTERN: "pattern", NOT_FORMAT: "format", NOT_MULTIPLE: "multipleOf"}[key]
            return {back: v} if key == NOT_CONST else {"type": {NOT_PATTERN: "string", NOT_FORMAT: "string",
                                                                NOT_MULTIPLE: "number"}[key], back: v}
        if key == "minItems":
            return {"type": "array", "maxItems": v - 1} if v > 0 else False
        if key == "maxItems":
            return {"type": "array", "minItems": v + 1}
        if key == "minProperties":
            return {"type": "object", "maxProperties": v - 1} if v > 0 else False
        if key == "maxProperties":
            return {"type": "object", "minProperties": v + 1}
        if key == "required":
            if not v:
                return None
            alts = [{"type": "object", "properties": {k: False}} for k in v]
            return alts[0] if len(alts) == 1 else {"anyOf": alts}
        if key == "dependentRequired" or (key == "dependencies" and all(isinstance(d, list) for d in v.values())):
            alts = [{"type": "object", "required": [a], "properties": {b: False}} for a, bs in v.items() for b in bs]
            return {"anyOf": alts} if alts else None
        if key in ("properties", "patternProperties", "additionalProperties"):
            # negated together: some property breaks its schema
            if key != "properties" and "properties" in s:
                return None
            if key == "additionalProperties" and "patternProperties" in s:
                return None
            props = s.get("properties", {})
            pats = s.get("patternProperties", {})
            alts = []
            for k in props:
                neg = self.neg(self.sub(node, "properties", k), depth + 1)
                if neg is not False:
                    alts.append({"type": "object", "required": [k], "properties": {k: neg}})
            for pat in pats:
                neg = self.neg(self.sub(node, "patternProperties", pat), depth + 1)
                if neg is not False:
                    alts.append({"type": "object", WITNESS: {"exclude": [], "match": pat, "notMatch": [],
                                                              "schema": neg}})
            if "additionalProperties" in s:
                neg = self.neg(self.sub(node, "additionalProperties"), depth + 1)
                if neg is not False:
                    alts.append({"type": "object", WITNESS: {"exclude": list(props), "match": None,
                                                              "notMatch": list(pats), "schema": neg}})
            return {"anyOf": alts} if len(alts) > 1 else (alts[0] if alts else None)
        if key in ("items", "prefixItems", "additionalItems"):
            return self.items(node, key, v, depth)
        if key == "contains":
            mn = s.get("minContains", 1)
            if "maxContains" in s or mn != 1:
                raise _refuse("maxContains" if "maxContains" in s else "minContains", p)
            return {"type": "array", "items": self.neg(self.sub(node, "contains"), depth + 1)}
        if key in ("minContains", "maxContains"):
            return None  # with contains
        if key == "uniqueItems":
            if v is False:
                return None
            raise _refuse(key, p)
        if key == "allOf":
            alts = [self.neg(self.sub(node, "allOf", i), depth + 1) for i in range(len(v))]
            return {"anyOf": alts}
        if key == "anyOf":
            return {"allOf": [self.neg(self.sub(node, "anyOf", i), depth + 1) for i in range(len(v))]}
        if key == "oneOf" and isinstance(v, list) and 0 < len(v) <= 8:
            # not exactly one: none, or some two
            alts = [{"allOf": [self.neg(self.sub(node, "oneOf", i), depth + 1) for i in range(len(v))]}]
            alts += [{"allOf": [self.piece(node, "oneOf", i), self.piece(node, "oneOf", j)]}
                     for i in range(len(v)) for j in range(i + 1, len(v))]
            return {"anyOf": alts}
        if key == "not":
            return self.piece(node, "not")
        if key in ("then", "else"):
            if "if" in s:
                return None
            return None
        if key == "if":
            if "then" not in s and "else" not in s:
                return None
            # ¬(if→then ∧ ¬if→else) = (if ∧ ¬then) ∨ (¬if ∧ ¬else)
            alts = []
            if "then" in s:
                alts.append({"allOf": [self.piece(node, "if"), self.neg(self.sub(node, "then"), depth + 1)]})
            if "else" in s:
                alts.append({"allOf": [self.neg(self.sub(node, "if"), depth + 1),
                                       self.neg(self.sub(node, "else"), depth + 1)]})
            return {"anyOf": alts} if len(alts) > 1 else alts[0]
        if key in ("unevaluatedItems", "unevaluatedProperties") and v is True:
            return None
        raise _refuse(key, p)

    def items(self, node, key, v, depth):
        s = node.schema
        p = node.pointer
        if key == "additionalItems":
            if not isinstance(s.get("items"), list) or v is True:
                return None
            raise _refuse("additionalItems", p)
        if key == "prefixItems" or isinstance(v, list):
            alts = []
            for i in range(len(v)):
                neg = self.neg(self.sub(node, key, i), depth + 1)
                if neg is not False:
                    key_out = "items" if self.conv.draft7 else "prefixItems"
                    alts.append({"type": "array", "minItems": i + 1, key_out: [True] * i + [neg]})
            return {"anyOf": alts} if len(alts) > 1 else (alts[0] if alts else None)
        # items as a schema: after prefixItems (2020-12) or for every item
        neg = self.neg(self.sub(node, "items"), depth + 1)
        if neg is False:
            return None
        if "prefixItems" in s and not self.conv.draft7:
            if len(s["prefixItems"]):
                raise _refuse("items", p, "negating items after prefixItems is not supported")
        return {"type": "array", "contains": neg}

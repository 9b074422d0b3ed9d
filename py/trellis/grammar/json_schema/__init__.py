"""JSON Schema front-end: a schema (dict, JSON text or bool) -> grammar IR.

    grammar = json_schema_to_grammar({"type": "object", "properties": {...}})
    compiled = compiler.compile_json_schema(schema)    # GrammarCompiler's verb

Draft 2020-12 by default; `$schema` (or `draft=`) selects draft-04, -06, -07 or 2019-09 with
their own semantics where they differ (`definitions`, `dependencies`, array-form `items`,
`additionalItems`, draft-07 `$ref` siblings, draft-04's `id`, boolean exclusive bounds and
integers without a fraction, 2019-09's `$recursiveRef` / `$recursiveAnchor` as the `$dynamicRef`
they became; `format` an annotation in 2019-09 / 2020-12, see below). Every keyword is enforced exactly or raises
`UnsupportedSchemaError(message, keyword, pointer)`; `ANNOTATIONS` are accepted and
ignored, and so are keywords no draft defines (the specification says so).

How: see converter.py (contexts of conjoined subschemas -> rules; the grammar of each JSON type
in _number_schema.py, _string_schema.py, _array_schema.py, _object_schema.py, which gather a
context's keywords into facts and build from them), _negate.py (exact
negation, used by `not`, general `if`, overlapping `oneOf`, `dependentSchemas`,
`maxContains`), _dfa.py (intersections of string languages), _numbers.py (digit-level
ranges and multiples), _text.py (JSON string encoding, `pattern`, `format`), _validate.py
(an exact validator for finite candidate sets such as `enum`), _refs.py (`$ref`, `$id`,
`$anchor`; `$dynamicRef` / `$dynamicAnchor` by specializing rules per dynamic scope).

Output conventions (restrictions of what is generated, never wrong acceptances):
- strings use the canonical JSON spelling (`json.dumps(..., ensure_ascii=False)`);
- whitespace: `any_whitespace=True` allows JSON whitespace between tokens, at most
  `max_whitespace` (default 20) bytes in a row; `any_whitespace=False` is compact, except
  that the single space of json.dumps' default ", " and ": " separators is allowed; with
  `indent` / `separators` (xgrammar's options) exactly json.dumps' layout (_layout.py), arrays
  and objects nested at most 32 levels when indented;
- object properties: with `property_order="schema"` (the default) the known properties come
  in the schema's order, each at most once, then additional ones; with `property_order="any"`
  in any order (required and dependent keys, up to 8, are tracked as sets; maxProperties is
  counted), except with minProperties beyond the required keys or more tracked keys, which
  fall back to schema order (so does a negated additionalProperties the other way round: its
  witness keys need the any-order form);
- numbers with bounds other than a sign, or with multipleOf, are written without an
  exponent; integers may end in `.0`; "-0" is not produced;
- minProperties counts the known keys and at most one additional key: a grammar cannot tell
  repeated additional keys apart (a duplicate would count twice), so more additional keys are
  allowed but do not help reach the minimum;
- a maxLength above 100,000 (without pattern/format, or with a pattern that repeats one
  character class) generates at most 100,000 characters;
- uniqueItems: when every item comes from a finite set (at most 8 values in all), the grammar's
  states track the values used (and count `contains` exactly); otherwise each item is checked
  against the ones before it by the core when it ends;
- formats: leap seconds (23:59:60 UTC, in any offset) are included where `time` / `date-time`
  is the string's only constraint (a check by the core) and left out when it is combined with
  other string constraints; A-labels (punycode) and "--" in places 3-4 of a host label are left
  out; quoted local parts and address literals of e-mail are included; `regex` is ECMAScript
  syntax (the `u` flag), checked by the core.

Refused (UnsupportedSchemaError with keyword and pointer): remote `$ref` and `$dynamicRef`,
`$recursiveRef` under draft-07 semantics, a `$dynamicRef` inside a subschema that a negation rebuilds (its
dynamic scope is not known there), `$dynamicRef` with draft-07 semantics, unknown `$schema`
meta-schemas, lookaround and Unicode properties other than General_Category and a few binary
ones (regex.py) in patterns, negations of `uniqueItems` / `propertyNames` / `contains` with counts
and of `oneOf` with more than 8 branches, formats idn-email and idn-hostname where formats are
asserted, `format: regex` together with other string constraints or under `not`, and grammars
beyond the size limits (keyword None).

Malformed schemas are refused the same way, never read as if a keyword were absent: each
keyword's value must have the JSON type and shape the specification gives it (one table,
_keywords.SHAPES, checked as the document is walked), the document must be JSON (no set, bytes,
tuple, NaN, infinity or non-string key), and the strings that constrain must have a UTF-8
encoding (no lone surrogate).

Limits (SchemaLimitError: a GrammarLimitError naming the keyword and pointer; the number is in
the message): objects and arrays nested more than 2,000 deep in the schema document, integers of
more than 1,000 digits, more than 3,000 properties of one object in schema order, more than
15,000 grammar rules, combinators distributing into more than 800 cases, counting automata
(min/maxProperties, contains counts) of more than 6,000 states; then the core's own limits
(GrammarLimitError): 2,000,000 automaton nodes, 131,072 states, expressions nested 2,000 deep.
Item counts are exact at any size (minItems/maxItems beyond 256 go through base-16 block rules).

A schema that admits no value (`false`, contradictory bounds, ...) compiles to the empty
language: its matchers refuse every token, and a request for it fails (InvalidRequestError).
"""

from __future__ import annotations

from ...errors import UnsupportedSchemaError
from .. import ir
from ._keywords import ANNOTATIONS, REFUSED_KEYWORDS
from .converter import DEFAULT_MAX_WHITESPACE, to_grammar
from ._text import FORMATS, REFUSED_FORMATS

__all__ = ["ANNOTATIONS", "FORMATS", "REFUSED_FORMATS", "REFUSED_KEYWORDS", "UnsupportedSchemaError",
           "json_schema_to_grammar"]


def json_schema_to_grammar(schema, *, any_whitespace: bool = True, strict: bool = False,
                           max_whitespace: int = DEFAULT_MAX_WHITESPACE, property_order: str = "schema",
                           draft: str | None = None, canonical_integers: bool = False,
                           format_assertion: bool | None = None, indent: int | None = None,
                           separators: tuple[str, str] | None = None) -> ir.Grammar:
    """The grammar of the JSON texts that are valid instances of `schema`.

    `strict` generates no member or item the schema does not name: where the subschemas of one
    place name properties (or prefixItems) and none gives additionalProperties /
    unevaluatedProperties (items / unevaluatedItems), it is as if unevaluatedProperties
    (unevaluatedItems) were false there; places that name nothing (`{"type": "object"}`) stay
    open. web-xgrammar's strictMode and OpenAI's strict mean the same; a subset of the language.
    `canonical_integers` writes integers as a generator should: `1`, never `1.0` (JSON Schema
    counts both as integers; validation keeps both). `property_order` is "schema" (known
    properties in the schema's order, as a model writes them when prompted with the schema; a
    smaller grammar) or "any". `draft` forces "draft4", "draft6", "draft7" or "2020-12"
    semantics; by default `$schema` decides and 2020-12 is assumed. `format_assertion`: by
    default a known `format` is enforced, except in the full language (`strict=False`) of a
    document that declares 2019-09 or 2020-12, where the specification makes it an annotation;
    True or False decides for every document.

    `indent` and `separators` are xgrammar's (and json.dumps'): with `any_whitespace=False` the text
    is exactly `json.dumps(value, indent=indent, separators=separators)`'s (keys in the order the
    grammar allows, strings with ensure_ascii=False). `separators` is (item separator, key
    separator), "," and ":" with JSON whitespace around them (so that the text stays JSON; xgrammar
    takes any strings), by default (",", ": ") with an indent and (", ", ": ") without; `indent` (0 to 64
    spaces per level) puts each item and member on its own line and the closing bracket on a line
    of its own, `[]` and `{}` empty. With an indent, arrays and objects nest at most
    MAX_INDENT_DEPTH (32) levels: indentation that grows without bound is beyond a grammar, so
    deeper values are not generated (recursive schemas are unrolled to that depth). Neither
    given, `any_whitespace=False` allows json.dumps' default separators or none of their spaces.
    With `any_whitespace=True` (as in xgrammar) `indent` is ignored, the whitespace being free,
    and `separators` are the literals between the whitespace (default "," and ":"). Malformed
    values raise InvalidRequestError naming "indent" or "separators".
    """
    return to_grammar(schema, any_whitespace=any_whitespace, strict=strict, max_whitespace=max_whitespace,
                      property_order=property_order, draft=draft, canonical_integers=canonical_integers,
                      format_assertion=format_assertion, indent=indent, separators=separators)

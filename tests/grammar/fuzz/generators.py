"""Hypothesis strategies for every kind of grammar input; each draws a `Case`.

The shapes aim at the edges: deep nesting, repetition bounds around 2**31, lone surrogates,
recursive and ambiguous rules, contradictory or malformed keywords, IR the front-ends would
never write. `GENERATORS` maps a generator's name to its strategy.
"""

from __future__ import annotations

import json
from functools import lru_cache

from hypothesis import strategies as st

from tests.grammar.fuzz import corpus
from tests.grammar.fuzz.cases import Case

# Numbers that sit on limits: small, around int32 and int64, negative.
BOUNDS = st.sampled_from([0, 1, 2, 3, 5, 8, 16, 100, 1000, 65535, 100001, 2**31 - 1, 2**31, 2**32, 2**63, 10**20])
DEPTHS = st.sampled_from([2, 10, 60, 300, 1200, 4000])
SEEDS = st.integers(0, 2**31 - 1)
LONE_SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "a\ud83d", "\ude00b"])
UNICODE_TEXT = st.one_of(  # lone surrogates one time in six: the other paths get their turn
    st.text(max_size=6),
    st.text(st.sampled_from("ab1 \"\\'\n\t{}[]:,é日😀\x00\x7f\u2028"), max_size=6),
    st.sampled_from(["a", "b", "name", "id", "", " "]),
    st.text(st.characters(codec="utf-8"), max_size=4),
    st.text(st.sampled_from("ab"), max_size=3),
    LONE_SURROGATES,
)


def _nest(inner: str, depth: int, left: str, right: str) -> str:
    return left * depth + inner + right * depth


# ---- EBNF -----------------------------------------------------------------------------

_EBNF_NAMES = ["root", "x", "y", "z", "a-b", "item_2"]
_EBNF_CHARS = st.sampled_from(list("ab12 ") + ["\\n", "\\t", "\\\\", '\\"', "\\x41", "\\u00e9", "\\U0001F600",
                                               "\\uD83D\\uDE00", "\\uD800", "é", "日", "\\x00", "\\e", "\\q"])


def _ebnf_literal():
    return st.tuples(st.lists(_EBNF_CHARS, max_size=4), st.sampled_from(['"', "'"])).map(
        lambda t: t[1] + "".join(t[0]) + t[1])


def _ebnf_class():
    item = st.one_of(_EBNF_CHARS.filter(lambda c: c not in ('\\"',)), st.sampled_from(["a-z", "0-9", "\\x00-\\x1F",
                                                                                        "^", "\\]", "-", "z-a",
                                                                                        "\\u0100-\\U0010FFFF"]))
    return st.tuples(st.booleans(), st.lists(item, max_size=4)).map(
        lambda t: "[" + ("^" if t[0] else "") + "".join(t[1]) + "]")


def _ebnf_repeat():
    return st.one_of(st.sampled_from(["*", "+", "?"]), st.tuples(BOUNDS, st.none() | BOUNDS, st.integers(0, 3)).map(
        lambda t: ["{%d}" % t[0], "{%d,}" % t[0], "{%d,%s}" % (t[0], "" if t[1] is None else t[1]),
                   "{,%s}" % (t[1] or 3)][t[2]]))


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _ebnf_expr():
    leaf = st.one_of(_ebnf_literal(), _ebnf_class(), st.sampled_from(_EBNF_NAMES + ["undefined_rule", '""']))

    def extend(inner):
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map(" ".join),
            st.lists(inner, min_size=2, max_size=4).map(" | ".join),
            inner.map(lambda e: f"({e})"),
            st.tuples(inner, _ebnf_repeat()).map(lambda t: f"({t[0]}){t[1]}"),
        )

    return st.recursive(leaf, extend, max_leaves=10)


@st.composite
def ebnf_cases(draw):
    names = ["root"] + draw(st.lists(st.sampled_from(_EBNF_NAMES[1:]), max_size=4, unique=True))
    rules = [f"{name} ::= {draw(_ebnf_expr())}" for name in names]
    if draw(st.integers(0, 9)) == 0:  # deep nesting in one rule
        depth = draw(DEPTHS)
        left, right = draw(st.sampled_from([("(", ")"), ('"x" (', ")"), ("(", ")*")]))
        rules[0] = "root ::= " + _nest('"a"', depth, left, right)
    if draw(st.integers(0, 7)) == 0:  # recursion with shared prefixes: ambiguous, maybe exponential
        rules += ['x ::= y | z', 'y ::= "a" x "1"', 'z ::= "a" x "2" | ""'] if "x" not in names else []
    sep = draw(st.sampled_from(["\n", "\n\n", "  # note\n", "\r\n", " "]))
    return Case("ebnf", "ebnf", sep.join(draw(st.permutations(rules)) if len(rules) < 5 else rules),
                walk_seed=draw(SEEDS))


# ---- regex ----------------------------------------------------------------------------

_REGEX_ATOMS = st.sampled_from([
    "a", "b", "1", "é", "😀", ".", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "\\.", "\\\\", "\\/", "\\-",
    "\\n", "\\t", "\\0", "\\x41", "\\u00e9", "\\u{1F600}", "\\u{110000}", "\\uD83D\\uDE00", "\\uD800", "\\cA",
    "\\p{L}", "\\P{Lu}", "\\p{Nd}", "\\p{Script=Greek}", "\\p{ASCII}", "\\1", "\\k<n>", "\\b", "[a-z]",
    "[^\\d\\s]", "[\\p{L}_]", "[z-a]", "[\\w-.]", "[]", "[^]", "{", "}", "$", "^", "\ud800", "(?=a)", "(?<!b)",
])


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _regex_expr():
    def extend(inner):
        quant = st.one_of(st.sampled_from(["*", "+", "?", "*?", "++"]), st.tuples(BOUNDS, st.none() | BOUNDS).map(
            lambda t: "{%d}" % t[0] if t[1] is None else "{%d,%d}" % t)) | BOUNDS.map(lambda n: "{%d,}" % n)
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.lists(inner, min_size=2, max_size=3).map("|".join),
            st.tuples(st.sampled_from(["(", "(?:", "(?<n>", "(?P<m>", "(?i)"]), inner).map(lambda t: t[0] + t[1] + ")"),
            st.tuples(inner, quant).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )

    return st.recursive(_REGEX_ATOMS, extend, max_leaves=10)


@st.composite
def regex_cases(draw):
    pattern = draw(_regex_expr())
    if draw(st.integers(0, 9)) == 0:
        pattern = _nest(pattern, draw(DEPTHS), draw(st.sampled_from(["(", "(?:", "(a|"])), ")")
    if draw(st.booleans()):
        pattern = "^" + pattern + "$"
    return Case("regex", "regex", pattern, walk_seed=draw(SEEDS))


# ---- JSON Schema ----------------------------------------------------------------------

FORMATS = ["date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference",
           "uuid", "regex", "json-pointer", "idn-email", "idn-hostname", "iri", "unknown-format"]
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
NUMBERS = st.one_of(st.integers(-10**20, 10**20), st.sampled_from([0, -1, 0.5, 1e-9, 0.1, 1e308, -1e308, 2**53 + 1]),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
JSON_VALUES = st.recursive(st.none() | st.booleans() | NUMBERS | UNICODE_TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(UNICODE_TEXT, inner, max_size=3),
                           max_leaves=6)
PROPERTY_NAMES = st.one_of(st.sampled_from(["a", "b", "name", "", "a b", '"q"', "\\", "é", "日本"]), UNICODE_TEXT)
REFS = st.sampled_from(["#", "#/$defs/a", "#/$defs/b", "#/definitions/a", "#/$defs/missing", "#/properties/a",
                        "#a", "http://example.com/x.json", "#/$defs/a/items", "#/$defs/%25", "#/$defs/~1"])


def _keyword_value(keyword: str, schema):
    """A value for any keyword seen in real schemas: what it means when we know it, else JSON."""
    if keyword in corpus.SCHEMA_VALUED:
        return schema
    if keyword in corpus.SCHEMA_MAPS:
        return st.dictionaries(PROPERTY_NAMES, schema, max_size=3)
    if keyword in corpus.SCHEMA_LISTS:
        return st.lists(schema, max_size=3) | schema
    return JSON_VALUES


def _schema_keywords(schema):
    """(keyword, value) pairs, typed keywords weighted toward their meaning."""
    pattern = st.one_of(_regex_expr(), st.sampled_from(corpus.regex_seeds() or ["[a-z]+"]))
    typed = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3),
        "minLength": BOUNDS, "maxLength": BOUNDS, "pattern": pattern, "format": st.sampled_from(FORMATS),
        "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS | st.booleans(),
        "exclusiveMaximum": NUMBERS, "multipleOf": NUMBERS,
        "properties": st.dictionaries(PROPERTY_NAMES, schema, max_size=4),
        "required": st.lists(PROPERTY_NAMES, max_size=3),
        "additionalProperties": st.booleans() | schema,
        "patternProperties": st.dictionaries(pattern, schema, max_size=2),
        "propertyNames": schema, "minProperties": BOUNDS, "maxProperties": BOUNDS,
        "dependentRequired": st.dictionaries(PROPERTY_NAMES, st.lists(PROPERTY_NAMES, max_size=2), max_size=2),
        "dependentSchemas": st.dictionaries(PROPERTY_NAMES, schema, max_size=2),
        "items": schema | st.lists(schema, max_size=3) | st.booleans(),
        "prefixItems": st.lists(schema, max_size=3) | st.dictionaries(PROPERTY_NAMES, schema, max_size=1),
        "contains": schema, "minContains": BOUNDS, "maxContains": BOUNDS,
        "minItems": BOUNDS, "maxItems": BOUNDS, "uniqueItems": st.booleans(),
        "additionalItems": st.booleans() | schema, "unevaluatedProperties": st.booleans() | schema,
        "unevaluatedItems": st.booleans() | schema,
        "anyOf": st.lists(schema, min_size=1, max_size=3), "oneOf": st.lists(schema, min_size=1, max_size=3),
        "allOf": st.lists(schema, min_size=1, max_size=3), "not": schema,
        "if": schema, "then": schema, "else": schema,
        "enum": st.lists(JSON_VALUES, max_size=4), "const": JSON_VALUES,
        "$ref": REFS, "$dynamicRef": st.sampled_from(["#meta", "#a"]), "$anchor": st.sampled_from(["a", "meta"]),
        "$schema": st.sampled_from(["https://json-schema.org/draft/2020-12/schema",
                                    "http://json-schema.org/draft-07/schema#", "http://example.com/unknown"]),
    }
    known = st.sampled_from(sorted(typed)).flatmap(lambda k: st.tuples(st.just(k), typed[k]))
    seen = st.sampled_from(corpus.schema_keywords()[:120]).flatmap(
        lambda k: st.tuples(st.just(k), typed[k] if k in typed else _keyword_value(k, schema)))
    return st.one_of(known, known, seen)


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _schema():
    def extend(inner):
        return st.lists(_schema_keywords(inner), max_size=5).map(dict)

    leaf = st.one_of(st.booleans(), st.sampled_from(TYPES).map(lambda t: {"type": t}), st.just({}))
    return st.recursive(leaf, extend, max_leaves=12)


@st.composite
def json_schemas(draw):
    schema = draw(_schema())
    if isinstance(schema, dict) and draw(st.integers(0, 3)) == 0:  # definitions for the $refs to find
        schema = {**schema, "$defs": {"a": draw(_schema()), "b": {"$ref": "#/$defs/a"}}}
    if draw(st.integers(0, 11)) == 0:
        wrap = draw(st.sampled_from(["items", "properties", "anyOf", "not", "allOf"]))
        for _ in range(draw(DEPTHS)):
            schema = {"properties": {"a": schema}} if wrap == "properties" else (
                {wrap: [schema]} if wrap in ("anyOf", "allOf") else {wrap: schema})
    return schema


@st.composite
def json_schema_cases(draw):
    options = draw(st.fixed_dictionaries({}, optional={
        "any_whitespace": st.booleans(), "strict": st.booleans(),
        "property_order": st.sampled_from(["schema", "any"]), "max_whitespace": st.sampled_from([0, 1, 20])}))
    return Case("json_schema", "json_schema", draw(json_schemas()), options, draw(SEEDS))


# ---- raw IR ---------------------------------------------------------------------------

_IR_NAMES = ["r0", "r1", "r2", "r3"]
_INT32 = st.one_of(st.integers(-3, 300), st.sampled_from([2**31 - 1, -2**31, 2**16, 2**24]))


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _ir_node():
    leaf = st.one_of(
        st.lists(st.integers(0, 255), max_size=6).map(lambda b: ["bytes", b]),
        st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)).map(sorted), min_size=1, max_size=3).map(
            lambda r: ["byteset", r]),
        st.lists(st.tuples(_INT32, _INT32), max_size=3).map(lambda r: ["byteset", r]),  # unsorted, out of range
        st.sampled_from(_IR_NAMES + ["missing"]).map(lambda n: ["ref", n]),
        st.tuples(st.integers(-1, 9), st.lists(_INT32, max_size=4)).map(lambda t: ["check", t[0], t[1]]),
        # distinct-key checks listing keys (bytes JSON writes plain or not), some empty, some prefixes
        st.lists(st.lists(st.sampled_from([0x61, 0x62, 0x20, 0x22, 0x5C, 0x0A, 0xC3, 0xA9]), max_size=4),
                 max_size=4).map(lambda keys: ["check", 2, [w for k in keys for w in (len(k), *k)]]),
        st.just(["seq", []]), st.just(["alt", []]),
        # automata: states mostly in range, bytes mostly too, acceptance mostly 0/1
        st.tuples(st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 255), st.integers(0, 255),
                                     st.integers(0, 4)).map(list), max_size=5),
                  st.lists(st.sampled_from([0, 1, 1, 2]), max_size=4)).map(
            lambda t: ["automaton", [[s, min(lo, hi), max(lo, hi), to] for s, lo, hi, to in t[0]], t[1]]),
    )

    def extend(inner):
        bound = st.one_of(st.integers(0, 4), _INT32, st.sampled_from([2**31, 2**40]))
        return st.one_of(
            st.lists(inner, min_size=1, max_size=4).map(lambda c: ["seq", c]),
            st.lists(inner, min_size=1, max_size=4).map(lambda c: ["alt", c]),
            st.tuples(inner, bound, st.none() | bound).map(lambda t: ["repeat", t[0], t[1], t[2]]),
            inner.map(lambda c: ["region", c]),
            # intersections: children mostly regular, wants mostly 0/1, the flag mostly 0/1
            st.tuples(st.lists(st.tuples(inner, st.sampled_from([1, 1, 0, 2])), min_size=1, max_size=3),
                      st.sampled_from([0, 1, 1, 3])).map(lambda t: ["and", [list(x) for x in t[0]], t[1]]),
            # machines: states mostly in range, acceptance mostly 0/1
            st.tuples(st.lists(st.tuples(st.integers(-1, 3), inner, st.integers(0, 4)).map(list), max_size=4),
                      st.lists(st.sampled_from([0, 1, 1, 2]), max_size=4)).map(lambda t: ["machine", t[0], t[1]]),
        )

    return st.recursive(leaf, extend, max_leaves=12)


@st.composite
def ir_cases(draw):
    count = draw(st.integers(1, 4))
    rules = [[name, draw(_ir_node())] for name in _IR_NAMES[:count]]
    root = draw(st.sampled_from(_IR_NAMES[:count] + (["missing"] if draw(st.integers(0, 19)) == 0 else [])))
    return Case("ir", "ir", {"root": root, "rules": rules}, walk_seed=draw(SEEDS))


# ---- structural tags and response_format ----------------------------------------------

_TAG_TEXT = st.one_of(st.sampled_from(["<tool>", "</tool>", "<", "<t", "<think>", "</think>", "", "<<", "a"]),
                      UNICODE_TEXT)


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _small_schema():
    return st.one_of(st.sampled_from([{}, True, False, {"type": "integer"}, {"type": "object", "properties":
                                       {"a": {"type": "string"}}, "required": ["a"]}]), _schema())


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _small_ebnf():
    return st.one_of(st.sampled_from(['root ::= "x" [0-9]+', "root ::= root", 'root ::= "a" | ""', "", "root ::= ("]),
                     ebnf_cases().map(lambda c: c.payload))


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _format():
    leaf = st.one_of(
        st.builds(lambda v: {"type": "const_string", "value": v}, _TAG_TEXT),
        st.builds(lambda s: {"type": "json_schema", "json_schema": s}, _small_schema()),
        st.builds(lambda p: {"type": "regex", "pattern": p}, _regex_expr()),
        st.builds(lambda g: {"type": "grammar", "grammar": g}, _small_ebnf()),
        st.builds(lambda e: {"type": "any_text", "excludes": e}, st.lists(_TAG_TEXT, max_size=2)),
    )

    def extend(inner):
        tag = st.builds(lambda b, c, e: {"begin": b, "content": c, "end": e}, _TAG_TEXT, inner,
                        _TAG_TEXT | st.lists(_TAG_TEXT, max_size=2))
        triggered = st.builds(
            lambda trig, tags, flags: {"type": "triggered_tags", "triggers": trig,
                                       "tags": [dict(t, begin=(trig[0] if trig else "") + t["begin"]) for t in tags],
                                       **flags},
            st.lists(_TAG_TEXT, min_size=1, max_size=2), st.lists(tag, min_size=1, max_size=2),
            st.fixed_dictionaries({}, optional={"at_least_one": st.booleans(), "stop_after_first": st.booleans(),
                                                "excludes": st.lists(_TAG_TEXT, max_size=2)}))
        return st.one_of(
            tag, triggered,
            st.lists(inner, min_size=1, max_size=3).map(lambda e: {"type": "sequence", "elements": e}),
            st.lists(inner, min_size=1, max_size=3).map(lambda e: {"type": "or", "elements": e}),
        )

    return st.recursive(leaf, extend, max_leaves=6)


def _mangled(value):
    """Sometimes a field with the wrong type, or the whole thing as JSON text."""
    return st.one_of(
        st.just(value), st.just(value),
        st.just(json.dumps(value)),
        st.sampled_from([None, 5, [], "x", {"type": None}]),
    )


@lru_cache(maxsize=None)  # built once: strategies are immutable
def _structural_tag():
    legacy = st.builds(
        lambda trig, structures: {"type": "structural_tag", "triggers": trig,
                                  "structures": [dict(s, begin=trig[0] + s["begin"]) for s in structures]},
        st.lists(_TAG_TEXT, min_size=1, max_size=2),
        st.lists(st.builds(lambda b, s, e: {"begin": b, "schema": s, "end": e}, _TAG_TEXT, _small_schema(), _TAG_TEXT),
                 min_size=1, max_size=2))
    return st.one_of(_format().map(lambda f: {"type": "structural_tag", "format": f}), legacy, _format())


@st.composite
def structural_tag_cases(draw):
    tag = draw(_structural_tag())
    if draw(st.integers(0, 5)) == 0:
        tag = draw(_mangled(tag))
    return Case("structural_tag", "structural_tag", tag, walk_seed=draw(SEEDS))


@st.composite
def response_format_cases(draw):
    schema, pattern = draw(_small_schema()), draw(_regex_expr())
    rf = draw(st.sampled_from([
        {"type": "text"}, {"type": "json_object"}, {"type": "json_object", "schema": schema},
        {"type": "json_object", "schema": json.dumps(schema)}, {"type": "grammar", "grammar": draw(_small_ebnf())},
        {"type": "json_schema", "json_schema": {"name": draw(st.sampled_from(["n", "bad name", ""])), "schema": schema,
                                                "strict": draw(st.sampled_from([True, False, None, "yes"]))}},
        {"type": "json_schema", "json_schema": schema}, {"type": "json", "value": schema},
        {"type": "regex", "regex": pattern}, {"type": "regex", "value": pattern},
        {"type": "structural_tag", "structural_tag": draw(_structural_tag())},
        {"type": "regex", "regex": pattern, "value": pattern}, {"type": "grammar"}, {"type": "nope"}, {},
    ]))
    if draw(st.integers(0, 5)) == 0:
        rf = {**rf, draw(st.sampled_from(["schema", "grammar", "extra", "structural_tag"])): draw(JSON_VALUES)}
    if draw(st.integers(0, 7)) == 0:
        rf = draw(_mangled(rf))
    return Case("response_format", "response_format", rf, walk_seed=draw(SEEDS))


# ---- mutations of valid inputs --------------------------------------------------------

_INSERTS = st.one_of(st.sampled_from(["(", ")", "[", "]", "{", "}", '"', "'", "\\", "|", "*", "::=", "2147483648",
                                      "{2147483648}", "\\u", "\ud800", "\x00", ",", ":", "-", "^", "$", "#", "\n"]),
                     st.characters(), LONE_SURROGATES)


@st.composite
def _mutated_text(draw, text: str) -> str:
    """Character edits, byte edits (decoded so that bad UTF-8 turns into lone surrogates), and
    a chunk repeated many times (nesting depth, long literals)."""
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "bytes", "repeat"]))
        at = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:at] + draw(_INSERTS) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)):]
        elif op == "replace" and text:
            text = text[:at] + draw(_INSERTS) + text[at + 1:]
        elif op == "bytes":
            data = bytearray(text.encode("utf-8", "surrogatepass"))
            if data:
                i = draw(st.integers(0, len(data) - 1))
                data[i] = draw(st.sampled_from([data[i] ^ (1 << draw(st.integers(0, 7))), 0x80, 0xC0, 0xED, 0xFF]))
            text = _decode(bytes(data))
        elif op == "repeat":
            end = min(len(text), at + draw(st.integers(1, 12)))
            text = text[:at] + text[at:end] * draw(st.sampled_from([2, 50, 1000, 5000])) + text[end:]
    return text


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


@st.composite
def mutation_cases(draw):
    kind = draw(st.sampled_from(["ebnf", "regex", "json_schema", "json_schema"]))
    seeds = {"ebnf": corpus.ebnf_seeds, "regex": corpus.regex_seeds, "json_schema": corpus.schema_seeds}[kind]()
    seed = draw(st.sampled_from(seeds))
    text = seed if isinstance(seed, str) else json.dumps(seed, ensure_ascii=draw(st.booleans()))
    text = draw(_mutated_text(text))
    payload = text
    if kind == "json_schema":  # a schema that is still JSON travels parsed; else as JSON text
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError):
            payload = text
    return Case("mutation", kind, payload, walk_seed=draw(SEEDS))


GENERATORS = {
    "ebnf": ebnf_cases(),
    "regex": regex_cases(),
    "json_schema": json_schema_cases(),
    "ir": ir_cases(),
    "structural_tag": structural_tag_cases(),
    "response_format": response_format_cases(),
    "mutation": mutation_cases(),
}

"""The built-in "any JSON value" grammar (RFC 8259), built directly from IR nodes.

Built in code rather than parsed from EBNF text because it is used for every
`response_format: {type: "json_object"}` request and should cost nothing to produce.
Whitespace is JSON's own (space, tab, LF, CR) and unbounded, exactly as RFC 8259 allows;
capping it is a decoding policy, not a property of the language.
"""

from __future__ import annotations

from functools import lru_cache

from . import ir
from .ir import Ref, alt, byte_set, char_class, literal, repeat, seq

_WS = repeat(byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0, None)
_DIGIT = byte_set([(0x30, 0x39)])
_HEX = byte_set([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])

# unescaped = %x20-21 / %x23-5B / %x5D-10FFFF   (anything but controls, '"' and '\')
_UNESCAPED = char_class([(0x20, 0x21), (0x23, 0x5B), (0x5D, ir.MAX_CODE_POINT)])
_ESCAPE = seq(
    literal("\\"),
    alt(byte_set([(c, c) for c in b'"\\/bfnrt']), seq(literal("u"), repeat(_HEX, 4, 4))),
)
_STRING = seq(literal('"'), repeat(alt(_UNESCAPED, _ESCAPE), 0, None), literal('"'))

# number = [ minus ] int [ frac ] [ exp ];  int = zero / ( digit1-9 *DIGIT )
_NUMBER = seq(
    repeat(literal("-"), 0, 1),
    alt(literal("0"), seq(byte_set([(0x31, 0x39)]), repeat(_DIGIT, 0, None))),
    repeat(seq(literal("."), repeat(_DIGIT, 1, None)), 0, 1),
    repeat(
        seq(
            byte_set([(0x45, 0x45), (0x65, 0x65)]),
            repeat(byte_set([(0x2B, 0x2B), (0x2D, 0x2D)]), 0, 1),
            repeat(_DIGIT, 1, None),
        ),
        0, 1,
    ),
)

_PRELUDE = ir.Prelude(_STRING, _NUMBER)  # written once for all its grammars


def _list(open_: str, item: ir.Expr, close: str) -> ir.Expr:
    """`open ws [ item ws *( "," ws item ws ) ] close` — the RFC's ws around every token."""
    more = repeat(seq(literal(","), _WS, item, _WS), 0, None)
    return seq(literal(open_), _WS, repeat(seq(item, _WS, more), 0, 1), literal(close))


@lru_cache(maxsize=2)
def _rules(distinct_keys: bool = False) -> tuple[tuple[str, ir.Expr], ...]:
    if distinct_keys:  # RFC 8259's names SHOULD be unique: a check after each key, per object
        member = seq(Ref("string"), ir.Check(ir.DISTINCT_KEY), _WS, literal(":"), _WS, Ref("value"))
        obj = ir.Region(_list("{", member, "}"))
    else:
        member = seq(Ref("string"), _WS, literal(":"), _WS, Ref("value"))
        obj = _list("{", member, "}")
    return (
        ("root", seq(_WS, Ref("value"), _WS)),  # JSON-text = ws value ws
        ("value", alt(Ref("object"), Ref("array"), Ref("string"), Ref("number"),
                      literal("true"), literal("false"), literal("null"))),
        ("object", obj),
        ("array", _list("[", Ref("value"), "]")),
        ("string", _STRING),
        ("number", _NUMBER),
    )


def json_text_rules(prefix: str, ws: ir.Expr) -> dict[str, ir.Expr]:
    """The same grammar with rule names prefixed and `ws` for every whitespace run (a bounded
    one, where a model generates it); its start rule is prefix + "root"."""
    rename = {name: Ref(prefix + name) for name, _ in _rules()}

    def sub(e: ir.Expr) -> ir.Expr:
        if e is _WS:
            return ws
        if isinstance(e, Ref):
            return rename[e.name]
        if isinstance(e, (ir.Seq, ir.Alt)):
            return type(e)(tuple(sub(x) for x in e.items))
        if isinstance(e, ir.Repeat):
            return ir.Repeat(sub(e.item), e.min, e.max)
        return e

    return {prefix + name: sub(body) for name, body in _rules()}


def builtin_json_grammar(distinct_keys: bool = False) -> ir.Grammar:
    """Any JSON value, surrounded by optional whitespace (RFC 8259 JSON-text); with
    `distinct_keys`, no object repeats a key (what a generator should write)."""
    return ir.Grammar(dict(_rules(distinct_keys)), "root", prelude=_PRELUDE)

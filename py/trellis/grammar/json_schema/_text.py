"""Strings for the JSON Schema front-end: JSON string encoding, `pattern`, `format`.

Constraints on strings (pattern, format, lengths, property names) are about the *decoded*
string. They are built as IR or DFAs over the decoded UTF-8 bytes and then mapped onto the
JSON text by `json_escape`, which replaces every byte that JSON must escape with its
escape. Only the canonical spelling is produced — the one `json.dumps(..., ensure_ascii=False)`
writes: `\\"`, `\\\\`, `\\b \\f \\n \\r \\t`, `\\u00XX` (lower-case hex) for the other
control characters, every other character raw. Accepting one spelling per string keeps
each grammar exact (a key like `"\\u0061"` cannot slip past a check on `"a"`).
"""

from __future__ import annotations

from functools import lru_cache
from json.encoder import encode_basestring

from ...errors import GrammarError, UnsupportedSchemaError
from .. import ir
from ..regex import regex_expr
from . import _dfa

_SHORT = {0x22: '\\"', 0x5C: "\\\\", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def escape_byte(b: int) -> str | None:
    """The JSON spelling of an ASCII byte that must be escaped, else None."""
    if b in _SHORT:
        return _SHORT[b]
    if b < 0x20:
        return "\\u%04x" % b
    return None


_SPECIAL = [b for b in range(0x80) if escape_byte(b) is not None]
HEAVY = ir.normalize_ranges([(b, b) for b in _SPECIAL] + [(0x80, 0xFF)])  # bytes whose JSON form is large


@lru_cache(maxsize=1024)  # patterns and formats recur from schema to schema
def json_escape(expr: ir.Expr) -> ir.Expr:
    """Map an expression over decoded UTF-8 bytes to one over JSON string-body bytes."""
    if isinstance(expr, ir.ByteSet):
        return _escape_set(expr)
    return _escape(expr, {})


def _escape(e: ir.Expr, memo: dict) -> ir.Expr:
    known = memo.get(id(e))  # by identity: shared parts are mapped once
    if known is not None:
        return known[0]
    if isinstance(e, ir.Bytes):
        out = _escape_bytes(e.data)
    elif isinstance(e, ir.ByteSet):
        out = _escape_set(e)
    elif isinstance(e, ir.Seq):
        out = ir.seq(*(_escape(x, memo) for x in e.items))
    elif isinstance(e, ir.Alt):
        out = ir.alt(*(_escape(x, memo) for x in e.items))
    elif isinstance(e, ir.Repeat):
        out = ir.Repeat(_escape(e.item, memo), e.min, e.max)
    elif isinstance(e, ir.Region):
        out = ir.Region(_escape(e.item, memo))
    else:  # Ref, Check
        out = e
    memo[id(e)] = (out, e)  # e kept alive so that its id is not reused
    return out


def _escape_bytes(data: bytes) -> ir.Expr:
    parts = []
    for b in data:
        esc = escape_byte(b)
        parts.append(ir.literal(esc) if esc else ir.Bytes(bytes([b])))
    merged: list[ir.Expr] = []
    for p in parts:
        if merged and isinstance(p, ir.Bytes) and isinstance(merged[-1], ir.Bytes):
            merged[-1] = ir.Bytes(merged[-1].data + p.data)
        else:
            merged.append(p)
    return ir.seq(*merged)


@lru_cache(maxsize=4096)
def _escape_set(e: ir.ByteSet) -> ir.Expr:
    if not any(lo <= 0x1F or lo <= 0x22 <= hi or lo <= 0x5C <= hi for lo, hi in e.ranges):
        return e
    special = [b for b in _SPECIAL if any(lo <= b <= hi for lo, hi in e.ranges)]
    if not special:
        return e
    rest = ir.normalize_ranges([(lo, hi) for lo, hi in e.ranges])
    keep = []
    for lo, hi in rest:
        start = lo
        for b in range(lo, hi + 1):
            if b in special:
                if start < b:
                    keep.append((start, b - 1))
                start = b + 1
        if start <= hi:
            keep.append((start, hi))
    # the escapes as one small trie: "\\" then a letter, or "u00" and two hex digits
    letters = [ord(escape_byte(b)[1]) for b in special if len(escape_byte(b)) == 2]
    long = [b for b in special if len(escape_byte(b)) == 6]
    tails = []
    if letters:
        tails.append(ir.byte_set([(c, c) for c in letters]))
    if long:
        by_high: dict[int, list[int]] = {}
        for b in long:
            by_high.setdefault(b >> 4, []).append(ord("%x" % (b & 15)))
        tails.append(ir.seq(ir.literal("u00"), ir.alt(*(ir.seq(ir.literal("%x" % h), ir.byte_set([(c, c) for c in cs]))
                                                        for h, cs in sorted(by_high.items())))))
    items = ([ir.byte_set(keep)] if keep else []) + [ir.seq(ir.literal("\\"), ir.alt(*tails))]
    return ir.alt(*items)


def encode_string(s: str) -> str:
    """The canonical JSON spelling of a string (what json.dumps(..., ensure_ascii=False) writes:
    `escape_byte` for the ASCII bytes it names, every other character raw)."""
    return encode_basestring(s)  # json's own (C) routine for exactly that


def _hex_digit(d: int) -> ir.Expr:
    """A hex digit of value d in either case (JSON's \\u escapes take both)."""
    text = "%x" % d
    return ir.byte_set(sorted({(ord(c), ord(c)) for c in (text, text.upper())}))


def _u_escape(unit: int) -> ir.Expr:
    return ir.seq(ir.literal("\\u"), *(_hex_digit(unit >> shift & 15) for shift in (12, 8, 4, 0)))


@lru_cache(maxsize=4096)
def _non_ascii(ch: str) -> ir.Expr:
    """A character above ASCII raw or as its \\u escape (a surrogate pair beyond the BMP)."""
    cp = ord(ch)
    units = [cp] if cp <= 0xFFFF else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
    return ir.alt(ir.Bytes(ch.encode("utf-8")), ir.seq(*(_u_escape(u) for u in units)))


def string_literal(s: str, shared: bool = True) -> ir.Expr:
    """The JSON text of the string `s`, quotes included: ASCII as `encode_string` writes it, and
    each other character raw or escaped. Both are the same string to a validator, and the
    escape spells a character whose raw bytes a vocabulary lacks (SmolLM2 has no token starting
    with 0xF1 or 0xF2, so an enum value holding U+9104D was a dead end). `shared`: one node per
    text (keys come again and again; not an enum's many values, which would push them out)."""
    text = encode_string(s)
    if text.isascii():  # the common case, without a look at each character
        return ir.literal(text) if shared else ir.Bytes(text.encode())
    text.encode("utf-8")  # a lone surrogate is refused here, as before
    parts: list[ir.Expr] = []
    run = []
    for ch in text:
        if ord(ch) < 0x80:
            run.append(ch)
            continue
        if run:
            parts.append(ir.literal("".join(run)))
            run = []
        parts.append(_non_ascii(ch))
    if run:
        parts.append(ir.literal("".join(run)))
    return ir.seq(*parts)


ANY_CHAR = ir.char_class([(0, ir.MAX_CODE_POINT)])  # one code point, decoded
ANY_STRING = ir.repeat(ANY_CHAR, 0, None)  # every decoded string (valid UTF-8)
JSON_CHAR = json_escape(ANY_CHAR)  # one code point, as it appears in a JSON string


# ---- patterns ------------------------------------------------------------------------------


def _ends_with_anchor(p: str) -> bool:
    if not p.endswith("$"):
        return False
    k = len(p) - 2
    n = 0
    while k >= 0 and p[k] == "\\":
        n += 1
        k -= 1
    return n % 2 == 0


def _split_top_level(p: str) -> list[str]:
    parts, depth, i, in_class, start = [], 0, 0, False, 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(p[start:i])
            start = i + 1
        i += 1
    parts.append(p[start:])
    return parts


def _drop_lazy(p: str) -> str:
    """Remove the '?' of lazy quantifiers: which match is found differs, whether one exists does not."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            out.append(p[i:i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
        if in_class:
            in_class = c != "]"
            continue
        if c == "[":
            in_class = True
        elif c in "*+?" or (c == "}" and _closes_quantifier(p, i - 1)):
            if i < len(p) and p[i] == "?" and (c != "?" or _is_quantifier_question(p, i - 1)):
                i += 1  # skip the lazy marker
    return "".join(out)


def _closes_quantifier(p: str, j: int) -> bool:
    k = p.rfind("{", 0, j)
    return k >= 0 and all(ch.isdigit() or ch == "," for ch in p[k + 1:j]) and p[k + 1:j][:1].isdigit()


def _is_quantifier_question(p: str, j: int) -> bool:
    """p[j] == '?': is it a quantifier (not the '?' of a '(?' group)?"""
    return j > 0 and p[j - 1] != "("


@lru_cache(maxsize=512)
def _pattern_expr_cached(pattern: str) -> ir.Expr:
    return _search_expr(pattern, ir.repeat(ANY_CHAR, 0, None))


def _search_expr(pattern: str, anything: ir.Expr) -> ir.Expr:
    pattern = _drop_lazy(pattern)
    alternatives = []
    # JSON Schema patterns search: each top-level alternative carries its own anchors
    for part in _split_top_level(pattern):  # [pattern] itself without a top-level "|"
        start, end = part.startswith("^"), _ends_with_anchor(part)
        core = regex_expr(part)
        alternatives.append(ir.seq(*([] if start else [anything]), core, *([] if end else [anything])))
    return ir.alt(*alternatives)


def pattern_expr(pattern, pointer: str, keyword: str = "pattern") -> ir.Expr:
    """The decoded strings an ECMA-262 `pattern` matches *anywhere* (JSON Schema semantics)."""
    if not isinstance(pattern, str):
        raise UnsupportedSchemaError("the pattern must be a string", keyword, pointer)
    try:
        return _pattern_expr_cached(pattern)
    except GrammarError as e:
        raise UnsupportedSchemaError(f"regular expression {pattern!r} not supported: {e}", keyword, pointer) from None


# Any bytes: what an unanchored pattern may have around its match, in its automaton. Over valid
# UTF-8 it is the same as any characters (a match starts with a lead byte, which no character
# holds inside), and the automata are only ever used on valid UTF-8: on encoded text, or in
# intersections with ANY_STRING. Without the character structure the search for a word needs
# about one state per letter, not nine (`nightly|beta|devedition|release|esr` anywhere: 3601).
_ANY_BYTES = ir.repeat(ir.ByteSet(((0, 0xFF),)), 0, None)


@lru_cache(maxsize=512)
def _pattern_dfa_cached(pattern: str) -> _dfa.Dfa:
    # \\p{..} classes have hundreds of sequences: built compact (any other pattern keeps its automaton)
    _pattern_expr_cached(pattern)  # raises for an unsupported pattern
    return _dfa.from_ir(_pattern_search_cached(pattern), compact=_has_property_escape(pattern))


def _has_property_escape(p: str) -> bool:
    i = p.find("\\")
    while i >= 0:
        if p[i + 1 : i + 2] in ("p", "P"):
            return True
        i = p.find("\\", i + 2)
    return False


def pattern_search_expr(pattern, pointer: str, keyword: str = "pattern") -> ir.Expr:
    """The byte strings an ECMA-262 `pattern` matches anywhere in (its automaton's language)."""
    pattern_expr(pattern, pointer, keyword)  # raises the schema error when unsupported
    return _pattern_search_cached(pattern)


@lru_cache(maxsize=512)
def _pattern_search_cached(pattern: str) -> ir.Expr:
    return _search_expr(pattern, _ANY_BYTES)


def pattern_dfa(pattern, pointer: str, keyword: str = "pattern") -> _dfa.Dfa:
    pattern_expr(pattern, pointer, keyword)  # raises the schema error when unsupported
    return _pattern_dfa_cached(pattern)


@lru_cache(maxsize=512)
def _pattern_matcher_cached(pattern: str) -> _dfa.LazyDfa:
    return _dfa.LazyDfa(_pattern_search_cached(pattern), compact=_has_property_escape(pattern))


def pattern_search(pattern: str, text: str, pointer: str, keyword: str = "pattern") -> bool:
    """Whether `pattern` matches anywhere in `text`: the automaton built only as far as the
    texts tested so far lead (a pattern's whole automaton is built where a grammar needs it)."""
    pattern_expr(pattern, pointer, keyword)  # raises the schema error when unsupported
    try:
        return _pattern_matcher_cached(pattern).matches(text.encode("utf-8"))
    except OverflowError:
        raise _dfa._too_big("this string constraint", keyword, pointer) from None


def length_expr(lo: int, hi: int | None) -> ir.Expr:
    return ir.repeat(ANY_CHAR, lo, hi)


@lru_cache(maxsize=4096)  # by structure: shared subtrees are measured once
def regex_min_max_length(expr: ir.Expr) -> tuple[int, int | None]:
    """Bounds on the number of code points of the strings an expression matches."""
    if isinstance(expr, ir.Bytes):
        n = sum(1 for b in expr.data if not 0x80 <= b <= 0xBF)
        return n, n
    if isinstance(expr, ir.ByteSet):
        lead = any(not (0x80 <= lo and hi <= 0xBF) for lo, hi in expr.ranges)
        return (1, 1) if lead else (0, 0)
    if isinstance(expr, ir.Seq):
        lo, hi = 0, 0
        for item in expr.items:
            a, b = regex_min_max_length(item)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(expr, ir.Alt):
        if not expr.items:
            return 0, 0
        bounds = [regex_min_max_length(x) for x in expr.items]
        return min(b[0] for b in bounds), (None if any(b[1] is None for b in bounds) else max(b[1] for b in bounds))
    if isinstance(expr, ir.Repeat):
        a, b = regex_min_max_length(expr.item)
        return a * expr.min, (None if expr.max is None or b is None else b * expr.max)
    return 0, None


# ---- formats ----------------------------------------------------------------------------

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"


def _ipv6() -> str:
    ls32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
    forms = [rf"(?:{_H16}:){{6}}{ls32}", rf"::(?:{_H16}:){{5}}{ls32}"]
    forms.append(rf"(?:{_H16})?::(?:{_H16}:){{4}}{ls32}")
    for n in range(1, 5):  # [ *n( h16 ":" ) h16 ] "::" ...
        before = rf"(?:(?:{_H16}:){{0,{n}}}{_H16})?"
        tail = {1: rf"(?:{_H16}:){{3}}{ls32}", 2: rf"(?:{_H16}:){{2}}{ls32}", 3: rf"{_H16}:{ls32}",
                4: ls32}[n]
        forms.append(rf"{before}::{tail}")
    forms.append(rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}")
    forms.append(rf"(?:(?:{_H16}:){{0,6}}{_H16})?::")
    return "(?:" + "|".join(forms) + ")"


_IPV6 = _ipv6()
_YEAR_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         rf"|02-(?:0[1-9]|1[0-9]|2[0-8]))|{_YEAR_LEAP}-02-29)")
# Leap seconds (":60") are valid only at 23:59:60 UTC: alone, a format gets them through a check
# (checked_format); combined with other string constraints they are left out (a restriction).
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DURATION = rf"P(?:[0-9]+W|{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME})"
_ALNUM = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"
# A label: letters, digits, hyphens, not starting or ending with '-'; "--" in places 3-4 is
# left out (reserved for A-labels, whose punycode is not checked: a restriction).


def _label(n: int) -> str:
    """Labels of at most n characters."""
    return (rf"(?:{_ALNUM}(?:{_LDH}?{_ALNUM})?|{_ALNUM}{_LDH}(?:{_LDH}{_ALNUM}"
            rf"|(?:{_ALNUM}{_LDH}|{_LDH}{_ALNUM}){_LDH}{{0,{n - 5}}}{_ALNUM}))")


_LABEL, _LABEL30 = _label(63), _label(30)
# At most 253 characters in all: up to 3 labels of any length, or up to 8 labels of <= 30.
_HOSTNAME = rf"(?:{_LABEL}(?:\.{_LABEL}){{0,2}}|{_LABEL30}(?:\.{_LABEL30}){{3,7}})"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_QUOTED = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"'
# RFC 5321: dot-atom or quoted local part; a host name or an address literal.
_EMAIL = rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|{_QUOTED})@(?:{_HOSTNAME}|\[{_IPV4}\]|\[IPv6:{_IPV6}\])"
_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_UNRESERVED = r"A-Za-z0-9._~\-"
_SUB = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB}:@]|{_PCT})"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB}:]|{_PCT})*"
_IP_LITERAL = rf"\[(?:{_IPV6}|[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB}:]+)\]"
_HOST = rf"(?:{_IP_LITERAL}|(?:[{_UNRESERVED}{_SUB}]|{_PCT})*)"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_PATH_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_HIER = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*)?"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_URI = rf"{_SCHEME}:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_PCHAR_NC = rf"(?:[{_UNRESERVED}{_SUB}@]|{_PCT})"
_RELATIVE = (rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR_NC}+(?:/{_PCHAR}*)*)?"
             rf"(?:\?{_QUERY})?(?:#{_QUERY})?")
_JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
# RFC 3987: IRIs are URIs whose unreserved characters include `ucschar` (and `iprivate` in queries)
_UCS = "".join(r"\u{%X}-\u{%X}" % (a, b) for a, b in [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)] + [
    (p << 16, (p << 16) + 0xFFFD) for p in range(1, 14)] + [(0xE1000, 0xEFFFD)])
_PRIVATE = r"\u{E000}-\u{F8FF}\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}"


def _uri_like(unreserved: str, private: str = "") -> tuple[str, str]:
    """(absolute, relative reference) regexes for RFC 3986 (or RFC 3987 with wider sets)."""
    pchar = rf"(?:[{unreserved}{_SUB}:@]|{_PCT})"
    pchar_nc = rf"(?:[{unreserved}{_SUB}@]|{_PCT})"
    userinfo = rf"(?:[{unreserved}{_SUB}:]|{_PCT})*"
    host = rf"(?:{_IP_LITERAL}|(?:[{unreserved}{_SUB}]|{_PCT})*)"
    authority = rf"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    abempty = rf"(?:/{pchar}*)*"
    hier = rf"(?://{authority}{abempty}|/(?:{pchar}+(?:/{pchar}*)*)?|{pchar}+(?:/{pchar}*)*)?"
    query = rf"(?:{pchar}|[/?{private}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    absolute = rf"{_SCHEME}:{hier}(?:\?{query})?(?:#{fragment})?"
    relative = (rf"(?://{authority}{abempty}|/(?:{pchar}+(?:/{pchar}*)*)?|{pchar_nc}+(?:/{pchar}*)*)?"
                rf"(?:\?{query})?(?:#{fragment})?")
    return absolute, relative


_IRI, _IRI_RELATIVE = _uri_like(_UNRESERVED + _UCS, _PRIVATE)
_VARCHAR = rf"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = (rf"(?:[\x21\x23\x24\x26-\x3b\x3d\x3f-\x5b\x5d\x5f\x61-\x7a\x7e{_UCS}{_PRIVATE}]|{_PCT}"
                 rf"|\{{[+#./;?&=,!@|]?{_VARSPEC}(?:,{_VARSPEC})*\}})*")
BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}[Tt]{_TIME}",
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": _UUID,
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE})",
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})",
    "iri": _IRI,
    "iri-reference": rf"(?:{_IRI}|{_IRI_RELATIVE})",
    "uri-template": _URI_TEMPLATE,
}
# Formats the spec defines that are not enforced: refused rather than silently ignored.
# Formats nobody defines are annotations (the spec says so) and are ignored.
REFUSED_FORMATS = {"idn-email", "idn-hostname"}
# Formats whose grammar has checks (ir.Check) decided by the core on the text: enforced when the
# format is a string's only constraint (a product automaton cannot hold a check); combined with
# others, time and date-time leave out leap seconds, and regex is refused.
CHECKED_FORMATS = ("time", "date-time", "regex")


@lru_cache(maxsize=64)
def full_regex_expr(pattern: str) -> ir.Expr:
    """A trusted, full-match regex of this module (formats, base64)."""
    return regex_expr("^" + pattern + "$")


@lru_cache(maxsize=64)
def full_regex_dfa(pattern: str) -> _dfa.Dfa:
    return _dfa.from_ir(full_regex_expr(pattern), "format")


@lru_cache(maxsize=64)
def _format_expr_cached(name: str) -> ir.Expr:
    return regex_expr("^" + FORMATS[name] + "$")


def format_expr(name, pointer: str) -> ir.Expr | None:
    """Decoded strings of a known format; None for an unknown (annotation-only) format."""
    if not isinstance(name, str):
        raise UnsupportedSchemaError("format must be a string", "format", pointer)
    if name in REFUSED_FORMATS:
        raise UnsupportedSchemaError(f"format {name!r} is not enforced", "format", pointer)
    if name == "regex":
        raise UnsupportedSchemaError("format 'regex' is enforced only as a string's one constraint (not with "
                                     "pattern, lengths, other formats or under not)", "format", pointer)
    if name not in FORMATS:
        return None
    return _format_expr_cached(name)


@lru_cache(maxsize=8)
def checked_format(name: str) -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """The JSON strings (quotes included) of a CHECKED_FORMATS format, and the rules the
    expression refers to."""
    quote = ir.literal('"')
    if name == "regex":
        body, rules = _regex_format()
        rules = {k: json_escape(v) for k, v in rules.items()}
        # The region starts at the opening quote, where the check's decoding starts (checks.h).
        return ir.seq(ir.Region(ir.seq(quote, json_escape(body), ir.Check(ir.REGEX))), quote), rules
    time = ir.alt(_format_expr_cached("time"), _leap_time())
    if name == "date-time":
        time = ir.seq(full_regex_expr(_DATE), ir.byte_set([(0x54, 0x54), (0x74, 0x74)]), time)
    return ir.seq(quote, json_escape(time), quote), {}


@lru_cache(maxsize=1)
def _leap_time() -> ir.Expr:
    """Times at second 60: a region whose check after the zone and after each digit of an
    offset keeps only what can still be 23:59:60 UTC (so no prefix is a dead end)."""
    check = ir.Check(ir.LEAP_SECOND)
    digit = ir.byte_set([(0x30, 0x39)])
    hour = ir.alt(ir.seq(ir.byte_set([(0x30, 0x31)]), check, digit), ir.seq(ir.literal("2"), check,
                                                                            ir.byte_set([(0x30, 0x33)])))
    minute = ir.seq(ir.byte_set([(0x30, 0x35)]), check, digit)
    offset = ir.seq(ir.byte_set([(0x2B, 0x2B), (0x2D, 0x2D)]), hour, check, ir.literal(":"), minute, check)
    zone = ir.alt(ir.seq(ir.byte_set([(0x5A, 0x5A), (0x7A, 0x7A)]), check), offset)
    return ir.Region(ir.seq(full_regex_expr(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:60(?:\.[0-9]+)?"), zone))


_REGEX_RULE = "fmt-regex-disjunction"
_SYNTAX = "^$\\.*+?()[]{}|"


@lru_cache(maxsize=1)
def _regex_format() -> tuple[ir.Expr, dict[str, ir.Expr]]:
    """Decoded ECMAScript patterns (the `u` flag) as a grammar of their structure, with a check at
    the end for what the grammar cannot see (checks.cpp: group names and back-references, range
    and quantifier order), and one after each class, bound and group name that refuses at once
    what nothing after could mend. Left out, a restriction: \\p{..} property escapes, the (?i:..)
    modifiers, group names beyond ASCII."""
    lit, cls = ir.literal, ir.char_class
    disj = ir.Ref(_REGEX_RULE)
    hex_ = ir.byte_set([(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)])
    digits = ir.seq(ir.byte_set([(0x30, 0x39)]), ir.repeat(ir.byte_set([(0x30, 0x39)]), 0, None))
    name = ir.seq(ir.byte_set([(0x24, 0x24), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]),
                  ir.repeat(ir.byte_set([(0x24, 0x24), (0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]), 0,
                            None))
    code_point = ir.seq(lit("{"), ir.repeat(lit("0"), 0, None),
                        ir.alt(ir.repeat(hex_, 1, 5), ir.seq(lit("10"), ir.repeat(hex_, 4, 4))), lit("}"))
    char_escape = ir.alt(ir.byte_set([(ord(c), ord(c)) for c in "fnrtv0/" + _SYNTAX]),
                         ir.seq(lit("c"), ir.byte_set([(0x41, 0x5A), (0x61, 0x7A)])),
                         ir.seq(lit("x"), hex_, hex_), ir.seq(lit("u"), ir.alt(ir.repeat(hex_, 4, 4), code_point)))
    class_escape = ir.byte_set([(ord(c), ord(c)) for c in "dDsSwW"])
    atom_escape = ir.alt(digits, ir.seq(lit("k<"), name, lit(">")), class_escape, char_escape)
    class_atom = ir.alt(cls([(ord("\\"), ord("\\")), (ord("]"), ord("]"))], negate=True),
                        ir.seq(lit("\\"), ir.alt(class_escape, char_escape, ir.byte_set([(0x62, 0x62), (0x2D, 0x2D)]))))
    # Checked as soon as they end, what no continuation could mend: a range, a bound, a name.
    mended = ir.Check(ir.REGEX_PREFIX)
    char_class = ir.seq(lit("["), ir.repeat(lit("^"), 0, 1), ir.repeat(class_atom, 0, None), lit("]"), mended)
    group = ir.seq(lit("("), ir.repeat(ir.alt(lit("?:"), ir.seq(lit("?<"), name, lit(">"), mended)), 0, 1), disj,
                   lit(")"))
    pattern_char = cls([(ord(c), ord(c)) for c in _SYNTAX], negate=True)
    atom = ir.alt(pattern_char, lit("."), ir.seq(lit("\\"), atom_escape), char_class, group)
    bound = ir.seq(lit("{"), digits, ir.repeat(ir.seq(lit(","), ir.repeat(digits, 0, 1)), 0, 1), lit("}"), mended)
    quantifier = ir.seq(ir.alt(ir.byte_set([(0x2A, 0x2B), (0x3F, 0x3F)]), bound), ir.repeat(lit("?"), 0, 1))
    look = ir.seq(ir.alt(lit("(?="), lit("(?!"), lit("(?<="), lit("(?<!")), disj, lit(")"))
    assertion = ir.alt(ir.byte_set([(0x24, 0x24), (0x5E, 0x5E)]), lit("\\b"), lit("\\B"), look)
    term = ir.alt(assertion, ir.seq(atom, ir.repeat(quantifier, 0, 1)))
    alternative = ir.repeat(term, 0, None)
    rules = {_REGEX_RULE: ir.seq(alternative, ir.repeat(ir.seq(lit("|"), alternative), 0, None))}
    return disj, rules


@lru_cache(maxsize=64)
def _format_dfa_cached(name: str) -> _dfa.Dfa:
    return _dfa.from_ir(_format_expr_cached(name), "format")


def format_dfa(name, pointer: str) -> _dfa.Dfa | None:
    if format_expr(name, pointer) is None:
        return None
    return _format_dfa_cached(name)

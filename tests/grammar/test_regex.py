"""Regex front-end: ECMA-262 subset, checked through the reference against Python's `re`."""

import re
import sys
import unicodedata
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grammar.reference import Reference
from trellis.errors import GrammarError
from trellis.grammar import ir
from trellis.grammar import regex as regex_module
from trellis.grammar.regex import parse_regex


def ref(pattern):
    return Reference(parse_regex(pattern))


# ---- random patterns against Python's re ------------------------------------------------
# Python with re.ASCII agrees with ECMA on \d and \w; on \s and `.` it agrees for strings
# without \r, U+2028/9 and non-ASCII spaces, so the alphabet below avoids those.

_ALPHABET = "ab0_ \t\n\x0b.-{}/é😀"
_LITERAL = {c: (re.escape(c) if c in ".-{}/" else c) for c in _ALPHABET}
_CLASS_CHARS = "ab0_ \t.{}/é😀"  # no '-' or '[' (Python warns on possible set operations)
_ESCAPES = ["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]


def _sampler(py_pattern):
    """A function drawing matching strings for a single-character pattern."""
    members = [c for c in _ALPHABET if re.fullmatch(py_pattern, c, re.ASCII)]
    return lambda rnd: rnd.choice(members) if members else "a"


def _same(text):
    return text, text, _sampler(text)


def _class(items, negate):
    body = "".join(items)
    text = f"[{'^' if negate else ''}{body}]"
    return text, text, _sampler(text)


_class_item = st.one_of(
    st.sampled_from(_CLASS_CHARS).map(lambda c: "\\" + c if c in "{}/." else c),
    st.tuples(st.sampled_from("ab0_é"), st.sampled_from("ab0_é")).map(sorted).map(
        lambda p: f"{p[0]}-{p[1]}"),
    st.sampled_from(_ESCAPES),
)
_atom = st.one_of(
    st.sampled_from(_ALPHABET).map(
        lambda c: (_LITERAL[c], _LITERAL[c] if c != "/" else "/", lambda rnd: c)),
    st.just(".").map(_same),
    st.sampled_from(_ESCAPES).map(_same),
    st.builds(_class, st.lists(_class_item, min_size=1, max_size=3), st.booleans()),
)
_QUANTS = {"*": (0, 3), "+": (1, 3), "?": (0, 1), "{2}": (2, 2), "{0,}": (0, 3),
           "{1,2}": (1, 2), "{0,1}": (0, 1)}


def _compose(children):
    def group(x, kind):
        ecma, py = {"cap": ("(", "("), "non": ("(?:", "(?:"), "named": ("(?<@>", "(?P<@>")}[kind]
        return ecma + x[0] + ")", py + x[1] + ")", x[2]

    def quantify(x, q):
        lo, hi = _QUANTS[q]
        return (f"(?:{x[0]}){q}", f"(?:{x[1]}){q}",
                lambda rnd: "".join(x[2](rnd) for _ in range(rnd.randint(lo, hi))))

    def sequence(xs):
        return ("".join(f"(?:{x[0]})" for x in xs), "".join(f"(?:{x[1]})" for x in xs),
                lambda rnd: "".join(x[2](rnd) for x in xs))

    def choice(xs):
        return ("|".join(x[0] for x in xs), "|".join(x[1] for x in xs),
                lambda rnd: rnd.choice(xs)[2](rnd))

    return (st.builds(group, children, st.sampled_from(["cap", "non", "named"]))
            | st.builds(quantify, children, st.sampled_from(sorted(_QUANTS)))
            | st.lists(children, min_size=2, max_size=3).map(sequence)
            | st.lists(children, min_size=2, max_size=3).map(choice))


def _name_groups(text):
    """Give every `@` group placeholder a unique name."""
    parts = text.split("@")
    return "".join(p + (f"g{i}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))


def _near(rnd, samples, alphabet):
    """Matching samples plus one-edit and doubled neighbours: the strings where an
    off-by-one in a bound or a class shows."""
    out = list(samples)
    for s in samples:
        i = rnd.randint(0, len(s))
        out += [s + s, s[1:], s[:-1], s[:i] + rnd.choice(alphabet) + s[i:],
                s[:i] + s[i:i + 1] + s[i:]]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(_atom, _compose, max_leaves=6), st.booleans(),
       st.lists(st.text(_ALPHABET, max_size=5), min_size=6, max_size=6),
       st.randoms(use_true_random=False))
def test_random_patterns_agree_with_python_re(node, anchored, texts, rnd):
    ecma, py, sample = node
    ecma, py = _name_groups(ecma), _name_groups(py)
    if anchored:
        ecma, py = f"^(?:{ecma})$", f"^(?:{py})$"
    r = ref(ecma)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would mean an ambiguous test pattern
        compiled = re.compile(py, re.ASCII)
    texts += _near(rnd, [sample(rnd) for _ in range(4)], _ALPHABET)
    for text in texts:
        want = compiled.fullmatch(text) is not None
        data = text.encode()
        assert r.accepts(data) == want, (ecma, text)
        if want:
            assert all(r.is_prefix(data[:i]) for i in range(len(data) + 1)), (ecma, text)


# ---- semantics ----------------------------------------------------------------------


def accepts(pattern, text):
    return ref(pattern).accepts(text.encode())


def test_one_rule_named_root():
    g = parse_regex("ab")
    assert g.root == "root" and list(g.rules) == ["root"] and g.rules["root"] == ir.literal("ab")


def test_dot_excludes_line_terminators_only():
    r = ref(".")
    for c in "a\té😀\x00\x7f\u0085\U0010FFFF":
        assert r.accepts(c.encode()), repr(c)
    for c in "\n\r\u2028\u2029":
        assert not r.accepts(c.encode()), repr(c)


def test_ecma_class_escapes():
    spaces = "\t\n\x0b\x0c\r \u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
    not_spaces = "a_\u0085\u180e\u200b\x1c"
    s, big_s = ref(r"\s"), ref(r"\S")
    for c in spaces:
        assert s.accepts(c.encode()) and not big_s.accepts(c.encode()), hex(ord(c))
    for c in not_spaces:
        assert not s.accepts(c.encode()) and big_s.accepts(c.encode()), hex(ord(c))
    assert accepts(r"\d+", "0123456789") and not accepts(r"\d", "\u0663")
    assert accepts(r"\w+", "azAZ09_") and not accepts(r"\w", "é") and accepts(r"\W", "é")
    assert accepts(r"\D", "\u0663") and not accepts(r"\D", "5")
    assert accepts(r"[^\d\s]", "x") and not accepts(r"[^\d\s]", "\u3000")
    assert accepts(r"[\D]", "x") and not accepts(r"[\D]", "7")


@pytest.mark.parametrize("pattern,text", [
    (r"\t\n\r\f\v\0", "\t\n\r\f\v\0"), (r"\x41\u00e9", "Aé"), (r"\u{1F600}\u{41}", "😀A"),
    (r"\uD83D\uDE00", "😀"), (r"\cJ\cj", "\n\n"), (r"[\b]", "\b"), (r"[\cA-\cC]", "\x02"),
    (r"\.\*\+\?\(\)\[\]\{\}\|\/\\\^\$\-", ".*+?()[]{}|/\\^$-"), (r"[\]\-\\^]+", "]-\\^"),
    ("é😀", "é😀"), (r"[é-ë]", "ê"), (r"[😀-😂]", "😁"), ("[]a|b", "b"), ("[^]", "\n"),
    ("[-a]", "-"), ("[a-]", "-"), ("[a-b-c]", "-"), ("[--/]", "."),
    # Annex B: a brace that does not start a quantifier is a literal.
    ("a{", "a{"), ("a{1", "a{1"), ("a{,2}", "a{,2}"), ("x{}", "x{}"), ("a{1,2x}", "a{1,2x}"),
    ("a}", "a}"), ("]", "]"), ("{", "{"), ("a{1,}", "aaaa"), ("a{0}b", "b"),
    # Anchors at the very ends are accepted and ignored; groups of every kind.
    ("^abc$", "abc"), ("^$", ""), ("^", ""), ("$", ""), ("^a|b$", "b"),
    ("(?<year>\\d{4})-(?P<m>\\d\\d)", "2024-05"), ("(a)(?:b)", "ab"), ("(|a)", ""),
])
def test_accepted(pattern, text):
    assert accepts(pattern, text)


@pytest.mark.parametrize("pattern,text", [
    ("[]", ""), ("[]a|b", "a"), ("a{2}", "aaa"), ("a{2,3}", "a"), ("a{0}b", "ab"),
    ("[^a]", "a"), ("[a-b-c]", "b-"), ("a?", "aa"), ("a+", ""), ("(?:ab)*", "aba"),
    ("\\0", "0"), ("a|b", "ab"), ("^abc$", "abc\n"),
])
def test_rejected(pattern, text):
    assert not accepts(pattern, text)


def test_prefixes():
    r = ref("abc|abd|x{3}")
    assert r.is_prefix(b"") and r.is_prefix(b"ab") and r.is_prefix(b"xx")
    assert not r.is_prefix(b"ac") and not r.is_prefix(b"xxxx") and not r.is_prefix(b"abcd")
    assert r.next_bytes(b"ab") == {ord("c"), ord("d")}
    r = ref("[é😀]+")
    assert r.is_prefix("é😀".encode()[:-1]) and not r.is_prefix(b"\xc3\x00")
    assert r.next_bytes(b"") == {0xC3, 0xF0}
    assert not ref("[]").is_prefix(b"") and not ref("a[]").is_prefix(b"a")


# ---- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("pattern,column,words", [
    ("(?=a)", 1, "lookaround"), ("a(?!b)", 2, "lookaround"), ("(?<=a)b", 1, "lookaround"),
    ("(?<!a)b", 1, "lookaround"),
    ("(a)\\1", 4, "backreference"), ("(?<n>a)\\k<n>", 8, "backreference"),
    ("(?P<n>a)(?P=n)", 9, "backreference"),
    ("a*?", 3, "lazy"), ("a+?", 3, "lazy"), ("a??", 3, "lazy"), ("a{2,}?", 6, "lazy"),
    ("a*+", 3, "possessive"), ("a{2}+", 5, "possessive"),
    ("*a", 1, "nothing to repeat"), ("a|*", 3, "nothing to repeat"),
    ("(+)", 2, "nothing to repeat"), ("{2}", 1, "nothing to repeat"),
    ("^*", 2, "nothing to repeat"), ("a**", 3, "nothing to repeat"),
    ("a^b", 2, "'^'"), ("(^a)", 2, "'^'"), ("a$b", 2, "'$'"), ("(a$)", 3, "'$'"), ("a$$", 2, "'$'"),
    ("(a", 1, "missing ')'"), ("((a)", 1, "missing ')'"), ("a)", 2, "unmatched ')'"),
    ("a{3,2}", 2, "out of order"), ("[b-a]", 2, "out of order"), ("[\\d-z]", 2, "class escape"),
    ("[a-\\w]", 2, "class escape"), ("[abc", 1, "unterminated"),
    ("(?i)a", 1, "flags"), ("(?i:a)", 1, "flags"), ("(?#c)", 1, "flags"),
    ("a\\p{Script=Greek}", 2, "'Script=Greek'"), ("[x\\P{scx=Latn}]", 3, "'scx=Latn'"),
    ("\\p{Alphabetic}", 1, "'Alphabetic' is not supported"), ("\\p{Emoji}", 1, "'Emoji'"),
    ("\\p{letter}", 1, "'letter'"), ("\\p{White_Space}", 1, "'White_Space'"), ("\\p{gc}", 1, "'gc'"),
    ("\\p{Script=Lu}", 1, "'Script=Lu'"), ("\\p{}", 1, "property"), ("\\pL", 1, "{name}"),
    ("a\\P{L", 2, "{name}"), ("[a-\\p{L}]", 2, "class escape"),
    ("a\\b", 2, "word boundary"), ("\\B", 1, "word boundary"),
    ("\\q", 1, "unknown escape"), ("\\é", 1, "unknown escape"), ("ab\\", 3, "backslash"),
    ("\\x4", 1, "hex digits"), ("\\u12", 1, "hex digits"), ("\\u{110000}", 1, "\\u{"),
    ("\\u{}", 1, "\\u{"), ("\\uD800", 1, "surrogate"), ("\\uDE00\\uD83D", 1, "surrogate"),
    ("\\c1", 1, "letter"), ("\\01", 1, "octal"),
    ("(?<a>x)(?<a>y)", 8, "duplicate group name"), ("(?<1a>x)", 1, "group name"),
    ("(?<a", 1, "group name"),
])
def test_errors_have_columns(pattern, column, words):
    with pytest.raises(GrammarError) as info:
        parse_regex(pattern)
    err = info.value
    assert (err.line, err.column) == (1, column), err
    assert words in err.message, err


# ---- Unicode property escapes ---------------------------------------------------------------
# General_Category values and their aliases as Unicode's PropertyValueAliases.txt lists them.
GC_ALIASES = {
    "C": ["Other"], "Cc": ["Control", "cntrl"], "Cf": ["Format"], "Cn": ["Unassigned"], "Co": ["Private_Use"],
    "Cs": ["Surrogate"], "L": ["Letter"], "LC": ["Cased_Letter"], "Ll": ["Lowercase_Letter"],
    "Lm": ["Modifier_Letter"], "Lo": ["Other_Letter"], "Lt": ["Titlecase_Letter"], "Lu": ["Uppercase_Letter"],
    "M": ["Mark", "Combining_Mark"], "Mc": ["Spacing_Mark"], "Me": ["Enclosing_Mark"], "Mn": ["Nonspacing_Mark"],
    "N": ["Number"], "Nd": ["Decimal_Number", "digit"], "Nl": ["Letter_Number"], "No": ["Other_Number"],
    "P": ["Punctuation", "punct"], "Pc": ["Connector_Punctuation"], "Pd": ["Dash_Punctuation"],
    "Pe": ["Close_Punctuation"], "Pf": ["Final_Punctuation"], "Pi": ["Initial_Punctuation"],
    "Po": ["Other_Punctuation"], "Ps": ["Open_Punctuation"], "S": ["Symbol"], "Sc": ["Currency_Symbol"],
    "Sk": ["Modifier_Symbol"], "Sm": ["Math_Symbol"], "So": ["Other_Symbol"], "Z": ["Separator"],
    "Zl": ["Line_Separator"], "Zp": ["Paragraph_Separator"], "Zs": ["Space_Separator"],
}
# ASCII, Latin-1, Bengali and Arabic-Indic digits, CJK, Hangul, astral letters and symbols, marks,
# private use, unassigned (BMP, plane 5, the last code point), noncharacters, format characters.
SAMPLES = ("\x00\x1f 09AZaz_!$^(-\x7f\xa0\xaa\xad\xb2\xbd\xd7\xe9\u01c5\u02b0\u0300\u0345\u0378\u0488"
           "\u0663\u0903\u09ea\u2028\u2029\u2160\u24b6\u3000\u4e2d\uac00\ue000\ufdd0\ufeff\ufffe"
           "\U0001d400\U0001f600\U00030000\U00050000\U000e0001\U000e0100\U000ffffd\U0010ffff")


def _members(short):
    if short == "LC":
        return {"Lu", "Ll", "Lt"}
    return {c for c in GC_ALIASES if len(c) == 2 and c.startswith(short)}


def _gc_spellings(short):
    names = [short, *GC_ALIASES[short]]
    return names + [f"gc={names[-1]}", f"General_Category={short}"]


def test_property_names_cover_every_general_category_alias():
    for short in GC_ALIASES:
        for name in _gc_spellings(short):
            assert regex_module._property_key(name) == ("gc", short), name
    for name in ["l", "LETTER", "Lu ", "gc=L=L", "sc=Latn", "Script=Latin", "Alphabetic", "IDS", "ID_Start"]:
        assert regex_module._property_key(name) is None, name


def test_general_category_ranges_are_exact():
    """Every code point, against unicodedata (the scan skips planes 4-13: checked here too)."""
    expected = list(map(unicodedata.category, map(chr, range(sys.maxunicode + 1))))
    assert set(expected[0x40000:0xE0000]) == {"Cn"}
    got = [""] * len(expected)
    for short in GC_ALIASES:
        if len(short) == 2:
            for lo, hi in regex_module._gc_ranges(short):
                got[lo : hi + 1] = [short] * (hi - lo + 1)
    assert got == expected
    for short in ["C", "L", "LC", "M", "N", "P", "S", "Z"]:
        members = set(_members(short))
        want = ir.normalize_ranges((c, c) for c, cat in enumerate(expected) if cat in members)
        assert regex_module._gc_ranges(short) == want, short


@pytest.mark.parametrize("short", ["L", "Lu", "Ll", "LC", "Nd", "N", "P", "Ps", "S", "Sm", "Z", "Zs", "M", "Mn",
                                   "C", "Cn", "Co", "Cf"])
def test_property_escapes_match_categories(short):
    members = _members(short) or {short}
    for name in _gc_spellings(short)[:2]:
        pos, neg = ref(f"\\p{{{name}}}"), ref(f"\\P{{{name}}}")
        in_class, negated_class = ref(f"[\\p{{{name}}}]"), ref(f"[^\\p{{{name}}}]")
        for c in SAMPLES:
            want = unicodedata.category(c) in members
            data = c.encode()
            assert pos.accepts(data) == want == in_class.accepts(data), (name, hex(ord(c)))
            assert neg.accepts(data) != want != negated_class.accepts(data), (name, hex(ord(c)))


def test_property_escapes_in_classes():
    assert accepts(r"^[\p{L}\d]+$", "aé5中\U0001d400") and not accepts(r"[\p{L}\d]", "\u09ea")
    assert accepts(r"\p{digit}+", "42\u09ea\u09e8") and not accepts(r"\p{digit}", "-")
    assert accepts(r"[^\p{Nd}]", "a") and not accepts(r"[^\p{Nd}]", "\u09ea") and not accepts(r"[^\p{Nd}]", "7")
    assert accepts(r"[^\P{Lu}]", "\U0001d400") and not accepts(r"[^\P{Lu}]", "a")
    assert accepts(r"[\P{L}x]", "x") and accepts(r"[\P{L}x]", "1") and not accepts(r"[\P{L}x]", "y")
    assert accepts(r"\p{Letter}cole", "\xe9cole") and not accepts(r"\p{Letter}cole", "\xc9COLE")
    assert not accepts(r"\p{Cs}", "a") and accepts(r"[^\p{Cs}]", "\U0010ffff") and accepts(r"\P{Cs}", "\ud7ff")


def test_binary_properties():
    cases = {
        "Any": lambda c: True, "ASCII": lambda c: c < "\x80",
        "Assigned": lambda c: unicodedata.category(c) != "Cn",
        "ASCII_Hex_Digit": lambda c: c in "0123456789ABCDEFabcdef", "Lowercase": str.islower,
        "Uppercase": str.isupper, "XID_Start": lambda c: c != "_" and c.isidentifier(),
        "XID_Continue": lambda c: ("a" + c).isidentifier(),
        "Noncharacter_Code_Point": lambda c: 0xFDD0 <= ord(c) <= 0xFDEF or ord(c) & 0xFFFE == 0xFFFE,
    }
    for name, test in cases.items():
        short = regex_module._BINARY[name]
        for spelling in {name, short}:
            pos, neg = ref(f"\\p{{{spelling}}}"), ref(f"[\\P{{{spelling}}}]")
            for c in SAMPLES + "\u2118\u309b\u1885":
                assert pos.accepts(c.encode()) == test(c) != neg.accepts(c.encode()), (spelling, hex(ord(c)))
    assert regex_module._binary_ranges("Assigned") == ir.negate_ranges(regex_module._gc_ranges("Cn"), 0x10FFFF)


def test_property_classes_are_shared_and_others_unchanged():
    # one expression per property, whatever the spelling: its parts are shared by all the grammars using it
    assert parse_regex(r"\p{L}").rules["root"].items[1] is parse_regex(r"\p{gc=Letter}").rules["root"].items[1]
    # classes without a property escape keep their flat form (and so every existing grammar)
    flat = ir.char_class([(0x61, 0x7A), (0xE9, 0xEB), (0x1F600, 0x1F600)])
    assert parse_regex("[a-zé-ë😀]").rules["root"] == flat


@pytest.mark.parametrize("pattern", [r"(?:a{2,}){3,5}", r"(?:a{3,})*b", r"(?:ab{2,}){2,}", r"a*a+a{2,5}",
                                     r"(?:(?:a|b){2,})+c", r"(?:a{2,}){0,3}", r"(?:a+)?", r"(?:b*){2}a{1,2}a*",
                                     # bounded inside: one range of counts (folded) or not (kept)
                                     r"(?:a{1,3}){2,}", r"(?:a{2,3}){0,}", r"(?:a{2,3}){1,3}", r"(?:a{3,4}){2,}",
                                     r"(?:a{0,0}){3,}", r"(?:(?:ab?){0,2}){2}", r"(?:a{2,5}){0,2}b", r"(?:a{4,5})+",
                                     # a copy beside an unbounded repetition of it joins it
                                     r"a(?:a){2,}b", r"(?:a(?:a){3,}){2}", r"a{3,}a", r"ab(?:ab)*c?"])
def test_folded_repetitions_keep_the_language(pattern):
    """Nested or adjacent unbounded repetitions are folded into one (ir.folded_repeat): the
    language is Python's on every string over {a, b, c} up to 9 characters."""
    import itertools

    reference, compiled = ref(pattern), re.compile(pattern)
    for n in range(10):
        for chars in itertools.product("abc", repeat=n):
            text = "".join(chars)
            assert reference.accepts(text.encode()) == (compiled.fullmatch(text) is not None), (pattern, text)


def test_nested_unbounded_repetitions_are_one():
    """The fuzz findings that kept a parser frame per split point are one repetition now."""
    for pattern, least in [(r"(?:[^]){16,}(?:(?:[^]){100001,})+", 100017), (r"(((([^a]){5,})){8,1000})", 40),
                           (r"(?:(?:\s){100,}){100,}", 10000), (r"(?:(?:(?:[^]){1,100001}){3,}){3,}", 9)]:
        root = parse_regex(pattern).rules["root"]
        assert type(root) is ir.Repeat and (root.min, root.max) == (least, None), pattern


@pytest.mark.parametrize("pattern", [r"(?:x|y*){3,40}", r"(?:x?y?){2,}x", r"(?:(?:x|)y*){0,9}", r"(?:x*y*){4,6}y",
                                     r"(?:x|y|){1,7}", r"(?:(?:xy?){0,2}){2,30}"])
def test_outlined_nullable_items_keep_the_language(pattern, monkeypatch):
    """A repeated item moved into a rule of its own (here every one: OUTLINE_NODES 0) loses its
    empty string when it has one, and the repetition its lower bound (regex._outline_repeated): the
    language is Python's on every string over {x, y} up to 6 characters."""
    import itertools

    monkeypatch.setattr(regex_module, "OUTLINE_NODES", 0)
    grammar, compiled = parse_regex(pattern), re.compile(pattern)
    assert any(type(body) is not ir.Repeat and name != "root" for name, body in grammar.rules.items())
    reference = Reference(grammar)
    for n in range(7):
        for chars in itertools.product("xy", repeat=n):
            text = "".join(chars)
            assert reference.accepts(text.encode()) == (compiled.fullmatch(text) is not None), (pattern, text)


def test_an_outlined_nullable_item_does_not_chain_empty_calls():
    """The fuzz finding: (\\p{L}|a*){16,100001} called its item rule 16 to 100,001 times at each position
    with nothing read; its first mask took minutes. Now the rule reads at least one character."""
    grammar = parse_regex(r"(?:\p{L}|(?:a)*){16,100001}")
    root = grammar.rules["root"]
    assert type(root) is ir.Repeat and (root.min, root.max) == (0, 100001) and type(root.item) is ir.Ref
    assert ir.nullable(grammar.rules[root.item.name]) is False


def test_a_class_spelled_5000_times_is_one_rule_called_5000_times(compiler):
    """A fuzz finding (seed 21): `[\\p{L}\\d]` written 5,000 times built its byte trie 5,000 times
    and inlined every copy, then was refused after 23 s ("more than 2,000,000 automaton nodes").
    The class is one shared expression now, and an item the pattern uses again and again is a
    rule of its own, which each use calls."""
    from trellis.grammar import GrammarMatcher

    grammar = parse_regex(r"[\p{L}\d]" * 5000)
    assert sum(type(item) is ir.Ref for item in grammar.rules["root"].items) == 5000
    m = GrammarMatcher(compiler.compile_regex(r"[\p{L}\d]" * 5000))
    assert m.accept_string("é1a" * 1666 + "Ω7") and m.can_terminate()
    assert not m.accept_string("x")
    assert not GrammarMatcher(compiler.compile_regex(r"[\p{L}\d]" * 500)).accept_string("a" * 499 + " ")


def test_quantifier_bounds_with_thousands_of_leading_zeros():
    """A fuzz finding: `int()` of more than 4,300 digits raises ValueError, zeros included."""
    from trellis.errors import GrammarLimitError

    zeros = "0" * 5000
    root = parse_regex(f"a{{{zeros}3,{zeros}5}}").rules["root"]
    assert type(root) is ir.Repeat and (root.min, root.max) == (3, 5)
    with pytest.raises(GrammarLimitError, match="exceeds the limit"):
        parse_regex(f"a{{{zeros}9{zeros}}}")
    with pytest.raises(GrammarError):
        parse_regex("a{0,0000:a{0,0000:a{0," + "0" * 4313 + "})")

"""The native regex front-end and json_schema/_text.py's patterns and formats
(kernels/grammar/src/schema/regex.*, patterns.*) against the Python: the same calls must
serialize to the same words, and where the Python raises the port must decline.

- regex_expr, pattern_expr, pattern_search_expr and regex_min_max_length on every `pattern` and
  `patternProperties` key of the MaskBench dev schemas and of the JSON Schema Test Suite;
  pattern_search of those patterns against the property names beside them and other texts;
- format_expr of every `format` value there (FORMATS, REFUSED_FORMATS, "regex", unknown ones),
  the FORMATS regexes as text, full_regex_expr(BASE64), checked_format of CHECKED_FORMATS;
- every Unicode property escape the Python supports, in and out of classes, negated, and under
  another Unicode version (declined);
- random patterns (tests/grammar/fuzz/generators.py's regex strategy) and hostile ones: groups
  nested 10,000 deep, quantifier bounds around ir.MAX_COUNT, lone surrogates, malformed escapes.

The Python side runs under ir.nesting_guard(NESTING_FRAMES), as inside the converter. The probe
(regex_probe.cpp, format in its header) is one of probes.py's library.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import random
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trellis.grammar import ir, regex
from trellis.grammar.json_schema import _text

from .probes import library, taken

HERE = Path(__file__).resolve().parent
MASKBENCH = HERE.parents[2].parent / "shared" / "data" / "maskbench-dev.jsonl.gz"
SUITE = HERE.parents[2].parent / "shared" / "data" / "json-schema-test-suite"
VERSION = unicodedata.unidata_version


@pytest.fixture(scope="module")
def probe():
    lib = library()
    lib.regex_probe_run.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.regex_probe_run.restype = ctypes.c_void_p

    def run(programs: list, fresh: bool = False, version: str = VERSION) -> list:
        data = json.dumps({"fresh": fresh, "version": version, "programs": programs}).encode()
        answer = taken(lib.regex_probe_run(data, len(data)))
        assert answer is not None, "the probe could not read its programs"
        return answer

    return run


# ---- the Python side of the probe's programs ------------------------------------------------

RAISED = "raised"


def _words(expr: ir.Expr, rules: dict | None = None) -> dict:
    words, names = ir.serialize(ir.Grammar({"root": expr, **(rules or {})}))
    return {"words": list(words), "names": names}


def _expr(program: dict):
    op = program["op"]
    if op == "regex":
        return regex.regex_expr(program["pattern"])
    if op == "pattern":
        return _text.pattern_expr(program["pattern"], "")
    if op == "search":
        return _text.pattern_search_expr(program["pattern"], "")
    if op == "full":
        return _text.full_regex_expr(program["pattern"])
    assert op == "format"
    return _text.format_expr(program["name"], "")


def py_run(program: dict):
    """What the probe answers for `program`, or RAISED where the Python raises."""
    op = program["op"]
    try:
        with ir.nesting_guard("the test", ir.NESTING_FRAMES):  # as inside the converter
            if op == "match":
                out = []
                for text in program["texts"]:
                    try:
                        out.append(int(_text.pattern_search(program["pattern"], text, "")))
                    except Exception:
                        out.append(RAISED)
                return out
            if op == "checked":
                expr, rules = _text.checked_format(program["name"])
                return _words(expr, rules)
            if op == "lengths":
                expr = _expr(program["of"])
                item = _text.regex_min_max_length(expr.item) if type(expr) is ir.Repeat else None
                return [list(_text.regex_min_max_length(expr)), list(item) if item else None]
            expr = _expr(program)
            return {"none": True} if expr is None else _words(expr)
    except Exception:
        return RAISED


class Tally:
    """Counts of a comparison: identical, declined where the Python works, refused by both."""

    def __init__(self):
        self.same = self.declined = self.refused = 0
        self.declines: list = []

    def __repr__(self):
        return f"{self.same} identical, {self.refused} refused by both, {self.declined} declined by the port only"


def compare(probe, programs: list, tally: Tally | None = None, fresh: bool = False) -> Tally:
    """Runs `programs` on both sides: identical answers, or the port declines (always where the
    Python raises); a match answers -1 where it declines."""
    tally = tally or Tally()
    native = probe(programs, fresh=fresh)
    for program, got in zip(programs, native):
        want = py_run(program)
        if program["op"] == "match":
            for text, w, g in zip(program["texts"], want, got):
                if w == RAISED:
                    assert g == -1, (program["pattern"], text, "the Python raises")
                    tally.refused += 1
                elif g == -1:
                    tally.declined += 1
                    tally.declines.append((program["pattern"], text))
                else:
                    assert g == w, (program["pattern"], text)
                    tally.same += 1
            continue
        declined = isinstance(got, dict) and ("declined" in got or "error" in got)
        if program["op"] == "lengths" and want != RAISED and isinstance(got, list):
            declined = got[0] is None  # past int64
        if want == RAISED:
            assert declined, (program, "the Python raises, the port answered", got)
            tally.refused += 1
        elif declined:
            tally.declined += 1
            tally.declines.append((program, got))
        else:
            assert got == want, program
            tally.same += 1
    return tally


# ---- the corpus -----------------------------------------------------------------------------


def _walk(schema, found: dict) -> None:
    stack = [schema]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if isinstance(x.get("pattern"), str):
                found["patterns"].add(x["pattern"])
            if isinstance(x.get("patternProperties"), dict):
                found["patterns"].update(x["patternProperties"])
                names = list(x.get("properties", {})) if isinstance(x.get("properties"), dict) else []
                for p in x["patternProperties"]:
                    found["keys"].setdefault(p, set()).update(names)
            if "format" in x and isinstance(x["format"], str):
                found["formats"].add(x["format"])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


@pytest.fixture(scope="module")
def corpus() -> dict:
    found = {"patterns": set(), "formats": set(), "keys": {}}
    with gzip.open(MASKBENCH, "rt") as f:
        for line in f:
            schema = json.loads(line)["schema"]
            _walk(json.loads(schema) if isinstance(schema, str) else schema, found)
    for path in sorted(SUITE.rglob("*.json")):
        try:
            groups = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        _walk(groups, found)
        for group in groups if isinstance(groups, list) else []:  # the instances' keys: texts to match
            for test in group.get("tests", []) if isinstance(group, dict) else []:
                if isinstance(test, dict) and isinstance(test.get("data"), dict):
                    found["keys"].setdefault(None, set()).update(test["data"])
    return found


# ---- tests ----------------------------------------------------------------------------------


def test_unicode_tables_are_generated(probe):
    from tests.grammar.native_schema import gen_regex_unicode

    assert probe([{"op": "version"}]) == [VERSION], "regenerate regex_unicode.inc (gen_regex_unicode.py)"
    assert gen_regex_unicode.OUT.read_text() == gen_regex_unicode.generate()


def test_format_regexes(probe):
    names = list(_text.FORMATS)
    assert probe([{"op": "format_regex", "name": None}]) == [[*names, _text.BASE64]]
    assert probe([{"op": "format_regex", "name": n} for n in names]) == [_text.FORMATS[n] for n in names]


def test_formats(probe):
    names = [*_text.FORMATS, *_text.REFUSED_FORMATS, "regex", "unknown", "", "Date", "date "]
    programs = [{"op": "format", "name": n} for n in names]
    programs += [{"op": "lengths", "of": {"op": "format", "name": n}} for n in _text.FORMATS]
    programs += [{"op": "full", "pattern": _text.BASE64}, {"op": "lengths", "of": {"op": "full", "pattern": _text.BASE64}}]
    programs += [{"op": "checked", "name": n} for n in _text.CHECKED_FORMATS]
    tally = compare(probe, programs)
    assert tally.declined == 0, tally.declines
    assert tally.refused == 3  # idn-email, idn-hostname, regex
    compare(probe, programs, fresh=True)


def test_corpus_patterns_and_formats(probe, corpus):
    patterns = sorted(corpus["patterns"])
    programs = []
    for p in patterns:
        programs += [{"op": op, "pattern": p} for op in ("regex", "pattern", "search")]
        programs.append({"op": "lengths", "of": {"op": "pattern", "pattern": p}})
    programs += [{"op": "format", "name": n} for n in sorted(corpus["formats"])]
    tally = compare(probe, programs)
    print(f"{len(patterns)} patterns, {len(corpus['formats'])} formats: {tally}")
    assert len(patterns) > 1800 and tally.same > 7000
    # declined only where the Python works but nests past the port's bound: none in real schemas
    assert tally.declined == 0, tally.declines[:5]


def test_corpus_pattern_search(probe, corpus):
    rng = random.Random(7)
    every = sorted(corpus["keys"].pop(None, set()), key=repr)
    extra = ["", "x-foo", "FOO1", "日本😀", "a\nb", "\ud800", "_$1.2"]
    programs = []
    for p in sorted(corpus["patterns"]):
        texts = sorted(corpus["keys"].get(p, ()))[:10] + rng.sample(every, min(5, len(every))) + extra
        programs.append({"op": "match", "pattern": p, "texts": texts})
    tally = compare(probe, programs)
    print(f"pattern_search: {tally}")
    assert tally.same > 20000 and tally.declined == 0, tally.declines[:5]


def test_property_escapes(probe):
    names = set(regex._GC_NAMES) | set(regex._BINARY_NAMES)
    names |= {f"gc={v}" for v in regex._GC_NAMES} | {f"General_Category={v}" for v in ("L", "Lu", "Letter", "Nd")}
    names |= {"Script=Greek", "gc=Any", "Lu=", "lu", "L&", "", "ASCII ", "Cased"}
    programs = []
    for n in sorted(names):
        for p in (f"\\p{{{n}}}", f"\\P{{{n}}}", f"[\\p{{{n}}}\\d]", f"[^\\P{{{n}}}a-z]", f"\\p{{{n}}}+x"):
            programs.append({"op": "regex", "pattern": p})
    tally = compare(probe, programs)
    assert tally.declined == 0 and tally.same > 500, tally
    # another Unicode version: declined, never other classes
    other = probe([{"op": "regex", "pattern": "\\p{L}"}, {"op": "regex", "pattern": "[a\\d]"}], version="13.0.0")
    assert "declined" in other[0] and other[1] == py_run({"op": "regex", "pattern": "[a\\d]"})


def _nest(inner: str, depth: int, left: str, right: str) -> str:
    return left * depth + inner + right * depth


HOSTILE = [
    _nest("a", 10000, "(", ")"), _nest("a", 10000, "(?:", ")"), _nest("a", 10000, "(a|", ")"),
    _nest("a", 10000, "(?:", ")*"), _nest("a", 10000, "(?:", "b)?"), _nest("a", 10000, "(?:x|", "y)"),
    _nest("a", 300, "(?:x|", "y)"), _nest("a", 100, "(?:x|", "y)+"), _nest("a", 10000, "(", ""),
    _nest("a", 10000, "", ")"), _nest("a", 10000, "[", ""), "(" * 400 + "a",
    "a{1,100000}", "(?:ab){1,100000}", "[a-z]{100000}", "a{2147483647}", "a{2147483648}", "a{0,2147483647}",
    "a{99999999999}", "ab{" + "9" * 5000 + "}", "a{" + "0" * 5000 + "1}", "(?:a{2147483647}){2}",
    "(?:a{65536}){65536}", "(?:a{1,2}){2147483647}", "(?:a*){3,}", "a{3,2}", "a{,5}", "{", "a{", "a{1", "a{1,",
    "\ud800", "a\ud83d", "[\udc00]", "(?<\ud800>a)", "\\p{\ud800}", "\\u{D800}", "\\uD800", "\\uDC00x",
    "\\uD83D\\uDE00", "\\uD83D\\u{DE00}", "\\uD83D\\uZZZZ", "\\ud83d\\ude00{2}",
    "\\q", "\\c1", "\\c", "\\x4", "\\xZZ", "\\u12", "\\u{}", "\\u{110000}", "\\u{0000000041}", "\\u{" + "0" * 5000 + "}",
    "\\1", "\\k<n>", "\\k", "\\b", "\\B", "\\01", "\\0", "\\", "a\\", "[\\b\\-]", "[\\B]", "\\/", "\\ ", "\\é", "\\_",
    "(?<n>a)(?<n>b)", "(?<1a>x)", "(?<$a>x)(?<a$>y)", "(?<a", "(?P<a>x)", "(?P=a)", "(?=a)", "(?!a)", "(?<=a)",
    "(?<!a)", "(?i)a", "(?", "(", ")", "a)", "(a", "a|", "|", "", "^", "$", "^$", "a$b", "^a^", "(a$)", "a*?",
    "a+?", "a??", "a{2}?", "a++", "*", "+a", "?", "{1}", "[]", "[^]", "[z-a]", "[\\d-z]", "[a-\\d]", "[a-]",
    "[-a]", "[a", "[\\", "\\p{L", "\\pL", "\\p", ".*" * 2000, "(?:.{16,})+", "(a|b*){16,100001}",
    "\x00", "a\x00b", "[\x00-\x1f]", "[\\x00-\\uFFFF]", "[\\u{10000}-\\u{10FFFF}]", "é+", "😀{3}",
    # group names beyond ASCII (str.isidentifier), digits beyond ASCII (_drop_lazy's isdigit)
    "(?<é>a)", "(?<日本>a)", "(?<a·b>x)", "(?<℘>x)", "(?<_>x)", "(?<$>x)", "(?<a\u0301>x)", "(?<１>x)",
    "(?<a１>x)", "(?<ª>x)", "(?<😀>x)", "a{١}?", "a{1,²}?", "a{1,2}??", "x{,}?", "a{1}?b|c{2,}?", "(??)", "[a-z]+?",
    "".join(f"(?<n{k}>x)" for k in range(20000)), "".join(f"(?<n{k % 19999}>x)" for k in range(20000)),
]


# Matched too: the Python takes seconds to refuse a search automaton past its budget.
SLOW_TO_MATCH = ("2147483647", "65536", "100001", "(a|(a|")


def test_hostile_patterns(probe):
    programs = []
    for p in HOSTILE:
        programs += [{"op": op, "pattern": p} for op in ("regex", "pattern")]
        if not any(s in p for s in SLOW_TO_MATCH):
            programs.append({"op": "match", "pattern": p, "texts": ["", "a", "ab", "aaa", "\ud800", "a" * 4001]})
    tally = compare(probe, programs, fresh=True)
    print(f"hostile: {tally}")
    assert tally.refused > 500 and tally.same > 250


# Regex syntax shaken: the parser's corners (escapes cut short, braces that are not quantifiers,
# names, ranges, anchors inside) rather than well-formed patterns.
SOUP = st.lists(st.sampled_from(list("()[]{}|\\^$.*+?-,:=!<>_Pp0129adkuxcDWSbB ") + [
    "é", "😀", "\ud800", "\u2028", "\\u{", "\\p{L}", "{2,3}", "(?<", "\\x4"]), max_size=14).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_random_patterns(probe, data):
    from tests.grammar.fuzz.generators import UNICODE_TEXT, _regex_expr

    pattern = data.draw(st.one_of(_regex_expr(), SOUP))
    if data.draw(st.integers(0, 9)) == 0:
        pattern = _nest(pattern, data.draw(st.sampled_from([2, 10, 60, 300])),
                        data.draw(st.sampled_from(["(", "(?:", "(a|"])), ")")
    if data.draw(st.booleans()):
        pattern = "^" + pattern + "$"
    texts = data.draw(st.lists(UNICODE_TEXT, max_size=4))
    programs = [{"op": op, "pattern": pattern} for op in ("regex", "pattern", "search")]
    programs += [{"op": "lengths", "of": {"op": "pattern", "pattern": pattern}},
                 {"op": "match", "pattern": pattern, "texts": texts + ["a", "ab1é😀"]}]
    compare(probe, programs, fresh=data.draw(st.booleans()))

"""The native port of json_schema/_text.py and _string_schema.py's counted strings
(kernels/grammar/src/schema/text.*) against the Python: the same constructions must serialize to
the same words and rule names.

- string_literal on every property name, key and string enum/const value of the MaskBench dev
  schemas and on random strings (controls, quotes, backslashes, BMP and astral characters, lone
  surrogates, which both sides refuse), with both `shared` values; encode_string and escape_byte;
- ANY_CHAR, ANY_STRING, JSON_CHAR, length_expr, and json_escape on them and on random expressions
  of every kind it maps;
- string bodies of {"type": "string"} with minLength/maxLength from a grid (lo > hi included)
  on a host whose rules and counter are the Converter's (checked against the real converter),
  and random runs of string bodies and counted character classes through one host (the rules of
  characters shared, fresh names, the rule limit).

The probe (text_probe.cpp, format in its header) is built under build/native_schema with the
zig toolchain when a source changed.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from trellis.errors import GrammarError, SchemaLimitError, UnsupportedSchemaError
from trellis.grammar import ir
from trellis.grammar.json_schema import _text, json_schema_to_grammar
from trellis.grammar.json_schema._string_schema import StringSchema
from trellis.grammar.json_schema.converter import Converter

from .dev_corpus import dev_objects
from .probes import library, taken

HERE = Path(__file__).resolve().parent
GRID = (0, 1, 2, 5, 64, 65, 255, 256, 1000, 100000, 100001, None)
FULL = [[0, ir.MAX_CODE_POINT]]


@pytest.fixture(scope="module")
def probe():
    import ctypes

    lib = library()
    lib.text_probe_run.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.text_probe_run.restype = ctypes.c_void_p

    def run(programs: list) -> list:
        data = json.dumps(programs).encode()
        answer = taken(lib.text_probe_run(data, len(data)))
        assert answer is not None, "the probe could not read its programs"
        return answer

    return run


# ---- the Python side of the probe's programs ------------------------------------------------


def py_eval(e) -> ir.Expr:
    op, args = e[0], e[1:]
    if op == "seq":
        return ir.seq(*map(py_eval, args))
    if op == "alt":
        return ir.alt(*map(py_eval, args))
    if op == "rep":
        return ir.repeat(py_eval(args[0]), args[1], args[2])
    if op == "rawrep":
        return ir.Repeat(py_eval(args[0]), args[1], args[2])
    if op == "region":
        return ir.Region(py_eval(args[0]))
    if op == "esc":
        # json_escape without its cache (random expressions would push JSON_CHAR out of it)
        x = py_eval(args[0])
        return _text._escape_set(x) if isinstance(x, ir.ByteSet) else _text._escape(x, {})
    if op == "lit":
        return ir.literal(args[0])
    if op == "bytes":
        return ir.Bytes(bytes(args[0]))
    if op == "set":
        return ir.byte_set([tuple(r) for r in args[0]])
    if op == "rawset":
        return ir.ByteSet(tuple(tuple(r) for r in args[0]))
    if op == "cc":
        return ir.char_class([tuple(r) for r in args[0]], args[1])
    if op == "ref":
        return ir.Ref(args[0])
    if op == "check":
        return ir.Check(args[0])
    if op == "strlit":
        return _text.string_literal(args[0], args[1])
    if op == "encode":
        return ir.Bytes(_text.encode_string(args[0]).encode("utf-8", "surrogatepass"))
    if op == "escbyte":
        esc = _text.escape_byte(args[0])
        return ir.NOTHING if esc is None else ir.literal(esc)
    if op == "len":
        return _text.length_expr(args[0], args[1])
    return {"anychar": _text.ANY_CHAR, "anystring": _text.ANY_STRING, "jsonchar": _text.JSON_CHAR}[op]


def py_rules(program: dict) -> dict:
    try:
        rules = {name: py_eval(e) for name, e in program["rules"]}
    except (UnicodeEncodeError, GrammarError):
        return {"declined": True}
    try:
        words, names = ir.serialize(ir.Grammar(rules, program["rules"][0][0]))
    except GrammarError as e:
        return {"error": str(e)}
    return {"words": list(words), "names": names}


class Host(StringSchema):
    """The Converter's part that StringSchema uses: its rules, counter, prefix, fresh and ref."""

    draft7 = False
    fresh = Converter.fresh
    ref = Converter.ref

    def __init__(self, counter: int = 0, prefix: str = ""):
        self.rules, self.char_rules, self._refs = {}, {}, {}
        self.counter, self.prefix = itertools.count(counter), prefix

    def too_many_rules(self):
        raise SchemaLimitError("too many rules", None, "")


def length_schema(lo, hi) -> dict:
    schema = {"type": "string"}
    if lo is not None:
        schema["minLength"] = lo
    if hi is not None:
        schema["maxLength"] = hi
    return schema


def py_strings(program: dict) -> dict:
    host = Host(program["counter"], program["prefix"])
    refs = []
    for i, (lo, hi, chars) in enumerate(program["strings"]):
        try:
            if chars is None:
                body = host.string([SimpleNamespace(schema=length_schema(lo, hi), pointer="")])
            else:
                # the full range as JSON_CHAR itself: json_escape's cache gives that object only
                # while it holds it (see the report on char_rule's `is`)
                ch = _text.JSON_CHAR if chars == FULL else _text.json_escape(ir.char_class([tuple(r) for r in chars]))
                body = host.capped_count(lo or 0, hi, "", ch)
        except (UnsupportedSchemaError, SchemaLimitError, GrammarError):
            return {"declined": i}
        host.rules[f"s{i}"] = body
        refs.append(host.ref(f"s{i}"))
    host.rules["root"] = ir.alt(*refs)
    words, names = ir.serialize(ir.Grammar(host.rules, "root"))
    return {"words": list(words), "names": names}


def to_probe(program: dict) -> dict:
    """minLength None is 0 to the port (count_bounds' start)."""
    if "strings" not in program:
        return program
    return {**program, "strings": [[lo or 0, hi, chars] for lo, hi, chars in program["strings"]]}


def compare(probe, programs: list, expected: list | None = None) -> int:
    got = probe([to_probe(p) for p in programs])
    if expected is None:
        expected = [py_strings(p) if "strings" in p else py_rules(p) for p in programs]
    assert len(got) == len(programs)
    bad = [(p, want, have) for p, want, have in zip(programs, expected, got) if want != have]
    assert not bad, f"{len(bad)} of {len(programs)} differ; the first: {bad[0]}"
    return len(programs)


def rules(expr) -> dict:
    return {"rules": [["root", expr]]}


# ---- string literals ------------------------------------------------------------------------


def maskbench_strings() -> list[str]:
    """Property names, every other key, and string enum and const values, sorted."""
    out: set[str] = set()
    for x in dev_objects():
        out.update(x)
        if isinstance(x.get("properties"), dict):
            out.update(x["properties"])
        if isinstance(x.get("enum"), list):
            out.update(v for v in x["enum"] if isinstance(v, str))
        if isinstance(x.get("const"), str):
            out.add(x["const"])
    return sorted(out)


def literal_programs(strings: list[str]) -> tuple[list, list]:
    """One program per string (the port ignores `shared`), and the Python's answers for both
    values of `shared`, which must agree."""
    programs, expected = [], []
    for s in strings:
        shared, unshared = (py_rules(rules(["strlit", s, flag])) for flag in (True, False))
        assert shared == unshared, s
        programs.append(rules(["strlit", s, True]))
        expected.append(shared)
    return programs, expected


def test_string_literal_maskbench(probe):
    strings = maskbench_strings()
    assert len(strings) > 50_000 and sum(not s.isascii() for s in strings) > 100
    for k in range(0, len(strings), 8192):
        compare(probe, *literal_programs(strings[k:k + 8192]))


def random_string(rng: random.Random) -> str:
    pools = [lambda: chr(rng.randrange(0x20)), lambda: rng.choice('"\\\x7f/'), lambda: chr(rng.randrange(0x20, 0x7F)),
             lambda: chr(rng.choice([rng.randrange(0x80, 0x800), rng.randrange(0x800, 0xD800),
                                     rng.randrange(0xE000, 0x10000)])),
             lambda: chr(rng.randrange(0x10000, 0x110000))]
    chars = [rng.choice(pools)() for _ in range(rng.randrange(12))]
    if rng.random() < 0.05:  # a lone surrogate: a low one, or a high one not before a low one
        chars.insert(rng.randrange(len(chars) + 1), rng.choice(["\udc00", "\udfff", "\ud800x", "\udbff"]))
    return "".join(chars)


def test_string_literal_random(probe):
    rng = random.Random(7)
    strings = ["", "a", '"', "\\", "\x00\x1f\x7f", "é", "\uffff", "\U0010ffff", "\U0001f600", "a\u00e9b\U0009104dc",
               "\ud800", "\udfff", "x\ud83dy", *(random_string(rng) for _ in range(3000))]
    programs, expected = literal_programs(strings)
    assert sum(e == {"declined": True} for e in expected) > 50
    compare(probe, programs, expected)
    # encode_string (WTF-8 through) and escape_byte on their own
    compare(probe, [rules(["encode", s]) for s in strings])
    compare(probe, [rules(["escbyte", b]) for b in range(256)])


# ---- the constants and json_escape -----------------------------------------------------------


def test_constants(probe):
    assert _text.json_escape(_text.ANY_CHAR) is _text.JSON_CHAR
    exprs = [["anychar"], ["anystring"], ["jsonchar"], ["esc", ["anychar"]], ["esc", ["anystring"]],
             ["esc", ["jsonchar"]], ["esc", ["esc", ["anystring"]]], ["seq", ["anychar"], ["jsonchar"], ["anystring"]]]
    exprs += [["len", lo, hi] for lo, hi in [(0, None), (0, 0), (3, 3), (1, 500), (64, None)]]
    exprs += [["esc", ["len", 2, 7]], ["esc", ["cc", FULL, True]], ["esc", ["cc", [[0x22, 0x22], [0x5C, 0x5C]], True]]]
    compare(probe, [rules(e) for e in exprs])


def random_expr(rng: random.Random, depth: int = 0):
    """Expressions of every kind json_escape looks at, leaning on the bytes JSON escapes."""
    def byte():
        return rng.choice([rng.randrange(0x20), 0x22, 0x5C, rng.randrange(256), rng.randrange(0x20, 0x80)])

    def ranges(top):
        out = []
        for _ in range(rng.randrange(1, 4)):
            a = byte() if top == 255 else rng.choice([byte(), rng.randrange(top + 1)])
            out.append([a, min(top, a + rng.choice([0, 0, 1, 3, 40, 300]))])
        return out

    kinds = ["bytes", "lit", "set", "rawset", "cc", "ref", "check"] + (["seq", "alt", "rep", "rawrep", "region", "esc"]
                                                                       if depth < 4 else [])
    k = rng.choice(kinds)
    if k == "bytes":
        return ["bytes", [byte() for _ in range(rng.randrange(4))]]
    if k == "lit":
        return ["lit", random_string(rng).encode("utf-8", "replace").decode()]
    if k in ("set", "rawset"):
        return [k, ranges(255) if rng.random() < 0.9 else []]
    if k == "cc":
        return ["cc", ranges(ir.MAX_CODE_POINT), rng.random() < 0.3]
    if k == "ref":
        return ["ref", "r"]
    if k == "check":
        return ["check", rng.randrange(1, 9)]
    if k in ("seq", "alt"):
        return [k, *(random_expr(rng, depth + 1) for _ in range(rng.randrange(4)))]
    if k in ("rep", "rawrep"):
        lo = rng.randrange(4)
        return [k, random_expr(rng, depth + 1), lo, rng.choice([None, lo, lo + 2])]
    return [k, random_expr(rng, depth + 1)]


def test_json_escape_random(probe):
    rng = random.Random(11)
    programs = []
    for _ in range(3000):
        e = random_expr(rng)
        shared = random_expr(rng, 3)  # a part met twice (Python maps it once, by identity)
        programs.append({"rules": [["root", ["esc", ["alt", ["seq", e, shared], ["rep", shared, 0, None]]]],
                                   ["r", ["lit", "x"]]]})
    compare(probe, programs)


# ---- string bodies ----------------------------------------------------------------------------


def test_string_lengths_grid(probe):
    programs = [{"strings": [[lo, hi, None]], "counter": 0, "prefix": ""} for lo in GRID for hi in GRID]
    expected = [py_strings(p) for p in programs]
    # minLength 100001 is refused unless a smaller maxLength makes the string NOTHING first
    assert sum("declined" in e for e in expected) == 2
    compare(probe, programs, expected)


def test_host_is_the_converter():
    """The test's host builds what the converter builds for {"type": "string"} with lengths."""
    for lo, hi in [(0, None), (5, 5), (70, None), (0, 1000), (65, 2000), (1500, 100001), (100000, None)]:
        g = json_schema_to_grammar(length_schema(lo, hi))
        host = Host()
        body = host.string([SimpleNamespace(schema=length_schema(lo, hi), pointer="")])
        assert g.rules[g.rules["root"].name] == body
        for name, rule in host.rules.items():
            assert g.rules[name] == rule


def test_string_runs_random(probe):
    """Several string bodies and counted classes through one host: rules of characters made
    once per (character, count), fresh names from the host's counter, the rule limit."""
    rng = random.Random(5)
    classes = [FULL, [[0x61, 0x7A]], [[0x20, 0x7E]], [[0, 0x7F]], [[0x30, 0x39], [0x41, 0x46]], [[0x80, 0x10FFFF]]]
    counts = [0, 1, 3, 16, 63, 64, 65, 100, 1023, 1024, 1025, 1040, 2000, 5000, 100000, 100001]
    programs = []
    for _ in range(300):
        steps = []
        for _ in range(rng.randrange(1, 7)):
            lo = rng.choice(counts + [None])
            hi = rng.choice(counts + [None])
            if rng.random() < 0.5:
                steps.append([lo, hi, None])
            else:  # capped_count's callers have lo <= hi
                lo = lo or 0
                if hi is not None and hi < lo:
                    lo, hi = hi, lo
                steps.append([lo, hi, rng.choice(classes)])
        programs.append({"strings": steps, "counter": rng.choice([0, 7, 14998, 15000]),
                         "prefix": rng.choice(["", "any."])})
    expected = [py_strings(p) for p in programs]
    assert sum("declined" in e for e in expected) > 20 and any("_15000" in n for e in expected for n in e.get("names", []))
    compare(probe, programs, expected)

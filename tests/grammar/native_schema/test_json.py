"""The C++ JSON reader and writer (kernels/grammar/src/schema/json.cpp) against Python's own json:
a text the C++ parser accepts must be one `json.loads` accepts, and its C++ `dumps` must be
`json.dumps(json.loads(text))` byte for byte, with the same say on lone surrogates.

The texts: every MaskBench dev schema (as the data set writes it, as json.dumps writes it, and
re-serialized with raw UTF-8 and other whitespace), every file of the JSON Schema Test Suite, a
hand-written corpus of edge cases, and random values in random layouts with byte mutations.
The driver (json_driver.cpp) is built with the library's zig flags under build/native_schema.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

from .building import OUT, ROOT, SRC, zig_build

HERE = Path(__file__).resolve().parent
DATA = ROOT / ".." / "shared" / "data"
LIMIT = 4  # tg::Code::limit

SURROGATE = re.compile("[\ud800-\udfff]")


@pytest.fixture(scope="module")
def driver() -> Path:
    sources = [HERE / "json_driver.cpp", SRC / "schema" / "json.cpp"]
    return zig_build(OUT / "json_driver", [f"-I{SRC / 'schema'}", *sources], sources)


def run_driver(driver: Path, texts: list[bytes], *options: str) -> list[tuple]:
    """("ok", lone surrogate, dumps) or ("error", code) per text."""
    data = b"".join(b"%d\n" % len(t) + t for t in texts)
    proc = subprocess.run([str(driver), *options], input=data, capture_output=True, check=True)
    lines = proc.stdout.decode("ascii").split("\n")[:-1]
    assert len(lines) == len(texts)
    results = []
    for line in lines:
        word, rest = line.split(" ", 1)
        if word == "ok":
            flag, dumped = rest.split(" ", 1)
            results.append(("ok", flag == "1", dumped))
        else:
            results.append(("error", int(rest.split(" ", 1)[0])))
    return results


def has_surrogate(value) -> bool:
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            if SURROGATE.search(v):
                return True
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v)
            todo.extend(v.values())
    return False


def python_result(text: bytes):
    """What the driver must print for `text`: Python's verdict, with error codes left out."""
    try:
        value = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ("error",)
    return ("ok", has_surrogate(value), json.dumps(value))


def to_bytes(text) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def check(driver: Path, texts: list, *options: str) -> list[tuple]:
    texts = [to_bytes(t) for t in texts]
    got = run_driver(driver, texts, *options)
    wrong = []
    for text, result in zip(texts, got):
        want = python_result(text)
        if result[:1] != want[:1] or (want[0] == "ok" and result != want) or result == ("error", 99):
            wrong.append(f"{text[:200]!r}: C++ {str(result)[:300]}, Python {str(want)[:300]}")
    assert not wrong, f"{len(wrong)} of {len(texts)} texts differ:\n" + "\n".join(wrong[:10])
    return got


# ---- the data sets -------------------------------------------------------------------------

LAYOUTS = [dict(indent=2), dict(indent="\t", separators=(",", " : ")), dict(separators=(",", ":")),
           dict(indent=" \r\n ", separators=("\t,", ":\n"))]


def relaid(value, i: int) -> bytes:
    """`value` with raw UTF-8 and the i-th layout."""
    text = json.dumps(value, ensure_ascii=False, **LAYOUTS[i % len(LAYOUTS)])
    return (" \t\r\n"[: i % 5] + text + "\n" * (i % 2)).encode("utf-8", "surrogatepass")


def test_maskbench_schemas(driver):
    path = DATA / "maskbench-dev.jsonl.gz"
    assert path.exists(), f"{path} is not there (../shared beside the checkout)"
    with gzip.open(path, "rb") as f:
        lines = f.read().splitlines()
    assert len(lines) > 1000
    batch: list[bytes] = []
    for i, line in enumerate(lines):
        schema = json.loads(line)["schema"]
        if isinstance(schema, str):
            batch.append(schema.encode("utf-8", "surrogatepass"))
            schema = json.loads(schema)
        batch += [line, json.dumps(schema).encode(), relaid(schema, i)]
        if len(batch) >= 3000 or i == len(lines) - 1:
            check(driver, batch)
            batch = []


def test_json_schema_test_suite(driver):
    folder = DATA / "json-schema-test-suite"
    assert folder.exists(), f"{folder} is not there (../shared beside the checkout)"
    files = sorted(folder.rglob("*.json"))
    assert len(files) > 100
    texts = [p.read_bytes() for p in files]
    texts += [relaid(json.loads(t), i) for i, t in enumerate(texts)]
    got = check(driver, texts)
    assert all(r[0] == "ok" for r in got)


# ---- edge cases ----------------------------------------------------------------------------

# text -> the dumps Python gives, or None where json.loads refuses it.
KNOWN = {
    "1e16": "1e+16", "9999999999999998.0": "9999999999999998.0", "1e-5": "1e-05", "0.0001": "0.0001",
    "0.1": "0.1", "5e-324": "5e-324", "1.7976931348623157e308": "1.7976931348623157e+308",
    "1e400": "Infinity", "-1e400": "-Infinity", "1e-400": "0.0", "-1e-400": "-0.0", "-0.0": "-0.0",
    "-0": "0", "0e0": "0.0", "1E+2": "100.0", "1.5e16": "1.5e+16", "123456789012345680.0": "1.2345678901234568e+17",
    "2e-324": "0.0", "3e-324": "5e-324", "100": "100", "-9223372036854775809": "-9223372036854775809",
    "NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity", "1.0e-4": "0.0001", "12e-6": "1.2e-05",
    '"\\ud83d\\ude00"': '"\\ud83d\\ude00"', '"\\u00e9\\u00C9"': '"\\u00e9\\u00c9"', '"\u00e9\U0001F600"': '"\\u00e9\\ud83d\\ude00"',
    '"\\/\\b\\f\\n\\r\\t\\"\\\\"': '"/\\b\\f\\n\\r\\t\\"\\\\"', '"\x7f"': '"\\u007f"', '"\\u0001\\u001f"': '"\\u0001\\u001f"',
    '{"a": 1, "b": 2, "a": 3, "a": 4}': '{"a": 4, "b": 2}', "[]": "[]", "{}": "{}", "[{}, [], [[]]]": "[{}, [], [[]]]",
    " \t\r\n[ 1 , 2 ]\n": "[1, 2]",
    "[1,]": None, '{"a":1,}': None, "01": None, "1.": None, ".5": None, "+1": None, "nan": None, "-NaN": None,
    "'a'": None, "[1] x": None, "": None, " ": None, "\ufeff1": None, "\x0c1": None, '"a\x00"': None,
    '"a\x1f"': None, '"abc': None, '"\\x41"': None, '"\\u12"': None, '"\\u12g4"': None, "[1 2]": None,
    '{"a" 1}': None, "{1: 2}": None, "{'a': 1}": None, "[1] // c": None, "/* c */ 1": None, "-": None,
    "1e": None, "1e+": None, "-01": None, "--1": None, "0x10": None, "infinity": None, "True": None,
    "[": None, "]": None, "{": None, '{"a"': None, '{"a":': None, "nul": None, "1_000": None,
}


def test_known_answers(driver):
    texts = list(KNOWN)
    got = check(driver, texts)
    for text, result in zip(texts, got):
        want = KNOWN[text]
        assert (result[2] if result[0] == "ok" else None) == want, (text, result)


def test_edge_cases(driver):
    digits = "1234567890" * 431
    texts = [
        "123456789012345678901234567890", "-123456789012345678901234567890", "9223372036854775807",
        "9223372036854775808", "-9223372036854775808", digits[:4300], "-" + digits[:4300], digits[:4301],
        "-" + digits[:4301], digits[:4301] + ".5", "0." + digits + "e-10", digits + "e-4300", "1" + "0" * 400 + ".0",
        "[" + "1e308, 1.8e308, 2.2250738585072014e-308, 2.225073858507201e-308, 4.9e-324, 2.4e-324, 2.5e-324]",
        '"\\ud800"', '"\\udc00"', '"\\ud800\\ud800"', '"\\udc00\\ud800"', '"\\ud800x"', '"\\ud800\\n"',
        '"\\ud800\\u0041"', '"\\ud800\\udbff\\udfff"', '"\\uDBFF\\uDFFF"', '{"\\ud800": 1}', '["\\udfff"]',
        '"\\ud800\\u12"', '"\\ud800\\', '"\\ud800', '"a\\', '"\\u"',
        '"\u00e9\u4e2d\U0001F600\u2028\ufeff"', '{"\u00e9": "\u00e9", "\\u00e9": 2}', '"\\u0000"',
        '{"a": {"b": 1, "b": 2}, "a": {"c": [1, {"d": 1, "d": [2]}]}}',
        '{"k": 1, "k": 2, "k": 3}', '[{"k": 1, "k": 2, "k": 3}, {"k": {"k": {"k": 1, "k": 2}, "k": 3}}]',
        "{" + ", ".join(f'"k{i % 700}": {i}' for i in range(2000)) + "}",
        "{" + ", ".join(f'"{"x" * (i % 50)}": {i}' for i in range(300)) + "}",
        '{"": 1, "": 2}', "[[[[[]]]]]", '{"a": {"b": {"c": {}}}}', "  [\n\t1\r\n]\r\n", "[1,\n2]",
        "[NaN, Infinity, -Infinity]", "[-Infinity1]", "[Infinit]", "[-Inf]", "[1.5E-3, 1e+0, 1E-0]",
        # Long and halfway decimal spellings: correctly rounded, as Python's float() is.
        "1" * 100_000 + ".5", "0." + "0" * 100_000 + "1", "1e" + "0" * 10_000 + "1", "0.0000" + "9" * 800 + "e-320",
        "2.4703282292062327e-324", "2.4703282292062328e-324", "[1e23, 8.41e21, 9007199254740993.0, 2e-1074]",
        "[1.00000000000000011102230246251565404236316680908203125, 1.00000000000000011102230246251565404236316680908203126]",
    ]
    # Invalid UTF-8 in a string (Python would not decode these bytes) and valid UTF-8 at the edges.
    raw = [b'"\xff"', b'"\xc0\x80"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe2\x82"', b'"\x80"',
           b'"\xf0\x9f\x98"', b'"\xdf\xbf\xef\xbf\xbf\xf4\x8f\xbf\xbf\xc2\x80\xe0\xa0\x80\xf0\x90\x80\x80"', b"\xe2\x80\x83 1"]
    got = check(driver, texts + raw)
    assert sum(r[0] == "ok" for r in got) > 30
    by_text = dict(zip(texts, got))
    assert by_text[digits[:4301]] == ("error", 1)
    assert by_text['"\\ud800"'][:2] == ("ok", True)
    assert by_text['"\\uDBFF\\uDFFF"'] == ("ok", False, '"\\udbff\\udfff"')


def nested(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "array" else ('{"a": ' * depth + "0" + "}" * depth)


def test_deep_nesting(driver):
    texts = [nested(10_000, "array"), nested(10_000, "object"), nested(1000, "array"), nested(1001, "array")]
    got = run_driver(driver, [t.encode() for t in texts])
    assert [r[:2] for r in got] == [("error", LIMIT), ("error", LIMIT), ("ok", False), ("error", LIMIT)]
    got = run_driver(driver, [t.encode() for t in texts], "--max-depth", "10000")
    assert got[:2] == [("ok", False, texts[0]), ("ok", False, texts[1])]
    got = run_driver(driver, [nested(200_000, "array").encode(), nested(10_001, "object").encode()],
                     "--max-depth", "200000")
    assert got[0][0] == "ok" and len(got[0][2]) == 400_000
    got = run_driver(driver, [nested(10_001, "object").encode()], "--max-depth", "10000")
    assert got == [("error", LIMIT)]


# ---- random values, layouts and mutations --------------------------------------------------

KEYS = ["a", "b", "type", "properties", "\u00e9", "k\U0001F600", "", "x y", "\\", '"', "\ud800"]


# Characters by weight: mostly ASCII letters, then escapes, the BMP's edges, astral code points.
ALPHABET = list("abcxyz" * 8 + " \"\\/\b\f\n\r\t\x00\x1f\x7f" + "\u00e9\u00ff\u0100\u07ff\u0800\u2028\ufeff\uffff"
                + "\U00010000\U0001F600\U0010FFFF")
WITH_SURROGATES = ALPHABET + list("\ud800\udbff\udc00\udfff")


def random_string(rng: random.Random) -> str:
    pool = WITH_SURROGATES if rng.random() < 0.1 else ALPHABET
    return "".join(rng.choices(pool, k=rng.choice([0, 1, 3, 10, 40])))


def random_float(rng: random.Random) -> float:
    r = rng.random()
    if r < 0.4:
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
    if r < 0.7:
        return rng.uniform(-1e6, 1e6)
    if r < 0.9:
        return float(f"{rng.randint(1, 10**rng.randint(1, 17))}e{rng.randint(-330, 310)}")
    return rng.choice([0.0, -0.0, 1e16, 1e-5, 1e-4, 0.1, 5e-324, 1e22, 1e21, 123456789.0])


class Obj(list):
    """An object as the list of its members: keys may repeat, as a text's may."""


class Tok(str):
    """Text to write as it is."""


def random_value(rng: random.Random, depth: int, budget: list[int]):
    """A value of at most about budget[0] values, nested at most `depth` deep."""
    budget[0] -= 1
    r = rng.random()
    if depth > 0 and r < 0.55 and budget[0] > 0:
        n = min(budget[0], rng.choice([0, 1, 2, 3, 5, 9, 12, 30]))
        if r < 0.3:
            return [random_value(rng, depth - 1, budget) for _ in range(n)]
        return Obj((rng.choice(KEYS) if rng.random() < 0.6 else random_string(rng), random_value(rng, depth - 1, budget))
                   for _ in range(n))
    if r < 0.65:
        return random_string(rng)
    if r < 0.8:
        return rng.choice([0, -1, 7, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, rng.randint(-10**40, 10**40),
                           rng.randint(-1000, 1000)])
    if r < 0.95:
        return random_float(rng)
    return rng.choice([None, True, False])


def write_string(rng: random.Random, s: str) -> str:
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch in '"\\' or c < 0x20 or 0xD800 <= c <= 0xDFFF or rng.random() < 0.1:
            short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                     "/": "\\/"}.get(ch)
            if short and rng.random() < 0.7:
                out.append(short)
            elif c >= 0x10000:
                c -= 0x10000
                out.append("\\u%04x\\u%04X" % (0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF)))
            else:
                out.append(("\\u%04x" if rng.random() < 0.5 else "\\u%04X") % c)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def write_number(rng: random.Random, v) -> str:
    if isinstance(v, int):
        return str(v)
    if v != v or v in (float("inf"), float("-inf")):
        return json.dumps(v)
    r = rng.random()
    if r < 0.5:
        return repr(v)
    if r < 0.7:
        return "%.17g" % v if "e" in "%.17g" % v or "." in "%.17g" % v else "%.17g.0" % v
    if r < 0.85:
        return ("%.*e" % (rng.randint(0, 25), v)).replace("e", rng.choice(["e", "E"]))
    return "%.*f" % (rng.randint(1, 30), v) if abs(v) < 1e30 else repr(v)


def write(rng: random.Random, value) -> str:
    """`value` as JSON text with random whitespace, escapes and number spellings. Iterative, as
    the values nest."""
    def ws() -> str:
        return "".join(rng.choices(" \t\r\n", k=rng.choice([0, 0, 0, 1, 2])))

    out: list[str] = []
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, Tok):
            out.append(v)
        elif isinstance(v, list):
            # Pushed in reverse: the opening bracket is popped first.
            obj = isinstance(v, Obj)
            parts = [Tok(ws() + ("}" if obj else "]"))]
            for i, item in enumerate(reversed(v)):
                if obj:
                    parts += [item[1], Tok(ws() + write_string(rng, item[0]) + ws() + ":" + ws())]
                else:
                    parts.append(item)
                if i < len(v) - 1:
                    parts.append(Tok(ws() + "," + ws()))
            parts.append(Tok(("{" if obj else "[") + ws()))
            todo += parts
        elif isinstance(v, str):
            out.append(write_string(rng, v))
        elif v is None or isinstance(v, bool):
            out.append(json.dumps(v))
        else:
            out.append(write_number(rng, v))
    return "".join(out)


MUTATION_BYTES = b'{}[]",:.-+eE0129 \t\n\r\\u/\x00\x1f\x7f\x80\xbf\xc3\xed\xa0\xf0\xffaINfnt'


def mutate(rng: random.Random, text: bytes) -> bytes:
    b = bytearray(text)
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        i = rng.randint(0, len(b))
        if r < 0.3 and b:
            del b[min(i, len(b) - 1)]
        elif r < 0.6:
            b.insert(i, rng.choice(MUTATION_BYTES))
        elif r < 0.85 and b:
            b[min(i, len(b) - 1)] = rng.choice(MUTATION_BYTES)
        elif r < 0.95:
            j = rng.randint(0, len(b))
            b[i:i] = b[min(i, j):max(i, j)][:20]
        else:
            del b[i:]
    return bytes(b)


def test_random_values_and_mutations(driver):
    rng = random.Random(20240617)
    texts = []
    for _ in range(8000):
        value = random_value(rng, rng.choice([0, 1, 2, 4, 8]), [rng.choice([5, 30, 100])])
        text = write(rng, value)
        texts.append(text)
        if rng.random() < 0.8:
            for _ in range(2):
                texts.append(mutate(rng, text.encode("utf-8", "surrogatepass")))
    # Floats alone: random bit patterns and decimal spellings of every length.
    for _ in range(400):
        floats = [random_float(rng) for _ in range(50)]
        texts.append("[" + ", ".join(write_number(rng, f) for f in floats) + "]")
        tokens = [f"{rng.choice(['', '-'])}{rng.randint(0, 10**rng.randint(1, 40))}.{rng.randint(0, 10**rng.randint(1, 40))}"
                  f"e{rng.randint(-400, 400)}" for _ in range(50)]
        texts.append("[" + ", ".join(tokens) + "]")
    got = check(driver, texts)
    accepted = sum(r[0] == "ok" for r in got)
    mutated_ok = sum(r[0] == "ok" for t, r in zip(texts, got) if isinstance(t, bytes))
    assert 8000 < accepted < len(texts) and mutated_ok > 500  # both verdicts, on mutated texts too

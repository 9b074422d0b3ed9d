"""The native grammar IR builder (kernels/grammar/src/schema/ir_build.*) against py/trellis/grammar/ir.py.

Real grammars (MaskBench dev schemas, the JSON Schema Test Suite's, EBNF, regex, built-in JSON)
are dumped as their Python expression DAGs, rebuilt in C++ through the raw node constructors
(hash-consed there, where the Python has many equal but distinct objects) and serialized: the
words and rule names must be ir.serialize's, word for word. Random construction programs run
the simplifying constructors (literal, seq, alt, repeat, byte_set, char_class, nonempty,
folded_repeat) on both sides and compare the words of a grammar that holds every result, their
nullable answers and their errors. Hand-made grammars cover serialize's other paths (preludes,
unreached rules, equal bodies) and its errors.

The driver (ir_driver.cpp, format in its header) is built under build/native_schema with the
zig toolchain, again only when a source changed. TRELLIS_IR_BUILD_ALL=1 replays every MaskBench
dev schema and every Test Suite group instead of a sample.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from trellis.errors import GrammarError, GrammarLimitError
from trellis.grammar import ir

from .building import OUT, ROOT, SRC, zig_build

HERE = Path(__file__).resolve().parent
DATA = ROOT.parent / "shared" / "data"
MASKBENCH = DATA / "maskbench-dev.jsonl.gz"
SUITE = DATA / "json-schema-test-suite"
LIBRARY = [SRC / "schema" / "ir_build.cpp"]
HEADERS = [SRC / "schema" / "ir_build.h", SRC / "ir.h", SRC / "status.h"]
ALL = os.environ.get("TRELLIS_IR_BUILD_ALL") == "1"
SAMPLE, LARGEST, SUITE_SAMPLE = 300, 30, 300


# ---- building -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver() -> Path:
    source = HERE / "ir_driver.cpp"
    out = OUT / "ir_driver"
    return zig_build(out, ["-I", SRC, source, *LIBRARY], [source, *LIBRARY])


def test_api_selftest(driver):
    done = subprocess.run([str(driver), "--selftest"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("selftest 0"), done.stdout + done.stderr


def _run(driver: Path, blocks: list[tuple[str, list[str], list[str]]]) -> None:
    """Feeds (label, lines, expected output lines) to the driver; asserts every block's output."""
    text = "".join("\n".join(lines) + "\nend\n" for _, lines, _ in blocks)
    done = subprocess.run([str(driver)], input=text, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got: dict[str, list[str]] = {}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("result "):
            current = got.setdefault(line[7:], [])
        else:
            current.append(line)
    assert len(got) == len(blocks), "labels must be distinct"
    bad = []
    for label, lines, want in blocks:
        have = got[label]
        if have != want:
            bad.append(label)
            if len(bad) == 1:
                first = _first_difference(have, want)
        assert "kept-builder-differs" not in have
    assert not bad, f"{len(bad)} of {len(blocks)} differ: {bad[:10]}; first {first}"


def _first_difference(have: list[str], want: list[str]) -> str:
    for i, (a, b) in enumerate(zip(have, want)):
        if a != b:
            if a.startswith("words") and b.startswith("words"):
                aw, bw = a.split(), b.split()
                j = next((k for k, (x, y) in enumerate(zip(aw, bw)) if x != y), min(len(aw), len(bw)))
                return f"line {i}: word {j - 1}: C++ {aw[j:j + 8]} Python {bw[j:j + 8]} ({len(aw)} / {len(bw)} words)"
            return f"line {i}: C++ {a[:200]!r} Python {b[:200]!r}"
    return f"C++ {len(have)} lines, Python {len(want)}: {have[-1:]} / {want[-1:]}"


# ---- dumping Python grammars ----------------------------------------------------------------


def _hex(data: bytes) -> str:
    return data.hex() or "-"


def _name(name: str) -> str:
    return _hex(name.encode("utf-8"))


class _Dump:
    """A grammar block's lines: every distinct expression object once, children first."""

    def __init__(self, head: str):
        self.lines = [head]
        self.ids: dict[int, int] = {}

    def node(self, top: ir.Expr) -> int:
        ids = self.ids
        stack = [(top, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in ids:
                continue
            if not ready:
                stack.append((e, True))
                stack.extend((c, False) for c in reversed(ir.children(e)) if id(c) not in ids)
                continue
            self.lines.append("n " + self._operands(e))
            ids[id(e)] = len(ids)
        return ids[id(top)]

    def _operands(self, e) -> str:
        ids, t = self.ids, type(e)
        if t is ir.Bytes:
            return f"B {_hex(e.data)}"
        if t is ir.ByteSet:
            return " ".join(["S", *(f"{lo} {hi}" for lo, hi in e.ranges)])
        if t is ir.Seq or t is ir.Alt:
            return " ".join(["Q" if t is ir.Seq else "A", *(str(ids[id(x)]) for x in e.items)])
        if t is ir.Repeat:
            return f"R {ids[id(e.item)]} {e.min} {-1 if e.max is None else e.max}"
        if t is ir.Ref:
            return f"F {_name(e.name)}"
        if t is ir.Check:
            return " ".join(["C", str(e.kind), *map(str, e.params)])
        if t is ir.Region:
            return f"G {ids[id(e.item)]}"
        if t is ir.And:
            return " ".join(["D", str(int(e.escaped)), *(f"{ids[id(x)]} {int(w)}" for x, w in zip(e.items, e.wants))])
        if t is ir.Automaton:
            return " ".join(["U", str(len(e.accept)), *(str(int(a)) for a in e.accept),
                             *(str(w) for run in e.runs for w in run)])
        if t is ir.Machine:
            return " ".join(["M", str(len(e.accept)), *(str(int(a)) for a in e.accept),
                             *(f"{a} {ids[id(x)]} {b}" for a, x, b in e.edges)])
        raise TypeError(f"not an IR expression: {e!r}")


def _expected(grammar: ir.Grammar) -> list[str]:
    try:
        words, names = ir.serialize(grammar)
    except GrammarLimitError as e:
        return [f"error 4 {e}"]
    except GrammarError as e:
        return [f"error 3 {e}"]
    except ValueError as e:  # a prelude expression that refers to a rule: its repr left out
        return [f"error 1 {str(e).split(':')[0]}"]
    return ["words " + " ".join(map(str, words)), "names " + " ".join(_name(n) for n in names)]


def grammar_block(label: str, grammar: ir.Grammar) -> tuple[str, list[str], list[str]]:
    d = _Dump(f"grammar {label}")
    for name, body in grammar.rules.items():
        d.lines.append(f"rule {_name(name)} {d.node(body)}")
    d.lines.append(f"root {_name(grammar.root)}")
    if grammar.prelude is not None:
        for e in grammar.prelude.exprs:
            d.lines.append(f"pexpr {d.node(e)}")
        for name, body in grammar.prelude.rules.items():
            d.lines.append(f"prule {_name(name)} {d.node(body)}")
    return label, d.lines, _expected(grammar)


# ---- grammars -------------------------------------------------------------------------------


def _maskbench() -> list[tuple[str, object]]:
    assert MASKBENCH.exists(), f"no {MASKBENCH} (../shared beside the checkout)"
    out = []
    with gzip.open(MASKBENCH, "rt", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            schema = o["schema"]
            out.append((o["id"], json.loads(schema) if isinstance(schema, str) else schema))
    return out


def _schema_blocks(cases) -> list:
    from trellis.grammar.json_schema import json_schema_to_grammar

    blocks = []
    for label, schema, options in cases:
        try:
            grammar = json_schema_to_grammar(schema, **options)
        except Exception:  # refused or over a limit: nothing to serialize
            continue
        blocks.append(grammar_block(label, grammar))
    return blocks


def test_maskbench_grammars(driver):
    schemas = _maskbench()
    chosen = set(range(len(schemas)))
    if not ALL:  # a fixed sample, and the largest schemas (the most words)
        size = sorted(range(len(schemas)), key=lambda i: len(json.dumps(schemas[i][1])))
        chosen = set(random.Random(20240607).sample(range(len(schemas)), SAMPLE)) | set(size[-LARGEST:])
    options = {"any_whitespace": True, "strict": False}
    blocks = _schema_blocks((f"{i}:{schemas[i][0]}", schemas[i][1], options) for i in sorted(chosen))
    assert len(blocks) > 0.9 * len(chosen)
    _run(driver, blocks)


def test_suite_grammars(driver):
    assert SUITE.exists(), f"no {SUITE} (../shared beside the checkout)"
    drafts = {"draft2020-12": "2020-12", "draft2019-09": "2019-09", "draft7": "draft7", "draft6": "draft6",
              "draft4": "draft4"}
    cases = []
    for path in sorted(p for d in drafts for p in (SUITE / d).rglob("*.json")):
        rel = path.relative_to(SUITE).as_posix()
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            options = {"draft": drafts[rel.split("/")[0]],
                       "format_assertion": True if "/optional/format/" in rel else None}
            cases.append((f"{rel}#{i}", group["schema"], options))
    if not ALL:
        cases = random.Random(7).sample(cases, SUITE_SAMPLE)
    # Other options now and then: strict, schema-free order, an indent (depth-numbered rules).
    variants = [{}, {"strict": True}, {"property_order": "any", "any_whitespace": False}, {"indent": 2}]
    cases = [(f"{label}/{k % 4}", schema, {**options, **variants[k % 4]})
             for k, (label, schema, options) in enumerate(cases)]
    blocks = _schema_blocks(cases)
    assert len(blocks) > 0.5 * len(cases)
    _run(driver, blocks)


ARITHMETIC_NESTED = r"""
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | [^\x00-\x7F]{2,5} | ("ab"?){3,10} | ("x"{2,3}){4,}
unused ::= "never" | expr
"""
REGEXES = [r"[a-z]+@[a-z]+\.(com|org)", r"(ab|cd)*e?", r"\d{3}-\d{4}", r"[^\n]{0,20}", r"(a|b*){16,100001}",
           r"\p{L}+\s\P{N}?", r"((x?){2}){3,7}", r"[\u0100-\uFFFF😀-🙏]+", r".*", r"(?:a{2,}){3}"]


def test_frontend_grammars(driver):
    from trellis.grammar.ebnf import ARITHMETIC_EBNF, LLAMACPP_JSON_EBNF, WEBLLM_JSON_EBNF
    from trellis.grammar.frontends import grammar_of

    sources = [("ebnf", ARITHMETIC_EBNF), ("ebnf", LLAMACPP_JSON_EBNF), ("ebnf", WEBLLM_JSON_EBNF),
               ("ebnf", ARITHMETIC_NESTED), ("builtin_json", None), ("json_object", None),
               *(("regex", r) for r in REGEXES)]
    blocks = [grammar_block(f"{kind}{i}", grammar_of(kind, source)) for i, (kind, source) in enumerate(sources)]
    _run(driver, blocks)


def _edge_grammars() -> list[tuple[str, ir.Grammar]]:
    """serialize's paths and errors, each in a small grammar."""
    a, b, ab = ir.literal("a"), ir.Bytes(b"b"), ir.seq(ir.literal("a"), ir.Bytes(b"b"))
    ref = ir.Ref
    same = [ir.Seq((ir.Bytes(b"x"), ir.Repeat(ir.ByteSet(((48, 57),)), 0, None))) for _ in range(3)]
    shared = ir.alt(ab, ir.Bytes(b"c"))
    prelude_rules = {"p0": ir.seq(ir.literal("["), ref("p1"), ir.literal("]")), "p1": ir.alt(a, ref("p0")),
                     "p2": ir.seq(ir.literal("["), ref("p1"), ir.literal("]"))}
    prelude = ir.Prelude(ir.EMPTY, ir.repeat(ir.byte_set([(48, 57)]), 1, None), ab, rules=prelude_rules)
    exprs_only = ir.Prelude(ab, ir.char_class([(0x80, 0x10FFFF)]))
    wrong_expr = ir.Prelude(ir.seq(a, ref("root")))
    reaching_out = ir.Prelude(rules={"q": ref("root")})
    return [
        ("plain", ir.Grammar({"root": ir.seq(ab, ref("x"), ab), "x": ir.repeat(shared, 2, 5)})),
        ("equal-bodies", ir.Grammar({"root": ir.seq(ref("x"), ref("y"), ref("z")), "x": same[0], "y": same[1],
                                     "z": ir.seq(ref("y"), same[2])})),
        ("unreached", ir.Grammar({"u1": ir.seq(ref("u2")), "root": ir.alt(a, b), "u2": ir.Ref("root"),
                                  "u3": ir.ByteSet(())})),
        ("root-last", ir.Grammar({"y": ab, "x": ir.alt(ref("y"), ref("root")), "root": ir.seq(ref("x"), ref("y"))})),
        ("root-is-ref", ir.Grammar({"root": ref("x"), "x": ref("y"), "y": ab})),
        ("empty-choices", ir.Grammar({"root": ir.alt(ir.NOTHING, ir.ByteSet(()), ref("u")), "u": ir.NOTHING,
                                      "v": ir.ByteSet(())})),
        ("prelude", ir.Grammar({**prelude_rules, "root": ir.seq(ref("p2"), ab, ref("r")), "r": ir.repeat(ab, 0, 1),
                                "spare": ref("p0")}, prelude=prelude)),
        ("prelude-root", ir.Grammar({**prelude_rules, "root": ref("p0")}, "p1", prelude=prelude)),
        ("prelude-exprs", ir.Grammar({"root": ir.seq(ab, ir.char_class([(0x80, 0x10FFFF)]))}, prelude=exprs_only)),
        ("checks", ir.Grammar({"root": ir.Region(ir.seq(ir.literal('"'), ir.Check(ir.REGEX, (1, -2, 3)),
                                                         ir.Check(ir.LEAP_SECOND), ir.literal('"')))})),
        ("machines", ir.Grammar({"root": ir.Machine([(0, a, 1), (1, ref("m"), 2), (1, b, 0)], [0, 0, 1]),
                                 "m": ir.Automaton([(0, 48, 57, 1), (1, 48, 57, 1)], [False, True]),
                                 "n": ir.And((ab, ir.repeat(ir.byte_set([(97, 98)]), 0, None)), (True, False), True)})),
        ("err-undefined", ir.Grammar({"root": ir.seq(a, ref("nowhere"))})),
        ("err-undefined-unreached", ir.Grammar({"root": a, "x": ir.alt(b, ir.repeat(ref("gone"), 0, 2))})),
        ("err-root", ir.Grammar({"x": a}, "root")),
        ("err-bound", ir.Grammar({"root": ir.Repeat(a, 1, ir.MAX_COUNT + 1)})),
        ("err-min-bound", ir.Grammar({"root": ir.Repeat(a, ir.MAX_COUNT + 5, None)})),
        ("unreached-bound", ir.Grammar({"root": a, "x": ir.Repeat(a, 1, ir.MAX_COUNT + 1)})),
        ("err-overflow", ir.Grammar({"root": ir.seq(ir.Repeat(a, -(2 ** 40), 3), ref("nowhere2"))})),
        ("err-overflow-only", ir.Grammar({"root": ir.Repeat(a, -(2 ** 40), 3)})),
        ("err-prelude-fit", ir.Grammar({**prelude_rules, "p1": ir.alt(b, ref("p0")), "root": ref("p0")},
                                       prelude=prelude)),
        ("err-prelude-expr", ir.Grammar({"root": a}, prelude=wrong_expr)),
        ("err-prelude-rule", ir.Grammar({**reaching_out.rules, "root": a}, "root", prelude=reaching_out)),
        ("quoted-name", ir.Grammar({"root": ref("it's")})),
    ]


def test_serialize_paths_and_errors(driver):
    blocks = [grammar_block(label, g) for label, g in _edge_grammars()]
    errors = [want for _, _, want in blocks if want[0].startswith("error")]
    assert len(errors) == 11, errors  # the hand-made errors happen in the Python too
    _run(driver, blocks)


# ---- random construction programs ---------------------------------------------------------

_CODE_POINTS = [0, 0x20, 0x41, 0x7E, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xD800, 0xDBFF, 0xDFFF,
                0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF]
_TEXT = ["", "a", "b", "ab", '"', "é", "😀", "\x00", "key", "a\u0301"]


def _program(seed: int, n_ops: int) -> tuple[str, list[str], list[str]]:
    """A random construction program, run in Python: its lines and what the driver must print."""
    rng = random.Random(seed)
    label = f"program{seed}"
    lines, out, values = [f"program {label}"], [], []

    def pick():
        return rng.choice([k for k, v in enumerate(values) if v is not None])

    def picks(lo, hi):
        return [pick() for _ in range(rng.randint(lo, hi))]

    def code_point():
        return rng.choice(_CODE_POINTS) + rng.choice([-1, 0, 0, 0, 1]) if rng.random() < 0.97 else rng.choice(
            [-1, 0x110000])

    def bound():
        return rng.choice([0, 0, 1, 1, 2, 3, 5, 16, 1000, ir.MAX_COUNT, ir.MAX_COUNT + 1])

    def ranges(point, n):
        out = []
        for _ in range(n):
            lo = point()
            out.append((lo, lo + rng.choice([0, 1, 5, 100, 0x800, -3])) if rng.random() < 0.6 else (lo, point()))
        return out

    def raw():
        kind = rng.choice("QQAARRBSFGCDUM")
        if kind in "QA":
            ks, node = picks(0, 4), ir.Seq if kind == "Q" else ir.Alt
            return f"n {kind} {' '.join(map(str, ks))}", lambda: node(tuple(values[k] for k in ks))
        if kind == "R":
            k, lo = pick(), rng.choice([0, 1, 2])
            hi = rng.choice([None, lo, lo + 3])
            return f"n R {k} {lo} {-1 if hi is None else hi}", lambda: ir.Repeat(values[k], lo, hi)
        if kind == "B":
            data = rng.choice(_TEXT).encode()
            return f"n B {_hex(data)}", lambda: ir.Bytes(data)
        if kind == "S":
            rs = ranges(lambda: rng.randint(0, 255), rng.randint(0, 3))
            return " ".join(["n S", *(f"{lo} {hi}" for lo, hi in rs)]), lambda: ir.ByteSet(tuple(rs))
        if kind == "F":
            k = pick()
            return f"n F {_name(f'r{k}')}", lambda: ir.Ref(f"r{k}")
        if kind == "G":
            k = pick()
            return f"n G {k}", lambda: ir.Region(values[k])
        if kind == "C":
            check, params = rng.randint(1, 8), [rng.randint(-5, 5) for _ in range(rng.randint(0, 3))]
            return " ".join(["n C", str(check), *map(str, params)]), lambda: ir.Check(check, params)
        if kind == "D":
            ks, escaped = picks(1, 3), rng.random() < 0.5
            wants = [rng.random() < 0.5 for _ in ks]
            line = " ".join(["n D", str(int(escaped)), *(f"{k} {int(w)}" for k, w in zip(ks, wants))])
            return line, lambda: ir.And(tuple(values[k] for k in ks), tuple(wants), escaped)
        if kind == "U":
            n = rng.randint(1, 3)
            accept = [rng.random() < 0.5 for _ in range(n)]
            runs = [(rng.randrange(n), lo, lo + rng.randint(0, 9), rng.randrange(n))
                    for lo in (rng.randint(0, 240) for _ in range(rng.randint(0, 4)))]
            return " ".join(["n U", str(n), *(str(int(a)) for a in accept), *(str(w) for r in runs for w in r)]), \
                lambda: ir.Automaton(runs, accept)
        n = rng.randint(1, 3)
        accept = [rng.random() < 0.5 for _ in range(n)]
        edges = [(rng.randrange(n), pick(), rng.randrange(n)) for _ in range(rng.randint(0, 4))]
        return " ".join(["n M", str(n), *(str(int(a)) for a in accept), *(f"{a} {k} {b}" for a, k, b in edges)]), \
            lambda: ir.Machine([(a, values[k], b) for a, k, b in edges], accept)

    # The two constants, as raw nodes, so that later ops can name them.
    for line, value in (("n Q", ir.Seq(())), ("n A", ir.Alt(()))):
        lines.append(f"op {line}")
        values.append(value)
    for k in range(2, n_ops):
        op = rng.choice(["literal", "literal", "byte_set", "char_class", "seq", "seq", "seq", "alt", "alt", "alt",
                         "repeat", "repeat", "folded", "folded", "nonempty", "nonempty", "nullable", "raw", "raw"])
        value = None
        try:
            if op == "literal":
                text = rng.choice(_TEXT)
                line = f"literal {_hex(text.encode())}"
                value = ir.literal(text if rng.random() < 0.5 else text.encode())
            elif op == "byte_set":
                rs = ranges(lambda: rng.choice([0, 9, 10, 32, 48, 57, 65, 97, 127, 128, 200, 255]) + rng.randint(-1, 1),
                            rng.randint(0, 4))
                line, value = " ".join(["byte_set", *(f"{lo} {hi}" for lo, hi in rs)]), ir.byte_set(rs)
            elif op == "char_class":
                rs = ranges(code_point, rng.randint(0, 3))
                negate = rng.random() < 0.4
                line = " ".join(["char_class", str(int(negate)), *(f"{lo} {hi}" for lo, hi in rs)])
                value = ir.char_class(rs, negate)
            elif op in ("seq", "alt"):
                ks = picks(0, 4)
                line = " ".join([op, *map(str, ks)])
                value = (ir.seq if op == "seq" else ir.alt)(*(values[j] for j in ks))
            elif op in ("repeat", "folded"):
                j, lo = pick(), bound()
                hi = rng.choice([None, lo, lo + bound(), bound(), 0])
                line = f"{op} {j} {lo} {-1 if hi is None else hi}"
                value = (ir.repeat if op == "repeat" else ir.folded_repeat)(values[j], lo, hi)
            elif op == "nonempty":
                j = pick()
                line = f"nonempty {j}"
                value = ir.nonempty(values[j])
                if value is None:
                    out.append(f"none {k}")
            elif op == "nullable":
                j = pick()
                line = f"nullable {j}"
                out.append(f"nullable {k} {({False: 0, True: 1, None: 2})[ir.nullable(values[j])]}")
            else:
                line, make = raw()
                value = make()
        except GrammarLimitError as e:
            out.append(f"error {k} 4 {e}")
            value = None
        except GrammarError as e:
            out.append(f"error {k} 3 {e}")
            value = None
        lines.append(f"op {line}")
        values.append(value)
    rules = {f"r{k}": v for k, v in enumerate(values) if v is not None}
    rules["root"] = ir.Seq(tuple(ir.Ref(name) for name in rules))
    return label, lines, out + _expected(ir.Grammar(rules, "root"))


def test_constructors_against_python(driver):
    blocks = [_program(seed, 30 + seed % 50) for seed in range(600)]
    kinds = " ".join(line for _, lines, _ in blocks for line in lines)
    for op in ("literal", "byte_set", "char_class", "seq", "alt", "repeat", "folded", "nonempty", "nullable"):
        assert f"op {op}" in kinds
    outputs = [line for _, _, want in blocks for line in want]
    assert any(x.startswith("none") for x in outputs) and any(x.startswith("error") for x in outputs)
    _run(driver, blocks)

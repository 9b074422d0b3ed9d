"""The native number grammar (kernels/grammar/src/schema/numbers.*) against the Python it ports:
_numbers.py's texts and digit-level ranges, _number_schema.NumberSchema.number (bounds,
multipleOf's automata and checks, the And of exclusions) and Converter.const_expr for numbers.

A case is a sequence of number() calls on one converter (its memo and its "and_N" rules carry
over), run by a real trellis Converter and by numbers_probe.cpp (built with the port's sources
into build/native_schema/libnumbers_probe.so, again only when a source changed): the words and
rule names of the grammar of the rules made and root = Seq(results) must be ir.serialize's, the
rules' sites the same, and where the Python raises the port must decline at the same call (the
port declines nowhere else in these cases). The cases: every distinct combination of number
keywords in the MaskBench dev schemas, draft-04 flags raw and rewritten, contexts of several
subschemas, a random grid of bounds, multiples and exclusions, and number constants.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import math
import random
from decimal import Decimal

import pytest

from trellis.grammar import ir
from trellis.grammar.json_schema._dialect import _draft6_forms
from trellis.grammar.json_schema._keywords import NUMBER_KEYWORDS
from trellis.grammar.json_schema._negate import NOT_CONST, NOT_MULTIPLE
from trellis.grammar.json_schema._numbers import (DIGIT, EXP, FRAC, INTEGER, MINUS, NON_INTEGER, NONZERO, NUMBER,
                                                  PLAIN_NUMBER, UINT, ZERO_FRAC)
from trellis.grammar.json_schema._refs import DEFAULT_BASE, Node
from trellis.grammar.json_schema.converter import Converter, Options

from .dev_corpus import dev_objects
from .probes import library, taken

ATOMS = {"null": 1, "boolean": 2, "int": 4, "frac": 8, "string": 16, "array": 32, "object": 64}
# The option sets numbers read: ZERO_FRAC everywhere, canonical_integers (EMPTY everywhere), and
# draft-04's integers without a fraction (EMPTY, but ZERO_FRAC after a constant's integral value).
OPTIONS = ("default", "canonical", "draft4")


class Probe:
    def __init__(self):
        self.lib = library()
        for name in ("numbers_probe_number", "numbers_probe_const", "numbers_probe_arith"):
            fn = getattr(self.lib, name)
            fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            fn.restype = ctypes.c_void_p
        self.lib.numbers_probe_texts.restype = ctypes.c_void_p

    def call(self, name: str, value):
        data = json.dumps(value).encode()
        return taken(getattr(self.lib, name)(data, len(data)))

    def texts(self):
        return taken(self.lib.numbers_probe_texts())


@pytest.fixture(scope="module")
def probe() -> Probe:
    return Probe()


def options(name: str) -> Options:
    opt = Options(True, False, 20, canonical_integers=name == "canonical")
    if name == "draft4":
        opt.integers_without_fraction()
    return opt


def grammar_words(rules: dict, extra=None) -> dict:
    words, names = ir.serialize(ir.Grammar(rules, "root"))
    return {"words": list(words), "names": names, **(extra or {})}


def python_number(calls, option: str) -> dict:
    """The Python's answer for a case (a fresh converter's rules and counter)."""
    conv = Converter({}, options(option), False)
    conv.rules, conv.sites, conv.counter = {}, {}, itertools.count()
    results = []
    for k, call in enumerate(calls):
        nodes = [Node(n["schema"], DEFAULT_BASE, n["pointer"]) for n in call["nodes"]]
        atoms = frozenset(a for a, bit in ATOMS.items() if call["atoms"] & bit)
        try:
            results.append(conv.number(nodes, atoms))
        except Exception:  # whatever the Python raises, the port declines
            return {"declined": k}
    rules = dict(conv.rules)
    rules["root"] = ir.Seq(tuple(results))
    return grammar_words(rules, {"sites": {k: list(v) for k, v in conv.sites.items()}})


def native_number(probe: Probe, calls, option: str) -> dict:
    opt = options(option)
    return probe.call("numbers_probe_number", {"zero_frac": opt.zero_frac is ZERO_FRAC,
                                               "const_zero_frac": opt.const_zero_frac is ZERO_FRAC,
                                               "calls": calls})


def check_cases(probe: Probe, cases) -> dict:
    """Each case under each option set; returns counts by outcome. Fails on the first difference."""
    counts = {"grammars": 0, "declined": 0}
    for calls in cases:
        for option in OPTIONS:
            want = python_number(calls, option)
            got = native_number(probe, calls, option)
            assert got == want, (option, json.dumps(calls)[:2000])
            counts["declined" if "declined" in want else "grammars"] += 1
    return counts


def call(*schemas, atoms=("int", "frac"), pointer="/p"):
    return {"nodes": [{"schema": s, "pointer": f"{pointer}/{i}"} for i, s in enumerate(schemas)],
            "atoms": sum(ATOMS[a] for a in atoms)}


# ---- the texts and the arithmetic -------------------------------------------------------------


def test_texts(probe):
    consts = {"DIGIT": DIGIT, "NONZERO": NONZERO, "UINT": UINT, "FRAC": FRAC, "EXP": EXP, "MINUS": MINUS,
              "NUMBER": NUMBER, "ZERO_FRAC": ZERO_FRAC, "INTEGER": INTEGER, "PLAIN_NUMBER": PLAIN_NUMBER,
              "NON_INTEGER": NON_INTEGER}
    rules = dict(consts)
    rules["root"] = ir.Seq(tuple(ir.Ref(n) for n in consts))
    assert probe.texts() == grammar_words(rules)


def test_arithmetic(probe):
    rng = random.Random(7)

    def big():
        n = rng.choice([1, 2, 5, 9, 10, 17, 18, 19, 27, 28, 40, 100, 300])
        v = rng.randrange(10 ** (n - 1), 10 ** n) if rng.random() < 0.8 else 10 ** n - rng.randrange(3)
        if rng.random() < 0.2:
            v = rng.choice([0, 1, 10 ** 9, 10 ** 18, 10 ** 9 - 1, 2 ** 63, 2 ** 64 - 1]) * rng.choice([1, 10 ** 27])
        return -v if rng.random() < 0.4 else v

    ops, want = [], []
    for _ in range(3000):
        a, b = big(), big()
        if rng.random() < 0.3:  # divisors that share factors, quotients of one limb
            b = a // rng.choice([1, 2, 3, 10 ** 9 + 7, 999999999]) or 1
        op = rng.choice(["add", "sub", "mul", "divmod", "gcd", "lcm"])
        if op == "divmod" and b == 0:
            b = 1
        ops.append([op, a, b])
        if op == "divmod":
            want.append(f"{a // b} {a % b}")
        else:
            want.append(str({"add": a + b, "sub": a - b, "mul": a * b, "gcd": math.gcd(a, b),
                             "lcm": math.lcm(a, b)}[op]))
    # negation rounds to 28 digits, half even; comparison is exact
    decs = [123456789012345678901234567890, -99999999999999999999999999995, 99999999999999999999999999985,
            12345678901234567890123456785, 12345678901234567890123456775, 10 ** 40 + 1, -(10 ** 28) + 1, 0,
            -0.0, 1.5, 2.5e-300, 1e308, 5e-324, -7.25, 1234567890123456789012345678901234567895]
    decs += [rng.randrange(10 ** 27, 10 ** 35) * rng.choice([1, -1]) for _ in range(200)]
    for d in decs:
        x = -(Decimal(d) if isinstance(d, int) else Decimal(repr(d)))
        s, digits, e = x.as_tuple()
        ops.append(["neg", d])
        want.append(f"{s} {''.join(map(str, digits))} {e}")
    pool = [0, -0.0, 0.0, 1, 1.0, 1.00001, 5, 5.0, -5, 0.5, 0.05, 50, 500.0, 1e16, 10 ** 16, 10 ** 16 + 1, 1e-7, -1e-7]
    for a in pool:
        for b in pool:
            da = Decimal(a) if isinstance(a, int) else Decimal(repr(a))
            db = Decimal(b) if isinstance(b, int) else Decimal(repr(b))
            ops.append(["cmp", a, b])
            want.append(str((da > db) - (da < db)))
    assert probe.call("numbers_probe_arith", ops) == want


# ---- number() -----------------------------------------------------------------------------------


def dev_number_schemas():
    """Every distinct number-keyword combination in MaskBench dev (what number() reads of a
    subschema), with the atoms its type allows; dicts that only look like one (a property
    named "minimum") included: the Python refuses them and the port must decline."""
    seen = {}
    for x in dev_objects():
        kept = {k: x[k] for k in NUMBER_KEYWORDS if k in x}
        if not kept:
            continue
        types = x.get("type") if isinstance(x.get("type"), list) else [x.get("type")]
        atoms = ("int",) if types == ["integer"] else ("int", "frac")
        seen.setdefault(json.dumps([kept, atoms]), (kept, atoms))
    return list(seen.values())


def test_maskbench_dev(probe):
    schemas = dev_number_schemas()
    assert len(schemas) > 100
    cases = []
    for kept, atoms in schemas:
        for a in {atoms, ("int",), ("frac",)}:
            cases.append([call(kept, atoms=a)])
        if any(isinstance(v, bool) for v in kept.values()):  # draft-04 flags, as draft6_forms rewrites them
            rewritten = dict(kept)
            _draft6_forms(rewritten, None, "")
            cases.append([call(rewritten, atoms=atoms)])
    rng = random.Random(3)
    for _ in range(300):  # contexts of several subschemas (allOf, $ref), some facts met again
        picked = [rng.choice(schemas)[0] for _ in range(rng.randrange(2, 4))]
        cases.append([call(*picked), call(*picked[:1], pointer="/q"), call(*picked, atoms=("int",))])
    counts = check_cases(probe, cases)
    assert counts["grammars"] > 2000 and counts["declined"] > 10, counts


BOUNDS = [0, -0.0, 0.0, 1, -1, 2, 5, 5.0, -5.0, 0.5, -0.5, 1e-3, -1e-3, 2.50, 2.5, 10, 99, 100, 101, 999.999, 1e16,
          -1e16, 1e-7, 123.456, -123.456, 0.1, 0.30000000000000004, 1e300, -1.5e-300, 5e-324, 1e308,
          123456789012345678901234567890, -123456789012345678901234567890, 999999999999999999999999999999,
          -999999999999999999999999999995, 10 ** 29, 2 ** 63, -(2 ** 63), 4503599627370496.5, 9007199254740993,
          "x", True, None, float("inf")]
MULTIPLES = [1, 2, 3, 5, 7, 10, 0.5, 0.1, 0.01, 0.25, 1e-3, 256, 1000, 1e20, 0.3, 1.5, 12.5, 123456789, 2.50, 6, 4,
             1e-5, 0.2, 9.0, 10 ** 19, 10 ** 30 + 7, 0.125, 33, 0, -2]
EXCLUDED = [0, 1, -1, 1.0, 0.5, 2.5, 10, 1e16, -0.0, 100, float("inf"), "a", None, True]


def random_schema(rng: random.Random) -> dict:
    s = {}
    for key in rng.sample(NUMBER_KEYWORDS[:4], rng.randrange(0, 5)):
        s[key] = rng.choice(BOUNDS[:-4] if rng.random() < 0.97 else BOUNDS)
    if rng.random() < 0.35:
        s["multipleOf"] = rng.choice(MULTIPLES[:-2] if rng.random() < 0.97 else MULTIPLES)
    if rng.random() < 0.08:
        s[NOT_MULTIPLE] = rng.choice(MULTIPLES)
    if rng.random() < 0.1:
        s[NOT_CONST] = rng.choice(EXCLUDED)
    return s


def test_grid(probe):
    rng = random.Random(11)
    atoms = [("int",), ("int", "frac"), ("frac",), ("int", "frac", "string"), ("int", "null")]
    cases = []
    for _ in range(500):
        a = rng.choice(atoms)
        case = [call(random_schema(rng), atoms=a)]
        if rng.random() < 0.3:
            case.append(call(random_schema(rng), random_schema(rng), atoms=rng.choice(atoms)))
        if rng.random() < 0.3:
            case.append(dict(case[0], atoms=sum(ATOMS[x] for x in rng.choice(atoms))))
            case.append(case[0])
        cases.append(case)
    # bounds and multiples with every pair of small values, and the contradictory ones
    for lo, hi in itertools.product([0, 0.5, 1, 3, -2, -0.5, 10.25], [0, 0.5, 3, 7.75, -1, 100]):
        for m in (None, 0.5, 2, 0.25, 3):
            for kl, kh in (("minimum", "maximum"), ("exclusiveMinimum", "exclusiveMaximum")):
                s = {kl: lo, kh: hi} if m is None else {kl: lo, kh: hi, "multipleOf": m}
                cases.append([call(s, atoms=("int",)), call(s)])
    counts = check_cases(probe, cases)
    assert counts["grammars"] > 1000 and counts["declined"] > 20, counts


def test_multiple_checks(probe):
    """multipleOf past an automaton's remainders: the core's checks (integers listed or checked
    whole, or each digit checked as written), and a product too big for MAX_STATES."""
    cases = [
        [call({"multipleOf": 1e20})],
        [call({"multipleOf": 10 ** 19}, atoms=("int",))],
        [call({"multipleOf": 10 ** 19, "minimum": -(10 ** 21), "maximum": 10 ** 21}, atoms=("int",))],
        [call({"multipleOf": 10 ** 19, "minimum": -(10 ** 22), "maximum": 10 ** 22})],
        [call({"multipleOf": 10 ** 19, "minimum": 5, "maximum": 10 ** 25})],
        [call({"multipleOf": 10 ** 19, "exclusiveMinimum": -(10 ** 19)})],
        [call({"multipleOf": 1234567, "maximum": 0})],
        [call({"multipleOf": 1.234567})],
        [call({"multipleOf": 1.234567, "minimum": 0, "maximum": 100})],
        [call({"multipleOf": 0.0001234567, "minimum": -1, "exclusiveMaximum": 1})],
        [call({"multipleOf": 1e-300})],
        [call({"multipleOf": 12345678901234567890123})],  # P >= 2^63: the Python raises
        [call({"multipleOf": 123456789012345678901234567890123})],  # normalize rounds it to 28 digits
        [call({"multipleOf": 1000000000000000000000000000001})],
        [call({"multipleOf": 7, "minimum": 0, "maximum": 10 ** 300})],
        [call({"multipleOf": 0.7, "minimum": 0, "maximum": 1e300})],
        [call({"multipleOf": 3, "minimum": 1, "maximum": 10 ** 1200})],
        [call({"multipleOf": 1500, "minimum": 0.001, "maximum": 10 ** 40})],
        [call({"multipleOf": 0.5}, {"multipleOf": 0.3}, {"multipleOf": 7})],
        [call({"multipleOf": 2, "minimum": 3, "maximum": 3})],
        [call({"multipleOf": 4, "minimum": 1, "maximum": 3}, {"multipleOf": 6})],
        [call({"minimum": 1e308, "multipleOf": 1e308})],
        [call({NOT_MULTIPLE: 0})],
        [call({NOT_MULTIPLE: -2, "maximum": 10})],
        [call({NOT_MULTIPLE: 1e20})],
    ]
    check_cases(probe, cases)


def test_constants(probe):
    values = [0, -0.0, 0.0, 1, 1.0, 1e16, 1e-7, 123456789012345678901234567890, -2.5, float("inf"), float("-inf"),
              float("nan"), 1e22, 1e23, 1.7976931348623157e308, -1e300, 5e-324, 2.0 ** 53 + 2, -(2.0 ** 60), 0.1,
              100.0, 1e15, 1.5e16, -123456789012345678901234567890, 12.5, 4503599627370496.5]
    for v in values:
        for zero_frac in (True, False):
            conv = Converter({}, options("default" if zero_frac else "canonical"), False)
            want = grammar_words({"root": conv.const_expr(v)})
            got = probe.call("numbers_probe_const", {"zero_frac": zero_frac, "value": v})
            assert got == want, (v, zero_frac)

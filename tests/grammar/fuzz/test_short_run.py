"""The grammar engine under fuzzing (tests/grammar/fuzz): a short deterministic run per generator
that fails on any finding (crash, hang, memory blow-up, untyped exception, matcher disagreement)
and prints its reproducer; plus checks that the harness classifies and minimises correctly.

Budget: TRELLIS_FUZZ_SECONDS (default 60) split across the generators; TRELLIS_FUZZ_SEED (0),
TRELLIS_FUZZ_WORKERS (2), TRELLIS_FUZZ_TIMEOUT (10 s per input). Against the sanitized core:
    TRELLIS_GRAMMAR_LIB=build/grammar/asan/libtrellis_grammar.so LD_PRELOAD=$(g++ -print-file-name=libasan.so) \\
    ASAN_OPTIONS=detect_leaks=0 python -m pytest tests/grammar/fuzz/test_short_run.py
(the workers inherit the environment; RLIMIT_AS is left off under ASan). The long run is
benchmarks/fuzz_bench.py.
"""

from __future__ import annotations

import os

import pytest

from tests.grammar.fuzz.cases import Case, compact_repr, reproducer
from tests.grammar.fuzz.generators import GENERATORS
from tests.grammar.fuzz.harness import FuzzRun, finding_key
from tests.grammar.fuzz.minimize import _Budget, shrink_text, shrink_tree
from tests.grammar.fuzz.pool import WorkerPool
from tests.grammar.fuzz.walk import Disagreement, check_schema_oracle

SECONDS = float(os.environ.get("TRELLIS_FUZZ_SECONDS", "60"))
SEED = int(os.environ.get("TRELLIS_FUZZ_SEED", "0"))
WORKERS = int(os.environ.get("TRELLIS_FUZZ_WORKERS", "2"))
TIMEOUT = float(os.environ.get("TRELLIS_FUZZ_TIMEOUT", "10"))


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(size=WORKERS, timeout_s=TIMEOUT) as p:
        yield p


# ---- the fuzz run ---------------------------------------------------------------------


@pytest.mark.parametrize("generator", list(GENERATORS))
def test_fuzz(pool, generator):
    share = SECONDS / len(GENERATORS)
    run = FuzzRun(pool, seed=SEED)
    stats = run.fuzz(generator, 0.75 * share)
    run.minimize_findings(0.25 * share, per_finding_s=0.25 * share)
    assert stats.tried > 0
    assert not run.findings, f"{generator}: {stats.tried} inputs\n\n{run.summary()}"


# ---- the harness itself ---------------------------------------------------------------


@pytest.mark.parametrize("what, status, key_part", [
    ("typed", "typed", None),
    ("untyped", "untyped", ("ZeroDivisionError at tests/grammar/fuzz/cases.py:run_selftest",)),
    ("segv", "crash", ("signal SIGSEGV", "AddressSanitizer: SEGV")),  # ASan reports it and exits
])
def test_pool_classifies_outcomes(pool, what, status, key_part):
    case = Case("selftest", "selftest", what)
    outcome = pool.run(case)
    assert outcome["status"] == status
    key = finding_key(case, outcome)
    assert (key is None) if key_part is None else any(part in key for part in key_part)
    assert pool.run(Case("selftest", "selftest", "typed"))["status"] == "typed"  # a worker is back


def test_pool_reports_a_hang_where_it_spins():
    with WorkerPool(size=1, timeout_s=2) as small:
        outcome = small.run(Case("selftest", "selftest", "hang"))
        assert outcome["status"] == "hang" and "run_selftest" in outcome["stderr"]
        assert small.run(Case("selftest", "selftest", "typed"))["status"] == "typed"


def test_a_compiled_grammar_is_walked(pool):
    outcome = pool.run(Case("t", "regex", "[ab]{3}c", walk_seed=1), max_steps=64)
    assert outcome["status"] == "compiled" and outcome["walk"]["steps"] >= 1


def test_shrink_text_finds_the_minimal_chunk():
    keeps = lambda t: "(((" in t and t.count("x") >= 2  # noqa: E731
    assert shrink_text("ab(((cdx12x34" * 3, keeps, _Budget(60, 10_000)) in ("(((xx", "xx(((", "x(((x")


def test_shrink_tree_halves_deep_nests_and_drops_members():
    value = {"junk": [1, 2], "a": {"x": 1}}
    for _ in range(500):
        value = {"items": value}
    keeps = lambda v: "'x': 1" in repr(v)  # noqa: E731
    assert shrink_tree(value, keeps, _Budget(60, 10_000)) == {"x": 1}


@pytest.mark.parametrize("text", ["(" * 3000 + "a" + ")" * 3000, "plain", "", "\ud800x" * 40, "ab" * 13 + "c"])
def test_compact_repr_round_trips(text):
    written = compact_repr(text)
    assert eval(written) == text  # noqa: S307 - our own output
    assert len(written) < 200


def test_reproducer_compiles_the_same_case():
    case = Case("t", "json_schema", {"items": {"items": {"const": "\ud800"}}}, {"strict": True})
    snippet = reproducer(case)
    assert "compile_json_schema({'items': {'items': {'const': '\\ud800'}}}, strict=True)" in snippet


def test_reproducers_name_the_run_vocabulary(monkeypatch):
    """A finding of a run over Gemma 3's vocabulary (fuzz_bench.py --vocab gemma3) reproduces on it."""
    case = Case("t", "regex", "a+", {})
    assert "Vocabulary.smollm2()" in reproducer(case)
    monkeypatch.setenv("TRELLIS_FUZZ_VOCAB", "gemma3")
    snippet = reproducer(case)
    assert "compiler = GrammarCompiler(Vocabulary.from_gguf(gemma3_gguf_path()))" in snippet
    assert "from tests.model.gemma3 import gemma3_gguf_path" in snippet
    monkeypatch.setenv("TRELLIS_FUZZ_VOCAB", "gemma")
    with pytest.raises(ValueError, match="gemma3"):
        reproducer(case)


def test_the_schema_oracle_judges_no_float_arithmetic_on_long_numbers():
    """jsonschema does multipleOf in floats: 4444...4.1 (55 digits) is a multiple of 0.5 as a
    float, so it found the grammar's exact answer invalid under `oneOf` (a fuzz finding against the
    oracle, not the grammar). Past 15 digits the oracle does not judge such arithmetic, while
    short numbers and exact comparisons are judged as before."""
    one_of = {"oneOf": [{}, {"multipleOf": 0.5}]}
    check_schema_oracle(one_of, {}, b"4" * 55 + b".1", "here")
    with pytest.raises(Disagreement):
        check_schema_oracle(one_of, {}, b"4.5", "here")
    with pytest.raises(Disagreement):
        check_schema_oracle({"maximum": 1}, {}, b"1.0000000000000000000001", "here")
    check_schema_oracle({"type": "integer"}, {}, b"8656900138898862140." + b"0" * 20, "here")  # an integer
    with pytest.raises(Disagreement):
        check_schema_oracle({"type": "integer"}, {}, b"8656900138898862140." + b"0" * 20 + b"1", "here")
    # An exponent past what a Decimal holds is not judged (as a float it would be 0, a multiple).
    check_schema_oracle(one_of, {}, b"1." + b"0" * 20 + b"1e-99999999999999999999", "here")


def test_the_schema_oracle_takes_a_floats_own_spelling_for_that_float():
    """A float const of 17 significant digits, written by the grammar as its repr, was a Decimal
    in the text, which no float equals: the oracle said the const's own text was invalid (a fuzz
    finding against the oracle, seed 20). The exact integer a large float is stays equal to it;
    another number is still a disagreement."""
    const = {"const": {"a": -3.7279715353317887e+37}}
    check_schema_oracle(const, {}, b'{"a": -3.7279715353317887e+37}', "here")
    with pytest.raises(Disagreement):
        check_schema_oracle(const, {}, b'{"a": -3.7279715353317888e+37}', "here")
    check_schema_oracle({"enum": [-5.122939065414451e+16]}, {}, b"-51229390654144512", "here")
    check_schema_oracle({"enum": [-5.122939065414451e+16]}, {}, b"-5.122939065414451e+16", "here")


def test_the_schema_oracle_does_not_judge_formats_it_turns_around():
    """Formats are asserted by the grammar and only annotate for the oracle: under `not` the
    oracle held every string invalid, where the grammar allows the strings that are no date (a
    fuzz finding against the oracle, seed 37). Formats elsewhere are judged as before."""
    negated = {"not": {"multipleOf": 0.1, "format": "date"}}
    check_schema_oracle(negated, {}, b'"sage"', "here")
    check_schema_oracle({"oneOf": [{"format": "date"}, {"type": "string"}]}, {}, b'"sage"', "here")
    with pytest.raises(Disagreement):
        check_schema_oracle({"format": "date", "type": "integer"}, {}, b'"sage"', "here")
    with pytest.raises(Disagreement):
        check_schema_oracle({"not": {"type": "string"}, "properties": {"format": {}}}, {}, b'"sage"', "here")

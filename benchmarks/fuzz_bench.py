"""Fuzzing the grammar engine, the long run (the short one is tests/grammar/fuzz/test_short_run.py).

    .venv/bin/python benchmarks/fuzz_bench.py [--minutes N] [--seed S] [--workers W] [--timeout T]
                                              [--only GENERATORS] [--vocab smollm2|gemma3]
    python3 build.py bench fuzz               (same thing, through the project's entry point)

Every generator of tests/grammar/fuzz (EBNF, regex, JSON Schema, raw IR, structural tags,
response_format, mutations of valid inputs) gets an equal share of the time; each input is compiled
in a worker process with a time bound (--timeout, default 10 s) and RLIMIT_AS (4 GiB), then its
masks are walked (up to 64 tokens). Then about a tenth of the time minimises the findings.

Columns per generator: inputs tried, compiled, typed errors (a TrellisError: the expected refusal),
walks (and tokens walked), findings by class (crash, hang, memory, untyped, disagreement) and
inputs per second. Below the table: each distinct finding (class, exception type and location),
how often it occurred and its reproducer (minimised unless it is a hang).

Writes benchmarks/results/fuzz.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "py"), str(ROOT)]

from tests.grammar.fuzz.cases import VOCABULARIES  # noqa: E402
from tests.grammar.fuzz.generators import GENERATORS  # noqa: E402
from tests.grammar.fuzz.harness import FuzzRun  # noqa: E402
from tests.grammar.fuzz.pool import WorkerPool  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "fuzz.md"


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "py", "kernels"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per input")
    parser.add_argument("--only", help="comma-separated generators (default: all)")
    parser.add_argument("--vocab", choices=list(VOCABULARIES), default="smollm2",
                        help="the workers' vocabulary (results: fuzz.md for smollm2, fuzz-<vocab>.md otherwise)")
    args = parser.parse_args()
    os.environ["TRELLIS_FUZZ_VOCAB"] = args.vocab  # the workers and the reproducers read it
    names = args.only.split(",") if args.only else list(GENERATORS)
    seconds = args.minutes * 60
    share = 0.9 * seconds / len(names)
    started = time.monotonic()
    with WorkerPool(size=args.workers, timeout_s=args.timeout) as pool:
        run = FuzzRun(pool, seed=args.seed)
        for name in names:
            stats = run.fuzz(name, share)
            print(f"{name}: {stats.tried} inputs, {sum(stats.findings.values())} findings", flush=True)
        run.minimize_findings(max(seconds - (time.monotonic() - started), 30.0), per_finding_s=60.0)
        restarts = pool.restarts
    elapsed = time.monotonic() - started
    print("\n".join(run.markdown_table()))
    print(run.summary())
    write_results(run, args, elapsed, restarts)


def write_results(run: FuzzRun, args, elapsed: float, restarts: int) -> None:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lib = os.environ.get("TRELLIS_GRAMMAR_LIB")
    core = f"TRELLIS_GRAMMAR_LIB ({Path(lib).name})" if lib else "native build"
    lines = [
        "# Grammar engine fuzzing",
        "",
        f"Written by `benchmarks/fuzz_bench.py` on {now}: {elapsed / 60:.1f} minutes, seed {args.seed}, "
        f"{args.workers} workers, {args.timeout:g} s and 4 GiB per input, mask walks of up to 64 tokens.",
        "",
        f"- Revision {git_revision()}; core: {core}; "
        f"Python {platform.python_version()}; {os.cpu_count()} logical cores; {restarts} worker restarts",
        f"- Vocabulary: {VOCABULARIES[args.vocab][0]}",
        "- Typed errors are the expected refusals (a TrellisError); every other class is a finding.",
        "",
        *run.markdown_table(),
        "",
        f"## Findings ({len(run.findings)} distinct, by class, exception type and location)",
        "",
    ]
    for i, finding in enumerate(run.findings.values(), 1):
        lines += [f"### {i}. {finding.key}", "", "```", finding.describe(), "```", ""]
    out = RESULTS if args.vocab == "smollm2" else RESULTS.with_name(f"fuzz-{args.vocab}.md")
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""JSON Schema Test Suite report: per file, how many groups compiled and passed, were refused
(with the keyword), or failed; never an invalid instance accepted.

    .venv/bin/python benchmarks/json_schema_suite_report.py [--tokens] [--compact]

Method (GUIDE.md): json.dumps(data, ensure_ascii=False), tokenized without special tokens
(greedy longest match over the SmolLM2 vocabulary) and fed token by token with --tokens, or
with accept_string (the same verdict, faster) by default. Writes
benchmarks/results/json_schema_suite.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "py", ROOT):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from tests.grammar import json_schema_suite as suite  # noqa: E402
from trellis.grammar import GrammarCompiler, Vocabulary  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "json_schema_suite.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", action="store_true", help="feed token by token (slower)")
    ap.add_argument("--compact", action="store_true", help="any_whitespace=False")
    ap.add_argument("--property-order", choices=("schema", "any"), default="schema",
                    help="the front-end's property_order (default: schema, the front-end's default)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    compiler = GrammarCompiler(Vocabulary.smollm2())
    feeder = suite.TokenFeeder(compiler.vocab) if args.tokens else None
    started = time.perf_counter()
    results = suite.run_suite(compiler, feeder=feeder, any_whitespace=not args.compact,
                              property_order=args.property_order)
    elapsed = time.perf_counter() - started
    other_order = "any" if args.property_order == "schema" else "schema"
    other = suite.run_suite(compiler, feeder=feeder, any_whitespace=not args.compact, property_order=other_order)
    other_passed = sum(r.status == "passed" for r in other)

    by_file: dict[str, list] = collections.defaultdict(list)
    for r in results:
        by_file[r.file].append(r)
    status = collections.Counter(r.status for r in results)
    invalid = sum(len(r.invalid_accepted) for r in results)
    tests = sum(len(g["tests"]) for _, _, _, g in suite.load_groups())
    keywords = collections.Counter(r.keyword or "(size)" for r in results if r.status == "refused")
    times = sorted(r.seconds for r in results)

    remote_refused = {(r.file, r.index) for r in results if r.status == "refused"
                      and ("remote reference" in r.message or "unknown meta-schema" in r.message)}
    reachable = len(results) - len(remote_refused)

    lines = [
        "# JSON Schema Test Suite",
        "",
        f"Written by `benchmarks/json_schema_suite_report.py{' --tokens' if args.tokens else ''}"
        f"{' --compact' if args.compact else ''}"
        f"{' --property-order any' if args.property_order == 'any' else ''}` on {_dt.date.today()} "
        f"({platform.machine()}, "
        f"Python {platform.python_version()}, native core). Suite: `../shared/data/json-schema-test-suite` "
        f"({', '.join(suite.DRAFTS)}, optional/ included; each with its own semantics: `$schema`, "
        "or the folder's draft).",
        "",
        "Method: each test's data is serialized with `json.dumps(data, ensure_ascii=False)` and fed "
        + ("token by token (greedy longest-match tokenization over the SmolLM2 vocabulary)"
           if args.tokens else "with `accept_string` (same verdict as token by token; see --tokens)")
        + "; valid = accepted and can terminate. A group *passes* when every valid instance is accepted "
          "and every invalid one rejected; *refused* = compile raised UnsupportedSchemaError.",
        "",
        "| groups | compiled and passing | refused | failed (valid rejected) | invalid instances accepted |",
        "|---|---|---|---|---|",
        f"| {len(results)} | {status['passed']} ({100 * status['passed'] / len(results):.1f}%) | "
        f"{status['refused']} | {status['failed'] + status['limit']} | **{invalid}** |",
        "",
        "| draft | groups | passing | refused | failed | invalid instances accepted |",
        "|---|---|---|---|---|---|",
        *[f"| {d} | {len(rs)} | {sum(r.status == 'passed' for r in rs)} | {sum(r.status == 'refused' for r in rs)} | "
          f"{sum(r.status in ('failed', 'limit') for r in rs)} | {sum(len(r.invalid_accepted) for r in rs)} |"
          for d in suite.DRAFTS for rs in [[r for r in results if r.file.split('/')[0] == d]]],
        "",
        f"{tests} test instances. Whole run {elapsed:.1f} s; per group (compile + all instances) median "
        f"{1000 * times[len(times) // 2]:.1f} ms, p99 {1000 * times[int(len(times) * 0.99)]:.1f} ms, "
        f"max {1000 * times[-1]:.1f} ms.",
        "",
        f"Front-end options: property_order={args.property_order!r}. With property_order={other_order!r}: "
        f"{other_passed} ({100 * other_passed / len(other):.1f}%) compiled and passing, "
        f"{sum(len(r.invalid_accepted) for r in other)} invalid instances accepted. (In schema order the "
        "groups whose valid instances list keys in another order fail: a restriction, never an acceptance.)",
        "",
        "## Out of reach",
        "",
        f"{len(remote_refused)} groups resolve a remote `$ref` or a custom `$schema` (the suite's `remotes/` "
        "are not in the data, and Trellis fetches nothing): refused. The best a front-end can reach without them "
        f"is {reachable} of {len(results)} groups ({100 * reachable / len(results):.1f}%); passed here: "
        f"{status['passed']} of those {reachable}. `optional/format/` is compiled with `format_assertion=True` "
        "(the suite's opt-in for asserting formats); elsewhere each draft's default (2019-09 and 2020-12 annotate).",
        "",
        "## Refusals by keyword",
        "",
        "| keyword | groups |",
        "|---|---|",
        *[f"| `{k}` | {n} |" for k, n in keywords.most_common()],
        "",
        "## Per file",
        "",
        "| file | groups | passed | refused (keywords) | failed |",
        "|---|---|---|---|---|",
    ]
    for file in sorted(by_file):
        rs = by_file[file]
        refused = [r for r in rs if r.status == "refused"]
        kws = collections.Counter(r.keyword or "-" for r in refused)
        kw_text = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in kws.most_common())
        failed = sum(r.status in ("failed", "limit") for r in rs)
        lines.append(f"| {file} | {len(rs)} | {sum(r.status == 'passed' for r in rs)} | "
                     f"{len(refused)}{f' ({kw_text})' if kw_text else ''} | {failed} |")
    failures = [r for r in results if r.status in ("failed", "limit")]
    lines += ["", "## Failed groups", "",
              "Every failure is a valid instance rejected (a restriction of what is generated), never an "
              "invalid one accepted.", ""]
    for r in failures:
        what = "; ".join(r.valid_rejected) or r.message
        if r.invalid_accepted:
            what += " — INVALID ACCEPTED: " + "; ".join(r.invalid_accepted)
        lines.append(f"- {r.file} #{r.index} “{r.description}”: {what}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[6:13]))
    print(f"wrote {args.out}")
    return 1 if invalid else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The compile tail on the browser's side: MaskBench's slowest schemas under Pyodide + wasm beside
web-xgrammar (issue 22, item 7).

    .venv/bin/python benchmarks/schema_tail_bench.py [--slowest 20] [--reps 1]
    python3 build.py bench schema_tail

1. Every MaskBench dev schema is compiled natively by Trellis (compile + first mask, as the MaskBench
   benchmark's TTFM); the `--slowest` N that compile and have a valid instance are kept.
2. In one node process (benchmarks/node/grammar_bench.cjs), the same N schemas are compiled by Trellis
   as the browser runs it (the Python front-end under Pyodide, the wasm core) and by
   @mlc-ai/web-xgrammar, then fed their first valid instance token by token; every mask is checked.
3. The table goes into benchmarks/results/grammar.md as its own section.

web-xgrammar compiles with its defaults (strict mode on, any whitespace); Trellis with
compile_json_schema's (the schema's whole language), as in the MaskBench table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "py", ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchmarks.grammar_bench import (RESULTS, GrammarSpec, GreedyTokenizer, TrellisNative, _fmt,  # noqa: E402
                                      ensure_anchors, load_vocab, machine_facts, run_node)
from benchmarks.json_schema_bench import DATA, load_split  # noqa: E402
from benchmarks.report import percentile, write_section  # noqa: E402

NATIVE = ROOT / "build" / "bench-node" / "schema_tail_native.json"
MARKER = "<!-- schema_tail_bench.py section: written by benchmarks/schema_tail_bench.py -->"


def native_ttfm(entries: list[dict], vocab) -> list[tuple[float, int]]:
    """(compile + first mask ms, index) of every schema Trellis compiles natively."""
    engine = TrellisNative()
    engine.setup(vocab)
    # The split's schemas and instances set aside from the cyclic collector (as json_schema_bench
    # does): a full collection would scan them all inside some schema's time (400 ms, once).
    gc.collect()
    gc.freeze()
    out = []
    for i, entry in enumerate(entries):
        spec = GrammarSpec(entry.get("id", str(i)), "json_schema", json.dumps(entry["schema"]), "")
        t0 = time.perf_counter()
        try:
            m = engine.matcher(engine.compile(spec))
            engine.fill(m, engine.new_mask())
        except Exception:  # noqa: BLE001 - refused or too large: not part of the tail
            continue
        out.append(((time.perf_counter() - t0) * 1e3, i))
        if i % 1000 == 999:
            print(f"  native: {i + 1}/{len(entries)} schemas", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slowest", type=int, default=20, help="how many of the slowest schemas")
    ap.add_argument("--reps", type=int, default=1, help="compiles and passes per schema and engine")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--no-install", action="store_true", help="do not install missing anchors")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--native", type=Path, help="reuse a native pass (the JSON this script saves in build/)")
    args = ap.parse_args(argv)
    if not args.no_install:
        ensure_anchors(python=False, node=True)

    vocab = load_vocab()
    entries = load_split(args.data)
    started = time.perf_counter()
    if args.native:
        timed = [tuple(x) for x in json.loads(args.native.read_text())]
    else:
        timed = sorted(native_ttfm(entries, vocab), reverse=True)
        NATIVE.parent.mkdir(parents=True, exist_ok=True)
        NATIVE.write_text(json.dumps(timed))
    native_s = time.perf_counter() - started
    greedy = GreedyTokenizer(vocab)
    specs, native = [], {}
    for ms, i in timed:
        valid = [t["data"] for t in entries[i]["tests"] if t["valid"]]
        if not valid:
            continue
        document = json.dumps(valid[0], ensure_ascii=False)
        spec = GrammarSpec(entries[i].get("id", str(i)), "json_schema", json.dumps(entries[i]["schema"]), document,
                           greedy.encode(document.encode("utf-8")))
        specs.append(spec)
        native[spec.name] = ms
        if len(specs) == args.slowest:
            break
    print(f"native pass: {len(timed)} schemas compiled in {native_s:.0f} s; the slowest {len(specs)}: "
          f"{_fmt(native[specs[0].name])} .. {_fmt(native[specs[-1].name])} ms", file=sys.stderr)

    results, node_info = run_node(specs, vocab, args.reps)
    engines = list(dict.fromkeys(r.engine for r in results))
    by = {(r.grammar, r.engine): r for r in results}

    def cell(r) -> str:
        if r is None or not r.compile_ms or not r.first_ms:
            return "n/a" if r is not None and r.missing else "error"
        mark = " †" if r.error else ""  # timed, but the instance was refused: see below
        return f"{_fmt(statistics.median(r.compile_ms))} + {_fmt(statistics.median(r.first_ms))}{mark}"

    rows = [f"| {s.name} | {_fmt(native[s.name])} | " + " | ".join(cell(by.get((s.name, e))) for e in engines)
            + f" | {len(s.tokens)} |" for s in specs]
    summary, refusals = [], []
    for e in engines:
        mine = [by[(s.name, e)] for s in specs if (s.name, e) in by]
        timed_rows = [r for r in mine if r.compile_ms and r.first_ms]
        ok = [r for r in timed_rows if not r.error and not r.missing]
        ttfm = [statistics.median(r.compile_ms) + statistics.median(r.first_ms) for r in timed_rows]
        masks = [x for r in ok for x in r.mask_us]
        errors = [f"{r.grammar}: {r.error}" for r in mine if r.error]
        summary.append(f"| {e} | {len(timed_rows)} | {len(ok)} | "
                       + (f"{_fmt(statistics.median(ttfm))} / {_fmt(max(ttfm))}" if ttfm else "—") + " | "
                       + (f"{_fmt(statistics.median(masks))} / {_fmt(percentile(masks, 0.99))}" if masks else "—")
                       + " |")
        refusals.extend(f"{e}: {err}" for err in errors)
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        MARKER,
        "",
        f"## MaskBench dev's {len(specs)} slowest schemas in the browser's setting",
        "",
        f"Written by `benchmarks/schema_tail_bench.py` on {now}, reps = {args.reps}; node "
        f"{node_info.get('node', '?')}, web-xgrammar {node_info.get('web_xgrammar', '?')}. The {len(specs)} "
        f"schemas of the dev split's {len(entries)} with the longest native Trellis time to first mask (of "
        f"{len(timed)} it compiles), each then compiled in one node process by Trellis as the browser runs it "
        "(Python front-end under Pyodide, wasm core) and by web-xgrammar (its defaults), and fed its first "
        "valid instance token by token (every mask checked). Cells: compile ms + first mask ms (medians).",
        "",
        "| schema | Trellis native TTFM ms | " + " | ".join(engines) + " | tokens |",
        "|---|---:|" + "---:|" * len(engines) + "---:|",
        *rows,
        "",
        "| engine | compiled | instance accepted throughout | TTFM ms median / max | mask µs median / p99 (accepted rows) |",
        "|---|---|---|---|---|",
        *summary,
        "",
        "† the engine compiled the schema but its mask refused a token of the instance MaskBench lists as valid "
        "(Trellis: the same schemas' valid instances are refused natively too, among the MaskBench table's "
        "validation errors; web-xgrammar runs in its default strict mode, where a member a schema does not "
        "name is never generated; its refusals are not analysed further here). Times are one run's on a "
        "shared 2-core machine: differences under about 20% are noise. The refusals, as checked:",
        "",
        *[f"- {line}" for line in refusals],
        "",
    ])
    print(section)
    write_section(args.out, MARKER, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())

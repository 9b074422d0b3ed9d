"""MaskBench (JSON Schema) benchmark: Trellis vs llguidance vs xgrammar on the same split and machine.

    .venv/bin/python benchmarks/json_schema_bench.py [--limit N] [--seed S] [--engines trellis,llguidance,xgrammar]
                                                     [--timing-sample K] [--timeout SEC] [--budget SEC]
                                                     [--repeat K] [--resume] [--no-install] [--no-write]

Data: ../shared/data/maskbench-dev.jsonl.gz (6,729 real-world schemas, each with valid and invalid
instances). --limit N takes a deterministic random sample of N schemas (--seed); without it the
whole split runs.

Method (GUIDE.md): each test's `data` is serialized with json.dumps(data, ensure_ascii=False)
(default separators) and tokenized with the SmolLM2 tokenizer (byte-level BPE from the GGUF's
tokens and merges, digits split one by one, as llama.cpp's `smollm` pre-tokenizer does; Hugging
Face `tokenizers` builds it, independently of Trellis), no special tokens. Every engine gets the
same ids. A valid instance passes when every token is accepted and EOS is then accepted (the
matcher can terminate); an invalid one is rejected when some token is refused or EOS is refused.

Counting (per engine):
  compile error     the schema does not compile (any exception: for Trellis an
                    UnsupportedSchemaError, or the JSON Schema front-end not existing yet), a crash
                    of the engine process, or no answer within --timeout seconds
  validation error  a valid instance rejected (schemas with at least one; instances in brackets)
  invalidation err  an invalid instance accepted (schemas / instances)
  passing           compiled, and every instance classified correctly
Correctness feeds tokens with accept_token only (no masks: fast). Timing:
  TTFM              time to first mask: schema text -> compile -> matcher -> first token bitmask,
                    for every compiled schema (xgrammar: its cache disabled, one thread)
  mask µs           per-token mask time while feeding the first valid instance token by token, on
                    a seeded random sample of --timing-sample schemas of the run (every source's: the
                    first ones in file order would all be BFCL's function calls; each mask is checked
                    to allow the next token; a disagreement is counted as "mask mismatch")

Each engine runs in its own worker process (one at a time, one thread), so a crash or a hang costs
one schema, not the run. --repeat K runs every engine K times, in turns (the order reversed every
other round, so that a slow stretch of a shared machine does not fall on one engine), and takes
each schema's best TTFM and each token's best mask time over the rounds; correctness is the first
round's (it does not vary). Results stream to build/json_schema_bench/<engine>-<n>-<seed>.partial.jsonl;
--resume continues an interrupted run, --budget stops an engine after SEC seconds and reports the
schemas done as a separately labelled partial row (the whole split takes xgrammar about an hour on
two shared cores; llguidance about a minute). Summaries are kept in build/json_schema_bench/summaries.json (one per
engine and split) and benchmarks/results/json_schema.md is rewritten from all of them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import gzip
import json
import os
import platform
import random
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "maskbench-dev.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "json_schema.md"
STATE = ROOT / "build" / "json_schema_bench"
ENGINES = ("trellis", "llguidance", "xgrammar")

for p in (ROOT / "py", ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


# ---------------------------------------------------------------------------------------------
# Data and tokenization
# ---------------------------------------------------------------------------------------------

def load_split(path: Path = DATA) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select(n_total: int, limit: int | None, seed: int) -> list[int]:
    indices = list(range(n_total))
    if limit is not None and limit < n_total:
        indices = sorted(random.Random(seed).sample(indices, limit))
    return indices


def build_tokenizer(vocab):
    """SmolLM2's tokenizer from the GGUF tokens and merges, with Hugging Face `tokenizers`."""
    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    reader = GGUFReader(str(vocab.path))
    f = reader.fields["tokenizer.ggml.merges"]
    merges = [tuple(bytes(f.parts[i]).decode("utf-8").split(" ", 1)) for i in f.data]
    ranks = {tok: i for i, tok in enumerate(vocab.encoded)}
    tok = Tokenizer(models.BPE(vocab=ranks, merges=merges, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def tokenize_tests(entries: list[dict], vocab) -> list[list[tuple[bool, list[int]]]]:
    tok = build_tokenizer(vocab)
    out = []
    for e in entries:
        texts = [json.dumps(t["data"], ensure_ascii=False) for t in e["tests"]]
        encs = tok.encode_batch(texts, add_special_tokens=False) if texts else []
        rows = []
        for t, text, enc in zip(e["tests"], texts, encs):
            ids = list(enc.ids)
            if b"".join(vocab.token_bytes[i] for i in ids) != text.encode("utf-8"):
                raise RuntimeError(f"tokenizer does not round-trip {text[:60]!r}")
            rows.append((bool(t["valid"]), ids))
        out.append(rows)
    return out


# ---------------------------------------------------------------------------------------------
# Engines: compile a schema; fresh matcher; fill; accept
# ---------------------------------------------------------------------------------------------

class Engine:
    name = "?"
    version = "?"

    def __init__(self, vocab):
        self.vocab = vocab
        self.eos = vocab.eos_id

    def compile(self, schema_text: str): ...
    def matcher(self, compiled): ...
    def fill(self, m, mask): ...
    def accept(self, m, token: int) -> bool: ...

    def new_mask(self):
        import numpy as np
        return np.zeros((self.vocab.vocab_size + 31) // 32, dtype=np.int32)


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, vocab):
        super().__init__(vocab)
        from grammar_bench import XGrammarNative
        self.inner = XGrammarNative()
        self.inner.setup(vocab)
        self.version = self.inner.version
        self.xgr = self.inner.xgr

    def compile(self, schema_text):
        # spec semantics (additionalProperties defaults to true), flexible whitespace
        return self.inner.compiler.compile_json_schema(schema_text, any_whitespace=True, strict_mode=False)

    def matcher(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def new_mask(self):
        import numpy as np
        return np.zeros((1, (self.vocab.vocab_size + 31) // 32), dtype=np.int32)

    def fill(self, m, mask):
        m.fill_next_token_bitmask(mask)

    def accept(self, m, token):
        return m.accept_token(token)


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, vocab):
        super().__init__(vocab)
        from grammar_bench import LLGuidanceNative
        self.inner = LLGuidanceNative()
        self.inner.setup(vocab)
        self.version = self.inner.version
        self.llg = self.inner.llg

    def compile(self, schema_text):
        M = self.llg.LLMatcher
        grammar = M.grammar_from_json_schema(schema_text, defaults={"whitespace_flexible": True})
        m = M(self.inner.tokenizer, grammar, log_level=1)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def matcher(self, compiled):
        return compiled.deep_copy()

    def new_mask(self):
        import numpy as np
        return np.zeros((1, (self.vocab.vocab_size + 31) // 32), dtype=np.int32)

    def fill(self, m, mask):
        self.llg.numpy.fill_next_token_bitmask(m, mask)

    def accept(self, m, token):
        return m.consume_token(token) and not m.is_error()


class TrellisEngine(Engine):
    name = "Trellis"

    def __init__(self, vocab):
        super().__init__(vocab)
        import trellis
        from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
        from grammar_bench import _git_rev
        v = Vocabulary.from_gguf(str(vocab.path))
        if v.vocab_size != vocab.vocab_size or vocab.eos_id not in v.stop_ids:
            raise RuntimeError("Trellis vocabulary differs from the GGUF's")
        self.compiler, self.GrammarMatcher = GrammarCompiler(v), GrammarMatcher
        self.version = trellis.__version__ + _git_rev()

    def compile(self, schema_text):
        # the front-end's defaults: spec semantics, flexible whitespace, known properties in schema order;
        # the schema's text, as the other engines get it (a dict would add a json.loads here and the
        # compiler's check that the dict is JSON as it stands)
        return self.compiler.compile_json_schema(schema_text, any_whitespace=True, strict=False)

    def matcher(self, compiled):
        return self.GrammarMatcher(compiled)

    def fill(self, m, mask):
        m.fill_next_token_bitmask(mask)

    def accept(self, m, token):
        return m.accept_token(token)


ENGINE_CLASSES = {"trellis": TrellisEngine, "llguidance": LLGuidanceEngine, "xgrammar": XGrammarEngine}


def _allowed(mask, token: int) -> bool:
    words = mask.reshape(-1)
    return bool((int(words[token // 32]) >> (token % 32)) & 1)


def run_schema(engine: Engine, entry: dict, tests, timed: bool) -> dict:
    """One schema through one engine: compile + TTFM, correctness of every instance, and (timed)
    per-token masks along the first valid instance."""
    res = {"id": entry["id"], "status": "ok", "valid_rejected": 0, "invalid_accepted": 0,
           "valid": sum(v for v, _ in tests), "invalid": sum(not v for v, _ in tests)}
    schema_text = json.dumps(entry["schema"], ensure_ascii=False)
    mask = engine.new_mask()
    t0 = time.perf_counter()
    try:
        compiled = engine.compile(schema_text)
        t1 = time.perf_counter()
        m = engine.matcher(compiled)
        engine.fill(m, mask)
        t2 = time.perf_counter()
    except Exception as e:  # noqa: BLE001 -- every refusal is a compile error, never a crash
        res.update(status="compile_error", error=f"{type(e).__name__}: {str(e)[:300]}")
        return res
    res["compile_ms"], res["ttfm_ms"] = (t1 - t0) * 1e3, (t2 - t0) * 1e3
    for valid, ids in tests:
        m = engine.matcher(compiled)
        ok = all(engine.accept(m, t) for t in ids) and engine.accept(m, engine.eos)
        if valid and not ok:
            res["valid_rejected"] += 1
        elif not valid and ok:
            res["invalid_accepted"] += 1
    if timed:
        first_valid = next((ids for v, ids in tests if v), None)
        if first_valid is not None:
            m = engine.matcher(compiled)
            times, mismatch = [], 0
            for t in list(first_valid) + [engine.eos]:
                s = time.perf_counter()
                engine.fill(m, mask)
                times.append((time.perf_counter() - s) * 1e6)
                if not _allowed(mask, t):
                    mismatch += 1
                if not engine.accept(m, t):
                    break
            res["mask_us"] = [round(x, 2) for x in times]
            res["mask_mismatch"] = mismatch
    return res


# ---------------------------------------------------------------------------------------------
# Worker (one engine, one process) and the supervising parent
# ---------------------------------------------------------------------------------------------

def worker_main(args) -> None:
    from grammar_bench import load_vocab
    vocab = load_vocab()
    entries = load_split(Path(args.data))
    indices = json.loads(Path(args.indices).read_text())
    timed = set(json.loads(Path(args.timed).read_text())) if args.timed else set()
    todo = indices[args.start:]
    tests = tokenize_tests([entries[i] for i in todo], vocab)
    try:
        engine = ENGINE_CLASSES[args.worker](vocab)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"engine_error": f"{type(e).__name__}: {e}"}), flush=True)
        return
    print(json.dumps({"engine": engine.name, "version": engine.version}), flush=True)
    # The harness's own heap (every schema and tokenized instance of the split) is set aside from
    # the cyclic collector, as a server does with its start-up heap: a full collection then costs
    # what the engine's objects cost, not a scan of the whole data set (~0.4 s each for Trellis,
    # whose Python front-end allocates; nothing for engines that allocate no Python objects).
    gc.collect()
    gc.freeze()
    parent = os.getppid()
    for i, t in zip(todo, tests):
        if os.getppid() != parent:  # the supervisor is gone: do not run on as an orphan
            return
        res = run_schema(engine, entries[i], t, i in timed)
        res["index"] = i
        print(json.dumps(res), flush=True)


def supervise(engine_key: str, indices: list[int], timed: list[int], timeout: float, log,
              partial: Path | None = None, budget_s: float | None = None) -> dict:
    """Run the engine's worker over `indices`, restarting it after a crash or hang. Every result
    is appended to `partial` as it arrives; results already there are reused (resume). With
    `budget_s`, stop after that many seconds and return what is done."""
    STATE.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict] = {}
    info = {"engine": engine_key, "version": "?"}
    if partial is not None and partial.exists():
        for line in partial.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if "engine" in r:
                    info.update(engine=r["engine"], version=r["version"])
                else:
                    results[r["index"]] = r
        if results:
            log(f"  {engine_key}: resuming, {len(results)} schemas already done")
    all_indices, indices = indices, [i for i in indices if i not in results]
    sink = open(partial, "a") if partial is not None else None

    def record(r: dict) -> None:
        results[r["index"]] = r
        if sink:
            sink.write(json.dumps(r) + "\n")
            sink.flush()

    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=STATE, delete=False) as f:
        json.dump(indices, f)
        idx_file = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=STATE, delete=False) as f:
        json.dump(timed, f)
        timed_file = f.name
    pos, started = 0, time.perf_counter()
    stderr_log = open(STATE / f"{engine_key}.stderr.log", "w")
    proc = None
    try:
        while pos < len(indices):
            if budget_s is not None and time.perf_counter() - started > budget_s:
                break
            cmd = [sys.executable, __file__, "--worker", engine_key, "--indices", idx_file,
                   "--timed", timed_file, "--start", str(pos), "--data", str(DATA)]
            env = dict(os.environ, OMP_NUM_THREADS="1", RAYON_NUM_THREADS="1")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr_log, text=True, env=env)
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            setup_deadline = time.monotonic() + 600  # vocabulary, data and tokenization first
            deadline, ready = setup_deadline, False
            while True:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    proc.kill()
                    proc.wait()
                    if ready:
                        i = indices[pos]
                        record({"index": i, "id": "?", "status": "compile_error",
                                "error": f"timeout: no answer within {timeout:g} s"})
                        log(f"  {engine_key}: schema #{i} timed out")
                        pos += 1
                    else:
                        raise RuntimeError(f"{engine_key} worker did not start")
                    break
                line = proc.stdout.readline()
                if not line:  # exited
                    proc.wait()
                    if pos < len(indices):
                        i = indices[pos]
                        record({"index": i, "id": "?", "status": "compile_error",
                                "error": f"crash: worker exit code {proc.returncode}"})
                        log(f"  {engine_key}: schema #{i} crashed the worker ({proc.returncode})")
                        pos += 1
                    break
                msg = json.loads(line)
                if "engine_error" in msg:
                    proc.wait()
                    return {**info, "unavailable": msg["engine_error"]}
                if "engine" in msg:
                    info.update(engine=msg["engine"], version=msg["version"])
                    if sink:
                        sink.write(line if line.endswith("\n") else line + "\n")
                        sink.flush()
                    ready = True
                    deadline = time.monotonic() + timeout
                    continue
                record(msg)
                pos += 1
                if budget_s is not None and time.perf_counter() - started > budget_s:
                    proc.kill()
                    proc.wait()
                    log(f"  {engine_key}: stopped after the {budget_s:g} s budget")
                    break
                if pos % 500 == 0:
                    log(f"  {engine_key}: {pos}/{len(indices)} schemas, "
                        f"{time.perf_counter() - started:.0f} s")
                deadline = time.monotonic() + timeout
            sel.close()
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr_log.close()
        if sink:
            sink.close()
        for name in (idx_file, timed_file):
            os.unlink(name)
    info["wall_s"] = time.perf_counter() - started
    info["results"] = [results[i] for i in all_indices if i in results]
    info["complete"] = len(info["results"]) == len(all_indices)
    return info


# ---------------------------------------------------------------------------------------------
# Summaries and the results file
# ---------------------------------------------------------------------------------------------

def _pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def _error_kind(error: str) -> str:
    """A short class for a compile error: the refused keyword when the message names one."""
    kind, _, message = error.partition(": ")
    message = re.sub(r"^\[[0-9:]+\] \S+?:\d+: ", "", message)  # xgrammar's log prefix
    match = re.search(r"\(keyword '([^']+)'", message)
    if match:
        return f"{kind} {match.group(1)}"
    if kind in ("RuntimeError", "ValueError"):
        kind = ""
    text = re.sub(r"\s+", " ", message)[:48].replace("|", "/")
    return f"{kind} {text}".strip()


def best_of(rounds: list[dict]) -> dict:
    """One engine's rounds as one run: the first round's results, with each schema's least TTFM
    (and compile time) and each token's least mask time over the rounds where it compiled."""
    info = dict(rounds[0])
    merged = []
    others = [{r["index"]: r for r in later.get("results", [])} for later in rounds[1:]]
    for r in rounds[0].get("results", []):
        r = dict(r)
        same = [o[r["index"]] for o in others if o.get(r["index"], {}).get("status") == "ok"]
        if r["status"] == "ok" and same:
            for key in ("ttfm_ms", "compile_ms"):
                r[key] = min([r[key]] + [o[key] for o in same])
            if r.get("mask_us"):  # the same tokens in every round: each one's least time
                masks = [o["mask_us"] for o in same if len(o.get("mask_us", ())) == len(r["mask_us"])]
                r["mask_us"] = [min(ts) for ts in zip(r["mask_us"], *masks)]
        merged.append(r)
    info["results"] = merged
    info["wall_s"] = sum(x.get("wall_s", 0) for x in rounds) / len(rounds)
    info["complete"] = all(x.get("complete", True) for x in rounds)
    return info


def summarize(info: dict) -> dict:
    rs = info.get("results", [])
    ok = [r for r in rs if r["status"] == "ok"]
    ttfm = [r["ttfm_ms"] for r in ok]
    masks = [x for r in ok for x in r.get("mask_us", [])[1:]]  # the first mask is in TTFM
    errors: dict[str, int] = {}
    for r in rs:
        if r["status"] != "ok":
            head = _error_kind(r.get("error", "?"))
            errors[head] = errors.get(head, 0) + 1
    return {
        "engine": info["engine"], "version": info["version"], "schemas": len(rs),
        "unavailable": info.get("unavailable"),
        "wall_s": round(info.get("wall_s", 0), 1),
        "passing": sum(1 for r in ok if r["valid_rejected"] == 0 and r["invalid_accepted"] == 0),
        "compile_errors": len(rs) - len(ok),
        "validation_schemas": sum(1 for r in ok if r["valid_rejected"]),
        "validation_instances": sum(r["valid_rejected"] for r in ok),
        "invalidation_schemas": sum(1 for r in ok if r["invalid_accepted"]),
        "invalidation_instances": sum(r["invalid_accepted"] for r in ok),
        "instances": sum(r.get("valid", 0) + r.get("invalid", 0) for r in ok),
        "ttfm_ms": {k: _pct(ttfm, q) for k, q in (("median", 50), ("p99", 99), ("max", 100))},
        "ttfm_over_50ms": sum(1 for t in ttfm if t > 50),
        "ttfm_by_id": {r["id"]: r["ttfm_ms"] for r in ok},  # for the schemas every engine compiles
        "mask_us": {k: _pct(masks, q) for k, q in (("median", 50), ("p99", 99), ("max", 100))},
        "mask_tokens": len(masks),
        "timed_schemas": sum(1 for r in ok if "mask_us" in r),
        "mask_mismatch": sum(r.get("mask_mismatch", 0) for r in ok),
        "error_kinds": dict(sorted(errors.items(), key=lambda kv: -kv[1])[:8]),
        "bad_examples": [{"id": r["id"], "valid_rejected": r["valid_rejected"],
                          "invalid_accepted": r["invalid_accepted"]}
                         for r in ok if r["invalid_accepted"]][:10],
    }


def _fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def render(summaries: dict) -> str:
    lines = [
        "# MaskBench (JSON Schema): Trellis vs llguidance vs xgrammar",
        "",
        "Written by `benchmarks/json_schema_bench.py` (method in its docstring and in GUIDE.md). SmolLM2-135M",
        "vocabulary; instances serialized with `json.dumps(data, ensure_ascii=False)` and tokenized with the",
        "model's BPE; one thread per engine, engines run one after another on the same machine.",
        "Compile errors include refusals (Trellis: `UnsupportedSchemaError`), crashes and timeouts.",
        "Validation errors: schemas with a valid instance rejected [instances]; invalidation errors: schemas",
        "with an invalid instance accepted [instances]. TTFM over every compiled schema; mask µs pooled over",
        "every token of the first valid instance of the timed schemas. Engines use their defaults with",
        "flexible whitespace (Trellis: known properties in schema order, additional ones after them).",
        "",
    ]
    by_split: dict[str, list] = {}
    for key, s in summaries.items():
        by_split.setdefault(s["split"], []).append(s)
    for split in sorted(by_split, key=lambda k: (by_split[k][0]["schemas"] if by_split[k] else 0),
                        reverse=True):
        rows = sorted(by_split[split], key=lambda s: s["engine"])
        lines += [f"## {split}", ""]
        k = rows[0].get("rounds", 1)
        lines.append("Runs started: " + ", ".join(f"{s['engine']} {s['when']}" for s in rows)
                     + f"; {rows[0]['machine']}; other jobs shared the two cores, so times are noisy"
                     + (f"; each engine ran {k} rounds in turns, and times are each schema's and token's "
                        f"best of them." if k > 1 else "."))
        lines.append("")
        lines.append("| engine | version | schemas | passing | compile errors | validation errors | "
                     "invalidation errors | TTFM ms median / p99 / max | mask µs median / p99 / max "
                     "(tokens) | wall s |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for s in rows:
            if s.get("unavailable"):
                lines.append(f"| {s['engine']} | – | – | unavailable: {s['unavailable'][:80]} |"
                             " | | | | | |")
                continue
            n = s["schemas"]
            t, m = s["ttfm_ms"], s["mask_us"]
            lines.append(
                f"| {s['engine']} | {s['version']} | {n} | {s['passing']} ({100 * s['passing'] / max(n, 1):.1f}%) "
                f"| {s['compile_errors']} | {s['validation_schemas']} [{s['validation_instances']}] "
                f"| {s['invalidation_schemas']} [{s['invalidation_instances']}] "
                f"| {_fmt(t['median'])} / {_fmt(t['p99'])} / {_fmt(t['max'])} "
                f"| {_fmt(m['median'], 1)} / {_fmt(m['p99'], 1)} / {_fmt(m['max'], 1)} ({s['mask_tokens']}) "
                f"| {s['wall_s']:.0f} |")
        lines.append("")
        by_engine = {s["engine"]: s for s in rows if not s.get("unavailable")}
        tr, llg = by_engine.get("Trellis"), by_engine.get("llguidance")
        if tr and llg and tr["schemas"] == llg["schemas"]:
            n = tr["schemas"]
            goals = [
                ("passing ≥ llguidance + 5% of schemas", tr["passing"] >= llg["passing"] + 0.05 * n,
                 f"{tr['passing']} vs {llg['passing']} + {0.05 * n:.0f}"),
                ("zero invalidation errors", tr["invalidation_instances"] == 0, str(tr["invalidation_instances"])),
                ("TTFM median ≤ 2× llguidance", tr["ttfm_ms"]["median"] is not None
                 and tr["ttfm_ms"]["median"] <= 2 * llg["ttfm_ms"]["median"],
                 f"{_fmt(tr['ttfm_ms']['median'])} vs 2 × {_fmt(llg['ttfm_ms']['median'])} ms"),
                ("mask p99 ≤ llguidance", tr["mask_us"]["p99"] is not None
                 and tr["mask_us"]["p99"] <= llg["mask_us"]["p99"],
                 f"{_fmt(tr['mask_us']['p99'], 1)} vs {_fmt(llg['mask_us']['p99'], 1)} µs"),
            ]
            lines.append("Issue 3 goals for Trellis on this split: " + "; ".join(
                f"{name}: {'met' if ok else 'NOT met'} ({detail})" for name, ok, detail in goals) + ".")
            lines.append("")
            t, lt = tr["ttfm_ms"], llg["ttfm_ms"]
            if None not in (t["median"], lt["median"]):
                tail = [  # issue 22: the compile tail
                    ("TTFM p99 ≤ llguidance", t["p99"] <= lt["p99"], f"{_fmt(t['p99'])} vs {_fmt(lt['p99'])} ms"),
                    ("TTFM max ≤ 50 ms", t["max"] <= 50, f"{_fmt(t['max'])} ms"),
                    ("TTFM median ≤ 1.2× llguidance", t["median"] <= 1.2 * lt["median"],
                     f"{_fmt(t['median'])} vs 1.2 × {_fmt(lt['median'])} ms"),
                ]
                over = "; ".join(f"{s['engine']} {s['ttfm_over_50ms']}" for s in (tr, llg) if "ttfm_over_50ms" in s)
                lines.append("Issue 22 goals (compile tail): " + "; ".join(
                    f"{name}: {'met' if ok else 'NOT met'} ({detail})" for name, ok, detail in tail)
                    + (f". Compiled schemas with TTFM over 50 ms: {over}." if over else "."))
                lines.append("")
                mine, theirs = tr.get("ttfm_by_id"), llg.get("ttfm_by_id")
                if mine and theirs:  # summaries written before this field have no common set
                    both = mine.keys() & theirs.keys()
                    figures = [" / ".join(_fmt(_pct([by[i] for i in both], q)) for q in (50, 99, 100))
                               for by in (mine, theirs)]
                    lines.append(f"Over the {len(both)} schemas both compile (the goals above take every schema "
                                 f"each compiles): TTFM ms median / p99 / max Trellis {figures[0]}, llguidance "
                                 f"{figures[1]}.")
                    lines.append("")
        for s in rows:
            if s.get("unavailable"):
                continue
            extra = []
            if s["error_kinds"]:
                extra.append("most frequent compile errors: " + ", ".join(f"{k} ({v})" for k, v in s["error_kinds"].items()))
            if s["mask_mismatch"]:
                why = (" (llguidance allows only the canonical token where the text is forced; "
                       "consume_token accepts the others)" if s["engine"] == "llguidance" else "")
                extra.append(f"{s['mask_mismatch']} masks did not allow the next token of a valid instance{why}")
            if s["bad_examples"]:
                extra.append("invalid accepted in: " + ", ".join(str(b["id"]) for b in s["bad_examples"][:5]))
            if extra:
                lines.append(f"- {s['engine']}: " + "; ".join(extra) + ".")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="random sample of N schemas (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--timing-sample", type=int, default=200,
                    help="per-token mask timing on a seeded random sample of K schemas of the run")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema before it counts as an error")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print, do not update the results file")
    ap.add_argument("--resume", action="store_true",
                    help="reuse the results of an interrupted run of the same split (build/json_schema_bench)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds per engine; stop there and report the schemas done (a partial row)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every engine, in turns; times are each schema's and token's best")
    # worker mode (internal)
    ap.add_argument("--worker", choices=ENGINES)
    ap.add_argument("--indices")
    ap.add_argument("--timed")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
        return

    # a terminated run still kills its worker (supervise's finally) and keeps its partial results
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}")
    if not args.no_install and any(e != "trellis" for e in engines):
        from grammar_bench import ensure_anchors
        ensure_anchors(python=True, node=False)
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        n_total = sum(1 for line in f if line.strip())
    indices = select(n_total, args.limit, args.seed)
    timed = sorted(random.Random(args.seed).sample(indices, min(args.timing_sample, len(indices))))
    split = (f"Full dev split ({n_total} schemas)" if len(indices) == n_total
             else f"Sample of {len(indices)} schemas (seed {args.seed})")
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    STATE.mkdir(parents=True, exist_ok=True)
    store = STATE / "summaries.json"
    summaries = json.loads(store.read_text()) if store.exists() else {}
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    rounds: dict[str, list] = {e: [] for e in engines}
    when: dict[str, str] = {}
    for k in range(args.repeat):
        for e in (engines if k % 2 == 0 else engines[::-1]):
            print(f"{e}: {len(indices)} schemas ({len(timed)} timed)"
                  + (f", round {k + 1} of {args.repeat}" if args.repeat > 1 else "") + " ...", flush=True)
            when.setdefault(e, _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
            partial = STATE / (f"{e}-{len(indices)}-{args.seed}" + (f"-r{k + 1}" if k else "") + ".partial.jsonl")
            if not args.resume and partial.exists():
                partial.unlink()
            rounds[e].append(supervise(e, indices, timed, args.timeout, lambda s: print(s, flush=True),
                                       partial=partial, budget_s=args.budget))
    for e in engines:
        info = best_of(rounds[e])
        s = summarize(info)
        row_split = split if info.get("complete", True) else (
            f"{split}: partial, the first {len(info['results'])} in file order")
        s.update(split=row_split, machine=machine, when=when[e], rounds=args.repeat)
        (STATE / f"{e}-{len(indices)}-{args.seed}.results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in info.get("results", [])))
        print(json.dumps({k: v for k, v in s.items() if k not in ("bad_examples", "ttfm_by_id")}), flush=True)
        summaries[f"{row_split}|{e}"] = s
        if not args.no_write:  # re-read first: another run may have written meanwhile
            merged = json.loads(store.read_text()) if store.exists() else {}
            merged[f"{row_split}|{e}"] = s
            summaries.update(merged)
            store.write_text(json.dumps(merged, indent=1))
            RESULTS.write_text(render(merged))
    print(render({k: v for k, v in summaries.items() if v["split"].startswith(split)}))


if __name__ == "__main__":
    main()

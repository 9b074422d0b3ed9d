"""Models benchmark: every architecture and weight format the build takes, and the real models, on the
desktop software adapters (wgpu-native on lavapipe and on SwiftShader).

    python3 benchmarks/models_bench.py [--cases all|llama-F32,qwen2,...] [--real smollm2,gemma3]
                                       [--no-swiftshader] [--real-reference smollm2]

Synthetic rows: a tiny random GGUF per architecture (tests/model/tiny_gguf.py: llama, llama3, mistral,
qwen2, qwen3, gemma2, gemma3, phi3, in the mixed Q4_1/Q8_0 types its writer stores) and a tiny Llama
per GGUF weight type (every linear weight and the embedding in that type; K-quants in 256-wide rows),
each built with the real model build (TVM kernels). Real rows: SmolLM2-135M-Instruct and Gemma 3 270M
from their built folders. Per row and adapter:

- load: `Executor(...)` (weights upload, buffers, pipelines), seconds;
- agreement with the numpy reference (tests/model/reference.py over gguf's dequantized weights): a
  prompt's prefill and greedy decode steps, the executor decoding its own tokens; the largest
  |logit difference| relative to the reference's largest |logit|, and whether every greedy token matched;
- decode tok/s: DECODE_TOKENS steps after a prefill (each step to the logits on the host);
- GPU memory: bytes the backend allocated for the executor against packed weights + KV cache at the
  context used (the manifest's weight arrays and per-context KV buffers);
- for the real models, the mask cost on the GPU: a decode step with a token bitmask applied on the GPU
  (a grammar's mask) against one without, per vocabulary.

The grammar core's mask cost per vocabulary is vocab_bench.py's (benchmarks/results/grammar.md); this
writes its rows beside ours. Each adapter runs in its own process (the Vulkan ICD is chosen when
wgpu-native loads). Writes benchmarks/results/models.md.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the numpy reference's small matmuls, on a busy machine
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]

from benchmarks.report import write_section  # noqa: E402

SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
RESULT = "@@ROW@@ "
ADAPTER_TIMEOUT_S = 1800

ARCHITECTURES = ["llama", "llama3", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"]
LLAMA_FORMATS = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]
TINY_PROMPT = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64, 128, 255, 30, 31, 32, 33]
TINY_STEPS = 8  # decode steps checked against the reference
DECODE_TOKENS = 16
REAL = {  # name -> (label, built folder relative to the repo, the GGUF)
    "smollm2": ("SmolLM2-135M-Instruct (Q4_1)", "build/models/smollm2-135m-instruct"),
    "gemma3": ("Gemma 3 270M (Q4_K_M)", "build/models/gemma-3-270m"),
}
REAL_PROMPT = [1, 504, 3458, 282, 4649, 314, 1, 21, 4045]  # ids below both vocabularies' sizes
REAL_STEPS = 3


def case_names(spec: str) -> list[str]:
    every = ARCHITECTURES + [f"llama-{kind}" for kind in LLAMA_FORMATS]
    return every if spec == "all" else [name for name in spec.split(",") if name]


def write_case(name: str, path: Path) -> str:
    """Write the tiny GGUF of case `name` (an architecture, or llama-TYPE); returns its weight-types label."""
    from tests.model.tiny_gguf import K_CONFIG, K_QUANTS, write_tiny, write_tiny_llama

    if name.startswith("llama-"):
        kind = name.split("-", 1)[1]
        write_tiny_llama(path, seed=3, q8_0_tensors=(), types={"*": kind},
                         config=K_CONFIG if kind in K_QUANTS else None)
        return kind
    if name == "llama":
        write_tiny_llama(path)
        return "Q4_1 + Q8_0"
    write_tiny(path, name)
    return "Q4_1 + Q8_0" + (" + F16" if name == "phi3" else "")


def build_cases(names, root: Path) -> list[dict]:
    """Write and build every case under `root`; returns [{name, types, gguf, folder, build_s}]."""
    from trellis.kernels.build_model import main as build

    cases = []
    for name in names:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        types = write_case(name, folder / "tiny.gguf")
        t = time.perf_counter()
        build(["--gguf", str(folder / "tiny.gguf"), "--out", str(folder / "out"), "--chunk", "16"])
        cases.append({"name": name, "types": types, "gguf": str(folder / "tiny.gguf"), "folder": str(folder / "out"),
                      "build_s": time.perf_counter() - t})
        print(f"built {name} in {cases[-1]['build_s']:.1f} s", flush=True)
    return cases


def kv_bytes(manifest: dict, context: int) -> int:
    return sum(spec.get("per_context", 0) * context for spec in manifest["buffers"].values() if spec["kind"] == "kv")


def packed_weight_bytes(manifest: dict) -> int:
    return sum(array["bytes"] for array in manifest["weights"]["arrays"].values())


def agreement(ex, reference, prompt, steps) -> dict:
    """The prefill's and each greedy decode step's logits against the reference's (the executor decodes
    its own argmax; the reference is fed its own): worst |diff| / max |reference logit|, tokens equal."""
    import numpy as np

    ex.reset()
    reference.reset()
    got, want = np.asarray(ex.prefill(prompt)), reference.forward(prompt)[-1]
    worst, tokens, expected = 0.0, [], []
    for step in range(steps + 1):
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
        tokens.append(int(np.argmax(got)))
        expected.append(int(np.argmax(want)))
        if step < steps:
            got, want = np.asarray(ex.decode(tokens[-1])), reference.forward([expected[-1]])[-1]
    return {"rel_diff": worst, "tokens_equal": tokens == expected, "steps": steps}


def decode_rate(ex, prompt, tokens: int, bitmask=None) -> tuple[float, list[float]]:
    """tok/s over `tokens` decode steps after a prefill of `prompt`, and each step's seconds."""
    ex.reset()
    ex.prefill(prompt)
    steps = []
    for i in range(tokens):
        t = time.perf_counter()
        ex.decode((5 + 7 * i) % ex.vocab_size, bitmask=bitmask)
        steps.append(time.perf_counter() - t)
    return tokens / sum(steps), steps


def measure(label, folder, gguf_path, backend, prompt, steps, context, check: bool, mask: bool) -> dict:
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(folder)
    before = backend.allocated_bytes
    t = time.perf_counter()
    ex = Executor(artifacts, backend, context=context)
    row = {"label": label, "load_s": time.perf_counter() - t, "allocated": backend.allocated_bytes - before,
           "weights": packed_weight_bytes(artifacts.manifest), "kv": kv_bytes(artifacts.manifest, context),
           "context": context, "variant": ex.variant, "vocab": ex.vocab_size}
    ex.prefill(prompt[:4])  # the first runs compile the shaders: outside the timings
    ex.decode(3)
    if check:
        from tests.model.reference import ReferenceModel

        t = time.perf_counter()
        row["agreement"] = agreement(ex, ReferenceModel(gguf_path), prompt, steps)
        row["reference_s"] = time.perf_counter() - t
    row["tok_s"], step_s = decode_rate(ex, prompt, DECODE_TOKENS)
    row["step_ms"] = statistics.median(step_s) * 1e3
    if mask:
        # A grammar's mask: every 3rd token allowed (the GPU work does not depend on which).
        words = [(0x49249249 if i % 3 == 0 else 0x24924924) for i in range((ex.vocab_size + 31) // 32)]
        words = [w - (1 << 32) if w >= 1 << 31 else w for w in words]
        # Masked and unmasked steps alternate in one sequence, and each pair's difference is taken: this
        # machine's speed drifts within seconds, more than the mask costs.
        ex.reset()
        ex.prefill(prompt)
        unmasked, masked = [], []
        for i in range(DECODE_TOKENS):
            for steps, bitmask in ((unmasked, None), (masked, words)):
                t = time.perf_counter()
                ex.decode((5 + 7 * i) % ex.vocab_size, bitmask=bitmask)
                steps.append(time.perf_counter() - t)
        row["mask_ms"] = statistics.median(m - u for m, u in zip(masked, unmasked)) * 1e3
        row["unmasked_ms"] = statistics.median(unmasked) * 1e3
    return row


def run_adapter(args) -> None:
    """In the child: every case on this process's adapter, one result line per row as soon as it exists."""
    from trellis.runtime.wgpu_backend import WgpuBackend

    backend = WgpuBackend()
    device = backend.adapter_info.get("device", "?")
    for case in json.loads(Path(args.cases_file).read_text()):
        try:
            row = measure(case["name"], case["folder"], case["gguf"], backend, TINY_PROMPT, TINY_STEPS,
                          len(TINY_PROMPT) + DECODE_TOKENS + 8, check=True, mask=False)
            row.update(case=case["name"], types=case["types"], build_s=case["build_s"])
        except Exception as e:  # a row that fails is a result too
            row = {"case": case["name"], "types": case["types"], "error": f"{type(e).__name__}: {e}"[:300]}
        print(RESULT + json.dumps({**row, "adapter": device}), flush=True)
    for name in [n for n in args.real.split(",") if n]:
        label, folder = REAL[name]
        folder = Path(args.models_dir) / Path(folder).name if args.models_dir else REPO / folder
        try:
            gguf_path = real_gguf(name)
            row = measure(label, folder, gguf_path, backend, REAL_PROMPT, REAL_STEPS,
                          len(REAL_PROMPT) + DECODE_TOKENS * 3 + 8, check=name in args.real_reference.split(","),
                          mask=True)
            row.update(types=label.split("(")[1].rstrip(")"))
        except Exception as e:
            row = {"label": label, "error": f"{type(e).__name__}: {e}"[:300]}
        row.update(case=f"real:{name}", real=name)  # keyed apart from the tiny model of the same architecture
        print(RESULT + json.dumps({**row, "adapter": device}), flush=True)


def real_gguf(name: str) -> str:
    if name == "smollm2":
        from trellis.kernels.build_model import default_gguf

        return default_gguf()
    from tests.model.gemma3 import gemma3_gguf_path

    return gemma3_gguf_path()


def mask_rows() -> tuple[list[str], list[str], str | None]:
    """vocab_bench.py's grammar-core rows (from benchmarks/results/grammar.md): JSON schema, lazy and warmed;
    and the lines of its table of the issue's goal (Gemma 3's figures against SmolLM2's), heading included."""
    path = REPO / "benchmarks" / "results" / "grammar.md"
    text = path.read_text() if path.exists() else ""
    section = text.split("## Vocabulary size", 1)[-1] if "## Vocabulary size" in text else ""
    timings, _, rest = section.partition("Per-vocabulary set-up")
    written = re.search(r"Written by `benchmarks/vocab_bench.py` on ([^,]+),", timings)
    rows = [line for line in timings.splitlines() if line.startswith("| JSON schema (nested) |")
            or line.startswith("| any JSON (built-in) |")]
    goal = "\n\n".join(rest[rest.find("Issue 24's goal"):].split("\n\n")[:2]) if "Issue 24's goal" in rest else ""
    return rows, goal.splitlines(), (written.group(1) if written else None)


MIB = 2 ** 20


def fmt_row(row: dict, adapters: list[str], by_adapter: dict) -> str:
    """One table line: the case's lavapipe measures, and the decode rate on each other adapter."""
    first = by_adapter[adapters[0]].get(row["name"], {"error": "no result (the adapter's run stopped)"})
    if "error" in first:
        cells = [row["name"], row.get("types", ""), "**failed**: " + first["error"].replace("|", "/")] + [""] * 5
    else:
        a = first.get("agreement")
        agree = (f"{a['rel_diff']:.1e}, tokens {'equal' if a['tokens_equal'] else '**differ**'}" if a else
                 "not run here (see below)")
        mem = (f"{first['allocated'] / MIB:.2f} MiB = {first['allocated'] / (first['weights'] + first['kv']):.2f} x "
               f"({first['weights'] / MIB:.2f} + {first['kv'] / MIB:.2f})")
        cells = [row["name"], row.get("types", ""), agree, f"{first['load_s']:.2f}",
                 f"{first['tok_s']:.1f}", f"{first['step_ms']:.1f}"]
        for adapter in adapters[1:]:
            other = by_adapter[adapter].get(row["name"])
            cells.append("not measured" if other is None else
                         f"**failed**: {other['error'][:80]}" if "error" in other else
                         f"{other['tok_s']:.1f} (agreement {other['agreement']['rel_diff']:.1e}"
                         f"{'' if other['agreement']['tokens_equal'] else ', tokens **differ**'})"
                         if other.get("agreement") else f"{other['tok_s']:.2f}")
        cells.append(mem)
    return "| " + " | ".join(cells) + " |"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="all", help="'all' or a comma list: llama, qwen2, llama-Q4_K, ...")
    parser.add_argument("--real", default="smollm2,gemma3", help="real models (built folders) to run on lavapipe")
    parser.add_argument("--real-reference", default="smollm2",
                        help="real models also checked against the numpy reference (Gemma 3's takes minutes)")
    parser.add_argument("--models-dir", help="folder holding the built real models (default: build/models)")
    parser.add_argument("--no-swiftshader", action="store_true")
    parser.add_argument("--adapter", help="(internal) run the cases in --cases-file on this process's adapter")
    parser.add_argument("--cases-file", help="(internal)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "models.md"))
    args = parser.parse_args(argv)
    if args.adapter:
        run_adapter(args)
        return 0

    root = Path(tempfile.mkdtemp(prefix="trellis-models-"))
    cases = build_cases(case_names(args.cases), root)
    (root / "cases.json").write_text(json.dumps(cases))
    adapters = [("lavapipe", {}, args.real)]
    if not args.no_swiftshader and os.path.exists(SWIFTSHADER_ICD):
        adapters.append(("swiftshader", {"VK_ICD_FILENAMES": SWIFTSHADER_ICD}, ""))  # real models: browser.md
    by_adapter, names, notes = {}, [], []
    for label, env, real in adapters:
        cmd = [sys.executable, __file__, "--adapter", label, "--cases-file", str(root / "cases.json"),
               "--real", real, "--real-reference", args.real_reference]
        if args.models_dir:
            cmd += ["--models-dir", args.models_dir]
        try:
            proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True,
                                  timeout=ADAPTER_TIMEOUT_S)
            output = proc.stdout
            if proc.returncode:
                notes.append(f"{label}: exit {proc.returncode}: {proc.stderr[-300:]}")
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            notes.append(f"{label}: timed out after {ADAPTER_TIMEOUT_S} s; the rows it finished are kept")
        rows = [json.loads(line[len(RESULT):]) for line in output.splitlines() if line.startswith(RESULT)]
        print(f"{label}:", *map(json.dumps, rows), sep="\n", flush=True)
        by_adapter[label] = {row["case"]: row for row in rows}
        names.append((label, rows[0]["adapter"] if rows else "?"))
    write_results(Path(args.out), cases, by_adapter, names, notes)
    print(f"wrote {args.out}")
    return 0


def write_results(out: Path, cases, by_adapter, names, notes) -> None:
    adapters = [label for label, _ in names]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    lines = ["# Models benchmark", "",
             f"Written by `python3 build.py bench models` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"commit {commit}; {os.cpu_count()} CPU cores (shared). Adapters (wgpu-native, desktop): "
             + ", ".join(f"{label}: {device}" for label, device in names) + ".", ""]
    columns = ["model", "weights", f"agreement with the numpy reference (lavapipe; worst abs diff / max abs logit)",
               "load s (lavapipe)", "decode tok/s (lavapipe)", "decode step ms (lavapipe, median)"]
    columns += [f"decode tok/s ({label})" for label in adapters[1:]]
    columns.append("GPU memory (lavapipe) = x (packed weights + KV cache)")
    lines += ["## Synthetic: every architecture and every weight type (tiny random models)", "",
              "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += [fmt_row(case, adapters, by_adapter) for case in cases]
    real = [row for row in by_adapter.get(adapters[0], {}).values() if row.get("real")]
    if real:
        lines += ["", "## Real models (lavapipe)", "",
                  "| model | agreement with the numpy reference | load s | decode tok/s | decode step ms (median) "
                  "| GPU memory = x (packed weights + KV cache) | kernel variant | GPU mask cost per step "
                  "(bitmask applied vs not) |", "|---|---|---|---|---|---|---|---|"]
        for row in real:
            if "error" in row:
                lines.append(f"| {row['label']} | **failed**: {row['error']} | | | | | | |")
                continue
            a = row.get("agreement")
            agree = (f"{a['rel_diff']:.1e} over a {len(REAL_PROMPT)}-token prefill and {a['steps']} greedy steps, "
                     f"tokens {'equal' if a['tokens_equal'] else '**differ**'}" if a else REAL_AGREEMENT[row['real']])
            lines.append(
                f"| {row['label']} | {agree} | {row['load_s']:.2f} | {row['tok_s']:.2f} | {row['step_ms']:.1f} | "
                f"{row['allocated'] / MIB:.1f} MiB = {row['allocated'] / (row['weights'] + row['kv']):.2f} x "
                f"({row['weights'] / MIB:.1f} + {row['kv'] / MIB:.1f} at context {row['context']}) | "
                f"{row['variant'] or 'default kernels'} | {row['mask_ms']:+.2f} ms on a {row['unmasked_ms']:.1f} ms "
                f"step ({row['vocab']:,} tokens) |")
    lines += ["", "Real models on SwiftShader: not rerun here; measured in Chromium (WebGPU, SwiftShader) and on the "
              "desktop's SwiftShader by benchmarks/browser_bench.py, benchmarks/results/browser.md: SmolLM2 decode "
              "1.57 tok/s in the browser, 1.90 tok/s on the desktop (same adapter); Gemma 3 270M 0.21-0.24 tok/s "
              "in the browser (measured once by hand, not in a benchmark run)."]
    rows, goal, written = mask_rows()
    lines += ["", "## Mask cost per vocabulary (grammar core)", ""]
    if rows:
        lines += [f"From benchmarks/vocab_bench.py (benchmarks/results/grammar.md, written {written}): the CPU "
                  "side of a constrained step, per vocabulary; the GPU side (applying the bitmask) is the last "
                  "column of the real models' table above.", "",
                  "| grammar | vocabulary | core | compile ms | first mask ms | mask median µs | p99 µs | max µs | tokens |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|", *rows, "", *goal]
    else:
        lines.append("Not found: run `python3 build.py bench vocab` (benchmarks/results/grammar.md).")
    lines += ["", "## Method", "", METHOD, ""]
    if notes:
        lines += ["Runs that stopped early: " + "; ".join(notes), ""]
    # The head of the file: sections other benchmarks write after it (reference_crosscheck.py's) are kept.
    write_section(out, None, "\n".join(lines))


REAL_AGREEMENT = {
    "smollm2": "not run here: tests/runtime/test_smollm2.py (greedy answer and logits against the reference)",
    "gemma3": "not run here: tests/engine/test_gemma3_engine.py (greedy continuation equals the numpy reference's)",
}
METHOD = (
    "Synthetic models: tests/model/tiny_gguf.py's writers (architectures: `write_tiny`, 2 layers, hidden 64-320, "
    "a 269-token vocabulary; their linear weights are Q4_1 and Q8_0 as that writer picks them, the embedding "
    "Q8_0; the `llama` row is `write_tiny_llama`'s default; the `llama-TYPE` rows store every linear weight and "
    "the embedding in TYPE, K-quants with 256-wide rows) built by py/trellis/kernels/build_model.py (`--chunk 16`, "
    "adapter variants included). Agreement: a 20-token prefill and 8 greedy decode steps, the executor "
    "decoding its own argmax, each step's logits against tests/model/reference.py (numpy, over "
    "gguf's dequantized weights); the tests assert <= 1e-3 (tests/runtime/reference_check.py). "
    "Load: `Executor(artifacts, backend, context)` (buffers, weights upload, pipelines). Decode: 16 steps after "
    "a prefill, each `decode()` to the logits on the host, tok/s = 16 / their sum (shader compiles done "
    "before). GPU memory: the bytes the backend allocated for the executor (storage buffers, weights and "
    "activations and KV cache) against the manifest's packed weight arrays plus its KV buffers at the context "
    "used. GPU mask cost: 16 pairs of decode steps in one sequence, one step without a bitmask then one with "
    "(every third token allowed; the bitmask uploaded and applied to the logits on the GPU), the median of the "
    "pairs' differences. SwiftShader: the same synthetic rows through wgpu-native with Chromium's SwiftShader Vulkan ICD "
    "(its own process); real models on SwiftShader are browser.md's. Not measured here: synthetic rows in "
    "Chromium itself (the browser column of browser.md covers SmolLM2 and the tiny Llama's parity test); "
    "the architectures in types other than Q4_1/Q8_0 (every type is measured on the Llama architecture, and "
    "the kernels are shared across architectures per type). This machine is 2 shared cores whose speed "
    "drifts up to 2x within minutes: rates are indicative, ratios within a run are firmer.")


if __name__ == "__main__":
    sys.exit(main())

"""A peer in the same browser: @wllama/wllama (llama.cpp built to wasm, with its WebGPU backend)
runs the same GGUF files as Trellis in the same Chromium (headless, WebGPU on SwiftShader).

    python3 benchmarks/wllama_peer.py [--models smollm2,gemma3] [--threads N]
    python3 benchmarks/browser_bench.py --peers wllama      (beside Trellis' own browser figures)

Per model, in a fresh browser profile and page (nothing in wllama's OPFS cache):

  * load: from `new Wllama(...)` to `loadModelFromUrl()` resolved, the GGUF fetched from the local server;
  * time to first token, client clock: from `createChatCompletion` (SmolLM2, its ChatML template; the
    same prompt as the Trellis benchmark) or `createCompletion` (Gemma 3 270M, a base model with no
    chat template) to the first streamed chunk with text; greedy, `cache_prompt: false` so that
    every request prefills its whole prompt; median of a few;
  * decode tokens/s over 32 tokens, greedy, `ignore_eos`: llama.cpp's own clock
    (`timings.predicted_per_second`) and the client's (first to last streamed chunk);
  * two configurations (`--configs`): wllama's defaults (half the logical cores as threads, every
    layer on WebGPU if llama.cpp finds an adapter) and all cores as threads;
  * the threads it ran with (`getNumThreads()`, and whether the page was cross-origin isolated, which
    wllama's pthreads need) and where the layers ran: llama.cpp's load log says how many layers
    it offloaded to the WebGPU device.

wllama's page is served with COOP/COEP headers (cross-origin isolation), its wasm from the npm
package installed at set-up into build/bench-node; nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]

WLLAMA_VERSION = "3.13.0"
BENCH_NODE = REPO / "build" / "bench-node"  # the benchmarks' npm packages (build/ is ignored)
WLLAMA_PKG = BENCH_NODE / "node_modules" / "@wllama" / "wllama"
NPM_INSTALL = ["npm", "install", "--prefix", str(BENCH_NODE), f"@wllama/wllama@{WLLAMA_VERSION}"]
TIMEOUT_MS = 900_000
DECODE_TOKENS = 32
TTFT_REPEATS = 3
RUN_BUDGET_S = 150  # per model and configuration (see runPeer)

# The same chat prompt as browser_bench.PROMPT; Gemma 3 270M is a base model: a plain prompt.
CHAT_PROMPT = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
PLAIN_PROMPT = "The three primary colors are"
MODELS = {
    "smollm2": {"title": "SmolLM2-135M-Instruct (Q4_1)", "file": "smollm2.gguf", "chat": True},
    "gemma3": {"title": "Gemma 3 270M (Q4_K_M)", "file": "gemma3.gguf", "chat": False},
}


def gguf_path(key: str) -> str:
    if key == "smollm2":
        from tests.model.smollm2 import smollm2_gguf_path

        return smollm2_gguf_path()
    if key == "gemma3":
        from tests.model.gemma3 import gemma3_gguf_path

        return gemma3_gguf_path()
    raise ValueError(f"unknown model {key!r} (smollm2, gemma3)")


def ensure_wllama(log=print) -> Path:
    """Installs the pinned @wllama/wllama into build/bench-node if missing (set-up time only)."""
    manifest = WLLAMA_PKG / "package.json"
    if not manifest.exists() or json.loads(manifest.read_text())["version"] != WLLAMA_VERSION:
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not on PATH; install node 20 (apt-get install -y nodejs npm)")
        BENCH_NODE.mkdir(parents=True, exist_ok=True)
        log("$ " + " ".join(NPM_INSTALL))
        subprocess.run(NPM_INSTALL, check=True)
    return WLLAMA_PKG


PAGE_JS = """
import { Wllama } from '/wllama/index.js';

// One model per page: load, TTFT repeats, one decode run.
window.runPeer = async ({ url, chat, messages, prompt, threads, gpuLayers, repeats, decodeTokens, budgetMs }) => {
  const logs = [];
  const keep = (level) => (...args) => logs.push(`${level}: ${args.map(String).join(' ')}`);
  const logger = { debug: keep('debug'), log: keep('log'), info: keep('info'), warn: keep('warn'),
                   error: keep('error') };
  const t0 = performance.now();
  const wllama = new Wllama({ default: '/wllama/wllama.wasm' }, { logger, allowOffline: false });
  const params = { n_ctx: 1024, useCache: false };
  if (threads !== null) params.n_threads = threads;  // else wllama's own choice: half the logical cores
  if (gpuLayers !== null) params.n_gpu_layers = gpuLayers;  // 0: no WebGPU at all (CPU only)
  await wllama.loadModelFromUrl(url, params);
  const loadMs = performance.now() - t0;
  const base = { temperature: 0, cache_prompt: false, stream: true };
  const ask = (extra) => chat ? wllama.createChatCompletion({ messages, ...base, ...extra })
                              : wllama.createCompletion({ prompt, ...base, ...extra });
  const textOf = (chunk) => chunk.choices && chunk.choices.length
    ? (chat ? chunk.choices[0].delta && chunk.choices[0].delta.content : chunk.choices[0].text) : null;
  // What the page itself gets from WebGPU (wllama asks for an adapter from its worker).
  const adapter = self.navigator.gpu ? await navigator.gpu.requestAdapter() : null;
  const pageAdapter = adapter ? `${adapter.info.vendor} ${adapter.info.architecture}`
    + (adapter.info.isFallbackAdapter ? ' (fallback adapter)' : '') : 'none';
  const ttft = [];
  let firstText = '';
  // A slow configuration (WebGPU on a software adapter) must not take the whole run: after a third
  // of the budget no more TTFT repeats; the decode run is aborted at the budget (its client clock stays).
  for (let i = 0; i < repeats && (i === 0 || performance.now() - t0 < budgetMs / 3); i++) {
    const s = performance.now();
    let first = null;
    for await (const chunk of await ask({ max_tokens: 1 })) {
      const text = textOf(chunk);
      if (first === null && text) { first = performance.now() - s; firstText = text; }
    }
    ttft.push(first);
  }
  const s = performance.now();
  const stamps = [];
  let text = '', timings = null, usage = null;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), Math.max(0, budgetMs - (performance.now() - t0)));
  let aborted = false;
  try {
    for await (const chunk of await ask({ max_tokens: decodeTokens, ignore_eos: true, abortSignal: abort.signal })) {
    const piece = textOf(chunk);
      if (piece) { stamps.push(performance.now() - s); text += piece; }
      if (chunk.timings) timings = chunk.timings;
      if (chunk.usage) usage = chunk.usage;
    }
  } catch (e) {
    if (!abort.signal.aborted) throw e;
    aborted = true;
  }
  clearTimeout(timer);
  return {
    loadMs, ttftMs: ttft, aborted, pageAdapter, firstText, decodeText: text, stampsMs: stamps, timings, usage,
    threads: wllama.getNumThreads(), multithread: wllama.isMultithread(),
    crossOriginIsolated: self.crossOriginIsolated, hardwareConcurrency: navigator.hardwareConcurrency,
    webgpuInPage: wllama.isSupportWebGPU(), logs,
  };
};
"""

PAGE_HTML = ("<!doctype html><meta charset='utf-8'><link rel='icon' href='data:,'><title>wllama peer</title>"
             "<script type='module' src='/peer.js'></script>\n")


def build_site(folder: Path, models: list[str]) -> Path:
    pkg = ensure_wllama()
    (folder / "wllama").mkdir(parents=True)
    shutil.copy2(pkg / "esm" / "index.js", folder / "wllama" / "index.js")
    shutil.copy2(pkg / "esm" / "wasm" / "wllama.wasm", folder / "wllama" / "wllama.wasm")
    (folder / "models").mkdir()
    for key in models:
        (folder / "models" / MODELS[key]["file"]).symlink_to(gguf_path(key))  # served as is, not copied
    (folder / "peer.js").write_text(PAGE_JS)
    (folder / "index.html").write_text(PAGE_HTML)
    return folder


def make_isolated_server(folder: Path):
    """The project's static server, plus the COOP/COEP headers that make the page cross-origin
    isolated (SharedArrayBuffer, hence wllama's threads)."""
    from functools import partial
    from http.server import ThreadingHTTPServer

    from web.site import Handler

    class IsolatedHandler(Handler):
        def end_headers(self):
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
            super().end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(IsolatedHandler, directory=str(folder)))
    server.daemon_threads = True
    return server


OFFLOAD = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
MODEL_BUFFER = re.compile(r"load_tensors:\s+(\S+) model buffer size\s*=\s*([\d.]+ MiB)")


def backend_of(result: dict) -> str:
    """Where llama.cpp put the weights, from its load log: its model buffers name their devices
    (CPU, or the WebGPU device), and a failed adapter request says why there was none."""
    logs = result["logs"]
    offloads = [m for line in logs for m in OFFLOAD.finditer(line)]
    buffers = [m.groups() for line in logs for m in MODEL_BUFFER.finditer(line)]
    no_adapter = [line.split("ggml_webgpu:", 1)[1].strip() for line in logs if "ggml_webgpu: Failed" in line]
    where = ", ".join(f"{name} {size}" for name, size in buffers) or "no model buffer line in the log"
    on_gpu = any(not name.upper().startswith("CPU") for name, _ in buffers)
    label = "WebGPU" if on_gpu else "CPU"
    if offloads:
        done, total = map(int, offloads[-1].groups())
        label += f" ({done}/{total} layers offloaded)"
    return f"{label}; model buffers: {where}" + (f"; {no_adapter[0][:100]}" if no_adapter else "")


def summarize(result: dict) -> dict:
    stamps = [t / 1e3 for t in result["stampsMs"]]
    client_tps = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 and stamps[-1] > stamps[0] else None
    timings = result.get("timings") or {}
    ttft = [t / 1e3 for t in result["ttftMs"] if t is not None]
    return {
        "load_s": result["loadMs"] / 1e3, "ttft_s": ttft, "ttft_median_s": statistics.median(ttft) if ttft else None,
        "decode_tps": None if result["aborted"] else timings.get("predicted_per_second"),
        "decode_tokens": timings.get("predicted_n") or len(stamps), "aborted": result["aborted"],
        "client_decode_tps": client_tps, "chunks": len(stamps),
        "prefill_tps": timings.get("prompt_per_second"), "prompt_tokens": timings.get("prompt_n"),
        "page_adapter": result["pageAdapter"], "threads": result["threads"], "multithread": result["multithread"],
        "isolated": result["crossOriginIsolated"], "cores": result["hardwareConcurrency"],
        "backend": backend_of(result), "text": result["decodeText"],
        "gpu_log": [line[:200] for line in result["logs"]
                    if re.search(r"webgpu|offloaded|CPU_REPACK|model buffer size", line, re.I)][:8],
    }


# wllama's configurations, name -> (n_gpu_layers, n_threads); None leaves wllama's default: every
# layer on WebGPU if llama.cpp finds an adapter, half the logical cores as threads. "cpu" hides
# WebGPU from it altogether (n_gpu_layers 0).
CONFIGS = {"default": (None, None), "all-cores": (None, os.cpu_count() or 1), "cpu": (0, None)}
CONFIG_TITLES = {"default": "its defaults", "all-cores": f"n_threads {os.cpu_count()} (all cores)",
                 "cpu": "n_gpu_layers 0 (no WebGPU)"}
DEFAULT_CONFIGS = ("default", "all-cores")


def run(models: list[str], threads: int | None = None, log=print, configs=DEFAULT_CONFIGS, logs_dir=None) -> dict:
    """Measures wllama on each model and configuration, a fresh browser profile and page each; returns
    {"wllama": version, "chromium": ..., "models": {key: {config: summary}}, "errors": ..., "blocked": [...]}."""
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, FLAGS

    root = Path(tempfile.mkdtemp(prefix="trellis-wllama-peer-"))
    out = {"wllama": WLLAMA_VERSION, "models": {}, "blocked": [], "errors": {}}
    try:
        site = build_site(root / "site", models)
        server = make_isolated_server(site)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
            out["chromium"] = browser.version
            for key in models:
                for config in configs:
                    summary = run_one(browser, url, key, config, threads, out, log, logs_dir)
                    if summary:
                        out["models"].setdefault(key, {})[config] = summary
            browser.close()
        server.shutdown()
        server.server_close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def run_one(browser, url, key, config, threads, out, log, logs_dir) -> dict | None:
    spec = MODELS[key]
    from tests.e2e.conftest import loopback_only

    context = browser.new_context()  # a fresh profile: empty OPFS, empty HTTP cache
    loopback_only(context, out["blocked"])
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/index.html")
    page.wait_for_function("typeof window.runPeer === 'function'")
    job = {"url": f"{url}/models/{spec['file']}", "chat": spec["chat"], "messages": CHAT_PROMPT,
           "prompt": PLAIN_PROMPT, "threads": threads or CONFIGS[config][1], "gpuLayers": CONFIGS[config][0],
           "repeats": TTFT_REPEATS, "decodeTokens": DECODE_TOKENS, "budgetMs": RUN_BUDGET_S * 1e3}
    log(f"wllama {WLLAMA_VERSION}, {key}, {config}: loading {spec['file']} "
        f"with {job['threads'] or 'its default number of'} threads")
    try:
        result = page.evaluate("(job) => window.runPeer(job)", job)
    except Exception as e:  # a peer that fails is reported, not fatal to the Trellis figures
        out["errors"][f"{key}/{config}"] = (f"{type(e).__name__}: {str(e)[:300]}"
                                            + (f"; page: {errors[:2]}" if errors else ""))
        log(f"wllama, {key}, {config}: failed: {out['errors'][f'{key}/{config}']}")
        return None
    finally:
        context.close()
    if logs_dir:
        Path(logs_dir).mkdir(parents=True, exist_ok=True)
        (Path(logs_dir) / f"wllama-{key}-{config}.log").write_text("\n".join(result["logs"]) + "\n")
    summary = summarize(result)
    log(f"wllama, {key}, {config}: loaded in {summary['load_s']:.2f} s; TTFT "
        f"{', '.join(f'{t * 1e3:.0f} ms' for t in summary['ttft_s'])}; decode "
        f"{summary['decode_tps'] or 0:.2f} tok/s (client {summary['client_decode_tps'] or 0:.2f}) over "
        f"{summary['decode_tokens']} tokens; {summary['threads']} threads "
        f"(isolated {summary['isolated']}); {summary['backend']}; text {summary['text'][:60]!r}")
    return summary


# Trellis' Gemma 3 figures in the browser, measured once by hand (load 27 s, TTFT 13-18 s, decode
# 0.21-0.24 tok/s on a loaded machine); browser_bench does not build Gemma 3 yet.
TRELLIS_GEMMA3_BY_HAND = "load 27 s, TTFT 13–18 s, decode 0.21–0.24 tok/s (measured once by hand, not in this run)"


def report_lines(peer: dict, trellis: dict | None = None) -> list[str]:
    """The peer section of results/browser.md; `trellis` is browser_bench's browser result, if any."""
    from benchmarks.browser_bench import fmt_s

    def num(v):
        return f"{v:.2f}" if v else "–"

    lines = [f"## Peer in the same browser: @wllama/wllama {peer['wllama']}", "",
             f"llama.cpp compiled to wasm (with its WebGPU backend), Chromium {peer.get('chromium', '?')}, the same "
             "GGUF files, each model in a fresh profile and page served with COOP/COEP (cross-origin isolated). "
             "On this machine WebGPU is a software adapter (SwiftShader, on the same 2 CPU cores): neither "
             "engine has a real GPU here, so these figures say how each copes with a CPU-only browser, not how "
             "either would run on a GPU.", "",
             "| model | engine | load (from the local server) | TTFT (median) | decode tok/s | threads | "
             "where it ran |", "|---|---|---:|---:|---:|---|---|"]
    for key, spec in MODELS.items():
        w = peer["models"].get(key)
        t = (trellis or {}).get("models", {}).get(key)
        if t:
            fresh, cached = t["loads"]
            lines.append(f"| {spec['title']} | Trellis | {fmt_s(fresh['readyMs'] / 1e3)} fresh, "
                         f"{fmt_s(cached['readyMs'] / 1e3)} cached | {fmt_s(statistics.median(t['ttft_none']))} | "
                         f"{num(t['decode_tps'])} ({t['decode_tokens']} tokens) | Pyodide worker | WebGPU "
                         "(SwiftShader) |")
        elif key == "gemma3":
            lines.append(f"| {spec['title']} | Trellis | {TRELLIS_GEMMA3_BY_HAND} | | | Pyodide worker | "
                         "WebGPU (SwiftShader) |")
        for config, w in (peer["models"].get(key) or {}).items():
            lines.append(f"| {spec['title']} | wllama, {CONFIG_TITLES[config]} | {fmt_s(w['load_s'])} | "
                         f"{fmt_s(w['ttft_median_s'])} | {num(w['decode_tps'])} ({w['decode_tokens']} tokens; client "
                         f"{num(w['client_decode_tps'])}{'; stopped at the time budget' if w['aborted'] else ''}) | "
                         f"{w['threads']}{' (pthreads)' if w['multithread'] else ''}"
                         f", isolated: {w['isolated']} | {w['backend']} |")
        for name, error in peer["errors"].items():
            if name.startswith(f"{key}/"):
                lines.append(f"| {spec['title']} | wllama, {name.split('/')[1]} | failed: {error} | | | | |")
    runs = [w for key_runs in peer["models"].values() for w in key_runs.values()]
    if runs and all(w["backend"].startswith("CPU") for w in runs):
        lines += ["", "**wllama ran on the CPU in every configuration** (llama.cpp's model buffers were all CPU "
                  "buffers) although the page itself gets a WebGPU adapter ("
                  + ", ".join(sorted({w["page_adapter"] for w in runs})) + "): its WebGPU backend did not use the "
                  "software adapter. Trellis runs on that adapter (SwiftShader): so the rows compare llama.cpp's "
                  "wasm CPU kernels with Trellis' WGSL kernels on a CPU-emulated GPU, on the same 2 cores."]
    lines += ["", "Method (wllama): load is `new Wllama()` to `loadModelFromUrl()` resolved (fetch of the GGUF into "
              "wllama's OPFS cache, then llama.cpp's load); TTFT is the client clock to the first streamed chunk "
              f"with text, greedy, `cache_prompt: false`, {TTFT_REPEATS} repeats (the first includes warm-up); "
              f"decode is llama.cpp's own clock over {DECODE_TOKENS} greedy tokens with `ignore_eos` (the client "
              "clock between the first and last streamed chunk beside it). SmolLM2 gets the same ChatML prompt as "
              f"Trellis' rows; Gemma 3 270M (a base model, no chat template) the plain prompt {PLAIN_PROMPT!r}. "
              "Trellis' TTFT is its 'no response format' median and its decode its engine clock (above).", ""]
    for key, runs in peer["models"].items():
        for config, w in runs.items():
            lines.append(f"- wllama, {key}, {config}: greedy text {w['text'][:80]!r}; from its log: "
                         + "; ".join(f"`{line}`" for line in w["gpu_log"][:4]))
    lines += ["", f"Nothing left the machine: {len(peer['blocked'])} requests to other hosts were blocked.", ""]
    return lines


SECTION = "## Peer in the same browser"


def write_section(path: Path, lines: list[str]) -> None:
    """Replaces (or appends) the peer section of an existing results file."""
    old = path.read_text().splitlines() if path.exists() else []
    start = next((i for i, line in enumerate(old) if line.startswith(SECTION)), None)
    if start is None:
        new = old + [""] + lines
    else:
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("## ")), len(old))
        new = old[:start] + lines + old[end:]
    path.write_text("\n".join(new).rstrip("\n") + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2,gemma3")
    parser.add_argument("--threads", type=int,
                        help="wllama's n_threads in every configuration (default: each configuration's)")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help=", ".join(CONFIGS))
    parser.add_argument("--logs", type=Path, help="a folder for llama.cpp's full logs, one file per run")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "browser.md",
                        help="the results file whose peer section is replaced")
    args = parser.parse_args(argv)
    started = time.time()
    peer = run(args.models.split(","), args.threads,
               lambda m: print(f"[{time.time() - started:6.1f} s] {m}", flush=True), args.configs.split(","), args.logs)
    lines = report_lines(peer)
    write_section(args.out, lines)
    print("\n".join(lines))
    print(f"wrote the peer section of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

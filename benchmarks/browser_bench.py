"""Browser benchmark: the engine in Chromium (Pyodide in a Web Worker, WebGPU on SwiftShader, the grammar
as wasm) beside the desktop engine (CPython, wgpu-native) in the same run.

    python3 benchmarks/browser_bench.py [--models tiny,smollm2] [--repeats N]
    python3 build.py bench browser                  (same thing, through the project's entry point)
    python3 benchmarks/browser_bench.py --peers wllama   (also @wllama/wllama on the same GGUFs: wllama_peer.py)

What is measured, per model (the tiny random Llama and the embedded SmolLM2):

  * Time to ready. Browser: `CreateEngine()` in a fresh page, once with a fresh profile (weights
    fetched, verified, put in the Cache API; Python started cold) and once after a reload (weights
    from the cache, Python from the memory snapshot the first load kept); the
    worker's own timings (`engine.info.timings`: Python ready, weights, kernels, engine build) say
    where the time goes. The browser engine is ready once the decode plan's kernels are compiled; the
    prefill plan's (most of the compile time on SwiftShader) compile after, and prefill runs token
    by token until they are in: so each load also asks a one-token answer the moment it is ready,
    and waits for every kernel before going on. Pyodide's cold start alone (a module worker that
    only runs `loadPyodide`) is the yardstick of the goal. Desktop: constructing `trellis.Engine`
    (weights upload, every pipeline).
  * Time to first token (TTFT), client clock: from `create({stream: true})` to the first chunk with
    text, after `resetChat()` so that the whole prompt is prefilled; (a) no response format and
    (c) a new schema (web-llm's Hermione schema with a property renamed per repeat, so the grammar
    cache misses: checked). The request is interrupted after its first chunk.
  * Decode tokens/s: `usage.extra.decode_tokens_per_s` of an unconstrained request with
    `ignore_eos` (the engine's clock, from the first sampled token to the last).
  * Grammar time per token: `usage.extra.grammar_per_token_s` of a request under the (cached)
    Hermione schema with free sampling (temperature 1), and its share of the decode step
    (`time_per_output_token_s` of the same request).

The desktop runs in subprocesses, one per adapter: lavapipe (Mesa's llvmpipe Vulkan, the desktop's
default here) and SwiftShader through wgpu-native with VK_ICD_FILENAMES pointing at the Vulkan ICD
that Chromium ships (/usr/lib/chromium/vk_swiftshader_icd.json): the same software adapter as the
browser's WebGPU, so the browser / desktop ratio compares like with like. Each adapter's name is
printed and written down.

Goals (issue 6): browser decode within 1.5x of the desktop on the same adapter; grammar <= 2% of a
decode step (browser); time to ready with cached weights <= 1.5x Pyodide's cold start.
Writes benchmarks/results/browser.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]
from benchmarks.report import cpu_line  # noqa: E402
RESULTS = REPO / "benchmarks" / "results" / "browser.md"
SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
RESULT = "@@RESULT@@ "
CHILD_TIMEOUT_S = 900
CHILD_MEMORY_LIMIT = 10 << 30
PROMPT = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]

# Per model: site id, TTFT repeats, decode tokens, grammar-run tokens.
MODELS = {
    "tiny": {"id": "tiny-llama", "title": "tiny random Llama (2 layers, hidden 64, 269-token byte vocabulary)",
             "repeats": 5, "decode": 64, "grammar": 48},
    "smollm2": {"id": "smollm2-135m-instruct", "title": "SmolLM2-135M-Instruct (Q4_1)",
                "repeats": 3, "decode": 16, "grammar": 12},
}


def hermione_variant(tag: str) -> dict:
    """web-llm's Hermione schema with one property renamed: a schema no cache has seen."""
    from trellis.engine.examples import PERSON_SCHEMA

    schema = json.loads(json.dumps(PERSON_SCHEMA))
    schema["properties"][f"patronus_{tag}"] = schema["properties"].pop("patronus")
    schema["required"] = [f"patronus_{tag}" if r == "patronus" else r for r in schema["required"]]
    return {"type": "json_object", "schema": schema}


def hermione() -> dict:
    from trellis.engine.examples import PERSON_SCHEMA

    return {"type": "json_object", "schema": PERSON_SCHEMA}


# ---- one measurement plan, two runners -----------------------------------------------------------


def measure(runner, spec: dict, repeats: int, log) -> dict:
    """TTFT (none / new schema), decode tok/s and grammar per token through `runner`
    (.reset(), .ttft(request) -> (client_s, usage), .complete(request) -> usage)."""
    salt = uuid.uuid4().hex[:8]
    runner.reset()
    runner.complete({"messages": PROMPT, "max_tokens": 4, "temperature": 0})  # warm-up (first dispatches)
    runner.reset()
    runner.complete({"messages": PROMPT, "max_tokens": 4, "temperature": 0,
                     "response_format": hermione()})  # warm-up; caches the grammar
    out = {"ttft_none": [], "ttft_schema": [], "engine_ttft_none": [], "engine_ttft_schema": [], "grammar_init": [],
           "hits": []}
    for i in range(repeats):
        for kind in ("none", "schema"):
            runner.reset()
            request = {"messages": PROMPT, "temperature": 0, "max_tokens": 256}  # interrupted after one chunk
            if kind == "schema":
                request.update(response_format=hermione_variant(f"{salt}{i}"), complete_on_length=True)
            client_s, usage = runner.ttft(request)
            out[f"ttft_{kind}"].append(client_s)
            out[f"engine_ttft_{kind}"].append(usage["extra"]["time_to_first_token_s"])
            if kind == "schema":
                out["grammar_init"].append(usage["extra"]["grammar_init_s"])
                out["hits"].append(usage["extra"]["grammar_cache_hit"])
        log(f"  TTFT repeat {i + 1}/{repeats}: none {out['ttft_none'][-1] * 1e3:.0f} ms, "
            f"new schema {out['ttft_schema'][-1] * 1e3:.0f} ms")
    runner.reset()
    usage = runner.complete({"messages": PROMPT, "max_tokens": spec["decode"], "ignore_eos": True, "temperature": 0})
    out["decode_tps"] = usage["extra"]["decode_tokens_per_s"]
    out["decode_tokens"] = usage["completion_tokens"]
    out["prefill_tps"] = usage["extra"]["prefill_tokens_per_s"]
    out["prefill_tokens"] = usage["extra"]["prefill_tokens"]
    out["gpu_wait_s"] = usage["extra"]["gpu_wait_per_step_s"]
    log(f"  decode: {out['decode_tps']:.2f} tok/s over {out['decode_tokens']} tokens "
        f"(waiting for the GPU and the read-back {out['gpu_wait_s'] * 1e3:.2f} ms a step)")
    # Greedy, so that the browser and the desktop take the same path through the grammar (parity):
    # the first run meets grammar states whose token masks are built lazily, the second sees them all again.
    request = {"messages": PROMPT, "max_tokens": spec["grammar"], "temperature": 0, "response_format": hermione()}
    for run in ("first", "second"):
        runner.reset()
        usage = runner.complete(request)
        x = usage["extra"]
        out["grammar_tokens"] = usage["completion_tokens"]
        out["grammar_hit"] = x["grammar_cache_hit"]
        step = x["time_per_output_token_s"]
        out[f"grammar_{run}_s"] = x["grammar_per_token_s"]
        out[f"grammar_{run}_share"] = x["grammar_per_token_s"] / step if step else 0.0
        out[f"grammar_{run}_step_s"] = step
        log(f"  grammar ({run} run): {x['grammar_per_token_s'] * 1e6:.0f} µs per token = "
            f"{out[f'grammar_{run}_share'] * 100:.2f}% of a {step * 1e3:.1f} ms step")
    return out


class DesktopRunner:
    def __init__(self, engine):
        self.engine = engine

    def reset(self):
        self.engine.reset_chat()

    def ttft(self, request):
        started = time.perf_counter()
        client, usage = None, None
        stream = self.engine.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            if client is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                client = time.perf_counter() - started
                self.engine.interrupt_generate()
            if chunk.get("usage"):
                usage = chunk["usage"]
        return (client if client is not None else usage["extra"]["time_to_first_token_s"]), usage

    def complete(self, request):
        return self.engine.chat.completions.create(**request)["usage"]


BROWSER_JS = """
window.bench = {
  // Ready, then a one-token request at once (prefill may still run token by token while the prefill
  // kernels compile), then waits until every kernel is compiled.
  async load(url, messages) {
    const t0 = performance.now();
    window.engine = await (await import('/trellis.js')).CreateEngine(url);
    const readyMs = performance.now() - t0;
    await engine.chat.completions.create({ messages, max_tokens: 1 });
    const firstAnswerMs = performance.now() - t0 - readyMs;
    while (engine.info.timings.allKernelsMs === null) await new Promise((r) => setTimeout(r, 20));
    // The worker keeps Python's memory snapshot after ready: the next load restores it.
    while (!(await (await caches.open('trellis-python-v1')).keys()).length) {
      await new Promise((r) => setTimeout(r, 20));
    }
    await engine.resetChat();
    return { readyMs, firstAnswerMs, info: engine.info };
  },
  // A fresh profile has no Python snapshot either (the previous model's load kept one).
  async forgetPython() { await caches.delete('trellis-python-v1'); },
  async pyodide() {
    const t0 = performance.now();
    const w = new Worker('/bench/pyodide_probe.js', { type: 'module' });
    const r = await new Promise((resolve, reject) => { w.onmessage = (e) => resolve(e.data); w.onerror = reject; });
    w.terminate();
    return { ...r, totalMs: performance.now() - t0 };
  },
  // The floor of a decode step's wait: a submission holding a 4-byte copy (after one trivial
  // dispatch with `dispatch`), then mapAsync; the median of n.
  async roundtrip(n, dispatch) {
    const device = await (await navigator.gpu.requestAdapter()).requestDevice();
    const src = device.createBuffer({ size: 64, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const dst = device.createBuffer({ size: 4, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
    const module = device.createShaderModule({ code: `@group(0) @binding(0) var<storage, read_write> b: array<f32>;
      @compute @workgroup_size(16) fn main(@builtin(global_invocation_id) i: vec3<u32>) { b[i.x] += 1.0; }` });
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: src } }] });
    const times = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const encoder = device.createCommandEncoder();
      if (dispatch) {
        const pass = encoder.beginComputePass();
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(1);
        pass.end();
      }
      encoder.copyBufferToBuffer(src, 0, dst, 0, 4);
      device.queue.submit([encoder.finish()]);
      await dst.mapAsync(GPUMapMode.READ);
      dst.unmap();
      times.push(performance.now() - t0);
    }
    device.destroy();
    return times.sort((a, b) => a - b)[n >> 1];
  },
  async reset() { await engine.resetChat(); },
  async ttft(request) {
    const t0 = performance.now();
    let client = null, usage = null;
    const stream = await engine.chat.completions.create({ ...request, stream: true,
      stream_options: { include_usage: true } });
    for await (const chunk of stream) {
      if (client === null && chunk.choices.length && chunk.choices[0].delta.content) {
        client = (performance.now() - t0) / 1000;
        engine.interruptGenerate();
      }
      if (chunk.usage) usage = chunk.usage;
    }
    return [client ?? usage.extra.time_to_first_token_s, usage];
  },
  async complete(request) { return (await engine.chat.completions.create(request)).usage; },
};
"""

PYODIDE_PROBE_JS = """// Pyodide's cold start alone, in a module worker as the engine's (browser_bench.py).
const t0 = performance.now();
const { loadPyodide } = await import(new URL('../pyodide/pyodide.mjs', import.meta.url).href);
const py = await loadPyodide({ indexURL: new URL('../pyodide/', import.meta.url).href });
py.runPython('import sys');
postMessage({ loadMs: performance.now() - t0 });
"""


class BrowserRunner:
    def __init__(self, page):
        self.page = page

    def reset(self):
        self.page.evaluate("bench.reset()")

    def ttft(self, request):
        return tuple(self.page.evaluate("(r) => bench.ttft(r)", request))

    def complete(self, request):
        return self.page.evaluate("(r) => bench.complete(r)", request)


# ---- desktop (a child process per adapter) ---------------------------------------------------------


TRIVIAL_WGSL = """@group(0) @binding(0) var<storage, read_write> b: array<f32>;
struct Args { unused: u32 }
@group(0) @binding(1) var<uniform> args: Args;
@compute @workgroup_size(16) fn main(@builtin(global_invocation_id) i: vec3<u32>) { b[i.x] += f32(args.unused); }"""


def roundtrip(backend, dispatches) -> float:
    """Median seconds of a 4-byte read-back after `dispatches` (None: one trivial dispatch), as bench.roundtrip."""
    probe = backend.create_buffer("probe", 64)
    if dispatches is None:
        dispatches = [backend.create_dispatch(backend.create_kernel("trivial", TRIVIAL_WGSL, "main"), [probe],
                                              bytes(16), 1, (1, 1, 1))]
    times = []
    for _ in range(50):
        t = time.perf_counter()
        backend.run(dispatches, read=(probe, 4))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def desktop_child(args) -> int:
    import resource

    # A shader compiler that runs away fails here, not the machine.
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_LIMIT, CHILD_MEMORY_LIMIT))
    from trellis.engine import Engine
    from trellis.runtime.wgpu_backend import WgpuBackend

    backend = WgpuBackend()
    info = backend.adapter_info
    print(RESULT + json.dumps({"adapter": info, "roundtrip_s": [roundtrip(backend, []), roundtrip(backend, None)]}),
          flush=True)
    for key, folder in zip(args.models.split(","), args.dirs.split(",")):
        spec = MODELS[key]
        log = lambda m: print(f"[desktop {args.desktop}, {key}] {m}", flush=True)  # noqa: E731
        t = time.perf_counter()
        engine = Engine(folder, backend=backend)
        load_s = time.perf_counter() - t
        log(f"engine ready in {load_s:.2f} s")
        result = measure(DesktopRunner(engine), spec, args.repeats or spec["repeats"], log)
        result["ready_s"] = load_s
        print(RESULT + json.dumps({"model": key, "result": result}), flush=True)
        del engine
    return 0


def run_desktop(label: str, env: dict, models: list[str], dirs: list[Path], repeats, log) -> dict:
    cmd = [sys.executable, __file__, "--desktop", label, "--models", ",".join(models),
           "--dirs", ",".join(map(str, dirs))] + (["--repeats", str(repeats)] if repeats else [])
    log(f"desktop on {label}: {' '.join(f'{k}={v}' for k, v in env.items()) or 'default Vulkan ICDs'}")
    out = {"adapter": None, "models": {}, "status": ""}
    try:
        proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
        stdout = proc.stdout
        status = f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}" if proc.returncode else ""
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        status = f"timed out after {CHILD_TIMEOUT_S} s"
    for line in stdout.splitlines():
        if line.startswith(RESULT):
            record = json.loads(line[len(RESULT):])
            if "adapter" in record:
                out["adapter"], out["roundtrip_s"] = record["adapter"], record["roundtrip_s"]
                log(f"  adapter: {adapter_name(record['adapter'])}")
            else:
                out["models"][record["model"]] = record["result"]
        else:
            print(f"  {line}", flush=True)
    out["status"] = status
    if status:
        log(f"  desktop on {label} stopped early: {status}")
    return out


# ---- browser -----------------------------------------------------------------------------------------


def run_browser(site: Path, models: list[str], repeats, log) -> dict:
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, FLAGS, loopback_only
    from web.site import make_server

    (site / "bench").mkdir(exist_ok=True)
    (site / "bench" / "pyodide_probe.js").write_text(PYODIDE_PROBE_JS)
    (site / "bench" / "index.html").write_text("<!doctype html><meta charset='utf-8'><link rel='icon' href='data:,'>"
                                                f"<title>bench</title><script>{BROWSER_JS}</script>\n")
    server = make_server(site, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    out = {"models": {}, "pyodide": [], "blocked": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        out["chromium"] = browser.version
        context = browser.new_context()  # a fresh profile: the first load of each model fetches its weights

        loopback_only(context, out["blocked"])
        context.set_default_timeout(CHILD_TIMEOUT_S * 1000)
        page = context.new_page()
        page.goto(f"{url}/bench/")
        for i in range(2):
            probe = page.evaluate("bench.pyodide()")
            out["pyodide"].append(probe)
            log(f"browser: Pyodide cold start {probe['totalMs'] / 1e3:.2f} s "
                f"(loadPyodide {probe['loadMs'] / 1e3:.2f} s)")
        out["roundtrip_s"] = [page.evaluate("([n, d]) => bench.roundtrip(n, d)", [50, d]) / 1e3 for d in (False, True)]
        log(f"browser: a read-back takes {out['roundtrip_s'][0] * 1e3:.2f} ms after a bare copy, "
            f"{out['roundtrip_s'][1] * 1e3:.2f} ms after one trivial dispatch (medians of 50)")
        for key in models:
            spec = MODELS[key]
            loads = []
            for phase in ("fresh profile", "cached weights"):
                page.goto(f"{url}/bench/")  # a new page: the previous engine's worker ends with it
                if phase == "fresh profile":
                    page.evaluate("bench.forgetPython()")
                load = page.evaluate("([u, m]) => bench.load(u, m)", [f"/models/{spec['id']}/", PROMPT])
                loads.append(load)
                t = load["info"]["timings"]
                log(f"browser, {key}: ready in {load['readyMs'] / 1e3:.2f} s ({phase}; weights fetched "
                    f"{load['info']['weights']['fetchedBytes'] / 2**20:.1f} MiB, cached "
                    f"{load['info']['weights']['cachedBytes'] / 2**20:.1f} MiB; python {t['pythonMs'] / 1e3:.2f} s, "
                    f"weights {t['weightsMs'] / 1e3:.2f} s, kernels {t['kernelsMs'] / 1e3:.2f} s "
                    f"(all {t['allKernelsMs'] / 1e3:.2f} s), first answer {load['firstAnswerMs'] / 1e3:.2f} s after, "
                    f"engine {t['engineMs'] / 1e3:.2f} s)")
            out["adapter"] = loads[-1]["info"]["adapter"]
            result = measure(BrowserRunner(page), spec, repeats or spec["repeats"],
                             lambda m, key=key: log(f"browser, {key}:{m}"))
            result["loads"] = loads
            out["models"][key] = result
        browser.close()
    server.shutdown()
    server.server_close()
    return out


# ---- report ------------------------------------------------------------------------------------------


def adapter_name(info: dict | None) -> str:
    if not info:
        return "?"
    parts = [info.get(k) for k in ("vendor", "architecture", "device", "description") if info.get(k)]
    name = " ".join(dict.fromkeys(str(p) for p in parts))
    return name + (" (fallback adapter)" if info.get("isFallbackAdapter") else "")


def fmt_s(seconds) -> str:
    if seconds is None:
        return "–"
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms" if abs(seconds) >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def med(values):
    return statistics.median(values) if values else None


def report(args, browser, desktops, models, elapsed, load_before, load_after) -> tuple[list[str], list[str]]:
    pyodide_s = med([p["totalMs"] / 1e3 for p in browser["pyodide"]])
    lines = ["# Browser benchmark", "",
             f"Written by `python3 benchmarks/browser_bench.py{' ' + ' '.join(args.argv) if args.argv else ''}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in {elapsed:.0f} s.", "",
             cpu_line(),
             f"- Browser: Chromium {browser.get('chromium', '?')} (headless, `--enable-unsafe-webgpu`), "
             "WebGPU adapter: "
             f"**{adapter_name(browser.get('adapter'))}**; Pyodide 314.0.7 (Python 3.14) in a module Web Worker; "
             "grammar core: wasm",
             *[f"- Desktop on {label}: CPython {platform.python_version()} + wgpu-native, adapter: "
               f"**{adapter_name(d['adapter'])}**" + (f" ({d['status']})" if d["status"] else "")
               for label, d in desktops.items()],
             f"- Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
             f"{', '.join(f'{x:.2f}' for x in load_after)}" + (
                 " — other work shared the CPUs (the software adapters run on the same cores), so timings are noisy."
                 if max(load_before[0], load_after[0]) > 1.5 else ""),
             "",
             f"Pyodide cold start (a module worker that only runs `loadPyodide`, no HTTP cache): "
             f"{', '.join(fmt_s(p['totalMs'] / 1e3) for p in browser['pyodide'])}; median {fmt_s(pyodide_s)}.", "",
             "Read-back floor (a submission holding a 4-byte copy, then the map; medians of 50), after a bare "
             "copy / after one trivial dispatch: " + ", ".join(
                 f"{label} {fmt_s(r[0])} / {fmt_s(r[1])}" for label, r in
                 [("browser", browser["roundtrip_s"])] + [(f"desktop on {k}", d["roundtrip_s"])
                                                          for k, d in desktops.items() if d.get("roundtrip_s")]) + ".",
             ""]
    goals = ["| model | goal | measured | verdict |", "|---|---|---|---|"]
    for key in models:
        b = browser["models"].get(key)
        if not b:
            continue
        same = desktops.get("swiftshader", {}).get("models", {}).get(key)
        lava = desktops.get("lavapipe", {}).get("models", {}).get(key)
        fresh, cached = b["loads"]
        ct = cached["info"]["timings"]
        ft = fresh["info"]["timings"]
        lines += [f"## {MODELS[key]['title']}", "",
                  "| measure | browser (Chromium, SwiftShader) | desktop, SwiftShader (same adapter) "
                  "| desktop, lavapipe "
                  "| browser ÷ desktop, same adapter (> 1: browser slower) |", "|---|---:|---:|---:|---:|"]

        def row(name, bv, sv, lv, ratio=True, f=fmt_s, rate=False):
            r = "–"
            if ratio and bv and sv and bv > 0 and sv > 0:
                r = f"{(sv / bv if rate else bv / sv):.2f}×"
            lines.append(f"| {name} | {f(bv)} | {f(sv)} | {f(lv)} | {r} |")

        def d(result, k):
            return result.get(k) if result else None

        row("time to ready, fresh profile (weights fetched)", fresh["readyMs"] / 1e3, None, None, False)
        row("time to ready, cached weights (reload)", cached["readyMs"] / 1e3, d(same, "ready_s"), d(lava, "ready_s"))
        for label, t in (("fresh", ft), ("cached", ct)):
            start = "from the kept snapshot" if t.get("pythonRestored") else "cold"
            lines.append(f"| … {label}: Python ready ({start}; Pyodide + trellis package "
                         f"{fmt_s(t['packageMs'] / 1e3)}) "
                         f"/ weights / decode kernels compiled / engine built (its build time) | "
                         f"{fmt_s(t['pythonMs'] / 1e3)} / {fmt_s(t['weightsMs'] / 1e3)} / {fmt_s(t['kernelsMs'] / 1e3)}"
                         f" / {fmt_s(t['totalMs'] / 1e3)} ({fmt_s(t['engineMs'] / 1e3)}) | | | |")
        lines.append(f"| … cached: every kernel compiled (prefill's too) | {fmt_s(ct['allKernelsMs'] / 1e3)} | | | |")
        row("… cached: a 1-token answer asked the moment it is ready (client)", cached["firstAnswerMs"] / 1e3,
            None, None, False)
        row("TTFT, no response format (client, median)", med(b["ttft_none"]), med(d(same, "ttft_none") or []),
            med(d(lava, "ttft_none") or []))
        row("TTFT, new schema (client, median)", med(b["ttft_schema"]), med(d(same, "ttft_schema") or []),
            med(d(lava, "ttft_schema") or []))
        row("… new schema − none", med(b["ttft_schema"]) - med(b["ttft_none"]),
            (med(same["ttft_schema"]) - med(same["ttft_none"])) if same else None,
            (med(lava["ttft_schema"]) - med(lava["ttft_none"])) if lava else None)
        row("… grammar init in the request (compile, matcher, first mask; median)", med(b["grammar_init"]),
            med(d(same, "grammar_init") or []), med(d(lava, "grammar_init") or []))
        row(f"prefill ({b['prefill_tokens']} prompt tokens), tok/s", b["prefill_tps"], d(same, "prefill_tps"),
            d(lava, "prefill_tps"), f=lambda v: f"{v:.2f}" if v else "–", rate=True)
        row(f"decode ({b['decode_tokens']} tokens, ignore_eos), tok/s", b["decode_tps"], d(same, "decode_tps"),
            d(lava, "decode_tps"), f=lambda v: f"{v:.2f}" if v else "–", rate=True)
        row("… of a decode step, waiting for the GPU's work and the read-back", b.get("gpu_wait_s"),
            d(same, "gpu_wait_s"), d(lava, "gpu_wait_s"))
        for run, what in (("first", "first run: lazily built masks"), ("second", "second run, same tokens")):
            row(f"grammar per token (Hermione schema, greedy, {b['grammar_tokens']} tokens; {what})",
                b[f"grammar_{run}_s"], d(same, f"grammar_{run}_s"), d(lava, f"grammar_{run}_s"))
            row("… share of the decode step", b[f"grammar_{run}_share"], d(same, f"grammar_{run}_share"),
                d(lava, f"grammar_{run}_share"), False, f=lambda v: f"{v * 100:.2f}%" if v is not None else "–")
        inputs = max(ct["pythonMs"], ct["weightsMs"])  # the engine build starts once both are in
        lines += ["", f"Ready with cached weights at {fmt_s(ct['totalMs'] / 1e3)}: Python ready "
                  f"{fmt_s(ct['pythonMs'] / 1e3)}, weights {fmt_s(ct['weightsMs'] / 1e3)}, decode kernels "
                  f"{fmt_s(ct['kernelsMs'] / 1e3)} (concurrently, on {os.cpu_count()} cores); the engine build ran "
                  f"from {fmt_s(inputs / 1e3)} for {fmt_s(ct['engineMs'] / 1e3)} (its plans waiting for the "
                  f"kernels); Pyodide alone starts in {fmt_s(pyodide_s)}."]
        hits = b["hits"] + (same["hits"] if same else []) + (lava["hits"] if lava else [])
        cache_check = ("False for every new schema" if not any(hits)
                       else "True for some new schema (the measurement is wrong)")
        lines += ["", f"Repeats of the TTFT pair: {len(b['ttft_none'])}. Cache check: grammar_cache_hit was "
                  f"{cache_check}; the grammar run's schema was {'a cache hit' if b['grammar_hit'] else 'compiled'} "
                  f"in the browser. Engine clock TTFT (browser): none {fmt_s(med(b['engine_ttft_none']))}, new schema "
                  f"{fmt_s(med(b['engine_ttft_schema']))}.", ""]
        if same:
            ratio = same["decode_tps"] / b["decode_tps"] if b["decode_tps"] else float("inf")
            goals.append(f"| {key} | browser decode within 1.5× of the desktop on the same adapter | desktop "
                         f"{same['decode_tps']:.2f} tok/s ÷ browser {b['decode_tps']:.2f} tok/s = {ratio:.2f}× "
                         f"| {'met' if ratio <= 1.5 else '**MISSED**'} |")
        else:
            goals.append(f"| {key} | browser decode within 1.5× of the desktop on the same adapter | "
                         "no SwiftShader desktop figure | not measured |")
        worst = max(b["grammar_first_share"], b["grammar_second_share"])
        goals.append(f"| {key} | grammar ≤ 2% of a decode step (browser) | first run "
                     f"{b['grammar_first_share'] * 100:.2f}% "
                     f"({fmt_s(b['grammar_first_s'])} of {fmt_s(b['grammar_first_step_s'])}), second run "
                     f"{b['grammar_second_share'] * 100:.2f}% ({fmt_s(b['grammar_second_s'])} of "
                     f"{fmt_s(b['grammar_second_step_s'])}) | {'met' if worst <= 0.02 else '**MISSED**'} |")
        ready = cached["readyMs"] / 1e3
        goals.append(f"| {key} | time to ready with cached weights ≤ 1.5× Pyodide's cold start | {fmt_s(ready)} = "
                     f"{ready / pyodide_s:.2f}× {fmt_s(pyodide_s)} "
                     f"| {'met' if ready <= 1.5 * pyodide_s else '**MISSED**'} |")
    notes = ["## Method", "",
             "TTFT is the client clock (from `create` to the first chunk with text), each request after `resetChat()` "
             "so the whole prompt is prefilled, interrupted after its first chunk. The new schema is web-llm's "
             "Hermione schema with a property renamed per repeat (never cached). Decode tokens/s and the grammar "
             "time per token are the engine's own figures (`usage.extra`), the same code on both sides: in the "
             "browser the engine is Python 3.14 under Pyodide (wasm) and each GPU submission and read-back crosses "
             "from Python to JavaScript; the grammar core is the same C++ built to wasm (browser) and native "
             "(desktop). The desktop's time to ready is `Engine(folder)` (weights from disk, pipelines compiled); the "
             "browser's is `CreateEngine()` to ready, in a new page each time (a new worker: Python starts "
             "again, cold in the fresh profile, from the memory snapshot the first load kept in the reload), "
             "after the previous page's kernels were all compiled; "
             "its parts are the worker's `engine.info.timings`, each the time from the start at which that part "
             "was done (Python, the weights and the decode plan's pipelines proceed concurrently; the prefill "
             "plan's pipelines compile after ready, prefill running token by token until they are in). "
             "The grammar runs are "
             "greedy so that both sides follow the same tokens through the grammar (the parity test checks that "
             "they do on the tiny model): the first run meets grammar states whose token masks are built lazily, "
             "the second run repeats the same tokens with every mask cached. The goals are judged on the browser "
             "column, against the desktop on the same adapter (SwiftShader) and Pyodide's cold start measured in "
             "the same run.",
             "", f"Nothing left the machine: {len(browser['blocked'])} requests to other hosts were blocked.", ""]
    return lines, goals + [""] + notes


def tiny_model_dir() -> Path:
    from trellis.kernels.build_model import main as build
    from tests.model.tiny_gguf import write_tiny_llama

    tmp = Path(tempfile.mkdtemp(prefix="trellis-browser-bench-"))
    write_tiny_llama(tmp / "tiny.gguf")
    build(["--gguf", str(tmp / "tiny.gguf"), "--out", str(tmp / "out")])
    return tmp / "out"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--repeats", type=int, help="TTFT repeats per model (default: tiny 5, smollm2 1)")
    parser.add_argument("--no-desktop", action="store_true", help="the browser only")
    parser.add_argument("--peers", default="", help="wllama: also @wllama/wllama in the same Chromium on the "
                        "SmolLM2 and Gemma 3 GGUFs (benchmarks/wllama_peer.py), a section of its own")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--desktop", help=argparse.SUPPRESS)  # (internal) a desktop child on this adapter
    parser.add_argument("--dirs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if args.desktop:
        return desktop_child(args)

    started = time.time()
    load_before = os.getloadavg()

    def log(message):
        print(f"[{time.time() - started:6.1f} s] {message}", flush=True)

    import shutil

    from trellis.runtime.artifacts import DEFAULT_MODEL_DIR
    from web.site import build_site

    models = args.models.split(",")
    dirs = []
    for key in models:
        if key == "tiny":
            dirs.append(tiny_model_dir())
        elif key == "smollm2":
            if not (DEFAULT_MODEL_DIR / "manifest.json").exists():
                sys.exit(f"{DEFAULT_MODEL_DIR} is missing: run `python3 build.py model` first")
            dirs.append(DEFAULT_MODEL_DIR)
        else:
            sys.exit(f"unknown model {key!r} (tiny, smollm2)")
    site_root = Path(tempfile.mkdtemp(prefix="trellis-browser-site-"))
    site = build_site(site_root / "site", [(MODELS[k]["id"], d) for k, d in zip(models, dirs)])
    log(f"built the site in {site}")
    try:
        browser = run_browser(site, models, args.repeats, log)
        desktops = {}
        if not args.no_desktop:
            adapters = []
            if os.path.exists(SWIFTSHADER_ICD):
                adapters.append(("swiftshader", {"VK_ICD_FILENAMES": SWIFTSHADER_ICD}))
            adapters.append(("lavapipe", {}))
            for label, env in adapters:
                desktops[label] = run_desktop(label, env, models, dirs, args.repeats, log)
    finally:
        shutil.rmtree(site_root, ignore_errors=True)
        for key, d in zip(models, dirs):
            if key == "tiny":
                shutil.rmtree(d.parent, ignore_errors=True)
    peers = [p for p in args.peers.split(",") if p]
    if any(p != "wllama" for p in peers):
        sys.exit(f"unknown peer in {args.peers!r} (wllama)")
    peer = None
    if peers:
        from benchmarks import wllama_peer

        peer = wllama_peer.run(list(wllama_peer.MODELS), log=log)
    lines, goals = report(args, browser, desktops, models, time.time() - started, load_before, os.getloadavg())
    if peer:
        from benchmarks import wllama_peer

        lines += wllama_peer.report_lines(peer, browser)
    # Goals first, right after the set-up facts.
    head_end = next(i for i, line in enumerate(lines) if line.startswith("## "))
    text = "\n".join(lines[:head_end] + ["## Goals", ""] + goals[:goals.index("")] + [""] + lines[head_end:]
                     + goals[goals.index("") + 1:]) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

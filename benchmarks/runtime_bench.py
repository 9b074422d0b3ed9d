"""Runtime benchmark: the WebGPU executor on this machine's adapters, against each adapter's roofline.

    python3 benchmarks/runtime_bench.py [--models tiny,smollm2] [--prompt-tokens 128] [--decode-tokens 8]

For each adapter (lavapipe; SwiftShader too when Chromium's ICD is installed) it first measures the
adapter's ceilings with calibration kernels (best GFLOP/s, best GB/s, and per packed weight format
the unpack floor: the rate of a kernel that does nothing but dequantize and multiply-add), then per
model: prefill tokens/s, decode tokens/s, dispatches per decode token, host time per decode step
(encoding and submitting, without the wait for the GPU), GPU time per kernel (timestamp queries, or
each dispatch repeated alone), the decode step as a share of the roofline (each step against a
streaming read run soon after it) and the ceilings the unpack floors, and they with the plan's
fixed cost (the decode plan with every kernel returning at once), put on that share, with an
adapter's kernel variants the same steps with the default kernels, and GPU memory against the
weight and KV-cache bytes.
The numpy reference forward pass runs beside it as a yardstick. Writes benchmarks/results/runtime.md.
"""

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# OpenBLAS's threads make the numpy reference's small matmuls ~100x slower on a busy small machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]
SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
RESULT = "@@RESULT@@ "
ADAPTER_TIMEOUT_S = 1800
ADAPTER_MEMORY_LIMIT = 10 << 30

FLOPS_WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  var a = vec4<f32>(f32(id.x) * 1e-9, 1.0, 2.0, 3.0);
  var b = vec4<f32>(0.5, 0.25, 0.125, 0.0625);
  var c = vec4<f32>(0.999, 0.998, 0.997, 0.996);
  var d = a; var e = b;
  for (var i = 0u; i < 1024u; i++) {
    a = fma(a, c, b); d = fma(d, c, e); b = fma(b, c, a); e = fma(e, c, d);
  }
  out[id.x] = a.x + b.y + d.z + e.w;
}
"""
FLOPS_PER_INVOCATION = 1024 * 4 * 4 * 2  # iterations x fma per iteration x lanes x 2
# Streaming reads of one array of words. Two orders: grid-strided (neighbouring invocations read
# neighbouring words) and chunked (each invocation streams its own contiguous chunk: the order a CPU
# core's prefetcher likes; software adapters run invocations on CPU cores). `@BODY@` consumes the word `w`.
STREAM_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let b = f32(id.x) * 1e-9;
@XS@
  var s = vec4<f32>(0.0);
  @LOOP@ {
    let w = src[i];
@BODY@
  }
  out[id.x] = s.x + s.y + s.z + s.w;
}
"""
STREAM_ORDERS = {
    "grid-strided": "for (var i = id.x; i < arrayLength(&src); i += n.x * 64u)",
    "chunked": "let chunk = (arrayLength(&src) + n.x * 64u - 1u) / (n.x * 64u);\n"
               "  for (var i = id.x * chunk; i < min((id.x + 1u) * chunk, arrayLength(&src)); i++)",
}
# The unpack floors: the least work a decode kernel does per packed weight word, as the model's kernels
# do it (a mask, a conversion and a multiply-add per weight; x pre-scaled by the weight's bit position),
# with x held in registers: no x, scale or output traffic. Their rate against the streaming read bounds
# the share of the roofline any kernel dequantizing in f32 can reach.
UNPACK_TERMS = {  # format -> (the f32 terms of one 32-bit word `c`, x's scale per term)
    "q4_1": ([f"f32(bitcast<i32>(w.{{c}} & {15 << 4 * j}u))" for j in range(7)] + ["f32(w.{c} >> 28u)"],
             [16.0 ** -j for j in range(7)] + [1.0]),
    "q8_0": (["f32(bitcast<i32>(w.{c} << 24u))"] + [f"f32(bitcast<i32>((w.{{c}} << {s}u) & 4278190080u))"
                                                   for s in (16, 8, 0)], [2.0 ** -24] * 4),
}
X_BASE, X_STEP = 0.11, 0.01  # x_j = (X_BASE + X_STEP * j + 1e-9 * invocation) * scale_j


def stream_wgsl(order: str, kind: str) -> str:
    """The streaming read (`kind` "stream") or an unpack floor ("q4_1", "q8_0") in `order`."""
    if kind == "stream":
        xs, body = "", "    s += bitcast<vec4<f32>>(w);"
    else:
        terms, scales = UNPACK_TERMS[kind]
        xs = "\n".join(f"  let x{j} = (b + {X_BASE + X_STEP * j}) * {scale!r};" for j, scale in enumerate(scales))
        body = "\n".join(f"    s.{c} = fma({term.format(c=c)}, x{j}, s.{c});"
                         for c in "xyzw" for j, term in enumerate(terms))
    return STREAM_WGSL.replace("@XS@", xs).replace("@LOOP@", STREAM_ORDERS[order]).replace("@BODY@", body)


def unpack_reference(kind: str, words) -> float:
    """What an unpack floor's invocations sum to over `words` (uint32), in float64 (x's 1e-9 term left out)."""
    import numpy as np

    w = np.asarray(words, dtype=np.uint32).astype(np.int64)
    _, scales = UNPACK_TERMS[kind]
    if kind == "q4_1":  # the top nibble is shifted down, the others masked in place
        values = [((w >> 4 * j) & 15) * 16.0 ** j for j in range(7)] + [w >> 28]
    else:
        values = [(((w >> 8 * j) & 255) ^ 128) - 128 for j in range(4)]  # the signed bytes
        values = [v * 2.0 ** 24 for v in values]
    return float(sum((v * ((X_BASE + X_STEP * j) * scales[j])).sum() for j, v in enumerate(values)))


def best_of(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def calibrate(backend, rounds: int = 5) -> dict:
    """Best GFLOP/s (register-only FMAs) and GB/s (the better of two streaming reads) the adapter reaches,
    and per packed weight format the unpack floor's rate as a fraction of the streaming read's
    (`unpack`; medians over rounds that run them in turn, as this machine drifts)."""
    import numpy as np

    device = backend.device
    groups = 256
    out = backend.create_buffer("out", 4 * groups * 64)
    src = backend.create_buffer("src", 64 << 20)

    def kernel(code, buffers):
        pipeline = device.create_compute_pipeline(
            layout="auto", compute={"module": device.create_shader_module(code=code), "entry_point": "main"})
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)])

        def run():
            encoder = device.create_command_encoder()
            p = encoder.begin_compute_pass()
            p.set_pipeline(pipeline)
            p.set_bind_group(0, group)
            p.dispatch_workgroups(groups)
            p.end()
            device.queue.submit([encoder.finish()])
            return device.queue.read_buffer(out)

        run()  # compile
        return run

    results = {"gflops": groups * 64 * FLOPS_PER_INVOCATION / best_of(kernel(FLOPS_WGSL, [out])) / 1e9}
    # Each unpack floor is first checked against numpy on random words: the rate is of the work claimed.
    probe = np.random.default_rng(7).integers(0, 2**32, 1 << 14, dtype=np.uint64).astype(np.uint32)
    probe_src = backend.create_buffer("probe", probe.nbytes, probe.tobytes())
    for kind in UNPACK_TERMS:
        for order in STREAM_ORDERS:
            got = float(np.frombuffer(kernel(stream_wgsl(order, kind), [probe_src, out])(), np.float32)
                        .astype(np.float64).sum())
            want = unpack_reference(kind, probe)
            if abs(got - want) > 1e-3 * abs(want):
                raise AssertionError(f"the {kind} unpack floor ({order}) sums to {got}, numpy to {want}")
    runs = {(kind, order): kernel(stream_wgsl(order, kind), [src, out])
            for kind in ("stream", *UNPACK_TERMS) for order in STREAM_ORDERS}
    times = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            t = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - t)
    best = {kind: min((key for key in times if key[0] == kind), key=lambda key: min(times[key]))
            for kind in ("stream", *UNPACK_TERMS)}
    stream = times[best["stream"]]
    results["gbps"] = src.size / min(stream) / 1e9
    results["stream"] = (runs[best["stream"]], src.size)  # kept: decode steps are paired with it
    results["stream_order"] = best["stream"][1]
    results["unpack"] = {kind: statistics.median(s / u for s, u in zip(stream, times[best[kind]]))
                         for kind in UNPACK_TERMS}
    results["unpack_gbps"] = {kind: src.size / min(times[best[kind]]) / 1e9 for kind in UNPACK_TERMS}
    return results


def unpack_ceiling(roofline_s: float, nbytes: float, gbps: float, format_bytes: dict, unpack: dict) -> float:
    """The share of the roofline a decode step would reach if each packed weight byte went at its
    format's unpack floor and every other byte (KV cache, f32 weights) at the streaming rate."""
    floored = sum(format_bytes.get(kind, 0) for kind in unpack)
    seconds = (nbytes - floored + sum(format_bytes.get(kind, 0) / rate for kind, rate in unpack.items())) / (gbps * 1e9)
    return roofline_s / seconds


def stream_gbps(ceilings) -> float:
    """GB/s of the better streaming read, run now (the better of two runs)."""
    run, size = ceilings["stream"]
    return size / best_of(run, 2) / 1e9


def decode_cost(model: dict, weights_bytes: int, position: int) -> tuple[float, float]:
    """(FLOPs, bytes) one decode step needs at `position`: the roofline's inputs."""
    h, f, v, layers = model["hidden"], model["ffn"], model["vocab"], model["n_layers"]
    q, kv = model["n_heads"] * model["head_dim"], model["n_kv_heads"] * model["head_dim"]
    macs = layers * (h * (q + 2 * kv) + q * h + 2 * h * f + f * h + 2 * q * (position + 1)) + h * v
    kv_bytes = layers * 2 * 4 * kv * (position + 1)
    return 2.0 * macs, float(weights_bytes + kv_bytes)


def timestamped_kernel_times(backend, names, plan) -> dict:
    """kernel -> median seconds of its dispatches in one decode step, from timestamps written at the
    beginning and end of a compute pass per dispatch."""
    import wgpu

    device = backend.device
    count = 2 * len(plan)
    queries = device.create_query_set(type="timestamp", count=count)
    resolved = device.create_buffer(size=8 * count, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    encoder = device.create_command_encoder()
    for i, dispatch in enumerate(plan):
        compute = encoder.begin_compute_pass(timestamp_writes={
            "query_set": queries, "beginning_of_pass_write_index": 2 * i, "end_of_pass_write_index": 2 * i + 1})
        compute.set_pipeline(dispatch.kernel)
        compute.set_bind_group(0, dispatch.group)
        compute.dispatch_workgroups(*dispatch.grid)
        compute.end()
    encoder.resolve_query_set(queries, 0, count, resolved, 0)
    device.queue.submit([encoder.finish()])
    stamps = struct.unpack(f"<{count}Q", device.queue.read_buffer(resolved))
    spans = {}
    for i, name in enumerate(names):
        spans.setdefault(name, []).append((stamps[2 * i + 1] - stamps[2 * i]) * 1e-9)
    return {name: statistics.median(seconds) for name, seconds in spans.items()}


def repeated_kernel_times(backend, ex, names) -> dict:
    """kernel -> seconds, each kernel's dispatch repeated alone in one submission (no timestamps)."""
    per_kernel, repeat = {}, 8
    empty = best_of(lambda: backend.run([], read=(ex.buffers["step"], 16)), 3)
    for kernel, dispatch in zip(names, ex._plans["decode"]):
        if kernel not in per_kernel:
            seconds = best_of(lambda: backend.run([dispatch] * repeat, read=(ex.buffers["step"], 16)), 2)
            per_kernel[kernel] = max(0.0, seconds - empty) / repeat
    return per_kernel


def decode_step(ex, backend, token) -> tuple[float, float]:
    """Seconds of one decode step (to the logits on the host), and of its host part (writes,
    encoding and submission only)."""
    t = time.perf_counter()
    ex.submit_decode(token)
    host = time.perf_counter() - t
    backend.read_back(ex.submit_read())  # waits for the GPU
    return time.perf_counter() - t, host


def idle_step(ex, backend) -> float:
    """Seconds of the decode plan with every kernel returning at once (zero tokens in the step
    words): what its dispatches, workgroup launches and the logits' read-back cost by themselves."""
    backend.write_buffer(ex.buffers["step"], 0, struct.pack("<4i", 0, ex.position - 1, 0, 0))
    t = time.perf_counter()
    backend.run(ex._plans["decode"], read=(ex.buffers["logits"], 4 * ex.vocab_size))
    return time.perf_counter() - t


def layer_dispatches(plan: list[dict]) -> int:
    """Dispatches of the plan's first layer: those reading its weights or its KV cache."""
    return sum(1 for d in plan if str(d["args"].get("w", "")).startswith("blk.0.")
               or {d["args"].get("k_cache"), d["args"].get("v_cache")} & {"k.0", "v.0"})


def bench_model(name, folder, gguf_path, backend, ceilings, prompt_tokens, decode_tokens, lines):
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(folder)
    context = prompt_tokens + decode_tokens + 8
    t = time.perf_counter()
    allocated_before = backend.allocated_bytes
    ex = Executor(artifacts, backend, context=context)
    load_s = time.perf_counter() - t
    allocated = backend.allocated_bytes - allocated_before
    vocab = ex.vocab_size
    prompt = [(17 + 31 * i) % vocab for i in range(prompt_tokens)]

    ex.prefill(prompt[:ex.chunk])  # compile the shaders before timing
    ex.decode(3)
    ex.reset()
    t = time.perf_counter()
    ex.prefill(prompt)
    prefill_s = time.perf_counter() - t

    # This machine's speed drifts by up to 2x within minutes (a shared host), so each decode step is
    # paired with a run of the plan's fixed cost and a streaming read right after it, and with a step
    # of the default kernels when the adapter has a variant: the shares and the variant's effect
    # compare like with like.
    plain = None
    if ex.variant:
        plain = Executor(artifacts, backend, context=context, variants=False)
        plain.prefill(prompt)
        plain.decode(3)
    flops, nbytes = decode_cost(artifacts.model, ex.weight_bytes, ex.position + decode_tokens // 2)
    step_times, host_times, shares, default_steps, gbps, idle_times = [], [], [], [], [], []
    for i in range(decode_tokens):
        step, host = decode_step(ex, backend, 5 + i)
        idle_times.append(idle_step(ex, backend))  # right after the step, in its state (caches, threads)
        gbps.append(stream_gbps(ceilings))
        step_times.append(step)
        host_times.append(host)
        shares.append(max(flops / (ceilings["gflops"] * 1e9), nbytes / (gbps[-1] * 1e9)) / step)
        if plain is not None:
            default_steps.append(decode_step(plain, backend, 5 + i)[0])
    del plain
    step_s = statistics.median(step_times)

    names = [ex.kernel_of(d) for d in artifacts.manifest["plans"]["decode"]["dispatches"]]
    backend.write_buffer(ex.buffers["step"], 0, struct.pack("<4i", 1, ex.position - 1, 0, 0))
    if backend.timestamps:
        per_kernel, timing = timestamped_kernel_times(backend, names, ex._plans["decode"]), "timestamp queries"
    else:
        per_kernel, timing = repeated_kernel_times(backend, ex, names), "each kernel repeated alone"

    roofline_s = max(flops / (ceilings["gflops"] * 1e9), nbytes / (statistics.median(gbps) * 1e9))
    kv_bytes = sum(spec.get("per_context", 0) * context for n, spec in artifacts.manifest["buffers"].items()
                   if spec["kind"] == "kv")
    format_bytes = {}
    for array, kind in artifacts.manifest["formats"].items():
        format_bytes[kind] = format_bytes.get(kind, 0) + artifacts.manifest["weights"]["arrays"][array]["bytes"]
    share = statistics.median(shares)
    ceiling = unpack_ceiling(roofline_s, nbytes, statistics.median(gbps), format_bytes, ceilings["unpack"])
    # The unpack floors' time plus the plan's fixed cost: what the step would take with every kernel
    # at its floor, on this adapter as it dispatches.
    idle_s = statistics.median(idle_times)
    fixed_ceiling = roofline_s / (roofline_s / ceiling + idle_s)

    ref_tps = None
    if gguf_path:
        from tests.model.reference import ReferenceLlama

        ref = ReferenceLlama(gguf_path)
        ref.forward(prompt[:16])
        t = time.perf_counter()
        for i in range(4):
            ref.forward([5 + i])
        ref_tps = 4 / (time.perf_counter() - t)

    rows = [
        ("load (weights upload, pipelines)", f"{load_s:.2f} s"),
        (f"prefill ({prompt_tokens} tokens, chunks of {ex.chunk})", f"{prompt_tokens / prefill_s:.2f} tok/s"),
        ("decode", f"{1 / step_s:.2f} tok/s (step median {step_s * 1e3:.1f} ms, max {max(step_times) * 1e3:.1f} ms)"),
        ("kernel variant for this adapter", f"{ex.variant} (decode step with the default kernels, in the "
                                            f"same minutes: {statistics.median(default_steps) * 1e3:.1f} ms)"
                                            if ex.variant else "none"),
        ("dispatches per decode token", f"{ex.dispatches_per_token} "
                                        f"({layer_dispatches(artifacts.manifest['plans']['decode']['dispatches'])}"
                                        " per layer)"),
        ("host time per decode step (no GPU wait)",
         f"median {statistics.median(host_times) * 1e3:.2f} ms, p99 {max(host_times) * 1e3:.2f} ms"),
        ("decode step vs roofline", f"{share * 100:.1f}% (median over the steps, each against "
                                    f"a streaming read soon after it: {min(gbps):.2f}-{max(gbps):.2f} GB/s; "
                                    f"{flops / 1e6:.0f} MFLOP, {nbytes / 2**20:.1f} MiB; roofline "
                                    f"{roofline_s * 1e3:.1f} ms at the median)"),
        ("ceiling for f32-dequantizing kernels (unpack floors)",
         f"{ceiling * 100:.1f}% of roofline, with "
         + ", ".join(f"{kind} ({format_bytes[kind] / 2**20:.1f} MiB) at {ceilings['unpack'][kind] * 100:.0f}%"
                     for kind in ceilings["unpack"] if kind in format_bytes)
         + f" of the streaming rate; this step reaches {share / ceiling * 100:.0f}% of it"),
        ("fixed cost of the decode plan (every kernel returning at once)",
         f"{idle_s * 1e3:.1f} ms (median, one run right after each step: {min(idle_times) * 1e3:.1f}-"
         f"{max(idle_times) * 1e3:.1f} ms; {idle_s / ex.dispatches_per_token * 1e6:.0f} us a dispatch)"),
        ("ceiling with the unpack floors and the fixed cost",
         f"{fixed_ceiling * 100:.1f}% of roofline; this step reaches {share / fixed_ceiling * 100:.0f}% of it"),
        ("GPU memory allocated", f"{allocated / 2**20:.1f} MiB = "
                                 f"{allocated / (ex.weight_bytes + kv_bytes):.2f} x (weights "
                                 f"{ex.weight_bytes / 2**20:.1f} MiB + KV {kv_bytes / 2**20:.1f} MiB at context {context})"),
        ("numpy reference decode (yardstick)", f"{ref_tps:.2f} tok/s" if ref_tps else "n/a"),
    ]
    lines.append(f"\n### {name}\n")
    lines.append("| measure | value |\n|---|---|")
    lines += [f"| {k} | {v} |" for k, v in rows]
    lines.append(f"\nGPU time per kernel in a decode step ({timing}; median over its dispatches):\n")
    lines.append("| kernel (decode plan) | dispatches | GPU ms each | share of step |\n|---|---|---|---|")
    for kernel, seconds in sorted(per_kernel.items(), key=lambda kv: -kv[1] * names.count(kv[0])):
        count = names.count(kernel)
        lines.append(f"| {kernel} | {count} | {seconds * 1e3:.2f} | {seconds * count / step_s * 100:.0f}% |")


def run_adapter(label, args, lines):
    from trellis.runtime.wgpu_backend import WgpuBackend

    backend = WgpuBackend(timestamps=True)
    ceilings = calibrate(backend)
    lines.append(f"\n## {label}: {backend.adapter_info.get('device', '?')} ({backend.adapter_info.get('description', '')})\n")
    floors = ", ".join(f"{kind} {ceilings['unpack_gbps'][kind]:.2f} GB/s ({rate * 100:.0f}%)"
                       for kind, rate in ceilings["unpack"].items())
    lines.append(f"Calibration: best {ceilings['gflops']:.2f} GFLOP/s (register FMAs), "
                 f"best {ceilings['gbps']:.2f} GB/s (streaming read, the better of grid-strided and chunked: "
                 f"{ceilings['stream_order']}). Unpack floors (each packed weight word masked, converted and "
                 f"multiply-added with x in registers, nothing else; the rate as a share of the streaming read's, "
                 f"median over rounds that run both): {floors}.")
    emit(lines[-2:])
    for model in args.models.split(","):
        start = len(lines)
        if model == "tiny":
            from trellis.kernels.build_model import main as build
            from tests.model.tiny_gguf import write_tiny_llama

            tmp = Path(tempfile.mkdtemp(prefix="trellis-bench-"))
            write_tiny_llama(tmp / "tiny.gguf")
            build(["--gguf", str(tmp / "tiny.gguf"), "--out", str(tmp / "out")])
            bench_model("tiny random Llama (2 layers, hidden 64)", tmp / "out", tmp / "tiny.gguf", backend, ceilings,
                        min(args.prompt_tokens, 128), args.decode_tokens, lines)
        elif model == "smollm2":
            from trellis.kernels.build_model import DEFAULT_OUT, default_gguf, main as build

            build([])
            bench_model("SmolLM2-135M-Instruct (Q4_1)", DEFAULT_OUT, default_gguf(), backend, ceilings,
                        args.prompt_tokens, args.decode_tokens, lines)
        emit(lines[start:])


def emit(lines) -> None:
    """Print result lines marked for the parent process, as soon as they exist (a child may be killed)."""
    print("\n".join(RESULT + line for line in "\n".join(lines).split("\n")), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=8)
    parser.add_argument("--no-swiftshader", action="store_true", help="skip SwiftShader (Chromium's ICD)")
    parser.add_argument("--adapter", choices=["lavapipe", "swiftshader"], help="(internal) one adapter only")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "runtime.md"))
    args = parser.parse_args(argv)

    if args.adapter:
        # A shader compiler that runs away (SwiftShader's once did, past 23 GB) fails here, not the machine.
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (ADAPTER_MEMORY_LIMIT, ADAPTER_MEMORY_LIMIT))
        run_adapter(args.adapter, args, [])
        return 0

    # Each adapter in its own process: the Vulkan ICD is chosen when wgpu-native loads.
    sections = []
    adapters = [("lavapipe", {})]
    if not args.no_swiftshader and os.path.exists(SWIFTSHADER_ICD):
        adapters.append(("swiftshader", {"VK_ICD_FILENAMES": SWIFTSHADER_ICD}))
    for label, env in adapters:
        cmd = [sys.executable, __file__, "--adapter", label, "--models", args.models,
               "--prompt-tokens", str(args.prompt_tokens), "--decode-tokens", str(args.decode_tokens)]
        try:
            proc = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True,
                                  timeout=ADAPTER_TIMEOUT_S)
            output, status = proc.stdout, (f"exit {proc.returncode}" if proc.returncode else "")
            sys.stderr.write(proc.stderr[-2000:] if proc.returncode else "")
        except subprocess.TimeoutExpired as e:
            output = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            status = f"timed out after {ADAPTER_TIMEOUT_S} s"
        results = [line[len(RESULT):] for line in output.splitlines() if line.startswith(RESULT)]
        print("\n".join(line for line in output.splitlines() if not line.startswith(RESULT)), flush=True)
        sections.append("\n".join(results) + "\n")
        if status:
            sections.append(f"\n{label}: stopped early ({status}); the sections above are what it finished.\n")
    if not args.no_swiftshader and not os.path.exists(SWIFTSHADER_ICD):
        sections.append(f"\nSwiftShader not measured: {SWIFTSHADER_ICD} is missing (apt-get install chromium).\n")

    header = ["# Runtime benchmark", "",
              f"Written by `python3 benchmarks/runtime_bench.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
              f"{os.cpu_count()} CPU cores. Goals (issue 4): decode step >= 50% of roofline, host time per decode "
              "step <= 1 ms for SmolLM2, GPU memory <= 1.2 x (weights + KV cache), <= 10 dispatches per layer."]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(header) + "\n" + "".join(sections))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

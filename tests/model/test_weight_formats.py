"""Every GGUF weight type the kernels take, through the real TVM-generated WGSL (on the software adapter),
against gguf's own `dequantize`: the matmul for one token and for a block of tokens, the embedding
lookup, fused weights whose parts differ in type, and tiny Llamas stored in every type end to end.

Rows are 256 wide throughout (whole K-quant super-blocks), so types packed in one kernel format share
its compiled kernels; the tiny Llamas' 64- and 96-wide rows leave groups of side vectors part-filled.
"""

import struct

import gguf
import numpy as np
import pytest

from trellis.kernels import kernels as K
from trellis.kernels import wgsl
from trellis.kernels.pack import group_format, pack_linear
from tests.model.tiny_gguf import BLOCK_FIELDS, K_CONFIG, random_blocks, write_tiny_llama
from trellis.errors import ModelError
from trellis.runtime.executor import Executor

ROWS, COLS, TILE, R, TOKENS = 48, 256, 32, 5, 4  # 48 rows: a tile and a row group are padded
# f16 scales and weights at the edges: zero, subnormals (smallest, largest), smallest normal, f16's
# largest, negative ones, and ordinary values.
EXTREMES = np.array([0.0, 2.0**-24, 3.05e-5, 2.0**-14, 65504.0, -65504.0, -1.0e-3, 0.37, -2.5, 1000.0], np.float32)
SINGLE = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]
# Fused weights of mixed types, and the format that holds them all (pack.KERNEL_FORMATS).
MIXED = [(("Q5_0", "Q5_0", "Q8_0"), "q8_0"),  # Gemma 3 270M Q4_K_M's Q/K/V
         (("Q4_K", "Q4_K", "Q6_K"), "q8_16"),  # Llama Q4_K_M's Q/K/V
         (("Q4_0", "Q5_1"), "q5_1"), (("Q5_0", "Q6_K"), "q6_k"), (("F16", "BF16"), "f32")]


def _weight(kind: str, rows: int, cols: int, rng) -> np.ndarray:
    """Random data of GGUF type `kind`: floats drawn from EXTREMES and a normal; blocks of random bytes
    whose f16 scales are drawn from EXTREMES."""
    if kind in BLOCK_FIELDS:
        return random_blocks(kind, rows, cols, rng, lambda n: rng.choice(EXTREMES, n))
    values = np.where(rng.random((rows, cols)) < 0.3, rng.choice(EXTREMES, (rows, cols)),
                      rng.normal(0, 1, (rows, cols))).astype(np.float32)
    if kind == "BF16":
        return gguf.quantize(values, gguf.GGMLQuantizationType.BF16)
    return values.astype(np.float16 if kind == "F16" else np.float32)


def _tensors(tmp_path, kinds, seed):
    """The ReaderTensors of one weight per kind, ROWS rows in all, as written to and read from a GGUF."""
    rng = np.random.default_rng(seed)
    path = tmp_path / f"w{seed}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for i, kind in enumerate(kinds):
        data = _weight(kind, ROWS // len(kinds), COLS, rng)
        w.add_tensor(f"part{i}.weight", data, raw_dtype=gguf.GGMLQuantizationType[kind] if kind in BLOCK_FIELDS
                     or kind == "BF16" else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tensors = gguf.GGUFReader(str(path)).tensors
    assert [t.tensor_type.name for t in tensors] == list(kinds)
    return tensors


def _oracle(tensors) -> np.ndarray:
    """[rows, cols] f64 of the parts stacked, as gguf dequantizes them."""
    return np.concatenate([gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1, COLS) for t in tensors]
                          ).astype(np.float64)


_PIPELINES = {}


def _run(backend, kernel, data: dict, out: str) -> np.ndarray:
    if kernel.name not in _PIPELINES:
        source, info = wgsl.lower(kernel)
        assert "enable f16" not in source
        _PIPELINES[kernel.name] = (backend.create_kernel(kernel.name, source, info["entry_point"]), info)
    pipeline, info = _PIPELINES[kernel.name]
    buffers = {name: backend.create_buffer(name, len(data[name]), data[name]) for name in data}
    dispatch = backend.create_dispatch(pipeline, [buffers[b["name"]] for b in info["bindings"]],
                                       Executor._uniform(info), info["uniform"]["binding"], info["grid"])
    return np.frombuffer(backend.run([dispatch], read=(buffers[out], len(data[out]))), np.float32)


def _check_matmul_and_embed(backend, tensors, fmt, rng):
    rows, cols = ROWS, COLS
    assert group_format(tensors) == fmt
    packed = pack_linear(tensors, TILE).tobytes()
    want_w = _oracle(tensors)
    x = rng.normal(0, 1, (TOKENS, cols)).astype(np.float32)
    for tokens, block in ((1, 1), (TOKENS, TOKENS)):  # the decode and the prefill forms
        kernel = K.matmul(fmt, cols, rows, tokens, block, "accumulate", R, TILE)
        y0 = rng.normal(0, 1, (tokens, rows)).astype(np.float32)
        got = _run(backend, kernel, {"x": x[:tokens].tobytes(), "w": packed, "y": y0.tobytes(),
                                     "step": struct.pack("<4i", tokens, 0, 0, 0)}, "y").reshape(tokens, rows)
        want = y0 + x[:tokens].astype(np.float64) @ want_w.T
        bound = 1e-5 * (np.abs(x[:tokens]) @ np.abs(want_w).T + np.abs(y0)) + 1e-30
        worst = np.max(np.abs(got - want) / bound)
        assert worst <= 1, f"{fmt} matmul, {tokens} tokens: error {worst:.2f} of the f32 bound"
    ids = np.array([0, rows - 1, 7, ROWS // 2 + 3], np.int32)
    kernel = K.embed(fmt, rows, cols, len(ids), TILE)
    got = _run(backend, kernel, {"ids": ids.tobytes(), "w": packed, "x": bytes(4 * len(ids) * cols),
                                 "step": struct.pack("<4i", len(ids), 0, 0, 0)}, "x").reshape(len(ids), cols)
    want = want_w[ids]
    # One product and one sum per element: equal to within an ulp of the terms.
    assert np.all(np.abs(got - want) <= 2e-7 * np.maximum(np.abs(want), np.abs(got)) + 1e-38), f"{fmt} embed"


@pytest.mark.parametrize("kind", SINGLE)
def test_each_type_matches_gguf_dequantize(kind, tmp_path, wgpu_backend):
    tensors = _tensors(tmp_path, [kind], SINGLE.index(kind))
    _check_matmul_and_embed(wgpu_backend, tensors, group_format(tensors), np.random.default_rng(1))


@pytest.mark.parametrize("kinds,fmt", MIXED)
def test_fused_parts_of_mixed_types_match_gguf_dequantize(kinds, fmt, tmp_path, wgpu_backend):
    tensors = _tensors(tmp_path, kinds, 100 + MIXED.index((kinds, fmt)))
    _check_matmul_and_embed(wgpu_backend, tensors, fmt, np.random.default_rng(2))


def test_quantized_and_float_parts_cannot_fuse(tmp_path):
    with pytest.raises(ModelError, match="part0.weight \\(Q4_K\\).*part1.weight \\(F16\\)"):
        group_format(_tensors(tmp_path, ["Q4_K", "F16"], 7))


# Two tiny Llamas that store every type (and each kernel format) somewhere: in the embedding (also the
# tied head), fused Q/K/V and gate/up of one or mixed types, the output and down projections.
def _layer(i, qkv, out, gate_up, down):
    p = f"blk.{i}."
    return {p + "attn_q.weight": qkv[0], p + "attn_k.weight": qkv[1], p + "attn_v.weight": qkv[2],
            p + "attn_output.weight": out, p + "ffn_gate.weight": gate_up[0], p + "ffn_up.weight": gate_up[1],
            p + "ffn_down.weight": down}


TINY_MODELS = {
    "legacy": (None, {"token_embd.weight": "F16",
                      **_layer(0, ("Q5_0", "Q5_0", "Q8_0"), "Q4_0", ("Q5_1", "Q5_0"), "BF16"),
                      **_layer(1, ("BF16", "BF16", "BF16"), "F16", ("Q4_0", "Q4_1"), "Q5_1")},
               {"token_embd.weight": "f16", "blk.0.attn_qkv": "q8_0", "blk.0.ffn_gate_up": "q5_1",
                "blk.1.attn_qkv": "bf16", "blk.1.ffn_gate_up": "q4_1", "blk.0.attn_output.weight": "q4_1"}),
    "k-quants": (K_CONFIG, {"token_embd.weight": "Q6_K",
                            **_layer(0, ("Q4_K", "Q4_K", "Q6_K"), "Q5_K", ("Q4_K", "Q4_K"), "Q6_K"),
                            **_layer(1, ("Q5_K", "Q5_K", "Q5_K"), "Q4_K", ("Q6_K", "Q6_K"), "Q5_K")},
                 {"token_embd.weight": "q6_k", "blk.0.attn_qkv": "q8_16", "blk.0.ffn_gate_up": "q4_1",
                  "blk.1.attn_qkv": "q5_1", "blk.1.ffn_gate_up": "q6_k", "blk.1.ffn_down.weight": "q5_1"}),
}


@pytest.mark.parametrize("model", sorted(TINY_MODELS))
def test_tiny_llama_in_every_type_matches_reference(model, tmp_path, wgpu_backend):
    """Prefill and greedy decoding on the GPU against the numpy reference over gguf's dequantized weights."""
    from trellis.kernels import build_model
    from tests.model.reference import ReferenceLlama
    from trellis.runtime import Artifacts

    config, types, formats = TINY_MODELS[model]
    write_tiny_llama(tmp_path / "m.gguf", seed=3, q8_0_tensors=(), types=types, config=config)
    stored = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(tmp_path / "m.gguf")).tensors}
    assert all(stored[name] == kind for name, kind in types.items())
    build_model.main(["--gguf", str(tmp_path / "m.gguf"), "--out", str(tmp_path / "out"), "--chunk", "16"])
    artifacts = Artifacts.from_dir(tmp_path / "out")
    assert formats.items() <= artifacts.manifest["formats"].items()
    ex, reference = Executor(artifacts, wgpu_backend, context=48), ReferenceLlama(tmp_path / "m.gguf")
    prompt = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64, 128, 255, 30, 31, 32, 33]  # a chunk and a part
    got, want = np.asarray(ex.prefill(prompt)), reference.forward(prompt)[-1]
    tokens = []
    for _ in range(6):
        assert np.max(np.abs(got - want)) <= 1e-3 * np.max(np.abs(want))
        tokens.append(int(np.argmax(got)))
        assert tokens[-1] == int(np.argmax(want))
        got, want = np.asarray(ex.decode(tokens[-1])), reference.forward([tokens[-1]])[-1]


@pytest.mark.slow
def test_gemma3_q4_k_m_layer_weights_match_gguf_dequantize(wgpu_backend):
    """A real Q4_K_M file's first layer (Gemma 3 270M: Q5_0 and Q8_0 fused into Q/K/V, Q5_0 gate/up, Q4_K
    output, Q6_K down) through the one-token and prefill matmuls."""
    from tests.model.gemma3 import gemma3_gguf_path

    tensors = {t.name: t for t in gguf.GGUFReader(gemma3_gguf_path()).tensors}
    rng = np.random.default_rng(4)
    groups = {"q8_0": ["attn_q", "attn_k", "attn_v"], "q5_1": ["ffn_gate", "ffn_up"], "q4_1": ["attn_output"],
              "q6_k": ["ffn_down"]}
    for fmt, parts in groups.items():
        members = [tensors[f"blk.0.{p}.weight"] for p in parts]
        assert group_format(members) == fmt
        w = np.concatenate([gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), -1)
                            for t in members]).astype(np.float64)
        rows, cols = w.shape
        packed = pack_linear(members, TILE).tobytes()
        x = rng.normal(0, 1, (TOKENS, cols)).astype(np.float32)
        for tokens in (1, TOKENS):
            kernel = K.matmul(fmt, cols, rows, tokens, tokens, "accumulate", R, TILE)
            got = _run(wgpu_backend, kernel, {"x": x[:tokens].tobytes(), "w": packed, "y": bytes(4 * tokens * rows),
                                              "step": struct.pack("<4i", tokens, 0, 0, 0)}, "y").reshape(tokens, rows)
            bound = 1e-5 * (np.abs(x[:tokens]) @ np.abs(w).T) + 1e-30
            assert np.max(np.abs(got - x[:tokens] @ w.T) / bound) <= 1, f"{fmt} ({', '.join(parts)}), {tokens} tokens"

"""GGUF tensors -> GPU-ready arrays (the layout `kernels.weight_vectors` describes).

Scales are widened from f16 to f32 here so no kernel needs `shader-f16`; quantized values keep
GGUF's byte order inside u32 words, so the shaders index nibbles and bytes as GUIDE.md describes.
"""

import numpy as np

from kernels.llm.gguf_model import dequantize
from kernels.llm.kernels import weight_shape, weight_vectors
from trellis.errors import ModelError

FORMATS = {"Q4_1": "q4_1", "Q8_0": "q8_0", "F32": "f32", "F16": "f32"}


def weight_format(tensor) -> str:
    try:
        return FORMATS[tensor.tensor_type.name]
    except KeyError:
        raise ModelError(f"tensor {tensor.name!r} has unsupported type {tensor.tensor_type.name}") from None


def _rows(tensor) -> np.ndarray:
    """u32 [rows, vectors, 4] of one weight: per row its quantized blocks in GGUF's byte order,
    then the f32 scales, both padded to whole 16-byte vectors."""
    cols, rows = (int(d) for d in tensor.shape)
    fmt = weight_format(tensor)
    quant_vectors, scale_vectors = weight_vectors(fmt, cols)
    if fmt == "f32":
        return dequantize(tensor).view(np.uint32).reshape(rows, quant_vectors, 4)
    block = {"q4_1": 20, "q8_0": 34}[fmt]
    raw = np.ascontiguousarray(tensor.data).view(np.uint8).reshape(rows, cols // 32, block)
    head = 4 if fmt == "q4_1" else 2  # f16 d (and m) lead each block
    scales = raw[:, :, :head].copy().view(np.float16).astype(np.float32).reshape(rows, -1)
    padded = np.zeros((rows, scale_vectors * 4), np.float32)
    padded[:, :scales.shape[1]] = scales
    quants = np.ascontiguousarray(raw[:, :, head:]).view(np.uint32).reshape(rows, quant_vectors, 4)
    return np.concatenate([quants, padded.view(np.uint32).reshape(rows, scale_vectors, 4)], axis=1)


def pack_linear(tensors, tile: int, order=None) -> np.ndarray:
    """One u32 array [tile, vector, row in tile, 4] of weights stacked by rows (one format, same width), the
    rows in tiles of `tile` (the last padded with zeros); with `order`, the stacked rows taken in that
    order (rows are independent in every format: NeoX RoPE's reordered Q/K rows)."""
    formats = {weight_format(t) for t in tensors}
    columns = {int(t.shape[0]) for t in tensors}
    if len(formats) != 1 or len(columns) != 1:
        names = ", ".join(f"{t.name} ({t.tensor_type.name}, {int(t.shape[0])} columns)" for t in tensors)
        raise ModelError(f"fused weights must share one type and width: {names}")
    fmt, cols = formats.pop(), columns.pop()
    stacked = np.concatenate([_rows(t) for t in tensors], axis=0)
    if order is not None:
        stacked = stacked[np.asarray(order)]
    tiles, vectors, _ = weight_shape(fmt, stacked.shape[0], cols, tile)
    assert stacked.shape[1] == vectors
    padded = np.zeros((tiles * tile, vectors, 4), np.uint32)
    padded[:stacked.shape[0]] = stacked
    return np.ascontiguousarray(padded.reshape(tiles, tile, vectors, 4).transpose(0, 2, 1, 3))


def pack_vector(tensor) -> np.ndarray:
    return dequantize(tensor).reshape(-1)


def rope_table(context: int, head_dim: int, theta: float, scale: float = 1.0, factors=None) -> np.ndarray:
    """cos and sin of position * theta^(-2i/d) for every (position, pair i), computed in double precision;
    positions divided by `scale` (linear scaling), pair i's frequency by factors[i] (Llama 3's rope_freqs)."""
    freqs = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if factors is not None:
        freqs = freqs / np.asarray(factors, np.float64)
    angles = (np.arange(context, dtype=np.float64) / scale)[:, None] * freqs[None, :]
    return np.stack([np.cos(angles), np.sin(angles)], axis=-1).astype(np.float32)

"""GGUF tensors -> GPU-ready arrays (the layout `kernels.weight_vectors` describes).

Scales are widened from f16 to f32 here so no kernel needs `shader-f16`; quantized values stay codes of
their own width (no f32 copy of a quantized weight). Q4_1 and Q8_0 keep GGUF's byte order inside u32
words (GUIDE.md); the other GGUF types are re-expressed in one of the kernels' formats (`KERNEL_FORMATS`)
exactly: every element still dequantizes to the value gguf's own `dequantize` gives.

The way there is one intermediate form per tensor, `Codes`: unsigned integer codes u per element and
per 16 elements an f32 scale d and offset m, w = d * (u - offset) + m. Each GGUF type has a reader into it
(`_READERS`) and each kernel format a writer from it (`_write`), so K-quants' super-blocks, Q5's
high-bit words and Q6_K's 16-element sub-blocks are all decoded once, in numpy, at build time.
"""

from dataclasses import dataclass

import numpy as np

from trellis.kernels.gguf_model import dequantize
from trellis.kernels.kernels import weight_shape, weight_vectors
from trellis.errors import ModelError

# Kernel formats from the cheapest (bytes per 32 weights as packed, scales included) up; a GGUF type
# is packed as the first that holds all of its values exactly. Fused weights (Q/K/V, gate/up) are one
# array in one format, so when their parts differ they take the first format that holds every part
# (Gemma 3's Q4_K_M mixes Q5_0 Q/K with a Q8_0 V: q8_0). The alternative, a kernel that switches
# format per row range or separate matmuls, costs shader size or dispatches on every step; this costs
# memory only on the mixed layers.
#   q4_1  24 B: 4-bit codes, per 32 an f32 d and m             (Q4_0, Q4_1, Q4_K)
#   q5_1  32 B: q4_1's nibbles, per 32 d, m, a high-bit word and 4 unused (Q5_0, Q5_1, Q5_K, Q4_0/1/K)
#   q6_k  32 B: q4_1's nibbles, per 16 d, per 32 two 2-bit high words, w = d (u - 32)  (Q6_K, Q4_0, Q5_0)
#   q8_0  36 B: int8 codes, per 32 d                            (Q8_0, Q4_0, Q5_0)
#   q8_16 48 B: int8 codes, per 16 d and m                      (every quantized type: the mixes' fallback)
#   f16 / bf16 64 B: the GGUF's 16-bit values as stored; f32 128 B (F32, and mixes of float types)
# K-quants' 6-bit sub-scales are pre-decoded into f32 d (and m) per sub-block, which costs in bytes per
# weight (packed against GGUF's): Q4_K as q4_1 0.75 against 0.5625 (+0.1875: 8 bytes of d and m per 32
# weights for 2 of sub-scales and d); Q5_K as q5_1 1.0 against 0.6875 (+0.3125: that 0.1875, and 0.125 in
# q5_1's unused lane); Q6_K as q6_k 1.0 against 0.8203 (+0.1797: 8 bytes of d per 32 for 2.25).
KERNEL_FORMATS = {
    "q4_1": {"Q4_0", "Q4_1", "Q4_K"},
    "q5_1": {"Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K"},
    "q6_k": {"Q4_0", "Q5_0", "Q6_K"},
    "q8_0": {"Q4_0", "Q5_0", "Q8_0"},
    "q8_16": {"Q4_0", "Q4_1", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q6_K", "Q8_0"},
    "f16": {"F16"},
    "bf16": {"BF16"},
    "f32": {"F32", "F16", "BF16"},
}
# GGUF types whose blocks go to the GPU as stored (no intermediate form).
_AS_STORED = {("Q4_1", "q4_1"), ("Q8_0", "q8_0"), ("F16", "f16"), ("BF16", "bf16")}


def group_format(tensors) -> str:
    """The kernel format of one GPU weight array holding `tensors` stacked by rows."""
    types = {t.tensor_type.name for t in tensors}
    for fmt, holds in KERNEL_FORMATS.items():
        if types <= holds:
            return fmt
    names = ", ".join(f"{t.name} ({t.tensor_type.name})" for t in tensors)
    if len(tensors) == 1:
        raise ModelError(f"tensor {names} has an unsupported type")
    raise ModelError(f"fused weights mix quantized and unquantized types, which no kernel format holds: {names}")


def weight_format(tensor) -> str:
    return group_format([tensor])


@dataclass
class Codes:
    """w[r, k] = d[r, k // 16] * (u[r, k] - offset) + m[r, k // 16] (m None: 0)."""
    u: np.ndarray  # uint8 [rows, cols]
    offset: int
    d: np.ndarray  # f32 [rows, cols // 16]
    m: np.ndarray | None


def _blocks(tensor, size: int) -> np.ndarray:
    """uint8 [rows, blocks per row, size]."""
    cols, rows = (int(d) for d in tensor.shape)
    return np.ascontiguousarray(tensor.data).view(np.uint8).reshape(rows, -1, size)


def _f16(raw) -> np.ndarray:
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)[..., 0]


def _nibbles(qs) -> np.ndarray:
    """[..., 16 bytes] -> [..., 32 codes]: element j < 16 is the low nibble of byte j, j >= 16 the high of j - 16."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def _bits(words, count: int, width: int = 1) -> np.ndarray:
    """[..., 4 bytes] little-endian u32 -> [..., count] fields of `width` bits from bit 0 up."""
    w = np.ascontiguousarray(words).view("<u4")[..., 0].astype(np.uint32)
    return ((w[..., None] >> (width * np.arange(count, dtype=np.uint32))) & ((1 << width) - 1)).astype(np.uint8)


def _per16(per32: np.ndarray) -> np.ndarray:
    return np.repeat(per32.reshape(per32.shape[0], -1), 2, axis=1)


def _flat(a) -> np.ndarray:
    return a.reshape(a.shape[0], -1)


def _read_q4_0(t):
    b = _blocks(t, 18)
    return Codes(_flat(_nibbles(b[..., 2:])), 8, _per16(_f16(b[..., 0:2])), None)


def _read_q4_1(t):
    b = _blocks(t, 20)
    return Codes(_flat(_nibbles(b[..., 4:])), 0, _per16(_f16(b[..., 0:2])), _per16(_f16(b[..., 2:4])))


def _read_q5_0(t):
    b = _blocks(t, 22)
    u = _nibbles(b[..., 6:]) | (_bits(b[..., 2:6], 32) << 4)
    return Codes(_flat(u), 16, _per16(_f16(b[..., 0:2])), None)


def _read_q5_1(t):
    b = _blocks(t, 24)
    u = _nibbles(b[..., 8:]) | (_bits(b[..., 4:8], 32) << 4)
    return Codes(_flat(u), 0, _per16(_f16(b[..., 0:2])), _per16(_f16(b[..., 2:4])))


def _read_q8_0(t):
    b = _blocks(t, 34)
    u = (b[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return Codes(_flat(u), 128, _per16(_f16(b[..., 0:2])), None)


def _k_scales(s):
    """K-quants' 12 scale bytes -> (8 scales, 8 mins) of 6 bits: sub-block j < 4 takes the low 6 bits of
    bytes j and j + 4; j >= 4 the nibbles of byte j + 4 with the top 2 bits of bytes j - 4 and j."""
    sc = np.empty(s.shape[:-1] + (8,), np.uint8)
    mn = np.empty_like(sc)
    sc[..., :4], mn[..., :4] = s[..., 0:4] & 63, s[..., 4:8] & 63
    sc[..., 4:] = (s[..., 8:12] & 15) | ((s[..., 0:4] >> 6) << 4)
    mn[..., 4:] = (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)
    return sc.astype(np.float32), mn.astype(np.float32)


def _k_low(qs):
    """K-quants' 128 bytes of nibbles -> [..., 8 sub-blocks, 32]: sub-blocks 2c and 2c + 1 are the low and
    high nibbles of bytes 32c .. 32c + 31."""
    chunks = qs.reshape(qs.shape[:-1] + (4, 32))
    return np.stack([chunks & 15, chunks >> 4], axis=-2).reshape(qs.shape[:-1] + (8, 32))


def _read_k(t, size: int, five: bool):
    b = _blocks(t, size)
    d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    sc, mn = _k_scales(b[..., 4:16])
    if five:  # qh[l] bit j is the fifth bit of element l of sub-block j
        u = _k_low(b[..., 48:176]) | (((b[..., 16:48, None] >> np.arange(8, dtype=np.uint8)) & 1).swapaxes(-1, -2) << 4)
    else:
        u = _k_low(b[..., 16:144])
    # f16 d times a 6-bit scale is exact in f32, as gguf computes it.
    return Codes(_flat(u), 0, _per16(d[..., None] * sc), _per16(-(dmin[..., None] * mn)))


def _read_q6_k(t):
    """Per half of 128 elements l + 32i (i < 4): the low nibble of ql[l] (i = 0), ql[l + 32] (1), the high
    nibbles of the same (2, 3), with bits 2i, 2i + 1 of qh[l] on top; a signed 8-bit scale per 16."""
    b = _blocks(t, 210)
    ql = b[..., 0:128].reshape(b.shape[:2] + (2, 2, 32))  # [half, ql[l] or ql[l + 32], l]
    qh = b[..., 128:192].reshape(b.shape[:2] + (2, 1, 32))
    low = np.concatenate([ql & 15, ql >> 4], axis=-2)  # i = 0..3
    high = (qh >> (2 * np.arange(4, dtype=np.uint8))[:, None]) & 3
    u = low | (high << 4)
    scales = b[..., 192:208].view(np.int8).astype(np.float32)
    d = _f16(b[..., 208:210])
    return Codes(_flat(u), 32, _flat(d[..., None] * scales), None)


_READERS = {
    "Q4_0": _read_q4_0, "Q4_1": _read_q4_1, "Q5_0": _read_q5_0, "Q5_1": _read_q5_1, "Q8_0": _read_q8_0,
    "Q4_K": lambda t: _read_k(t, 144, False), "Q5_K": lambda t: _read_k(t, 176, True), "Q6_K": _read_q6_k,
}


def _words(bytes_per_row: np.ndarray) -> np.ndarray:
    """uint8 [rows, 16 n] -> u32 [rows, n, 4]."""
    return np.ascontiguousarray(bytes_per_row).view("<u4").astype(np.uint32).reshape(bytes_per_row.shape[0], -1, 4)


def _pack_nibbles(u) -> np.ndarray:
    """[rows, cols] codes -> [rows, cols / 32 * 16] bytes in Q4_1's order (`_nibbles` inverted)."""
    b = (u & 15).reshape(u.shape[0], -1, 2, 16)
    return (b[:, :, 0] | (b[:, :, 1] << 4)).reshape(u.shape[0], -1)


def _high_words(u, shift: int, width: int, per_word: int) -> np.ndarray:
    """u32 [rows, words]: bits shift.. of each code, `per_word` codes to a word, `width` bits each."""
    f = ((u >> shift) & ((1 << width) - 1)).astype(np.uint32).reshape(u.shape[0], -1, per_word)
    return (f << (width * np.arange(per_word, dtype=np.uint32))).sum(axis=-1, dtype=np.uint32)


def _side(words: list) -> np.ndarray:
    """u32 [rows, blocks, 4]: per block one side vector (kernels.SIDE_WORDS) whose lane k is block's word
    k of `words` ([rows, blocks] u32 or f32 each), unused lanes zero."""
    out = np.zeros(words[0].shape + (4,), np.uint32)
    for k, w in enumerate(words):
        out[..., k] = np.ascontiguousarray(w).view(np.uint32)
    return out


def _fits(u, bits: int, name: str, fmt: str) -> np.ndarray:
    if u.min() < 0 or u.max() >= 1 << bits:  # KERNEL_FORMATS names a format too narrow for the type
        raise ModelError(f"tensor {name!r}: codes outside {bits} bits for {fmt}")
    return u.astype(np.uint8)


def _uniform32(a: np.ndarray, name: str) -> np.ndarray:
    if not np.array_equal(a[:, 0::2], a[:, 1::2], equal_nan=True):
        raise ModelError(f"tensor {name!r}: per-16 scales where its format has one per 32")
    return np.ascontiguousarray(a[:, 0::2])


def _write(fmt: str, c: Codes, name: str) -> np.ndarray:
    blocks = c.u.shape[1] // 32
    if fmt in ("q4_1", "q5_1"):
        # Symmetric types keep their unsigned codes with m = -offset * d: exact (an f16 d times a power of two).
        u = _fits(c.u, 4 if fmt == "q4_1" else 5, name, fmt)
        m = (c.m if c.m is not None else 0) - np.float32(c.offset) * c.d
        d, m = _uniform32(c.d, name), _uniform32(m.astype(np.float32), name)
        quants = _words(_pack_nibbles(u))
        if fmt == "q4_1":  # GGUF's Q4_1 order: (d, m) per block, two blocks per vector
            dm = np.stack([d, m], axis=-1).reshape(d.shape[0], -1)
            scales = np.zeros((d.shape[0], -(-blocks // 2) * 4), np.float32)
            scales[:, :dm.shape[1]] = dm
            return np.concatenate([quants, scales.view(np.uint32).reshape(d.shape[0], -1, 4)], axis=1)
        return np.concatenate([quants, _side([d, m, _high_words(u, 4, 1, 32)])], axis=1)
    if fmt == "q6_k":
        if c.m is not None:
            raise ModelError(f"tensor {name!r}: an offset per block, which q6_k has not")
        u = _fits(c.u.astype(np.int16) - c.offset + 32, 6, name, fmt)
        highs = _high_words(u, 4, 2, 16)  # [rows, 2 per block]
        return np.concatenate([_words(_pack_nibbles(u)),
                               _side([c.d[:, 0::2], c.d[:, 1::2], highs[:, 0::2], highs[:, 1::2]])],
                              axis=1)
    if fmt in ("q8_0", "q8_16"):
        signed = c.u.astype(np.int16) - c.offset
        m = c.m
        if m is None:
            m = np.zeros_like(c.d)
        elif fmt == "q8_0":
            raise ModelError(f"tensor {name!r}: an offset per block, which q8_0 has not")
        if signed.min() < -128 or signed.max() > 127:
            raise ModelError(f"tensor {name!r}: codes outside 8 bits for {fmt}")
        quants = _words(signed.astype(np.int8).view(np.uint8))
        if fmt == "q8_0":
            d = _uniform32(c.d, name)
            scales = np.zeros((d.shape[0], -(-blocks // 4) * 4), np.float32)
            scales[:, :blocks] = d
            return np.concatenate([quants, scales.view(np.uint32).reshape(d.shape[0], -1, 4)], axis=1)
        return np.concatenate([quants, _side([c.d[:, 0::2], c.d[:, 1::2], m[:, 0::2], m[:, 1::2]])], axis=1)
    raise ValueError(f"no writer for {fmt!r}")


def _rows(tensor, fmt: str) -> np.ndarray:
    """u32 [rows, vectors, 4] of one weight in kernel format `fmt`: per row its quantized blocks, then the
    f32 scales (and side words), both padded to whole 16-byte vectors."""
    cols, rows = (int(d) for d in tensor.shape)
    quant_vectors, scale_vectors = weight_vectors(fmt, cols)
    kind = tensor.tensor_type.name
    if fmt == "f32":
        return dequantize(tensor).view(np.uint32).reshape(rows, quant_vectors, 4)
    if (kind, fmt) in (("F16", "f16"), ("BF16", "bf16")):
        return _words(np.ascontiguousarray(tensor.data).view(np.uint8).reshape(rows, -1))
    if (kind, fmt) in _AS_STORED:
        block = {"q4_1": 20, "q8_0": 34}[fmt]
        raw = _blocks(tensor, block)
        head = 4 if fmt == "q4_1" else 2  # f16 d (and m) lead each block
        scales = raw[:, :, :head].copy().view(np.float16).astype(np.float32).reshape(rows, -1)
        padded = np.zeros((rows, scale_vectors * 4), np.float32)
        padded[:, :scales.shape[1]] = scales
        quants = np.ascontiguousarray(raw[:, :, head:]).view(np.uint32).reshape(rows, quant_vectors, 4)
        return np.concatenate([quants, padded.view(np.uint32).reshape(rows, scale_vectors, 4)], axis=1)
    out = _write(fmt, _READERS[kind](tensor), tensor.name)
    assert out.shape == (rows, quant_vectors + scale_vectors, 4), (tensor.name, fmt, out.shape)
    return out


def pack_linear(tensors, tile: int, order=None) -> np.ndarray:
    """One u32 array [tile, vector, row in tile, 4] of weights stacked by rows (same width, one kernel
    format: `group_format`), the rows in tiles of `tile` (the last padded with zeros); with `order`, the
    stacked rows taken in that order (rows are independent in every format: NeoX RoPE's reordered Q/K rows)."""
    columns = {int(t.shape[0]) for t in tensors}
    if len(columns) != 1:
        names = ", ".join(f"{t.name} ({int(t.shape[0])} columns)" for t in tensors)
        raise ModelError(f"fused weights must share one width: {names}")
    fmt, cols = group_format(tensors), columns.pop()
    stacked = np.concatenate([_rows(t, fmt) for t in tensors], axis=0)
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

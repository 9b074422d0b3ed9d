"""TensorIR kernels of the Llama forward pass, written for software WebGPU adapters.

The kernels are barrier-free: each invocation owns its outputs and keeps partial sums in registers
(lavapipe and SwiftShader run workgroup barriers and shared-memory reductions about 10x slower).
Only the default form of attention has barriers (two per tile of keys); its subgroup forms, which
software adapters run, have none.
On lavapipe a storage-buffer load costs about the same whether it fetches 4 or 16 bytes, so weights
and activations are read as 16-byte vectors and every load is reused across several rows (register
blocking) and, in prefill, across several tokens.

On adapters with subgroups, the one-token dot products can share x's loads across a subgroup
(`x_lanes`), and attention its scores: each lane loads or computes one value and subgroupShuffle
hands it to the others (`shuffled`), as kernel variants for adapters whose subgroup size is known
(graph.ADAPTER_FORMS).

Shapes are static per model; what changes per step (tokens in the chunk, start position) is read from
a small `step` storage buffer, so grids and uniforms stay constant and bind groups are made once.

Each weight is one array of 16-byte vectors (see `weight_vectors`): per row, the quantized blocks,
then the f32 block scales, with the rows in tiles ([tile, vector, row in tile], `weight_shape`).
One buffer per weight keeps every kernel at 7 storage bindings or fewer (WebGPU's default limit is
8), and fused projections (Q/K/V, gate/up) are one weight with stacked rows.
"""

import functools
import struct
from dataclasses import dataclass

from tvm.script import tirx as T

from trellis.runtime.abi import MASKED_LOGIT, STEP_WORDS  # the runtime's values: the manifest records MASKED_LOGIT

F32, U32, I32 = "float32", "uint32", "int32"
F32X4, U32X4 = "float32x4", "uint32x4"
WG = 64  # invocations per workgroup for element-parallel kernels
# Invocations per workgroup of the register-blocked dot-product kernels: few invocations each doing
# much work, so small workgroups, or lavapipe would run a layer's GEMV on one of its threads.
DOT_WG = 16
# Attention's running maximum before the first key, and the score of a key a query does not see:
# below any real score, so exp(it - max) is 0 (WGSL has no infinity literal).
NO_SCORE = -3.0e38

# Per format: 16-byte vectors of quantized values per 32-element block, and blocks per scale vector.
# (pack.KERNEL_FORMATS says which GGUF types each format holds.)
QUANT_VECTORS = {"q4_1": 1, "q8_0": 2, "f32": 8, "q5_1": 1, "q6_k": 1, "q8_16": 2, "f16": 4, "bf16": 4}
BLOCKS_PER_SCALE_VECTOR = {"q4_1": 2, "q8_0": 4, "f32": 0,  # q4_1: (d, m) pairs; q8_0: d
                           "q5_1": 1, "q6_k": 1, "q8_16": 1, "f16": 0, "bf16": 0}
# Formats with several words per block besides the codes have one side vector per block, its lanes:
#   q5_1: d, m, the 32 fifth bits (lane 3 unused)  w = d * (nibble | bit << 4) + m
#   q6_k: d of elements 0-15, d of 16-31, their 2-bit high parts (16 a word)   w = d * (code - 32)
#   q8_16: d of elements 0-15, d of 16-31, m of 0-15, m of 16-31              w = d * int8 + m
# (Struct-of-arrays over groups of 4 blocks would save q5_1's unused lane, 1/8 byte per weight, but a
# block's words then sit in lanes that vary with the block: either 4 blocks unrolled per loop step,
# which made shaders 4x larger (780 KB for a 32-row head, minutes to compile on lavapipe), or lane
# selects per element.)
SIDE_WORDS = {"q5_1": 3, "q6_k": 4, "q8_16": 4}
# Formats whose dot products dequantize a block into registers first (`block_value`): no shifted-code
# form or shared x loads (`x_lanes`) for them; q4_1 and q8_0 (SmolLM2's) keep their faster forms.
VALUE_FORMATS = ("q5_1", "q6_k", "q8_16", "f16", "bf16")


def weight_vectors(fmt: str, cols: int) -> tuple[int, int]:
    """(quantized vectors, scale vectors) per row of `cols` elements in `fmt`."""
    if fmt not in QUANT_VECTORS:
        raise ValueError(f"unknown weight format {fmt!r}")
    if cols % 32:
        raise ValueError(f"weight rows must be a multiple of 32 elements, got {cols}")
    blocks = cols // 32
    if fmt in SIDE_WORDS:
        return blocks * QUANT_VECTORS[fmt], blocks
    per_scale = BLOCKS_PER_SCALE_VECTOR[fmt]
    return blocks * QUANT_VECTORS[fmt], (blocks + per_scale - 1) // per_scale if per_scale else 0


def weight_shape(fmt: str, rows: int, cols: int, tile: int) -> tuple[int, int, int]:
    """[tile, vector, row in tile]: the rows in tiles of `tile` (the last padded), each tile's rows
    interleaved vector by vector, so an invocation that owns a tile's rows reads one sequential stream.
    Software adapters run invocations as the SIMD lanes of a CPU thread and load lane by lane; on
    lavapipe a streaming read ran 5-6x faster with each lane reading its own run of memory than with
    neighbouring lanes reading neighbouring vectors and striding on together (as column-major
    [vector, row], the one tile of all rows, has them), likely as the CPU's prefetchers stop at pages."""
    return -(-rows // tile), sum(weight_vectors(fmt, cols)), tile


def weight_at(w, vector, row, *word):
    """Vector `vector` of row `row` of a weight buffer shaped by `weight_shape`; with `word`, that u32
    word of it, from the weight as a buffer of words (shaped weight_shape + (4,))."""
    tile = w.shape[2]
    return w[row // tile, vector, row % tile, *word]


def lane(vector, i: int):
    return T.Shuffle([vector], [i])


def lane_of(vector, i, count: int):
    """Lane `i` (an expression below `count`) of a vector, as a chain of selects: Shuffle needs constants."""
    if isinstance(i, int):
        return lane(vector, i)
    out = lane(vector, count - 1)
    for j in range(count - 2, -1, -1):
        out = T.Select(i == j, lane(vector, j), out)
    return out


def shuffled(value, v, lanes: int):
    """`value` as subgroup lane v holds it (the subgroup's lanes share loads in groups of `lanes`)."""
    return T.tvm_warp_shuffle(T.uint32(0xFFFFFFFF), value, v, lanes, lanes)


def nibble_bit(j):
    """Where q4_1 element j (an int or an unrolled loop variable) sits in its word: element j < 16
    is the low nibble of byte j, j >= 16 the high nibble of byte j - 16; byte j % 16 is byte j % 4
    of word (j % 16) // 4."""
    return 8 * (j % 4) + 4 * (j // 16)


def block_code(fmt: str, wq, w0, j):
    """Element j of a 32-element block whose weight vectors are wq[w0:]; x's matching element is
    lane j % 4 of x vector j // 4. For q4_1 / q8_0 this is the integer code (the caller applies the
    scales; q4_1's nibbles: `nibble_bit`). `j` may be an int or an (unrolled) loop variable."""
    if fmt == "q4_1":
        word = lane_of(wq[w0], (j % 16) // 4, 4)
        return T.Cast(F32, T.bitwise_and(T.shift_right(word, T.Cast(U32, nibble_bit(j))), T.uint32(15)))
    if fmt == "q8_0":
        word = lane_of(wq[w0 + j // 16], (j % 16) // 4, 4)
        # Move the byte to the top, then an arithmetic shift sign-extends it.
        return T.Cast(F32, T.shift_right(T.reinterpret(I32, T.shift_left(word, T.Cast(U32, 24 - 8 * (j % 4)))), 24))
    return T.reinterpret(F32, lane_of(wq[w0 + j // 4], j % 4, 4))


def _f16_value(h):
    """The f32 value of the f16 whose bits are h's low 16 (inf and NaN excepted): the exponent re-biased
    for normals, subnormals as mantissa * 2**-24 (no f32 subnormal on the way, which GPUs may flush)."""
    mag = T.bitwise_and(h, T.uint32(0x7FFF))
    sign = T.shift_left(T.shift_right(h, T.uint32(15)), T.uint32(31))
    tiny = T.Cast(F32, T.reinterpret(I32, mag)) * T.reinterpret(F32, T.uint32((127 - 24) << 23))
    return T.Select(mag < T.uint32(0x400), T.Select(sign == T.uint32(0), tiny, -tiny),
                    T.reinterpret(F32, T.bitwise_or(sign, T.shift_left(mag, T.uint32(13)) + T.uint32(112 << 23))))


def block_value(fmt: str, quant_word, side_word, j):
    """Element j of a block of a VALUE_FORMATS format as f32, exactly as gguf dequantizes it.
    quant_word(i): u32 word i of the block's code vectors; side_word(k): the block's side word k."""
    if fmt in ("f16", "bf16"):
        half = T.shift_right(quant_word(j // 2), T.Cast(U32, 16 * (j % 2)))
        if fmt == "bf16":  # the high half of an f32
            return T.reinterpret(F32, T.shift_left(half, T.uint32(16)))
        return _f16_value(T.bitwise_and(half, T.uint32(0xFFFF)))
    if fmt == "q8_16":
        code = T.shift_right(T.reinterpret(I32, T.shift_left(quant_word(j // 4), T.Cast(U32, 24 - 8 * (j % 4)))), 24)
        return (T.reinterpret(F32, side_word(j // 16)) * T.Cast(F32, code)
                + T.reinterpret(F32, side_word(2 + j // 16)))
    nibble = T.bitwise_and(T.shift_right(quant_word((j % 16) // 4), T.Cast(U32, nibble_bit(j))), T.uint32(15))
    if fmt == "q5_1":
        high = T.bitwise_and(T.shift_right(side_word(2), T.Cast(U32, j)), T.uint32(1))
        code = T.Cast(F32, T.reinterpret(I32, T.bitwise_or(nibble, T.shift_left(high, T.uint32(4)))))
        return T.reinterpret(F32, side_word(0)) * code + T.reinterpret(F32, side_word(1))
    if fmt == "q6_k":
        high = T.bitwise_and(T.shift_right(side_word(2 + j // 16), T.Cast(U32, 2 * (j % 16))), T.uint32(3))
        code = T.Cast(F32, T.reinterpret(I32, T.bitwise_or(nibble, T.shift_left(high, T.uint32(4)))))
        return T.reinterpret(F32, side_word(j // 16)) * (code - T.float32(32))
    raise ValueError(f"no block values for {fmt!r}")


def register_value(fmt: str, wq, sv, r, j):
    """block_value of element j of a block of dot-product row r: its code vectors in wq[0:], its side
    vector in sv[r]."""
    return block_value(fmt, lambda i: lane_of(wq[i // 4], i % 4, 4), lambda k: lane_of(sv[r], k, 4), j)


def block_dot(fmt: str, wq, w0, xv):
    """sum over a 32-element block of code(w) * x, where w's vectors are wq[w0:] and x's are xv[0:8]."""
    return _sum([block_code(fmt, wq, w0, j) * lane(xv[j // 4], j % 4) for j in range(32)])


def unpacked_dot(codes, c0, xv):
    """block_dot over a block's codes already unpacked into codes[c0:c0 + 32]."""
    return _sum([codes[c0 + j] * lane(xv[j // 4], j % 4) for j in range(32)])


def _sum(terms):
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def vector_sum(xv):
    total = lane(xv[0], 0)
    for v in range(8):
        for b in range(4):
            if v or b:
                total = total + lane(xv[v], b)
    return total


def scale_d(fmt: str, sv, block):
    """The block's scale d from its scale vector."""
    if fmt == "q4_1":
        return T.reinterpret(F32, lane_of(sv, (block % 2) * 2, 4))
    return T.reinterpret(F32, lane_of(sv, block % 4, 4))


def scale_m(sv, block):
    """q4_1's offset m."""
    return T.reinterpret(F32, lane_of(sv, (block % 2) * 2 + 1, 4))


def _row(row0, r, run, stride):
    """dot_rows' row r: runs of `run` consecutive rows from row0, `stride` apart."""
    return row0 + r % run + (r // run) * stride


@dataclass
class Kernel:
    name: str
    func: object  # tvm PrimFunc
    grid: tuple  # workgroups (x, y, z)
    subgroups: bool = False  # uses subgroup builtins (the device needs WebGPU's "subgroups" feature)


@T.macro
def _accumulate(fmt, acc, i, dm, r, dot, sx):
    """acc[i] += row r's block scales applied to `dot` (q4_1: d * dot + m * sum(x))."""
    if fmt == "q4_1":
        acc[i] = acc[i] + dm[r * 2] * dot + dm[r * 2 + 1] * sx[0]
    elif fmt == "q8_0":
        acc[i] = acc[i] + dm[r * 2] * dot
    else:
        acc[i] = acc[i] + dot


def shifted_code(fmt: str, wq, w0, j: int):
    """Element j of a quantized block, left where it sits in its word: code * 2**shift,
    from one AND (and for some positions one shift), converted as a signed integer.

    Software adapters run one instruction per operation per SIMD lane, and the usual extraction
    (shift down, mask, convert) costs three before the multiply. The power of two is taken out of x
    instead (`shift_scale`), once per block for all rows. Every value stays below 2**31, so the
    conversion is exact and signed: unsigned conversion takes several instructions on CPUs without
    AVX-512."""
    if fmt == "q4_1":
        word = lane(wq[w0], (j % 16) // 4)
        bit = nibble_bit(j)
        if bit > 24:  # the top nibble would reach the sign bit
            word = T.shift_right(word, T.uint32(bit - 24))
        return T.Cast(F32, T.reinterpret(I32, T.bitwise_and(word, T.uint32(15 << min(bit, 24)))))
    if fmt == "q8_0":
        word = lane(wq[w0 + j // 16], (j % 16) // 4)
        if j % 4 != 3:  # move the byte to the top: its sign is the word's
            word = T.shift_left(word, T.uint32(24 - 8 * (j % 4)))
        return T.Cast(F32, T.reinterpret(I32, T.bitwise_and(word, T.uint32(0xFF000000))))
    raise ValueError(f"no shifted codes for {fmt!r}")


def shift_scale(fmt: str, j):
    """2**-shift of element j (an int or an unrolled loop variable), as an exact f32: TVM prints
    float literals with 7 digits, so the power of two is built from its bits."""
    shift = T.min(nibble_bit(j), 24) if fmt == "q4_1" else 24
    return T.reinterpret(F32, T.shift_left(T.Cast(U32, 127 - shift), T.uint32(23)))


def shifted_dot(fmt: str, wq, xs):
    """sum over a block of shifted_code * xs, as one chain of fused multiply-adds."""
    total = shifted_code(fmt, wq, 0, 0) * xs[0]
    for j in range(1, 32):
        total = T.fma(shifted_code(fmt, wq, 0, j), xs[j], total)
    return total


@T.macro
def dot_rows_decode(fmt, w, x, n_blk, quant_vectors, per_scale, row0, n_rows, run, stride, t0, acc, wq, sv, xv, xs,
                    sx, lanes, x_lane, xl):
    """dot_rows for one token, with fewer operations per weight (decode is most of a step's time).

    Each row's scale vector is loaded once for the `per_scale` blocks it holds (not once per block),
    x is read and scaled once per block for all rows (`shifted_code`), and the products are fused
    multiply-adds. With `lanes` > 1, a block's 8 x vectors take 8 / lanes loads: each invocation
    loads the one its `x_lane` (local index % lanes) names, and subgroupShuffle hands every
    subgroup lane v's (v < lanes) to all. So subgroups must hold a multiple of `lanes` invocations
    in local-index order, which the backends check (their subgroup probe)."""
    for i in T.unroll(n_rows):
        acc[i] = T.float32(0)
    for g in range((n_blk + per_scale - 1) // per_scale):
        for r in T.unroll(n_rows):
            sv[r] = weight_at(w, quant_vectors + g, _row(row0, r, run, stride))
        for bi in T.unroll(per_scale):
            if n_blk % per_scale == 0 or g * per_scale + bi < n_blk:
                if lanes == 1:
                    for v in T.unroll(8):
                        xv[v] = x[t0, (g * per_scale + bi) * 8 + v]
                else:
                    for v0 in T.unroll(8 // lanes):
                        xl[0] = x[t0, (g * per_scale + bi) * 8 + v0 * lanes + x_lane]
                        for v in T.unroll(lanes):
                            xv[v0 * lanes + v] = shuffled(xl[0], v, lanes)
                if fmt == "q4_1":
                    sx[0] = vector_sum(xv)
                for j in T.unroll(32):
                    xs[j] = lane_of(xv[j // 4], j % 4, 4) * shift_scale(fmt, j)
                for r in T.unroll(n_rows):
                    for i in T.unroll(QUANT_VECTORS[fmt]):
                        wq[i] = weight_at(w, (g * per_scale + bi) * QUANT_VECTORS[fmt] + i, _row(row0, r, run, stride))
                    if fmt == "q4_1":
                        acc[r] = T.fma(T.reinterpret(F32, lane(sv[r], bi * 2)), shifted_dot(fmt, wq, xs),
                                       T.fma(T.reinterpret(F32, lane(sv[r], bi * 2 + 1)), sx[0], acc[r]))
                    else:
                        acc[r] = T.fma(T.reinterpret(F32, lane(sv[r], bi)), shifted_dot(fmt, wq, xs), acc[r])


@T.macro
def _dot_rows_blocks(fmt, w, x, n_blk, quant_vectors, per_scale, row0, n_rows, run, stride, t0, n_tok, acc, wq, sv, xv,
                     sx, dm, codes):
    """dot_rows one block at a time, for several tokens or f32 weights.

    Each block's weight vectors are loaded once for all tokens, x's once for all rows. The block's
    scales go to registers (dm) first: inlining their lane selection into every token's sum made
    SwiftShader's shader compiler run out of memory. With several tokens, each row's codes are
    unpacked once into `codes` (32 per row) rather than once per token: software adapters compile
    every unrolled operation, and the unpacking was most of them.
    """
    for i in T.unroll(n_rows * n_tok):
        acc[i] = T.float32(0)
    for b in range(n_blk):
        for r in T.unroll(n_rows):
            for i in T.unroll(QUANT_VECTORS[fmt]):
                wq[r * QUANT_VECTORS[fmt] + i] = weight_at(w, b * QUANT_VECTORS[fmt] + i, _row(row0, r, run, stride))
            if per_scale > 0:
                sv[0] = weight_at(w, quant_vectors + b // T.max(per_scale, 1), _row(row0, r, run, stride))
                dm[r * 2] = scale_d(fmt, sv[0], b)
                if fmt == "q4_1":
                    dm[r * 2 + 1] = scale_m(sv[0], b)
            if n_tok > 1:
                for j in T.unroll(32):
                    codes[r * 32 + j] = block_code(fmt, wq, r * QUANT_VECTORS[fmt], j)
        for t in T.unroll(n_tok):
            for v in T.unroll(8):
                xv[v] = x[t0 + t, b * 8 + v]
            if fmt == "q4_1":
                sx[0] = vector_sum(xv)
            for r in T.unroll(n_rows):
                if n_tok > 1:
                    _accumulate(fmt, acc, r * n_tok + t, dm, r, unpacked_dot(codes, r * 32, xv), sx)
                else:
                    _accumulate(fmt, acc, r * n_tok + t, dm, r, block_dot(fmt, wq, r * QUANT_VECTORS[fmt], xv), sx)


@T.macro
def _dot_rows_values(fmt, w, x, n_blk, quant_vectors, row0, n_rows, run, stride, t0, n_tok, acc, wq, sv, xv, vals):
    """dot_rows for VALUE_FORMATS: per block, each row's values dequantized once into `vals` (32 per row)
    for all tokens."""
    for i in T.unroll(n_rows * n_tok):
        acc[i] = T.float32(0)
    for b in range(n_blk):
        for r in T.unroll(n_rows):
            if fmt in SIDE_WORDS:
                sv[r] = weight_at(w, quant_vectors + b, _row(row0, r, run, stride))
            for i in T.unroll(QUANT_VECTORS[fmt]):
                wq[i] = weight_at(w, b * QUANT_VECTORS[fmt] + i, _row(row0, r, run, stride))
            for j in T.unroll(32):
                vals[r * 32 + j] = register_value(fmt, wq, sv, r, j)
        for t in T.unroll(n_tok):
            for v in T.unroll(8):
                xv[v] = x[t0 + t, b * 8 + v]
            for r in T.unroll(n_rows):
                acc[r * n_tok + t] = acc[r * n_tok + t] + unpacked_dot(vals, r * 32, xv)


@T.macro
def dot_rows(fmt, w, x, n_blk, quant_vectors, per_scale, row0, n_rows, run, stride, t0, n_tok, acc, wq, sv, xv, xs, sx,
             dm, codes, lanes, x_lane, xl):
    """acc[r * n_tok + t] = W[row r] . x[t0 + t] for r < n_rows, t < n_tok, where row r is
    row0 + r % run + (r // run) * stride (runs of consecutive rows, e.g. gate rows then up rows).
    One token of quantized weights (decode, the head) takes dot_rows_decode, the rest
    _dot_rows_blocks (which has no `lanes` form); VALUE_FORMATS take _dot_rows_values."""
    if fmt in VALUE_FORMATS:
        _dot_rows_values(fmt, w, x, n_blk, quant_vectors, row0, n_rows, run, stride, t0, n_tok, acc, wq, sv, xv,
                         codes)
    elif n_tok == 1 and per_scale > 0:
        dot_rows_decode(fmt, w, x, n_blk, quant_vectors, per_scale, row0, n_rows, run, stride, t0, acc, wq, sv, xv,
                        xs, sx, lanes, x_lane, xl)
    else:
        _dot_rows_blocks(fmt, w, x, n_blk, quant_vectors, per_scale, row0, n_rows, run, stride, t0, n_tok, acc, wq, sv,
                         xv, sx, dm, codes)


def _dot_setup(fmt, rows, cols, tile):
    shape = weight_shape(fmt, rows, cols, tile)
    return shape, cols // 32, weight_vectors(fmt, cols)[0], BLOCKS_PER_SCALE_VECTOR[fmt]


def shares_x_loads(fmt: str) -> bool:
    """Whether one-token dot products over `fmt` weights have an `x_lanes` form."""
    return fmt in ("q4_1", "q8_0")


def _check_lanes(x_lanes: int, tokens_per_invocation: int, fmt: str) -> None:
    if x_lanes not in (1, 2, 4, 8):
        raise ValueError(f"x_lanes {x_lanes} does not divide a block's 8 x vectors into lanes")
    if x_lanes > 1 and (tokens_per_invocation != 1 or not shares_x_loads(fmt)):
        raise ValueError("shared x loads (x_lanes > 1) exist for one token of q4_1 / q8_0 weights only")


def _codes_len(fmt: str, rows: int, tokens: int) -> int:
    """Unpacked codes (or values) an invocation keeps: 32 per row, unless one token of q4_1 / q8_0."""
    return rows * 32 if tokens > 1 or fmt in VALUE_FORMATS else 1


def _computes(inv, threads, lanes):
    """Whether invocation `inv` runs its dot products. With lanes sharing x loads, all lanes of a group
    whose first has outputs do (a shuffle reads lanes that must run); those past `threads` read
    clamped rows and store nothing (`_stores`)."""
    return inv < threads if lanes == 1 else inv - inv % lanes < threads


def _stores(inv, threads, lanes, condition):
    """`condition`, and with lanes sharing x loads, that invocation `inv` has outputs (`_computes`)."""
    return condition if lanes == 1 else T.And(condition, inv < threads)


def _suffix(x_lanes: int) -> str:
    return f"_l{x_lanes}" if x_lanes > 1 else ""


def _float_suffix(tag: str, value: float, default: float) -> str:
    """A kernel name's part for a float option, empty at its default (names stay as they were)."""
    return "" if value == default else f"_{tag}{value:g}".replace("-", "m").replace(".", "p")


def _scaled(value, scale: float):
    return value if scale == 1.0 else value * _exact_f32(scale)


def _exact_f32(value: float):
    """`value` rounded to f32, built from its bits: TVM prints float literals with 7 digits."""
    return T.reinterpret(F32, T.uint32(struct.unpack("<I", struct.pack("<f", value))[0]))


# tanh's argument is clamped: past +-10 tanh is 1 to f32 precision, and some adapters' tanh
# overflows (exp of a large argument) into NaN.
TANH_CLAMP = 10.0


def _tanh(value):
    return T.tanh(T.max(T.min(value, T.float32(TANH_CLAMP)), T.float32(-TANH_CLAMP)))


def softcapped(value, cap: float):
    """Gemma 2's soft-capping: cap * tanh(value / cap) (cap 0: none)."""
    return value if not cap else T.float32(cap) * _tanh(value / T.float32(cap))


@functools.cache  # one parse per distinct kernel, however many layers use it
def embed(fmt, vocab, hidden, tokens, tile, scale=1.0, part=None):
    """x[t] = dequantized row ids[t] of the embedding (times `scale`: Gemma's sqrt(hidden)); reads the
    weight as plain u32 words.

    With `part` = (first, rows), the weight holds only the embedding's rows first .. first + rows - 1
    (one buffer of an embedding split into row parts): x[t] is written only for the tokens whose id
    falls among them, so one dispatch per part fills every token's row."""
    first, rows = part or (0, vocab)
    shape = weight_shape(fmt, rows, hidden, tile)
    qv = weight_vectors(fmt, hidden)[0]
    per_scale = BLOCKS_PER_SCALE_VECTOR[fmt]
    total = tokens * hidden

    def word(w, row, vec, i):  # u32 word i of vector vec of `row`
        return weight_at(w, vec, row, i)

    def element(w, row, k):
        blk, j = k // 32, k % 32
        if fmt in VALUE_FORMATS:
            return block_value(fmt, lambda i: word(w, row, blk * QUANT_VECTORS[fmt] + i // 4, i % 4),
                               lambda s: word(w, row, qv + blk, s), j)
        if fmt == "q4_1":
            q = T.bitwise_and(T.shift_right(word(w, row, blk, (j % 16) // 4), T.Cast(U32, nibble_bit(j))),
                              T.uint32(15))
            d = T.reinterpret(F32, word(w, row, qv + blk // per_scale, (blk % per_scale) * 2))
            m = T.reinterpret(F32, word(w, row, qv + blk // per_scale, (blk % per_scale) * 2 + 1))
            return d * T.Cast(F32, q) + m
        if fmt == "q8_0":
            wd = word(w, row, blk * 2 + j // 16, (j % 16) // 4)
            signed = T.shift_right(T.reinterpret(I32, T.shift_left(wd, T.Cast(U32, 24 - (j % 4) * 8))), 24)
            return T.reinterpret(F32, word(w, row, qv + blk // per_scale, blk % per_scale)) * T.Cast(F32, signed)
        return T.reinterpret(F32, word(w, row, k // 4, k % 4))

    @T.prim_func(s_tir=True)
    def func(ids: T.Buffer((tokens,), I32), w: T.Buffer((*shape, 4), U32),
             x: T.Buffer((tokens, hidden), F32), step: T.Buffer((STEP_WORDS,), I32)):
        for bx in T.thread_binding((total + WG - 1) // WG, "blockIdx.x"):
            for tx in T.thread_binding(WG, "threadIdx.x"):
                with T.sblock("embed"):
                    if part is None:
                        if bx * WG + tx < total and (bx * WG + tx) // hidden < step[0]:
                            x[(bx * WG + tx) // hidden, (bx * WG + tx) % hidden] = _scaled(element(
                                w, ids[(bx * WG + tx) // hidden], (bx * WG + tx) % hidden), scale)
                    elif bx * WG + tx < total and (bx * WG + tx) // hidden < step[0]:
                        if T.And(ids[(bx * WG + tx) // hidden] >= first, ids[(bx * WG + tx) // hidden] < first + rows):
                            x[(bx * WG + tx) // hidden, (bx * WG + tx) % hidden] = _scaled(element(
                                w, ids[(bx * WG + tx) // hidden] - first, (bx * WG + tx) % hidden), scale)

    rows_suffix = f"_rows{first}_{first + rows}" if part else ""
    return Kernel(f"embed_{fmt}_v{vocab}_h{hidden}_t{tokens}_w{tile}{_float_suffix('x', scale, 1.0)}{rows_suffix}",
                  func, ((total + WG - 1) // WG, 1, 1))


@functools.cache
def rms_norm(hidden, tokens, eps):
    """One workgroup per token; every invocation sums the squares itself (no barrier), then scales a slice."""
    vecs = hidden // 4
    lanes = 16
    per_thread = (vecs + lanes - 1) // lanes

    @T.prim_func(s_tir=True)
    def func(x: T.Buffer((tokens, vecs), F32X4), g: T.Buffer((vecs,), F32X4), y: T.Buffer((tokens, vecs), F32X4),
             step: T.Buffer((STEP_WORDS,), I32)):
        for t in T.thread_binding(tokens, "blockIdx.x"):
            for tx in T.thread_binding(lanes, "threadIdx.x"):
                with T.sblock("rms_norm"):
                    acc = T.sblock_alloc_buffer((1,), F32X4, scope="local")
                    r = T.sblock_alloc_buffer((1,), F32, scope="local")
                    if t < step[0]:
                        acc[0] = T.Broadcast(T.float32(0), 4)
                        for k in range(vecs):
                            acc[0] = acc[0] + x[t, k] * x[t, k]
                        r[0] = T.float32(1) / T.sqrt(
                            (lane(acc[0], 0) + lane(acc[0], 1) + lane(acc[0], 2) + lane(acc[0], 3))
                            / T.float32(hidden) + T.float32(eps))
                        for j in range(per_thread):
                            if j * lanes + tx < vecs:
                                y[t, j * lanes + tx] = x[t, j * lanes + tx] * T.Broadcast(r[0], 4) * g[j * lanes + tx]

    if hidden % 4:
        raise ValueError(f"hidden size {hidden} is not a multiple of 4")
    return Kernel(f"rms_norm_h{hidden}_e{eps:g}_t{tokens}".replace("-", "m").replace(".", "p"), func, (tokens, 1, 1))


# An RMSNorm between a residual add and a projection costs no dispatch of its own: whoever writes
# the residual stream x also writes the norm's input h = x * g (g its weight) and sumsq[t, i], the
# sum of x[t]^2 over invocation i's rows; the projection reading h finishes the norm by scaling its
# dot products by 1 / rms (`rms_scale`). No barrier: each invocation reads all partial sums itself.


@T.macro
def rms_scale(acc, n_acc, t0, n_tok, sumsq, parts, hidden, eps, rs):
    """acc[i] /= rms of x[t0 + i % n_tok] for i < n_acc (dot products laid out [row, token]), the
    rms from each token's partial sums of squares: rs[t] = 1 / sqrt(mean of x[t0 + t]^2 + eps)."""
    for t in T.unroll(n_tok):
        rs[t] = T.float32(0)
        for p in range(parts):
            rs[t] = rs[t] + sumsq[t0 + t, p]
        rs[t] = T.float32(1) / T.sqrt(rs[t] / T.float32(hidden) + T.float32(eps))
    for i in T.unroll(n_acc):
        acc[i] = acc[i] * rs[i % n_tok]


@functools.cache
def norm_partials(hidden, tokens, rows_per_thread):
    """h[t] = x[t] * g and sumsq[t, i] = sum of x[t, r]^2 over the `rows_per_thread` rows r of
    invocation i: the first layer's norm input (later layers' come from matmul's residual_norm)."""
    R = rows_per_thread
    parts = (hidden + R - 1) // R

    @T.prim_func(s_tir=True)
    def func(x: T.Buffer((tokens, hidden), F32), g: T.Buffer((hidden,), F32), h: T.Buffer((tokens, hidden), F32),
             sumsq: T.Buffer((tokens, parts), F32), step: T.Buffer((STEP_WORDS,), I32)):
        for t in T.thread_binding(tokens, "blockIdx.y"):
            for pb in T.thread_binding((parts + WG - 1) // WG, "blockIdx.x"):
                for tx in T.thread_binding(WG, "threadIdx.x"):
                    with T.sblock("norm_partials"):
                        ss = T.sblock_alloc_buffer((1,), F32, scope="local")
                        if pb * WG + tx < parts and t < step[0]:
                            ss[0] = T.float32(0)
                            for r in T.unroll(R):
                                if (pb * WG + tx) * R + r < hidden:
                                    h[t, (pb * WG + tx) * R + r] = x[t, (pb * WG + tx) * R + r] * g[(pb * WG + tx) * R + r]
                                    ss[0] = ss[0] + x[t, (pb * WG + tx) * R + r] * x[t, (pb * WG + tx) * R + r]
                            sumsq[t, pb * WG + tx] = ss[0]

    return Kernel(f"norm_partials_h{hidden}_t{tokens}_r{R}", func, ((parts + WG - 1) // WG, tokens, 1))


@T.macro
def _matmul(fmt, mode, x, w, y, g, h, sumsq, step, rows, R, n_blk, quant_vectors, per_scale, groups, n_tok, threads,
            lanes, softcap, y_first):
    """matmul's loop nest; g, h and sumsq are used (and passed) in mode "residual_norm" only."""
    for tb in T.thread_binding(groups, "blockIdx.y"):
        for ob in T.thread_binding((threads + DOT_WG - 1) // DOT_WG, "blockIdx.x"):
            for tx in T.thread_binding(DOT_WG, "threadIdx.x"):
                with T.sblock("matmul"):
                    acc = T.sblock_alloc_buffer((R * n_tok,), F32, scope="local")
                    wq = T.sblock_alloc_buffer((R * QUANT_VECTORS[fmt],), U32X4, scope="local")
                    sv = T.sblock_alloc_buffer((R,), U32X4, scope="local")
                    dm = T.sblock_alloc_buffer((2 * R,), F32, scope="local")
                    xv = T.sblock_alloc_buffer((8,), F32X4, scope="local")
                    xl = T.sblock_alloc_buffer((1,), F32X4, scope="local")
                    xs = T.sblock_alloc_buffer((32,), F32, scope="local")
                    sx = T.sblock_alloc_buffer((1,), F32, scope="local")
                    codes = T.sblock_alloc_buffer((_codes_len(fmt, R, n_tok),), F32, scope="local")
                    t0 = T.sblock_alloc_buffer((1,), I32, scope="local")
                    ss = T.sblock_alloc_buffer((n_tok,), F32, scope="local")  # residual_norm's sums of squares
                    out = T.sblock_alloc_buffer((1,), F32, scope="local")
                    if _computes(ob * DOT_WG + tx, threads, lanes) and tb * n_tok < step[0]:
                        # The head reads only the chunk's last token.
                        if mode == "last":
                            t0[0] = step[0] - 1
                        else:
                            t0[0] = tb * n_tok
                        dot_rows(fmt, w, x, n_blk, quant_vectors, per_scale, (ob * DOT_WG + tx) * R, R, R, 0,
                                 t0[0], n_tok, acc, wq, sv, xv, xs, sx, dm, codes, lanes, tx % lanes, xl)
                        if mode == "residual_norm":
                            for t in T.unroll(n_tok):
                                ss[t] = T.float32(0)
                        for r in T.unroll(R):
                            if (ob * DOT_WG + tx) * R + r < rows:
                                for t in T.unroll(n_tok):
                                    if mode == "last" and y_first > 0:
                                        y[y_first + (ob * DOT_WG + tx) * R + r] = softcapped(acc[r], softcap)
                                    elif mode == "last":
                                        y[(ob * DOT_WG + tx) * R + r] = softcapped(acc[r], softcap)
                                    elif tb * n_tok + t < step[0]:
                                        if mode == "accumulate":
                                            y[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] = (
                                                y[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] + acc[r * n_tok + t])
                                        elif mode == "store":
                                            y[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] = acc[r * n_tok + t]
                                        else:
                                            out[0] = y[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] + acc[r * n_tok + t]
                                            y[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] = out[0]
                                            h[tb * n_tok + t, (ob * DOT_WG + tx) * R + r] = (
                                                out[0] * g[(ob * DOT_WG + tx) * R + r])
                                            ss[t] = ss[t] + out[0] * out[0]
                        if mode == "residual_norm":
                            for t in T.unroll(n_tok):
                                if _stores(ob * DOT_WG + tx, threads, lanes, tb * n_tok + t < step[0]):
                                    sumsq[tb * n_tok + t, ob * DOT_WG + tx] = ss[t]


@functools.cache
def matmul(fmt, k_dim, rows, tokens, block, mode, rows_per_thread, tile, x_lanes=1, softcap=0.0, y_first=0):
    """y[t, o] += x[t, :] . W[o, :]; an invocation owns `rows_per_thread` rows and `block` tokens.

    mode "accumulate" adds into y (the residual add); "residual_norm" too, and then writes the next
    norm's input from the new y: h[t, o] = y[t, o] * g[o] and sumsq[t, i] over invocation i's rows
    (see `rms_scale`); "store" writes y = x . W (an output that is normed before its residual add);
    "last" computes only the chunk's last token into y[y_first + o] (the logits head, soft-capped with
    `softcap`; `y_first` > 0: W is a row part of a head split over several buffers, starting at that row).
    Rows past the end (when rows % rows_per_thread != 0) are computed from clamped reads and dropped
    (and so are invocations past the end, with `x_lanes`: see dot_rows_decode).
    """
    if mode not in ("accumulate", "residual_norm", "store", "last"):
        raise ValueError(f"unknown matmul mode {mode!r}")
    R = rows_per_thread
    shape, n_blk, quant_vectors, per_scale = _dot_setup(fmt, rows, k_dim, tile)
    groups = 1 if mode == "last" else tokens // block
    n_tok = 1 if mode == "last" else block
    if y_first and mode != "last":
        raise ValueError("only the head (mode 'last') writes at a row offset")
    y_shape = (y_first + rows,) if mode == "last" else (tokens, rows)
    threads = (rows + R - 1) // R
    _check_lanes(x_lanes, n_tok, fmt)

    if mode == "residual_norm":
        @T.prim_func(s_tir=True)
        def func(x: T.Buffer((tokens, k_dim // 4), F32X4), w: T.Buffer(shape, U32X4), y: T.Buffer(y_shape, F32),
                 g: T.Buffer((rows,), F32), h: T.Buffer((tokens, rows), F32), sumsq: T.Buffer((tokens, threads), F32),
                 step: T.Buffer((STEP_WORDS,), I32)):
            _matmul(fmt, mode, x, w, y, g, h, sumsq, step, rows, R, n_blk, quant_vectors, per_scale, groups, n_tok,
                    threads, x_lanes, softcap, 0)
    else:
        @T.prim_func(s_tir=True)
        def func(x: T.Buffer((tokens, k_dim // 4), F32X4), w: T.Buffer(shape, U32X4), y: T.Buffer(y_shape, F32),
                 step: T.Buffer((STEP_WORDS,), I32)):
            _matmul(fmt, mode, x, w, y, None, None, None, step, rows, R, n_blk, quant_vectors, per_scale, groups,
                    n_tok, threads, x_lanes, softcap, y_first)

    return Kernel(f"matmul_{mode}_{fmt}_k{k_dim}_o{rows}_t{tokens}_r{R}_w{tile}{_suffix(x_lanes)}"
                  f"{_float_suffix('c', softcap, 0.0)}{f'_at{y_first}' if y_first else ''}", func,
                  ((threads + DOT_WG - 1) // DOT_WG, groups, 1), x_lanes > 1)


ACTIVATION_NAMES = {"silu": "silu", "gelu_tanh": "gelu"}


def _activation(act_fn: str, g):
    if act_fn == "silu":
        return g / (T.float32(1) + T.exp(-g))
    if act_fn == "gelu_tanh":  # 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3)))
        return T.float32(0.5) * g * (T.float32(1) + _tanh(
            _exact_f32(0.7978845608028654) * (g + T.float32(0.044715) * g * g * g)))
    raise ValueError(f"unknown activation {act_fn!r}")


@functools.cache
def gate_up_silu(fmt, hidden, ffn, tokens, block, rows_per_thread, parts, eps, tile, x_lanes=1, act_fn="silu"):
    """act[t, o] = silu(n[t] . W[o]) * (n[t] . W[ffn + o]), where n[t] = x[t] / rms is the RMSNorm of
    x = h / g (`rms_scale`, from `parts` partial sums): W stacks the gate rows over the up rows, so
    the norm, the two GEMVs and the SiLU-mul are one pass. An invocation owns `rows_per_thread` outputs.
    `act_fn` "gelu_tanh" takes GELU's tanh approximation instead of SiLU (Gemma)."""
    R = rows_per_thread
    if ffn % R:
        raise ValueError(f"FFN size {ffn} is not a multiple of {R}")
    shape, n_blk, quant_vectors, per_scale = _dot_setup(fmt, 2 * ffn, hidden, tile)
    threads = ffn // R
    _check_lanes(x_lanes, block, fmt)

    @T.prim_func(s_tir=True)
    def func(x: T.Buffer((tokens, hidden // 4), F32X4), w: T.Buffer(shape, U32X4), act: T.Buffer((tokens, ffn), F32),
             sumsq: T.Buffer((tokens, parts), F32), step: T.Buffer((STEP_WORDS,), I32)):
        for tb in T.thread_binding(tokens // block, "blockIdx.y"):
            for ob in T.thread_binding((threads + DOT_WG - 1) // DOT_WG, "blockIdx.x"):
                for tx in T.thread_binding(DOT_WG, "threadIdx.x"):
                    with T.sblock("gate_up"):
                        rs = T.sblock_alloc_buffer((block,), F32, scope="local")
                        # Rows: gate rows o*R .. o*R+R-1, then the up rows ffn + the same.
                        acc = T.sblock_alloc_buffer((2 * R * block,), F32, scope="local")
                        wq = T.sblock_alloc_buffer((2 * R * QUANT_VECTORS[fmt],), U32X4, scope="local")
                        sv = T.sblock_alloc_buffer((2 * R,), U32X4, scope="local")
                        dm = T.sblock_alloc_buffer((4 * R,), F32, scope="local")
                        xv = T.sblock_alloc_buffer((8,), F32X4, scope="local")
                        xl = T.sblock_alloc_buffer((1,), F32X4, scope="local")
                        xs = T.sblock_alloc_buffer((32,), F32, scope="local")
                        sx = T.sblock_alloc_buffer((1,), F32, scope="local")
                        codes = T.sblock_alloc_buffer((_codes_len(fmt, 2 * R, block),), F32, scope="local")
                        if _computes(ob * DOT_WG + tx, threads, x_lanes) and tb * block < step[0]:
                            dot_rows(fmt, w, x, n_blk, quant_vectors, per_scale, (ob * DOT_WG + tx) * R, 2 * R, R, ffn,
                                     tb * block, block, acc, wq, sv, xv, xs, sx, dm, codes, x_lanes, tx % x_lanes, xl)
                            rms_scale(acc, 2 * R * block, tb * block, block, sumsq, parts, hidden, eps, rs)
                            for r in T.unroll(R):
                                for t in T.unroll(block):
                                    if _stores(ob * DOT_WG + tx, threads, x_lanes, tb * block + t < step[0]):
                                        act[tb * block + t, (ob * DOT_WG + tx) * R + r] = (
                                            _activation(act_fn, acc[r * block + t]) * acc[(R + r) * block + t])

    return Kernel(f"gate_up_{ACTIVATION_NAMES[act_fn]}_{fmt}_h{hidden}_f{ffn}_t{tokens}_r{R}_s{parts}_w{tile}"
                  f"{_suffix(x_lanes)}", func,
                  ((threads + DOT_WG - 1) // DOT_WG, tokens // block, 1), x_lanes > 1)


@functools.cache
def qkv_rope(fmt, hidden, n_heads, n_kv, head_dim, context, tokens, block, pairs_per_thread, parts, eps, tile,
             x_lanes=1, rotate=True):
    """The RMSNorm (finished from `parts` partial sums, `rms_scale`), Q, K, V projections,
    interleaved RoPE and the KV-cache append in one kernel (without `rotate`, no RoPE: `qk_finish`
    applies it after the Q/K norms or biases that come before it).

    W stacks the Q, K and V rows. An invocation owns `pairs_per_thread` pairs of output rows
    (2i, 2i+1) and `block` tokens, so it rotates each pair itself; `rope` holds cos and sin per
    (position, pair), computed at build time in double precision.
    """
    P = pairs_per_thread
    q_rows, kv_rows = n_heads * head_dim, n_kv * head_dim
    shape, n_blk, quant_vectors, per_scale = _dot_setup(fmt, q_rows + 2 * kv_rows, hidden, tile)
    pairs = (q_rows + 2 * kv_rows) // 2
    if pairs % P or half_check(head_dim, P):
        raise ValueError(f"{pairs} row pairs (head dim {head_dim}) do not split into groups of {P}")
    threads = pairs // P
    half = head_dim // 2
    _check_lanes(x_lanes, block, fmt)

    @T.macro
    def body(x, w, rope, q, k_cache, v_cache, sumsq, step):
        for tb in T.thread_binding(tokens // block, "blockIdx.y"):
            for pb in T.thread_binding((threads + DOT_WG - 1) // DOT_WG, "blockIdx.x"):
                for tx in T.thread_binding(DOT_WG, "threadIdx.x"):
                    with T.sblock("qkv"):
                        rs = T.sblock_alloc_buffer((block,), F32, scope="local")
                        acc = T.sblock_alloc_buffer((2 * P * block,), F32, scope="local")
                        wq = T.sblock_alloc_buffer((2 * P * QUANT_VECTORS[fmt],), U32X4, scope="local")
                        sv = T.sblock_alloc_buffer((2 * P,), U32X4, scope="local")
                        dm = T.sblock_alloc_buffer((4 * P,), F32, scope="local")
                        xv = T.sblock_alloc_buffer((8,), F32X4, scope="local")
                        xs = T.sblock_alloc_buffer((32,), F32, scope="local")
                        sx = T.sblock_alloc_buffer((1,), F32, scope="local")
                        cs = T.sblock_alloc_buffer((2,), F32, scope="local")
                        xl = T.sblock_alloc_buffer((1,), F32X4, scope="local")
                        codes = T.sblock_alloc_buffer((_codes_len(fmt, 2 * P, block),), F32, scope="local")
                        if _computes(pb * DOT_WG + tx, threads, x_lanes) and tb * block < step[0]:
                            dot_rows(fmt, w, x, n_blk, quant_vectors, per_scale, (pb * DOT_WG + tx) * 2 * P, 2 * P,
                                     2 * P, 0, tb * block, block, acc, wq, sv, xv, xs, sx, dm, codes, x_lanes,
                                     tx % x_lanes, xl)
                            rms_scale(acc, 2 * P * block, tb * block, block, sumsq, parts, hidden, eps, rs)
                            for i in T.unroll(P):
                                for t in T.unroll(block):
                                    if _stores(pb * DOT_WG + tx, threads, x_lanes, tb * block + t < step[0]):
                                        # Rows 2p, 2p+1 of pair p = invocation * P + i; acc[(2i + j) * block + t].
                                        if rotate:
                                            cs[0] = rope[step[1] + tb * block + t,
                                                         ((pb * DOT_WG + tx) * P + i) % half, 0]
                                            cs[1] = rope[step[1] + tb * block + t,
                                                         ((pb * DOT_WG + tx) * P + i) % half, 1]
                                        else:  # qk_finish rotates, after what must come first (norm, bias)
                                            cs[0] = T.float32(1)
                                            cs[1] = T.float32(0)
                                        if ((pb * DOT_WG + tx) * P + i) * 2 < q_rows:
                                            q[tb * block + t, ((pb * DOT_WG + tx) * P + i) * 2] = (
                                                acc[2 * i * block + t] * cs[0] - acc[(2 * i + 1) * block + t] * cs[1])
                                            q[tb * block + t, ((pb * DOT_WG + tx) * P + i) * 2 + 1] = (
                                                acc[2 * i * block + t] * cs[1] + acc[(2 * i + 1) * block + t] * cs[0])
                                        elif ((pb * DOT_WG + tx) * P + i) * 2 < q_rows + kv_rows:
                                            k_cache[step[1] + tb * block + t, ((pb * DOT_WG + tx) * P + i) * 2 - q_rows] = (
                                                acc[2 * i * block + t] * cs[0] - acc[(2 * i + 1) * block + t] * cs[1])
                                            k_cache[step[1] + tb * block + t,
                                                    ((pb * DOT_WG + tx) * P + i) * 2 - q_rows + 1] = (
                                                acc[2 * i * block + t] * cs[1] + acc[(2 * i + 1) * block + t] * cs[0])
                                        else:
                                            v_cache[step[1] + tb * block + t,
                                                    ((pb * DOT_WG + tx) * P + i) * 2 - q_rows - kv_rows] = (
                                                acc[2 * i * block + t])
                                            v_cache[step[1] + tb * block + t,
                                                    ((pb * DOT_WG + tx) * P + i) * 2 - q_rows - kv_rows + 1] = (
                                                acc[(2 * i + 1) * block + t])

    if rotate:
        @T.prim_func(s_tir=True)
        def func(x: T.Buffer((tokens, hidden // 4), F32X4), w: T.Buffer(shape, U32X4),
                 rope: T.Buffer((context, half, 2), F32), q: T.Buffer((tokens, q_rows), F32),
                 k_cache: T.Buffer((context, kv_rows), F32), v_cache: T.Buffer((context, kv_rows), F32),
                 sumsq: T.Buffer((tokens, parts), F32), step: T.Buffer((STEP_WORDS,), I32)):
            body(x, w, rope, q, k_cache, v_cache, sumsq, step)
    else:
        @T.prim_func(s_tir=True)
        def func(x: T.Buffer((tokens, hidden // 4), F32X4), w: T.Buffer(shape, U32X4),
                 q: T.Buffer((tokens, q_rows), F32), k_cache: T.Buffer((context, kv_rows), F32),
                 v_cache: T.Buffer((context, kv_rows), F32), sumsq: T.Buffer((tokens, parts), F32),
                 step: T.Buffer((STEP_WORDS,), I32)):
            body(x, w, None, q, k_cache, v_cache, sumsq, step)

    name = (f"qkv{'_rope' if rotate else ''}_{fmt}_h{hidden}_q{q_rows}_kv{kv_rows}_t{tokens}_p{P}_s{parts}_w{tile}"
            f"{_suffix(x_lanes)}")
    return Kernel(name, func, ((threads + DOT_WG - 1) // DOT_WG, tokens // block, 1), x_lanes > 1)


def half_check(head_dim: int, pairs_per_thread: int) -> bool:
    """True when an invocation's pairs would straddle two heads (they must not: RoPE is per head)."""
    return (head_dim // 2) % pairs_per_thread != 0


@functools.cache
def qk_finish(n_heads, n_kv, head_dim, context, tokens, bias, norm, eps):
    """What comes between the Q/K/V projections (qkv_rope without `rotate`) and attention when a
    model has Q/K/V biases (`bias`: Qwen2) or per-head Q/K RMSNorms (`norm`: Qwen3, Gemma 3): add
    the biases, norm each head, then RoPE (interleaved pairs), in place in q and the KV cache.

    One invocation per (token, head) owns the whole head, so the norm needs no barrier and no other
    invocation writes what it reads. `b` stacks the Q, K and V biases as W stacks their rows;
    `q_norm` and `k_norm` are per head-dimension weights, shared by the heads.
    """
    if not (bias or norm):
        raise ValueError("qk_finish without biases or norms: qkv_rope rotates by itself")
    q_rows, kv_rows = n_heads * head_dim, n_kv * head_dim
    heads = n_heads + n_kv + (n_kv if bias else 0)  # V heads only take their bias
    half = head_dim // 2

    def value(buf, row, col, b, b_col):
        return buf[row, col] + b[b_col] if bias else buf[row, col]

    @T.macro
    def finish(buf, row, col0, b, b0, g, rope, pos, r, a):
        if norm:
            r[0] = T.float32(0)
            for j in range(head_dim):
                a[0] = value(buf, row, col0 + j, b, b0 + j)
                r[0] = r[0] + a[0] * a[0]
            r[0] = T.float32(1) / T.sqrt(r[0] / T.float32(head_dim) + T.float32(eps))
        for i in range(half):
            a[0] = value(buf, row, col0 + 2 * i, b, b0 + 2 * i)
            a[1] = value(buf, row, col0 + 2 * i + 1, b, b0 + 2 * i + 1)
            if norm:
                a[0] = a[0] * r[0] * g[2 * i]
                a[1] = a[1] * r[0] * g[2 * i + 1]
            buf[row, col0 + 2 * i] = a[0] * rope[pos, i, 0] - a[1] * rope[pos, i, 1]
            buf[row, col0 + 2 * i + 1] = a[0] * rope[pos, i, 1] + a[1] * rope[pos, i, 0]

    @T.macro
    def body(q, k_cache, v_cache, b, q_norm, k_norm, rope, step):
        for t in T.thread_binding(tokens, "blockIdx.y"):
            for hb in T.thread_binding((heads + WG - 1) // WG, "blockIdx.x"):
                for tx in T.thread_binding(WG, "threadIdx.x"):
                    with T.sblock("qk_finish"):
                        r = T.sblock_alloc_buffer((1,), F32, scope="local")
                        a = T.sblock_alloc_buffer((2,), F32, scope="local")
                        if hb * WG + tx < heads and t < step[0]:
                            if hb * WG + tx < n_heads:
                                finish(q, t, (hb * WG + tx) * head_dim, b, (hb * WG + tx) * head_dim, q_norm, rope,
                                       step[1] + t, r, a)
                            elif hb * WG + tx < n_heads + n_kv:
                                finish(k_cache, step[1] + t, (hb * WG + tx - n_heads) * head_dim, b,
                                       q_rows + (hb * WG + tx - n_heads) * head_dim, k_norm, rope, step[1] + t, r, a)
                            elif bias:
                                for j in range(head_dim):
                                    v_cache[step[1] + t, (hb * WG + tx - n_heads - n_kv) * head_dim + j] = (
                                        v_cache[step[1] + t, (hb * WG + tx - n_heads - n_kv) * head_dim + j]
                                        + b[q_rows + kv_rows + (hb * WG + tx - n_heads - n_kv) * head_dim + j])

    Q, KV, ROPE, STEP = (tokens, q_rows), (context, kv_rows), (context, half, 2), (STEP_WORDS,)
    if bias and norm:
        @T.prim_func(s_tir=True)
        def func(q: T.Buffer(Q, F32), k_cache: T.Buffer(KV, F32), v_cache: T.Buffer(KV, F32),
                 b: T.Buffer((q_rows + 2 * kv_rows,), F32), q_norm: T.Buffer((head_dim,), F32),
                 k_norm: T.Buffer((head_dim,), F32), rope: T.Buffer(ROPE, F32), step: T.Buffer(STEP, I32)):
            body(q, k_cache, v_cache, b, q_norm, k_norm, rope, step)
    elif bias:
        @T.prim_func(s_tir=True)
        def func(q: T.Buffer(Q, F32), k_cache: T.Buffer(KV, F32), v_cache: T.Buffer(KV, F32),
                 b: T.Buffer((q_rows + 2 * kv_rows,), F32), rope: T.Buffer(ROPE, F32), step: T.Buffer(STEP, I32)):
            body(q, k_cache, v_cache, b, None, None, rope, step)
    else:
        @T.prim_func(s_tir=True)
        def func(q: T.Buffer(Q, F32), k_cache: T.Buffer(KV, F32), q_norm: T.Buffer((head_dim,), F32),
                 k_norm: T.Buffer((head_dim,), F32), rope: T.Buffer(ROPE, F32), step: T.Buffer(STEP, I32)):
            body(q, k_cache, None, None, q_norm, k_norm, rope, step)

    kind = ("_bias" if bias else "") + ("_norm" if norm else "")
    name = f"qk_finish{kind}_h{n_heads}_kv{n_kv}_d{head_dim}_t{tokens}" + (
        f"_e{eps:g}".replace("-", "m").replace(".", "p") if norm else "")
    return Kernel(name, func, ((heads + WG - 1) // WG, tokens, 1))


@functools.cache
def post_norm_add(hidden, tokens, rows_per_thread, eps):
    """x[t] += RMSNorm(o[t]) * g_post (a sandwich norm: Gemma's post-attention and post-FFN norms),
    then the next norm's input as residual_norm writes it: h[t] = x[t] * g and the partial sums of
    squares sumsq[t, i] over invocation i's `rows_per_thread` rows.

    Every invocation sums o[t]'s squares itself (no barrier); it writes only its own rows of x."""
    R = rows_per_thread
    parts = (hidden + R - 1) // R

    @T.prim_func(s_tir=True)
    def func(o: T.Buffer((tokens, hidden), F32), g_post: T.Buffer((hidden,), F32), x: T.Buffer((tokens, hidden), F32),
             g: T.Buffer((hidden,), F32), h: T.Buffer((tokens, hidden), F32), sumsq: T.Buffer((tokens, parts), F32),
             step: T.Buffer((STEP_WORDS,), I32)):
        for t in T.thread_binding(tokens, "blockIdx.y"):
            for pb in T.thread_binding((parts + WG - 1) // WG, "blockIdx.x"):
                for tx in T.thread_binding(WG, "threadIdx.x"):
                    with T.sblock("post_norm_add"):
                        rs = T.sblock_alloc_buffer((1,), F32, scope="local")
                        ss = T.sblock_alloc_buffer((1,), F32, scope="local")
                        out = T.sblock_alloc_buffer((1,), F32, scope="local")
                        if pb * WG + tx < parts and t < step[0]:
                            rs[0] = T.float32(0)
                            for k in range(hidden):
                                rs[0] = rs[0] + o[t, k] * o[t, k]
                            rs[0] = T.float32(1) / T.sqrt(rs[0] / T.float32(hidden) + T.float32(eps))
                            ss[0] = T.float32(0)
                            for r in T.unroll(R):
                                if (pb * WG + tx) * R + r < hidden:
                                    out[0] = x[t, (pb * WG + tx) * R + r] + (
                                        o[t, (pb * WG + tx) * R + r] * rs[0] * g_post[(pb * WG + tx) * R + r])
                                    x[t, (pb * WG + tx) * R + r] = out[0]
                                    h[t, (pb * WG + tx) * R + r] = out[0] * g[(pb * WG + tx) * R + r]
                                    ss[0] = ss[0] + out[0] * out[0]
                            sumsq[t, pb * WG + tx] = ss[0]

    name = f"post_norm_add_h{hidden}_e{eps:g}_t{tokens}_r{R}".replace("-", "m").replace(".", "p")
    return Kernel(name, func, ((parts + WG - 1) // WG, tokens, 1))


def _first_key(position, window: int):
    """The first key position a token at `position` sees (with a sliding `window`, the last `window`)."""
    return 0 if not window else T.max(position - (window - 1), 0)


def _sees(key, position, window: int):
    return key <= position if not window else T.And(key <= position, key > position - window)


@functools.cache
def attention(n_heads, n_kv, head_dim, context, tokens, lanes=1, heads=1, window=0, softcap=0.0, scale=0.0):
    """out[t, h] = softmax(q[t, h] . k[:, h // group] / sqrt(d)) . v[:, h // group] in one pass over
    the keys the token may see (an online softmax: the running max rescales the sums as it grows),
    so scores never leave the workgroup and attention costs one dispatch, not two: lavapipe pays
    ~50 us a dispatch (waking its threads), about a layer's attention work at short contexts.

    A workgroup per (`heads` query heads of one KV head, token) takes the keys in tiles: each
    invocation scores one key of the tile for each head (the whole dot products: every key is
    loaded once per workgroup), then all fold the tile into their share of the outputs. Default:
    dv invocations, one output vector per head each, the tile's scores through workgroup memory
    between two barriers. With `lanes` > 1 (subgroups of a multiple of `lanes` invocations in
    local-index order, as in dot_rows_decode), `lanes` invocations, dv / lanes output vectors per
    head each, and subgroupShuffle hands the scores round: no barrier.

    Options: `window` > 0 lets a token see only the last `window` positions (its own included: a
    sliding-window layer); `softcap` caps the scaled scores (`softcapped`); `scale` replaces
    1/sqrt(head_dim).
    """
    group = n_heads // n_kv
    dv = head_dim // 4
    default_scale = 1.0 / head_dim**0.5
    options = _float_suffix("s", scale or default_scale, default_scale) + _float_suffix("c", softcap, 0.0)
    options += f"_win{window}" if window else ""
    scale = scale or default_scale
    if lanes > 1 and dv % lanes:
        raise ValueError(f"{dv} output vectors per head do not split over {lanes} lanes")
    if group % heads:
        raise ValueError(f"{heads} heads per workgroup do not divide the {group} query heads of a KV head")
    tile = lanes if lanes > 1 else dv  # keys per tile: one per invocation
    per_lane = dv // tile  # output vectors per invocation and head
    H = heads

    @T.prim_func(s_tir=True)
    def func(q: T.Buffer((tokens, n_heads * dv), F32X4), k_cache: T.Buffer((context, n_kv * dv), F32X4),
             v_cache: T.Buffer((context, n_kv * dv), F32X4), out: T.Buffer((tokens, n_heads * dv), F32X4),
             step: T.Buffer((STEP_WORDS,), I32)):
        for t in T.thread_binding(tokens, "blockIdx.y"):
            for hb in T.thread_binding(n_heads // H, "blockIdx.x"):
                for i in T.thread_binding(tile, "threadIdx.x"):
                    with T.sblock("attention"):
                        tile_scores = T.sblock_alloc_buffer((H * tile,), F32, scope="shared")
                        qv = T.sblock_alloc_buffer((H * dv,), F32X4, scope="local")
                        o = T.sblock_alloc_buffer((H * per_lane,), F32X4, scope="local")
                        dot = T.sblock_alloc_buffer((1,), F32X4, scope="local")
                        # per head: running max, its successor, normalizer, this invocation's key's score
                        acc = T.sblock_alloc_buffer((4 * H,), F32, scope="local")
                        w = T.sblock_alloc_buffer((1,), F32, scope="local")  # a key's weight
                        if t < step[0]:
                            for d in T.unroll(H * dv):
                                qv[d] = q[t, hb * H * dv + d]
                            for j in T.unroll(H * per_lane):
                                o[j] = T.Broadcast(T.float32(0), 4)
                            for hh in T.unroll(H):
                                acc[4 * hh] = T.float32(NO_SCORE)
                                acc[4 * hh + 2] = T.float32(0)
                            # Causal: token t sits at position step[1] + t and sees keys up to it.
                            for k0 in range(_first_key(step[1] + t, window) // tile, (step[1] + t + tile) // tile):
                                for hh in T.unroll(H):
                                    acc[4 * hh + 3] = T.float32(NO_SCORE)
                                if _sees(k0 * tile + i, step[1] + t, window):
                                    for hh in T.unroll(H):
                                        dot[0] = T.Broadcast(T.float32(0), 4)
                                        for d in T.unroll(dv):
                                            dot[0] = dot[0] + qv[hh * dv + d] * k_cache[
                                                k0 * tile + i, (hb * H // group) * dv + d]
                                        acc[4 * hh + 3] = softcapped(
                                            (lane(dot[0], 0) + lane(dot[0], 1) + lane(dot[0], 2) + lane(dot[0], 3))
                                            * T.float32(scale), softcap)
                                if lanes == 1:
                                    for hh in T.unroll(H):
                                        tile_scores[hh * tile + i] = acc[4 * hh + 3]
                                    T.tvm_storage_sync("shared")
                                for hh in T.unroll(H):
                                    acc[4 * hh + 1] = acc[4 * hh]
                                    for v in T.unroll(tile):
                                        acc[4 * hh + 1] = T.max(acc[4 * hh + 1], shuffled(acc[4 * hh + 3], v, lanes)
                                                                if lanes > 1 else tile_scores[hh * tile + v])
                                    # Rescale what the earlier tiles summed (exp(-huge) = 0 on the first).
                                    w[0] = T.exp(acc[4 * hh] - acc[4 * hh + 1])
                                    acc[4 * hh + 2] = acc[4 * hh + 2] * w[0]
                                    for j in T.unroll(per_lane):
                                        o[hh * per_lane + j] = o[hh * per_lane + j] * T.Broadcast(w[0], 4)
                                    acc[4 * hh] = acc[4 * hh + 1]
                                    if lanes > 1:
                                        acc[4 * hh + 3] = T.exp(acc[4 * hh + 3] - acc[4 * hh])  # past the keys: 0
                                for v in T.unroll(tile):
                                    if _sees(k0 * tile + v, step[1] + t, window):
                                        for hh in T.unroll(H):
                                            if lanes == 1:
                                                w[0] = T.exp(tile_scores[hh * tile + v] - acc[4 * hh])
                                            else:
                                                w[0] = shuffled(acc[4 * hh + 3], v, lanes)
                                            acc[4 * hh + 2] = acc[4 * hh + 2] + w[0]
                                            for j in T.unroll(per_lane):
                                                o[hh * per_lane + j] = o[hh * per_lane + j] + T.Broadcast(
                                                    w[0], 4) * v_cache[k0 * tile + v,
                                                                       (hb * H // group) * dv + i * per_lane + j]
                                if lanes == 1:
                                    T.tvm_storage_sync("shared")
                            for hh in T.unroll(H):
                                for j in T.unroll(per_lane):
                                    out[t, (hb * H + hh) * dv + i * per_lane + j] = (
                                        o[hh * per_lane + j] / T.Broadcast(acc[4 * hh + 2], 4))

    return Kernel(f"attention_h{n_heads}_kv{n_kv}_d{head_dim}_t{tokens}_g{H}{options}{_suffix(lanes)}", func,
                  (n_heads // H, tokens, 1), lanes > 1)


@functools.cache
def apply_bitmask(vocab):
    """logits[i] = MASKED_LOGIT where bit i % 32 of word i // 32 is clear (the grammar's token mask).

    WGSL has no infinity literal; a huge negative finite value sorts and samples the same way.
    """
    words = (vocab + 31) // 32

    @T.prim_func(s_tir=True)
    def func(logits: T.Buffer((vocab,), F32), mask: T.Buffer((words,), U32)):
        for bx in T.thread_binding((vocab + WG - 1) // WG, "blockIdx.x"):
            for tx in T.thread_binding(WG, "threadIdx.x"):
                with T.sblock("mask"):
                    if bx * WG + tx < vocab:
                        if T.bitwise_and(T.shift_right(mask[(bx * WG + tx) // 32], T.Cast(U32, (bx * WG + tx) % 32)),
                                         T.uint32(1)) == T.uint32(0):
                            logits[bx * WG + tx] = T.float32(MASKED_LOGIT)

    return Kernel(f"apply_bitmask_v{vocab}", func, ((vocab + WG - 1) // WG, 1, 1))


# Greedy decoding on the GPU: the logits' argmax in two barrier-free passes, so a decode step can
# feed the next one without the host (the engine reads back one token id, several steps later).
ARGMAX_PARTS = 64  # contiguous slices of the logits, one invocation each


@functools.cache
def argmax_partial(vocab):
    """best[2p], best[2p + 1] = the largest logit of slice p (as f32 bits) and its first index (-1: an
    empty slice). Slices are contiguous and in order, and a later logit wins only when larger, so the
    final pass finds the first of equal maxima, as the host's `logits.index(max(logits))` does."""
    span = (vocab + ARGMAX_PARTS - 1) // ARGMAX_PARTS

    @T.prim_func(s_tir=True)
    def func(logits: T.Buffer((vocab,), F32), best: T.Buffer((2 * ARGMAX_PARTS,), I32)):
        for tx in T.thread_binding(ARGMAX_PARTS, "threadIdx.x"):
            with T.sblock("argmax_partial"):
                top = T.sblock_alloc_buffer((1,), F32, scope="local")
                at = T.sblock_alloc_buffer((1,), I32, scope="local")
                if tx * span < vocab:
                    top[0] = logits[tx * span]
                    at[0] = tx * span
                    for i in range(1, span):
                        if tx * span + i < vocab:
                            if logits[tx * span + i] > top[0]:
                                top[0] = logits[tx * span + i]
                                at[0] = tx * span + i
                    best[2 * tx] = T.reinterpret(I32, top[0])
                    best[2 * tx + 1] = at[0]
                else:
                    best[2 * tx] = T.reinterpret(I32, T.float32(MASKED_LOGIT))
                    best[2 * tx + 1] = -1

    return Kernel(f"argmax_partial_v{vocab}", func, (1, 1, 1))


@functools.cache
def argmax_final():
    """ids[0] = the index of the largest of the slices' maxima (the first of equals): the next
    decode step's input token, and what the host reads back."""

    @T.prim_func(s_tir=True)
    def func(best: T.Buffer((2 * ARGMAX_PARTS,), I32), ids: T.Buffer((1,), I32)):
        for tx in T.thread_binding(1, "threadIdx.x"):
            with T.sblock("argmax_final"):
                top = T.sblock_alloc_buffer((1,), F32, scope="local")
                at = T.sblock_alloc_buffer((1,), I32, scope="local")
                top[0] = T.reinterpret(F32, best[0])
                at[0] = best[1]
                for p in range(1, ARGMAX_PARTS):
                    if best[2 * p + 1] >= 0:
                        if T.reinterpret(F32, best[2 * p]) > top[0]:
                            top[0] = T.reinterpret(F32, best[2 * p])
                            at[0] = best[2 * p + 1]
                ids[0] = at[0]

    return Kernel("argmax_final", func, (1, 1, 1))

"""The forward pass as kernels, buffers and dispatch plans (a prefill chunk, a decode step; and
the small plans run after either: the grammar's bitmask, the greedy argmax).

Per Llama layer: qkv_rope (the attention norm, Q/K/V, RoPE, KV append), attention, residual_norm
(output projection + residual, and the FFN norm's input), gate_up_silu (the FFN norm, gate/up,
SiLU-mul), residual_norm (down projection + residual, and the next layer's norm input): 5
dispatches. The first layer's norm input comes from norm_partials after the embedding; after the
last layer, a plain residual add, the final norm and the head (last token only).

Other architectures are the same plan with the options their config's features name (see
gguf_model.ModelConfig): Q/K/V biases or Q/K norms move RoPE into qk_finish after the projections;
sandwich norms store each output projection and add it normed (post_norm_add); sliding-window
layers run attention with a window and their own RoPE table; the embedding, the activation, the
scores and the logits take their scale, function and soft-cap as kernel options. NeoX RoPE (pairs
i, i + d/2) is interleaved RoPE on Q/K rows reordered at pack time (`qk_row_order`): attention's
scores are the same in any order of the head dimension that Q and K share.
"""

from dataclasses import dataclass

from trellis.kernels import kernels as K
from trellis.kernels.gguf_model import ModelConfig
from trellis.errors import ModelError

PREFILL_BLOCK = 8  # tokens per invocation in prefill matmuls (register blocking)
# Output rows per invocation (register blocking: each x load serves that many rows), by tokens per invocation.
# Lavapipe pays per load, so more rows per x load is faster (prefill with 16 rows ran 1.5x faster than
# with 8), but the unrolled shaders grow: SwiftShader's compiler ran out of memory on the 16-row
# prefill kernels, and compiling takes longer. Small test models use small blocks.
ROWS_PER_THREAD = {1: 8, PREFILL_BLOCK: 8}
SMALL_MODEL_ROWS_PER_THREAD = {1: 4, PREFILL_BLOCK: 4}
HEAD_ROWS_PER_THREAD = 8  # fewer x reads per weight; the one-token path keeps one row's codes live at a time
# Rows per tile of the weights' layout (K.weight_shape). SmolLM2's decode step on lavapipe, against
# tiles of 8 rows (one projection invocation's): 4 rows 1.17x, 16 rows 0.89x, 32 rows 0.88x, 64 rows
# 1.02x the time; SwiftShader's did not change from 8 to 32. The head's tile is the rows per
# invocation of lavapipe's form (ADAPTER_FORMS), which ran slower from tiles of 8.
ROW_TILE = 16
HEAD_ROW_TILE = 32
# Attention: the query heads of a KV head share a workgroup and its key and value loads, as many as
# fit this many query floats in registers. SmolLM2's 3 heads a workgroup (against 1) ran one-token
# attention 0.82x (lavapipe) and 0.62x (SwiftShader) the time.
ATTENTION_QUERY_FLOATS = 192
# The most bytes of one weight buffer: WebGPU's default maxStorageBufferBindingSize, which lavapipe
# offers too (SwiftShader 1 GiB; real GPUs often 128 MiB to 2 GiB). A vocabulary-sized array above it
# (Gemma 3's 262,144-row embedding and tied head, 180 MiB as packed) is split into row parts, a buffer
# each (`vocab_parts`): one embedding dispatch per part, each writing the tokens whose ids fall in its
# rows, and one head dispatch per part, each writing its rows of the logits. The layers' arrays are
# far smaller (a 7B model's largest is about 50 MiB) and are never split.
MAX_BINDING_BYTES = 128 * 2**20
VOCAB_WEIGHTS = ("token_embd.weight", "output.weight")  # arrays of one row per token


@dataclass(frozen=True)
class Part:
    """Rows first .. first + rows - 1 of a vocabulary-sized weight array, held by weight array `name`."""
    name: str
    first: int
    rows: int


@dataclass(frozen=True)
class Form:
    """How a plan's one-token dot-product kernels are shaped (the default, or an adapter's variant)."""
    head_rows: int = HEAD_ROWS_PER_THREAD  # rows per invocation of the logits head
    # Lanes of a subgroup that share loads: x's in the one-token dot products (K.dot_rows_decode)
    # and the scores in attention (K.attention); 1: none.
    lanes: int = 1


# Adapters that run kernels faster in another form (same bindings): (variant name, the adapter's
# name as it reports it, the subgroup size the form needs or None, form). The executor and the
# browser's worker take the first that fits the adapter. Lavapipe (LLVM) ran the SmolLM2 head ~1.4x
# faster with 32 rows per invocation (10 against 14 ms), where SwiftShader ran it 2x slower and
# compiled it longer. Both pay per storage load and lane (x's loads were 20-45% of a projection's time
# on lavapipe), so with subgroups a lane loads an eighth (lavapipe) or a quarter (SwiftShader) of x
# (and of attention's scores, which it also exponentiates once rather than once per lane).
ADAPTER_FORMS = [
    ("llvmpipe-subgroups-8", "llvmpipe", 8, Form(head_rows=32, lanes=8)),
    ("llvmpipe", "llvmpipe", None, Form(head_rows=32)),
    ("swiftshader-subgroups-4", "swiftshader", 4, Form(lanes=4)),
]


def rows_per_thread(c: ModelConfig, block: int) -> int:
    """Output rows per invocation of the matmuls for `block` tokens per invocation."""
    return (ROWS_PER_THREAD if c.hidden >= 256 else SMALL_MODEL_ROWS_PER_THREAD)[block]


def norm_parts(c: ModelConfig, block: int) -> int:
    """Partial sums of squares per token that the norms' producers write (one per invocation)."""
    rows = rows_per_thread(c, block)
    return (c.hidden + rows - 1) // rows


def buffers(c: ModelConfig, chunk: int) -> dict:
    """name -> {"bytes": fixed size, "per_context": bytes per context position, "kind"}."""
    q_rows, kv_rows = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    parts = max(norm_parts(c, block) for block in (1, PREFILL_BLOCK))
    out = {
        "sumsq": {"bytes": 4 * chunk * parts, "kind": "activation"},
        "step": {"bytes": 4 * K.STEP_WORDS, "kind": "step"},
        "ids": {"bytes": 4 * chunk, "kind": "input"},
        "x": {"bytes": 4 * chunk * c.hidden, "kind": "activation"},
        "h": {"bytes": 4 * chunk * c.hidden, "kind": "activation"},
        "q": {"bytes": 4 * chunk * q_rows, "kind": "activation"},
        "attn": {"bytes": 4 * chunk * q_rows, "kind": "activation"},
        "act": {"bytes": 4 * chunk * c.ffn, "kind": "activation"},
        **({"o": {"bytes": 4 * chunk * c.hidden, "kind": "activation"}} if c.post_norms else {}),
        "logits": {"bytes": 4 * c.vocab, "kind": "output"},
        "bitmask": {"bytes": 4 * ((c.vocab + 31) // 32), "kind": "input"},
        "argmax": {"bytes": 8 * K.ARGMAX_PARTS, "kind": "activation"},
    }
    for i in range(c.n_layers):
        out[f"k.{i}"] = {"bytes": 0, "per_context": 4 * kv_rows, "kind": "kv"}
        out[f"v.{i}"] = {"bytes": 0, "per_context": 4 * kv_rows, "kind": "kv"}
    return out


def row_tile(formats: dict, weight: str) -> int:
    """Rows per tile of weight array `weight` (of `linear_groups`) in the layout K.weight_shape describes."""
    return HEAD_ROW_TILE if weight == _head_weight(formats) else ROW_TILE


def vocab_parts(c: ModelConfig, formats: dict, max_binding_bytes: int = MAX_BINDING_BYTES) -> dict:
    """weight -> its Parts, for the vocabulary-sized weight arrays (`VOCAB_WEIGHTS`) of `formats`: one
    Part of every row under the weight's own name when its packed array fits `max_binding_bytes`;
    else the fewest parts of whole row tiles that fit, as even as tiles allow, named by their rows
    (`weight[first:end]`)."""
    out = {}
    for weight in VOCAB_WEIGHTS:
        if weight not in formats:
            continue
        tile = row_tile(formats, weight)
        tiles, vectors, _ = K.weight_shape(formats[weight], c.vocab, c.hidden, tile)
        tile_bytes = 16 * vectors * tile
        if tiles * tile_bytes <= max_binding_bytes:
            out[weight] = [Part(weight, 0, c.vocab)]
            continue
        if tile_bytes > max_binding_bytes:
            raise ModelError(f"weight {weight!r}: one tile of {tile} rows takes {tile_bytes} bytes, above the"
                             f" binding limit of {max_binding_bytes} bytes")
        count = -(-tiles // (max_binding_bytes // tile_bytes))
        per = -(-tiles // count) * tile  # rows per part; fewer in the last
        out[weight] = [Part(f"{weight}[{first}:{min(first + per, c.vocab)}]", first, min(per, c.vocab - first))
                       for first in range(0, c.vocab, per)]
    return out


def linear_groups(c: ModelConfig, names) -> dict:
    """GPU weight array -> the GGUF tensors stacked into it (Q/K/V and gate/up are fused; Phi-3 stores
    them fused already)."""
    groups = {"token_embd.weight": ["token_embd.weight"]}
    if "output.weight" in names:
        groups["output.weight"] = ["output.weight"]
    for i in range(c.n_layers):
        p = f"blk.{i}."
        groups[p + "attn_qkv"] = ([p + "attn_qkv.weight"] if c.fused_qkv
                                  else [p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"])
        groups[p + "attn_output.weight"] = [p + "attn_output.weight"]
        groups[p + "ffn_gate_up"] = [p + "ffn_up.weight"] if c.fused_gate_up else [p + "ffn_gate.weight",
                                                                                  p + "ffn_up.weight"]
        groups[p + "ffn_down.weight"] = [p + "ffn_down.weight"]
    return groups


def vector_groups(c: ModelConfig) -> dict:
    """GPU vector array (f32) -> the 1-D GGUF tensors it holds: the norms one each, the Q/K/V biases
    stacked as their rows are (`<layer>.attn_qkv.bias`)."""
    groups = {}
    for i in range(c.n_layers):
        p = f"blk.{i}."
        names = [p + "attn_norm.weight", p + "ffn_norm.weight"]
        if c.qk_norm:
            names += [p + "attn_q_norm.weight", p + "attn_k_norm.weight"]
        if c.post_norms:
            names += [p + "post_attention_norm.weight", p + "post_ffw_norm.weight"]
        groups.update({name: [name] for name in names})
        if c.qkv_bias:
            groups[p + "attn_qkv.bias"] = [p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"]
    groups["output_norm.weight"] = ["output_norm.weight"]
    return groups


# GGUF tensors the build reads into something other than a weight array of their own.
ROPE_FREQS = "rope_freqs.weight"  # Llama 3's per-pair frequency divisors, folded into the RoPE tables


def head_order(c: ModelConfig) -> list[int] | None:
    """The order of a head's dimensions on the GPU: NeoX RoPE's pairs (i, i + d/2) made adjacent
    (interleaved pairs 2i, 2i+1), or None where RoPE is interleaved already."""
    if c.rope_style == "interleaved":
        return None
    if c.rope_style != "neox":
        raise ValueError(f"unknown RoPE style {c.rope_style!r}")
    half = c.head_dim // 2
    return [j // 2 + (j % 2) * half for j in range(c.head_dim)]


def qk_row_order(c: ModelConfig) -> list[int] | None:
    """The stacked Q/K/V rows in GPU order (`head_order` within each Q and K head; V as stored)."""
    order = head_order(c)
    if order is None:
        return None
    heads = c.n_heads + c.n_kv_heads
    rows = [h * c.head_dim + j for h in range(heads) for j in order]
    return rows + list(range(heads * c.head_dim, heads * c.head_dim + c.n_kv_heads * c.head_dim))


def rope_tables(c: ModelConfig) -> dict:
    """RoPE table name -> (base, linear scale): the global layers' ("rope"), and the sliding-window
    layers' own ("rope_local") where their base differs or the global layers' are scaled."""
    tables = {"rope": (c.rope_theta, c.rope_scale)}
    if any(map(c.sliding, range(c.n_layers))) and (c.rope_theta_local or c.rope_scale != 1.0):
        tables["rope_local"] = (c.rope_theta_local or c.rope_theta, 1.0)
    return tables


def rope_of(c: ModelConfig, layer: int) -> str:
    return "rope_local" if c.sliding(layer) and "rope_local" in rope_tables(c) else "rope"


def plan(c: ModelConfig, formats: dict, tokens: int, block: int, kernels: dict, form: Form = Form(),
         max_binding_bytes: int = MAX_BINDING_BYTES) -> list[dict]:
    """Dispatches for `tokens` tokens per run; fills `kernels` (name -> Kernel) with what it uses.

    `formats` maps each weight array of `linear_groups` to its format; `form` shapes the one-token
    dot products (the head's, and with `block` 1 every projection's); vocabulary-sized arrays above
    `max_binding_bytes` are read from their row parts (`vocab_parts`).
    """
    row_parts = vocab_parts(c, formats, max_binding_bytes)

    def lanes(weight, tokens_per_invocation=block):  # shared x loads serve one token of quantized weights
        return form.lanes if tokens_per_invocation == 1 and K.shares_x_loads(formats[weight]) else 1

    def use(kernel: K.Kernel, **args) -> dict:
        kernels.setdefault(kernel.name, kernel)
        return {"kernel": kernel.name, "args": args}

    def tile(weight):
        return row_tile(formats, weight)

    embedding = "token_embd.weight"
    steps = [use(K.embed(formats[embedding], c.vocab, c.hidden, tokens, tile(embedding), c.embed_scale,
                         (part.first, part.rows) if len(row_parts[embedding]) > 1 else None),
                 ids="ids", w=part.name, x="x", step="step")
             for part in row_parts[embedding]]

    def attention(layer):
        return K.attention(c.n_heads, c.n_kv_heads, c.head_dim, c.context, tokens,
                           form.lanes if (c.head_dim // 4) % form.lanes == 0 else 1,
                           _divisor(c.n_heads // c.n_kv_heads, max(1, ATTENTION_QUERY_FLOATS // c.head_dim)),
                           c.sliding_window if c.sliding(layer) else 0, c.attn_softcap, c.attn_scale)
    q_rows = c.n_heads * c.head_dim
    rows, parts = rows_per_thread(c, block), norm_parts(c, block)
    steps.append(use(K.norm_partials(c.hidden, tokens, rows), x="x", g="blk.0.attn_norm.weight", h="h",
                     sumsq="sumsq", step="step"))

    def residual(weight, k_dim, x, next_norm, post_norm=None):
        """The residual add of a projection, writing the input of the norm `next_norm` (None: none);
        with `post_norm`, the projection is normed by that weight before it is added."""
        if post_norm is not None:
            return [use(K.matmul(formats[weight], k_dim, c.hidden, tokens, block, "store", rows, tile(weight),
                                 lanes(weight)),
                        x=x, w=weight, y="o", step="step"),
                    use(K.post_norm_add(c.hidden, tokens, rows, c.rms_eps), o="o", g_post=post_norm, x="x",
                        g=next_norm or "output_norm.weight", h="h", sumsq="sumsq", step="step")]
        if next_norm is None:
            return use(K.matmul(formats[weight], k_dim, c.hidden, tokens, block, "accumulate", rows, tile(weight),
                                lanes(weight)),
                       x=x, w=weight, y="x", step="step")
        return use(K.matmul(formats[weight], k_dim, c.hidden, tokens, block, "residual_norm", rows, tile(weight),
                            lanes(weight)),
                   x=x, w=weight, y="x", g=next_norm, h="h", sumsq="sumsq", step="step")

    def projected(step_or_steps):
        return step_or_steps if isinstance(step_or_steps, list) else [step_or_steps]

    finish = c.qkv_bias or c.qk_norm  # RoPE comes after them, in qk_finish
    for i in range(c.n_layers):
        p = f"blk.{i}."
        next_norm = f"blk.{i + 1}.attn_norm.weight" if i + 1 < c.n_layers else None
        kv = {"k_cache": f"k.{i}", "v_cache": f"v.{i}"}
        rope = {} if finish else {"rope": rope_of(c, i)}
        steps.append(use(K.qkv_rope(formats[p + "attn_qkv"], c.hidden, c.n_heads, c.n_kv_heads, c.head_dim,
                                    c.context, tokens, block, _pairs(c, rows // 2), parts, c.rms_eps,
                                    tile(p + "attn_qkv"), lanes(p + "attn_qkv"), not finish),
                         x="h", w=p + "attn_qkv", **rope, q="q", **kv, sumsq="sumsq", step="step"))
        if finish:
            extra = {"v_cache": f"v.{i}", "b": p + "attn_qkv.bias"} if c.qkv_bias else {}
            if c.qk_norm:
                extra.update(q_norm=p + "attn_q_norm.weight", k_norm=p + "attn_k_norm.weight")
            steps.append(use(K.qk_finish(c.n_heads, c.n_kv_heads, c.head_dim, c.context, tokens, c.qkv_bias,
                                         c.qk_norm, c.rms_eps),
                             q="q", k_cache=f"k.{i}", **extra, rope=rope_of(c, i), step="step"))
        steps += [
            use(attention(i), q="q", **kv, out="attn", step="step"),
            *projected(residual(p + "attn_output.weight", q_rows, "attn", p + "ffn_norm.weight",
                                p + "post_attention_norm.weight" if c.post_norms else None)),
            use(K.gate_up_silu(formats[p + "ffn_gate_up"], c.hidden, c.ffn, tokens, block, _divisor(c.ffn, rows // 2),
                               parts, c.rms_eps, tile(p + "ffn_gate_up"), lanes(p + "ffn_gate_up"), c.activation),
                x="h", w=p + "ffn_gate_up", act="act", sumsq="sumsq", step="step"),
            *projected(residual(p + "ffn_down.weight", c.ffn, "act", next_norm,
                                p + "post_ffw_norm.weight" if c.post_norms else None)),
        ]
    # The head's norm stays a dispatch: the head has the most invocations, each would read every partial sum.
    head = _head_weight(formats)
    steps.append(use(K.rms_norm(c.hidden, tokens, c.rms_eps), x="x", g="output_norm.weight", y="h", step="step"))
    steps += [use(K.matmul(formats[head], c.hidden, part.rows, tokens, 1, "last", form.head_rows, tile(head),
                           lanes(head, 1), c.final_softcap, part.first),
                  x="h", w=part.name, y="logits", step="step")
              for part in row_parts[head]]
    return steps


def adapter_variants(c: ModelConfig, formats: dict, tokens: int, block: int, default: list[dict],
                     kernels: dict, max_binding_bytes: int = MAX_BINDING_BYTES) -> dict:
    """variant name -> {"adapter", "subgroup_size" (where the form needs one), "kernels": {kernel of
    `default`, the plan(..., tokens, block): the kernel that variant runs instead}}; fills `kernels`
    with them."""
    out = {}
    for name, adapter, subgroup_size, form in ADAPTER_FORMS:
        steps = plan(c, formats, tokens, block, kernels, form, max_binding_bytes)
        swaps = {}
        for d, v in zip(default, steps):
            if swaps.setdefault(d["kernel"], v["kernel"]) != v["kernel"]:
                raise ValueError(f"variant {name} runs {d['kernel']} in two forms")
        swaps = {d: v for d, v in swaps.items() if d != v}
        out[name] = {"adapter": adapter, "kernels": swaps}
        if subgroup_size:
            out[name]["subgroup_size"] = subgroup_size
    return out


def _head_weight(formats: dict) -> str:
    return "output.weight" if "output.weight" in formats else "token_embd.weight"


def mask_plan(c: ModelConfig, kernels: dict) -> list[dict]:
    """Applies the uploaded token bitmask to the logits, after either plan."""
    kernel = K.apply_bitmask(c.vocab)
    kernels.setdefault(kernel.name, kernel)
    return [{"kernel": kernel.name, "args": {"logits": "logits", "mask": "bitmask"}}]


def argmax_plan(c: ModelConfig, kernels: dict) -> list[dict]:
    """Greedy decoding on the GPU: the logits' argmax (the first of equal maxima) into ids[0], where
    the next decode step reads its input token."""
    partial, final = K.argmax_partial(c.vocab), K.argmax_final()
    kernels.setdefault(partial.name, partial)
    kernels.setdefault(final.name, final)
    return [{"kernel": partial.name, "args": {"logits": "logits", "best": "argmax"}},
            {"kernel": final.name, "args": {"best": "argmax", "ids": "ids"}}]


def _divisor(n: int, at_most: int) -> int:
    """The largest divisor of n not above at_most."""
    return max(d for d in range(1, at_most + 1) if n % d == 0)


def _pairs(c: ModelConfig, at_most: int) -> int:
    """Row pairs per invocation of qkv_rope: must divide the pair count and stay inside one head."""
    pairs = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim // 2
    return max(d for d in range(1, at_most + 1) if pairs % d == 0 and (c.head_dim // 2) % d == 0)

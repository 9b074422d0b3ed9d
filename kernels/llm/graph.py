"""The Llama forward pass as kernels, buffers and dispatch plans (a prefill chunk, a decode step; and
the small plans run after either: the grammar's bitmask, the greedy argmax).

Per layer: qkv_rope (the attention norm, Q/K/V, RoPE, KV append), attention, residual_norm (output
projection + residual, and the FFN norm's input), gate_up_silu (the FFN norm, gate/up, SiLU-mul),
residual_norm (down projection + residual, and the next layer's norm input): 5 dispatches. The
first layer's norm input comes from norm_partials after the embedding; after the last layer, a
plain residual add, the final norm and the head (last token only).
"""

from dataclasses import dataclass

from kernels.llm import kernels as K
from kernels.llm.gguf_model import LlamaConfig

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


def rows_per_thread(c: LlamaConfig, block: int) -> int:
    """Output rows per invocation of the matmuls for `block` tokens per invocation."""
    return (ROWS_PER_THREAD if c.hidden >= 256 else SMALL_MODEL_ROWS_PER_THREAD)[block]


def norm_parts(c: LlamaConfig, block: int) -> int:
    """Partial sums of squares per token that the norms' producers write (one per invocation)."""
    rows = rows_per_thread(c, block)
    return (c.hidden + rows - 1) // rows


def buffers(c: LlamaConfig, chunk: int) -> dict:
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


def linear_groups(c: LlamaConfig, names) -> dict:
    """GPU weight array -> the GGUF tensors stacked into it (Q/K/V and gate/up are fused)."""
    groups = {"token_embd.weight": ["token_embd.weight"]}
    if "output.weight" in names:
        groups["output.weight"] = ["output.weight"]
    for i in range(c.n_layers):
        p = f"blk.{i}."
        groups[p + "attn_qkv"] = [p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"]
        groups[p + "attn_output.weight"] = [p + "attn_output.weight"]
        groups[p + "ffn_gate_up"] = [p + "ffn_gate.weight", p + "ffn_up.weight"]
        groups[p + "ffn_down.weight"] = [p + "ffn_down.weight"]
    return groups


def plan(c: LlamaConfig, formats: dict, tokens: int, block: int, kernels: dict, form: Form = Form()) -> list[dict]:
    """Dispatches for `tokens` tokens per run; fills `kernels` (name -> Kernel) with what it uses.

    `formats` maps each weight array of `linear_groups` to its format; `form` shapes the one-token
    dot products (the head's, and with `block` 1 every projection's).
    """

    def lanes(weight, tokens_per_invocation=block):  # shared x loads serve one token of quantized weights
        return form.lanes if tokens_per_invocation == 1 and K.shares_x_loads(formats[weight]) else 1

    def use(kernel: K.Kernel, **args) -> dict:
        kernels.setdefault(kernel.name, kernel)
        return {"kernel": kernel.name, "args": args}

    def tile(weight):
        return row_tile(formats, weight)

    steps = [use(K.embed(formats["token_embd.weight"], c.vocab, c.hidden, tokens, tile("token_embd.weight")),
                 ids="ids", w="token_embd.weight", x="x", step="step")]
    attention = K.attention(c.n_heads, c.n_kv_heads, c.head_dim, c.context, tokens,
                            form.lanes if (c.head_dim // 4) % form.lanes == 0 else 1,
                            _divisor(c.n_heads // c.n_kv_heads, max(1, ATTENTION_QUERY_FLOATS // c.head_dim)))
    q_rows = c.n_heads * c.head_dim
    rows, parts = rows_per_thread(c, block), norm_parts(c, block)
    steps.append(use(K.norm_partials(c.hidden, tokens, rows), x="x", g="blk.0.attn_norm.weight", h="h",
                     sumsq="sumsq", step="step"))

    def residual(weight, k_dim, x, next_norm):
        """The residual add of a projection, writing the input of the norm `next_norm` (None: none)."""
        if next_norm is None:
            return use(K.matmul(formats[weight], k_dim, c.hidden, tokens, block, "accumulate", rows, tile(weight),
                                lanes(weight)),
                       x=x, w=weight, y="x", step="step")
        return use(K.matmul(formats[weight], k_dim, c.hidden, tokens, block, "residual_norm", rows, tile(weight),
                            lanes(weight)),
                   x=x, w=weight, y="x", g=next_norm, h="h", sumsq="sumsq", step="step")

    for i in range(c.n_layers):
        p = f"blk.{i}."
        next_norm = f"blk.{i + 1}.attn_norm.weight" if i + 1 < c.n_layers else None
        steps += [
            use(K.qkv_rope(formats[p + "attn_qkv"], c.hidden, c.n_heads, c.n_kv_heads, c.head_dim, c.context,
                           tokens, block, _pairs(c, rows // 2), parts, c.rms_eps, tile(p + "attn_qkv"),
                           lanes(p + "attn_qkv")),
                x="h", w=p + "attn_qkv", rope="rope", q="q", k_cache=f"k.{i}", v_cache=f"v.{i}", sumsq="sumsq",
                step="step"),
            use(attention, q="q", k_cache=f"k.{i}", v_cache=f"v.{i}", out="attn", step="step"),
            residual(p + "attn_output.weight", q_rows, "attn", p + "ffn_norm.weight"),
            use(K.gate_up_silu(formats[p + "ffn_gate_up"], c.hidden, c.ffn, tokens, block, _divisor(c.ffn, rows // 2),
                               parts, c.rms_eps, tile(p + "ffn_gate_up"), lanes(p + "ffn_gate_up")),
                x="h", w=p + "ffn_gate_up", act="act", sumsq="sumsq", step="step"),
            residual(p + "ffn_down.weight", c.ffn, "act", next_norm),
        ]
    # The head's norm stays a dispatch: the head has the most invocations, each would read every partial sum.
    head = _head_weight(formats)
    steps += [
        use(K.rms_norm(c.hidden, tokens, c.rms_eps), x="x", g="output_norm.weight", y="h", step="step"),
        use(K.matmul(formats[head], c.hidden, c.vocab, tokens, 1, "last", form.head_rows, tile(head), lanes(head, 1)),
            x="h", w=head, y="logits", step="step"),
    ]
    return steps


def adapter_variants(c: LlamaConfig, formats: dict, tokens: int, block: int, default: list[dict],
                     kernels: dict) -> dict:
    """variant name -> {"adapter", "subgroup_size" (where the form needs one), "kernels": {kernel of
    `default`, the plan(..., tokens, block): the kernel that variant runs instead}}; fills `kernels`
    with them."""
    out = {}
    for name, adapter, subgroup_size, form in ADAPTER_FORMS:
        steps = plan(c, formats, tokens, block, kernels, form)
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


def mask_plan(c: LlamaConfig, kernels: dict) -> list[dict]:
    """Applies the uploaded token bitmask to the logits, after either plan."""
    kernel = K.apply_bitmask(c.vocab)
    kernels.setdefault(kernel.name, kernel)
    return [{"kernel": kernel.name, "args": {"logits": "logits", "mask": "bitmask"}}]


def argmax_plan(c: LlamaConfig, kernels: dict) -> list[dict]:
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


def _pairs(c: LlamaConfig, at_most: int) -> int:
    """Row pairs per invocation of qkv_rope: must divide the pair count and stay inside one head."""
    pairs = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim // 2
    return max(d for d in range(1, at_most + 1) if pairs % d == 0 and (c.head_dim // 2) % d == 0)

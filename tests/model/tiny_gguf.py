"""A tiny random-weight Llama written as a GGUF, shaped like SmolLM2 but small enough for fast tests.

2 layers, hidden 64, 4 query heads over 2 KV heads (GQA), head dim 16, FFN 96; linear weights Q4_1
(one Q8_0, to cover that GEMV too), a Q8_0 token embedding tied as the output head, F32 norms;
a byte-level vocabulary of 3 control tokens, 256 bytes and a few merges (vocab 269: not a round number).
`types` stores any tensor in any GGUF type the kernels pack; K-quants need rows of 256 (K_CONFIG).
"""

import gguf
import numpy as np

from trellis.bytelevel import BYTE_TO_CHAR

CONFIG = dict(n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn=96, context=2048,
              rope_theta=10000.0, rms_eps=1e-5)
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# ChatML with no default system message (the engine renders chat through the model's template).
CHAT_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                 "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "a n", "e r", "o n", "Ġ a", "r e", "a t"]


# For K-quant weights: every linear weight's row a multiple of 256 elements.
K_CONFIG = dict(CONFIG, hidden=256, head_dim=64, ffn=256)
K_QUANTS = ("Q4_K", "Q5_K", "Q6_K")
# Where each quantized type's f16 scale fields sit in its block: (block bytes, elements, scale offsets).
BLOCK_FIELDS = {"Q4_0": (18, 32, (0,)), "Q4_1": (20, 32, (0, 2)), "Q5_0": (22, 32, (0,)), "Q5_1": (24, 32, (0, 2)),
                "Q8_0": (34, 32, (0,)), "Q4_K": (144, 256, (0, 2)), "Q5_K": (176, 256, (0, 2)),
                "Q6_K": (210, 256, (208,))}


def random_blocks(qtype: str, rows: int, cols: int, rng, scales) -> np.ndarray:
    """uint8 [rows, bytes] of `qtype` blocks: random bytes (codes, sub-scales, high bits), with each f16
    scale field drawn by scales(count) (an f16 array), so no block holds an infinity or NaN."""
    size, per, offsets = BLOCK_FIELDS[qtype]
    raw = rng.integers(0, 256, (rows, cols // per, size), dtype=np.uint8)
    for offset in offsets:
        raw[..., offset:offset + 2] = scales(rows * (cols // per)).astype(np.float16).view(np.uint8).reshape(
            rows, cols // per, 2)
    return raw.reshape(rows, -1)


def sane_scales(qtype: str, n_in: int, rng):
    """scales() for random_blocks giving weights of about 1 / sqrt(n_in): codes times sub-scales reach
    about 15 * 63 (Q4_K), 31 * 63 (Q5_K) or 32 * 127 (Q6_K)."""
    reach = {"Q4_K": 15 * 63, "Q5_K": 31 * 63, "Q6_K": 32 * 127}.get(qtype, 16)
    return lambda n: rng.uniform(0.5, 1.5, n) * 3 / np.sqrt(n_in) / reach


def tiny_tokenizer() -> tuple[list[str], list[int], list[str]]:
    tokens = CONTROL + [BYTE_TO_CHAR[b] for b in range(256)] + [m.replace(" ", "") for m in MERGES]
    types = [3] * len(CONTROL) + [1] * (len(tokens) - len(CONTROL))
    return tokens, types, MERGES


def write_tiny_llama(path, seed: int = 0, q8_0_tensors=("blk.1.ffn_down.weight",), float_tensors=None,
                     chat_template: bool = True, types=None, config=None) -> dict:
    """Write the model to `path`; returns its config (with vocab).

    `float_tensors` maps tensor names to "F16" or "F32" to store those unquantized; `types` maps tensor
    names (or "*": every linear weight and the embedding) to a GGUF type name; `config` replaces CONFIG.
    """
    float_tensors = float_tensors or {}
    types = types or {}
    rng = np.random.default_rng(seed)
    c = dict(config or CONFIG)
    tokens, token_types, merges = tiny_tokenizer()
    c["vocab"] = len(tokens)
    h, d, f = c["hidden"], c["head_dim"], c["ffn"]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama-test")
    w.add_block_count(c["n_layers"])
    w.add_context_length(c["context"])
    w.add_embedding_length(h)
    w.add_feed_forward_length(f)
    w.add_head_count(c["n_heads"])
    w.add_head_count_kv(c["n_kv_heads"])
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_vocab_size(c["vocab"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if chat_template:
        w.add_chat_template(CHAT_TEMPLATE)

    def linear(name, n_out, n_in, qtype=gguf.GGMLQuantizationType.Q4_1):
        if name in q8_0_tensors:
            qtype = gguf.GGMLQuantizationType.Q8_0
        kind = types.get(name, types.get("*"))
        if kind in K_QUANTS:  # gguf cannot quantize to these: random blocks of sane scales
            qtype = gguf.GGMLQuantizationType[kind]
            w.add_tensor(name, random_blocks(kind, n_out, n_in, rng, sane_scales(kind, n_in, rng)), raw_dtype=qtype)
            return
        if kind is not None:
            qtype = gguf.GGMLQuantizationType[kind]
        # Non-zero means per row exercise Q4_1's offset term.
        weight = rng.normal(0, 1 / np.sqrt(n_in), (n_out, n_in)) + rng.normal(0, 0.02, (n_out, 1))
        if name in float_tensors:
            w.add_tensor(name, weight.astype({"F16": np.float16, "F32": np.float32}[float_tensors[name]]))
            return
        w.add_tensor(name, gguf.quantize(weight.astype(np.float32), qtype), raw_dtype=qtype)

    def norm(name):
        w.add_tensor(name, (1 + rng.normal(0, 0.1, h)).astype(np.float32))

    linear("token_embd.weight", c["vocab"], h, gguf.GGMLQuantizationType.Q8_0)
    for i in range(c["n_layers"]):
        norm(f"blk.{i}.attn_norm.weight")
        linear(f"blk.{i}.attn_q.weight", c["n_heads"] * d, h)
        linear(f"blk.{i}.attn_k.weight", c["n_kv_heads"] * d, h)
        linear(f"blk.{i}.attn_v.weight", c["n_kv_heads"] * d, h)
        linear(f"blk.{i}.attn_output.weight", h, c["n_heads"] * d)
        norm(f"blk.{i}.ffn_norm.weight")
        linear(f"blk.{i}.ffn_gate.weight", f, h)
        linear(f"blk.{i}.ffn_up.weight", f, h)
        linear(f"blk.{i}.ffn_down.weight", h, f)
    norm("output_norm.weight")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return c


# Tiny random models of the other architectures: each mirrors its architecture's peculiar shapes
# (head dims other than hidden / heads, one KV head, widths that are not powers of two) and its
# features (see gguf_model.ARCHITECTURES), small enough to build and run in seconds. Windows and
# soft-caps are small so that a 48-token prompt and random weights reach them.
TINY = {
    "llama3": dict(arch="llama", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn=96,
                   rope_theta=500000.0, rope_freqs=True),
    "mistral": dict(arch="mistral", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn=96,
                    rope_theta=1000000.0, sliding_window=7),
    "qwen2": dict(arch="qwen2", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=16, ffn=96,
                  rope_theta=1000000.0, bias=True, untied=True),
    "qwen3": dict(arch="qwen3", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=32, ffn=96,
                  rope_theta=1000000.0, qk_norm=True),
    "gemma2": dict(arch="gemma2", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2, head_dim=32, ffn=128,
                   rope_theta=10000.0, rms_eps=1e-6, sliding_window=6, post_norms=True, attn_softcap=2.0,
                   final_softcap=3.0),
    # Gemma 3 270M's shapes scaled down: head dim 256 with one KV head, a hidden size that is no
    # multiple of the head dim, 6 layers so that the sixth is global.
    "gemma3": dict(arch="gemma3", n_layers=6, hidden=320, n_heads=2, n_kv_heads=1, head_dim=256, ffn=64,
                   rope_theta=1000000.0, rms_eps=1e-6, sliding_window=6, post_norms=True, qk_norm=True),
    "phi3": dict(arch="phi3", n_layers=2, hidden=96, n_heads=2, n_kv_heads=2, head_dim=48, ffn=64,
                 rope_theta=10000.0, fused=True, untied=True, sliding_window=2047),
}


def llama3_rope_factors(head_dim: int, theta: float, factor=8.0, low=1.0, high=4.0, original=32) -> np.ndarray:
    """Llama 3's frequency divisors (Meta's rope scaling: long wavelengths divided by `factor`, short
    ones kept, a smooth blend between), as convert_hf_to_gguf stores them in rope_freqs; a short
    `original` context makes all three regimes occur in a tiny head."""
    freqs = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * np.pi / freqs
    smooth = (original / wavelen - low) / (high - low)
    factors = np.where(wavelen < original / high, 1.0,
                       np.where(wavelen > original / low, factor, 1 / ((1 - smooth) / factor + smooth)))
    return factors.astype(np.float32)


def write_tiny(path, name: str, seed: int = 0) -> dict:
    """Write the tiny model `name` (a key of TINY) to `path`; returns its settings (with vocab)."""
    c = dict(TINY[name])
    rng = np.random.default_rng(seed)
    tokens, types, merges = tiny_tokenizer()
    c["vocab"] = len(tokens)
    h, d, f = c["hidden"], c["head_dim"], c["ffn"]
    heads, kv = c["n_heads"], c["n_kv_heads"]

    w = gguf.GGUFWriter(str(path), c["arch"])
    w.add_name(f"tiny-{name}-test")
    w.add_block_count(c["n_layers"])
    w.add_context_length(2048)
    w.add_embedding_length(h)
    w.add_feed_forward_length(f)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    if d != h // heads:
        w.add_key_length(d)
        w.add_value_length(d)
    w.add_rope_dimension_count(d)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c.get("rms_eps", 1e-5))
    if c.get("sliding_window"):
        w.add_sliding_window(c["sliding_window"])
    if c.get("attn_softcap"):
        w.add_attn_logit_softcapping(c["attn_softcap"])
        w.add_final_logit_softcapping(c["final_softcap"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    formats = [gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0]

    def linear(tensor, n_out, n_in, kind=None):
        weight = rng.normal(0, 1 / np.sqrt(n_in), (n_out, n_in)) + rng.normal(0, 0.02, (n_out, 1))
        if kind in ("F16", "F32"):
            w.add_tensor(tensor, weight.astype({"F16": np.float16, "F32": np.float32}[kind]))
            return
        qtype = kind or formats[int(rng.integers(2))]
        w.add_tensor(tensor, gguf.quantize(weight.astype(np.float32), qtype), raw_dtype=qtype)

    def vector(tensor, n, mean=1.0, spread=0.1):
        w.add_tensor(tensor, (mean + rng.normal(0, spread, n)).astype(np.float32))

    linear("token_embd.weight", c["vocab"], h, gguf.GGMLQuantizationType.Q8_0)
    if c.get("rope_freqs"):
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(d, c["rope_theta"]))
    for i in range(c["n_layers"]):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", h)
        qkv_format = formats[i % 2]  # fused weights share one format
        if c.get("fused"):
            linear(p + "attn_qkv.weight", (heads + 2 * kv) * d, h, "F16" if i == 0 else None)
        else:
            linear(p + "attn_q.weight", heads * d, h, qkv_format)
            linear(p + "attn_k.weight", kv * d, h, qkv_format)
            linear(p + "attn_v.weight", kv * d, h, qkv_format)
        if c.get("bias"):
            vector(p + "attn_q.bias", heads * d, 0.0, 0.5)
            vector(p + "attn_k.bias", kv * d, 0.0, 0.5)
            vector(p + "attn_v.bias", kv * d, 0.0, 0.5)
        if c.get("qk_norm"):
            vector(p + "attn_q_norm.weight", d, 1.0, 0.3)
            vector(p + "attn_k_norm.weight", d, 1.0, 0.3)
        linear(p + "attn_output.weight", h, heads * d)
        if c.get("post_norms"):
            vector(p + "post_attention_norm.weight", h, 1.0, 0.3)
        vector(p + "ffn_norm.weight", h)
        if c.get("fused"):
            linear(p + "ffn_up.weight", 2 * f, h)
        else:
            linear(p + "ffn_gate.weight", f, h, formats[(i + 1) % 2])
            linear(p + "ffn_up.weight", f, h, formats[(i + 1) % 2])
        linear(p + "ffn_down.weight", h, f)
        if c.get("post_norms"):
            vector(p + "post_ffw_norm.weight", h, 1.0, 0.3)
    vector("output_norm.weight", h)
    if c.get("untied"):
        linear("output.weight", c["vocab"], h, gguf.GGMLQuantizationType.Q4_1)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return c

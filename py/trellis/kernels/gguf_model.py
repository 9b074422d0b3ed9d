"""Read a GGUF at build time: the model's config (architecture and its features), tokenizer data and raw tensors.

Build-time only (imports gguf and numpy); the runtime reads what `build_model` writes from this.
"""

import math
from dataclasses import MISSING, dataclass, fields

import gguf
import numpy as np

from trellis.errors import ModelError

# What py/trellis/kernels/pack.py packs (its KERNEL_FORMATS): the types a Q4_K_M / Q5_K_M / Q6_K file mixes.
SUPPORTED_TYPES = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"}


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer: the Llama shape, plus named features where an architecture differs.

    The defaults are Llama's; `read_config` sets the features each architecture has (llama.cpp's
    semantics), and graph.plan turns each into plan options, never into a copy of the Llama path.
    """
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context: int
    rope_theta: float
    rms_eps: float
    architecture: str = "llama"
    # RoPE: "interleaved" rotates pairs (2i, 2i+1) (Llama's GGUF order), "neox" pairs (i, i + d/2).
    rope_style: str = "interleaved"
    rope_scale: float = 1.0  # linear scaling: positions are divided by this (global layers only)
    rope_freq_factors: bool = False  # a `rope_freqs.weight` tensor divides each pair's frequency (Llama 3)
    rope_theta_local: float = 0.0  # the sliding-window layers' own RoPE base (0: rope_theta)
    sliding_window: int = 0  # keys a sliding-window layer sees, its own position included (0: none)
    global_every: int = 0  # with a window: every n-th layer (n-1, 2n-1, ...) is global; 0: none is
    attn_scale: float = 0.0  # the scores' scale (0: 1/sqrt(head_dim))
    attn_softcap: float = 0.0  # scores become cap * tanh(score / cap) (0: none)
    final_softcap: float = 0.0  # the same for the logits
    qkv_bias: bool = False  # Q/K/V projections have biases (attn_q/k/v.bias)
    qk_norm: bool = False  # per-head RMSNorm of Q and K before RoPE (attn_q_norm, attn_k_norm)
    post_norms: bool = False  # RMSNorm of the attention and FFN outputs before their residual adds
    embed_scale: float = 1.0  # the token embeddings are multiplied by this (Gemma: sqrt(hidden))
    activation: str = "silu"  # of the FFN's gate: "silu" or "gelu_tanh"
    fused_qkv: bool = False  # one attn_qkv tensor instead of attn_q/k/v (Phi-3)
    fused_gate_up: bool = False  # one ffn_up tensor holding the gate rows then the up rows (Phi-3)

    def to_dict(self) -> dict:
        """The manifest's model description: the Llama fields, then the features that differ from
        Llama's (so a Llama model's manifest stays as it was before features existed)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.default is MISSING or value != f.default:
                out[f.name] = value
        return out

    def sliding(self, layer: int) -> bool:
        """Whether `layer` attends through the sliding window (llama.cpp's SWA pattern)."""
        if not self.sliding_window:
            return False
        return not self.global_every or (layer + 1) % self.global_every != 0

    @property
    def scale(self) -> float:
        return self.attn_scale or 1.0 / math.sqrt(self.head_dim)


LlamaConfig = ModelConfig  # the name before other architectures


def _field(reader: gguf.GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ModelError(f"GGUF field {key!r} is missing")
        return default
    return field.contents()


# Per architecture: the features it has (llama.cpp: llama-model.cpp's hyperparameters and graph
# per architecture, and its rope type: NORM = interleaved, NEOX = halves).
ARCHITECTURES = {
    "llama": dict(),
    "mistral": dict(),
    "qwen2": dict(rope_style="neox", qkv_bias=True),
    "qwen3": dict(rope_style="neox", qk_norm=True),
    "gemma2": dict(rope_style="neox", post_norms=True, activation="gelu_tanh", global_every=2),
    "gemma3": dict(rope_style="neox", post_norms=True, activation="gelu_tanh", qk_norm=True, global_every=6,
                   rope_theta_local=10000.0),
    "phi3": dict(rope_style="neox", fused_qkv=True, fused_gate_up=True),
}
# Gemma's 27B models scale scores by 1/sqrt(hidden / heads), not 1/sqrt(head dim) (by block count).
_GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}


def read_config(reader: gguf.GGUFReader) -> ModelConfig:
    arch = _field(reader, "general.architecture")
    if arch not in ARCHITECTURES:
        raise ModelError(f"GGUF architecture {arch!r} is not supported (supported: {', '.join(ARCHITECTURES)})")

    def key(name, default=None):
        return _field(reader, f"{arch}.{name}", default)

    hidden = int(key("embedding_length"))
    n_heads = int(key("attention.head_count"))
    head_dim = int(key("attention.key_length", hidden // n_heads))
    if int(key("attention.value_length", head_dim)) != head_dim:
        raise ModelError(f"{arch}.attention.value_length differs from the key length {head_dim} (unsupported)")
    rope_dims = int(key("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise ModelError(f"{arch}.rope.dimension_count {rope_dims} is not the head dim {head_dim}: partial RoPE"
                         " is not supported")
    tokens = reader.fields["tokenizer.ggml.tokens"]
    n_layers = int(key("block_count"))
    features = dict(ARCHITECTURES[arch])

    scaling = str(key("rope.scaling.type", "none"))
    if scaling == "linear":
        features["rope_scale"] = float(key("rope.scaling.factor"))
    elif scaling != "none":
        raise ModelError(f"{arch}.rope.scaling.type {scaling!r} is not supported (none, linear)")
    features["rope_freq_factors"] = any(t.name == "rope_freqs.weight" for t in reader.tensors)
    for long_rope in ("rope_factors_long.weight", "rope_factors_short.weight"):
        if any(t.name == long_rope for t in reader.tensors):
            raise ModelError(f"tensor {long_rope!r}: LongRoPE scaling is not supported")

    window = int(key("attention.sliding_window", 0)) if arch in ("mistral", "phi3", "gemma2", "gemma3") else 0
    if window:
        features["sliding_window"] = window
        pattern = reader.fields.get(f"{arch}.attention.sliding_window_pattern")
        if pattern is not None:
            value = pattern.contents()
            if isinstance(value, list):  # one flag per layer (true: sliding)
                globals_ = [i for i, sliding in enumerate(value) if not sliding]
                every = globals_[0] + 1 if globals_ else 0
                if [not s for s in value] != [every and (i + 1) % every == 0 for i in range(n_layers)]:
                    raise ModelError(f"{arch}.attention.sliding_window_pattern {value} is not periodic (unsupported)")
                features["global_every"] = every
            else:
                features["global_every"] = int(value)
    else:
        features["global_every"] = 0
    if features.get("rope_theta_local"):
        features["rope_theta_local"] = float(key("rope.freq_base_swa", features["rope_theta_local"]))
    if arch in _GEMMA_27B_LAYERS and n_layers == _GEMMA_27B_LAYERS[arch]:
        features["attn_scale"] = 1.0 / math.sqrt(hidden / n_heads)
    if arch.startswith("gemma"):
        features["embed_scale"] = math.sqrt(hidden)
        features["attn_softcap"] = float(key("attn_logit_softcapping", 0.0) or 0.0)
        features["final_softcap"] = float(key("final_logit_softcapping", 0.0) or 0.0)
    return ModelConfig(
        n_layers=n_layers,
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=int(key("attention.head_count_kv", n_heads)),
        head_dim=head_dim,
        ffn=int(key("feed_forward_length")),
        vocab=int(key("vocab_size", len(tokens.data))),
        context=int(key("context_length")),
        rope_theta=float(key("rope.freq_base", 10000.0)),
        rms_eps=float(key("attention.layer_norm_rms_epsilon")),
        architecture=arch,
        **features,
    )


def read_tokenizer(reader: gguf.GGUFReader) -> dict:
    """The tokenizer data `trellis.model.tokenizer.Tokenizer` loads (see trellis.model.tokenizer_data)."""
    from trellis.model.tokenizer_data import tokenizer_data

    meta = {key: field.contents() for key, field in reader.fields.items() if key.startswith("tokenizer.")}
    return tokenizer_data(meta)


# llama.cpp's `general.sampling.*` keys (written from a model's generation config) -> request fields.
SAMPLING_KEYS = {"general.sampling.temp": "temperature", "general.sampling.top_p": "top_p",
                 "general.sampling.penalty_repeat": "repetition_penalty"}


def read_sampling(reader: gguf.GGUFReader) -> dict:
    """The sampling defaults the GGUF records (empty when it records none)."""
    out = {}
    for key, field in SAMPLING_KEYS.items():
        if key in reader.fields:
            value = reader.fields[key].contents()
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ModelError(f"GGUF field {key!r} is not a number: {value!r}")
            out[field] = float(value)
    return out


def tensors_by_name(reader: gguf.GGUFReader) -> dict:
    """name -> ReaderTensor, after checking every tensor type is one we can pack."""
    out = {}
    for t in reader.tensors:
        if t.tensor_type.name not in SUPPORTED_TYPES:
            raise ModelError(
                f"tensor {t.name!r} has type {t.tensor_type.name}; supported: {', '.join(sorted(SUPPORTED_TYPES))}"
            )
        out[t.name] = t
    return out


def dequantize(tensor) -> np.ndarray:
    """f32 array shaped [out, in] (numpy order: GGUF lists shapes as [in, out])."""
    shape = tuple(int(d) for d in reversed(tensor.shape))
    return gguf.dequantize(tensor.data, tensor.tensor_type).reshape(shape).astype(np.float32)

"""Read a Llama-architecture GGUF at build time: config, tokenizer data and raw tensors.

Build-time only (imports gguf and numpy); the runtime reads what `build_model` writes from this.
"""

from dataclasses import dataclass

import gguf
import numpy as np

from trellis.errors import ModelError

# What kernels/llm/pack.py packs (its KERNEL_FORMATS): the types a Q4_K_M / Q5_K_M / Q6_K file mixes.
SUPPORTED_TYPES = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"}


@dataclass(frozen=True)
class LlamaConfig:
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

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _field(reader: gguf.GGUFReader, key: str, default=None):
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ModelError(f"GGUF field {key!r} is missing")
        return default
    return field.contents()


def read_config(reader: gguf.GGUFReader) -> LlamaConfig:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ModelError(f"GGUF architecture {arch!r} is not supported (only 'llama')")
    hidden = int(_field(reader, "llama.embedding_length"))
    n_heads = int(_field(reader, "llama.attention.head_count"))
    tokens = reader.fields["tokenizer.ggml.tokens"]
    return LlamaConfig(
        n_layers=int(_field(reader, "llama.block_count")),
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=int(_field(reader, "llama.attention.head_count_kv", n_heads)),
        head_dim=int(_field(reader, "llama.rope.dimension_count", hidden // n_heads)),
        ffn=int(_field(reader, "llama.feed_forward_length")),
        vocab=int(_field(reader, "llama.vocab_size", len(tokens.data))),
        context=int(_field(reader, "llama.context_length")),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
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

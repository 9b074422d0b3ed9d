"""The tokenizer data `Tokenizer` loads, taken from a GGUF file's `tokenizer.*` metadata.

The model build writes this dict as tokenizer.json in the artifacts (py/trellis/kernels/gguf_model.py reads
the metadata with the `gguf` package); a browser can build the same dict from
`trellis.grammar.vocabulary.read_gguf_metadata`. Flags a GGUF leaves out take llama.cpp's defaults.
"""

from trellis.errors import ModelError
from trellis.model.pretokenize import LLAMA3_NAMES

MODELS = ("gpt2", "llama")  # byte-level BPE; SentencePiece-style pieces with scores
_IDS = ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id", "eot_token_id", "eom_token_id")


def default_flags(model: str, pre: str) -> dict:
    """llama.cpp's defaults: SentencePiece vocabularies add BOS and a space prefix; byte-level BPE
    ones add BOS only for the Llama 3 pre-tokenizer."""
    spm = model == "llama"
    return {"add_bos": spm or pre in LLAMA3_NAMES, "add_eos": False, "add_space_prefix": spm}


def tokenizer_data(meta: dict) -> dict:
    """`meta` maps GGUF keys ("tokenizer.ggml.tokens", ...) to their values."""

    def get(key, default=None, required=False):
        value = meta.get(f"tokenizer.ggml.{key}", default)
        if required and value is None:
            raise ModelError(f"GGUF field 'tokenizer.ggml.{key}' is missing")
        return value

    model = get("model", required=True)
    if model not in MODELS:
        raise ModelError(f"tokenizer.ggml.model {model!r} is not supported (supported: {', '.join(MODELS)})")
    tokens = list(get("tokens", required=True))
    types = get("token_type")
    data = {
        "model": model,
        "pre": get("pre", "gpt2") if model == "gpt2" else get("pre", "default"),
        "tokens": tokens,
        "token_types": [int(t) for t in types] if types is not None else [1] * len(tokens),
    }
    if model == "gpt2":
        data["merges"] = list(get("merges", required=True))
    else:
        data["scores"] = [float(s) for s in get("scores", required=True)]
    for key in _IDS:
        value = get(key)
        if value is not None:
            data[key] = int(value)
    flags = default_flags(model, data["pre"])
    for key, gguf_key in (("add_bos", "add_bos_token"), ("add_eos", "add_eos_token"),
                          ("add_space_prefix", "add_space_prefix")):
        value = get(gguf_key)
        data[key] = flags[key] if value is None else bool(value)
    template = meta.get("tokenizer.chat_template")
    if template is not None:
        data["chat_template"] = template
    return data

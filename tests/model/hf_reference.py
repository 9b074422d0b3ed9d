"""Hugging Face `tokenizers` references built from a GGUF's own tokenizer fields (test oracles)."""

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

CONTROL, USER_DEFINED = 3, 4

# The split patterns of Llama 3's and Qwen2's tokenizer.json (Split, behavior "isolated").
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")


def _verbatim_tokens(data: dict) -> list[AddedToken]:
    """Control tokens as special added tokens, user-defined ones as plain added tokens; both are
    matched on the raw text (normalized=False), as llama.cpp matches them before tokenizing."""
    return [AddedToken(tok, special=t == CONTROL, normalized=False)
            for tok, t in zip(data["tokens"], data["token_types"]) if t in (CONTROL, USER_DEFINED)]


def sentencepiece_reference(data: dict, add_space_prefix: bool | None = None) -> Tokenizer:
    """transformers' GGUF converter for `llama` vocabularies: a BPE model with byte fallback whose merges
    are every split of a piece into two pieces, ranked by the merged piece's score (highest first);
    normalizer: prepend U+2581 (when the GGUF asks for a space prefix), then spaces -> U+2581.
    Merge targets are normal pieces only (see trellis.model.spm)."""
    tokens, types, scores = data["tokens"], data["token_types"], data["scores"]
    vocab = {}
    for i, tok in enumerate(tokens):
        vocab.setdefault(tok, i)
    merges = []
    for i, (piece, t) in enumerate(zip(tokens, types)):
        if t != 1 or vocab[piece] != i:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                merges.append((-scores[i], vocab[left], vocab[right], left, right))
    merges.sort()
    unk = data.get("unknown_token_id")
    hf = Tokenizer(models.BPE(vocab, [(m[3], m[4]) for m in merges], byte_fallback=True,
                              unk_token=tokens[unk] if unk is not None else None, fuse_unk=True))
    prefix = data["add_space_prefix"] if add_space_prefix is None else add_space_prefix
    hf.normalizer = normalizers.Sequence(
        ([normalizers.Prepend("\u2581")] if prefix else []) + [normalizers.Replace(" ", "\u2581")])
    hf.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    hf.add_tokens(_verbatim_tokens(data))
    return hf


def byte_level_reference(data: dict, pattern: str, ignore_merges: bool) -> Tokenizer:
    """A byte-level BPE with the model family's split regex, as in its tokenizer.json (Qwen2's
    tokenizer.json also has an NFC normalizer, which a GGUF does not record and llama.cpp does not
    apply: left out, so test texts are NFC already)."""
    vocab = {}
    for i, tok in enumerate(data["tokens"]):
        vocab.setdefault(tok, i)
    merges = [tuple(m.split(" ", 1)) for m in data["merges"]]
    hf = Tokenizer(models.BPE(vocab, merges, ignore_merges=ignore_merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    hf.add_tokens(_verbatim_tokens(data))
    return hf

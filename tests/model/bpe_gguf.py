"""Small synthetic byte-level BPE GGUFs (Llama 3 / Qwen2 style): merges trained here with `tokenizers`
on the repository's README, written with gguf.GGUFWriter exactly as a converted model stores them."""

import pathlib

import gguf

from trellis.bytelevel import BYTE_TO_CHAR

CONTROL = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
USER_DEFINED = ["<tool_call>", "</tool_call>"]
# A token no merge reaches: a Llama 3 vocabulary (ignore_merges) takes the word " zyxwvut" whole.
UNREACHABLE = "\u0120zyxwvut"


def train_merges(extra_texts=(), vocab_size: int = 700) -> tuple[list[str], list[str]]:
    """(tokens, merges) of a byte-level BPE trained on README.md and `extra_texts`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    text = (pathlib.Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator([text, *extra_texts], trainer)
    vocab = hf.get_vocab()
    tokens = sorted(vocab, key=vocab.get)
    assert all(BYTE_TO_CHAR[b] in vocab for b in range(256))
    import json

    merges = json.loads(hf.to_str())["model"]["merges"]
    return tokens, [m if isinstance(m, str) else " ".join(m) for m in merges]


def write_bpe_gguf(path, pre: str, extra_texts=()) -> None:
    tokens, merges = train_merges(extra_texts)
    tokens = CONTROL + tokens + [UNREACHABLE] + USER_DEFINED
    types = [3] * len(CONTROL) + [1] * (len(tokens) - len(CONTROL) - len(USER_DEFINED)) + [4] * len(USER_DEFINED)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

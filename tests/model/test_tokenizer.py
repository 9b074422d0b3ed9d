"""The pure-Python tokenizer against Hugging Face `tokenizers` built from the same GGUF data."""

import pytest

from tests.model.corpus import TEXTS
from trellis.errors import ModelError
from trellis.model.pretokenize import split_gpt2, split_smollm
from trellis.model.tokenizer import Tokenizer

CORPUS = [*TEXTS,  # and this vocabulary's own special tokens among text
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> <file_sep><filename>x.py<gh_stars>10",
]


@pytest.fixture(scope="module")
def ours(smollm2_tokenizer_data):
    return Tokenizer(smollm2_tokenizer_data)


@pytest.fixture(scope="module")
def reference(smollm2_tokenizer_data):
    """HF tokenizer with the smollm pre-tokenizer spelled out (digits split, then byte-level)."""
    from tokenizers import AddedToken, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers

    data = smollm2_tokenizer_data
    vocab = {tok: i for i, tok in enumerate(data["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in data["merges"]]
    hf = HFTokenizer(models.BPE(vocab, merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens(
        [AddedToken(data["tokens"][i], special=True, normalized=False)
         for i, t in enumerate(data["token_types"]) if t == 3]
    )
    return hf


@pytest.mark.parametrize("text", CORPUS)
def test_encode_matches_hf(ours, reference, text):
    assert ours.encode(text) == reference.encode(text).ids


def test_generated_corpus_matches_hf(ours, reference):
    import random

    rng = random.Random(4)
    alphabet = "ab Zé1 2\n\t'sœ😀,.-_()  7x\u00a0日"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    assert [ours.encode(t) for t in texts] == [e.ids for e in reference.encode_batch(texts)]


@pytest.mark.parametrize("text", CORPUS)
def test_decode_round_trips(ours, text):
    # SmolLM2 has no token for some control bytes (\x1d here): encoding drops them, as HF does.
    dropped = text.replace("\x1d", "")
    assert ours.decode(ours.encode(text)) == dropped


def test_digits_are_split_individually(ours):
    ids = ours.encode("  12345")
    assert [ours.decode([i]) for i in ids][-5:] == list("12345")
    assert split_smollm("a 12b") == ["a", " ", "1", "2", "b"]
    assert split_gpt2("a 12b") == ["a", " 12", "b"]


def test_special_tokens(ours):
    ids = ours.encode("<|im_start|>user<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2
    assert ours.encode("<|im_start|>", special=False) != [1]
    assert ours.decode(ids, skip_special=True) == "user"
    assert ours.decode(ids) == "<|im_start|>user<|im_end|>"


@pytest.mark.parametrize("text", [*CORPUS, "\ufdd0<|im_end|>\ufdd1 and \ufdd0 alone", "<|im_start|><|im_start|>x<|im_end"])
def test_defused_text_is_encoded_as_hf_split_special_tokens(ours, reference, text):
    """What users write is text: defuse() + encode() = HF with split_special_tokens, and the
    text decodes back exactly (the marks are gone)."""
    reference.encode_special_tokens = True
    try:
        expected = reference.encode(text).ids
    finally:
        reference.encode_special_tokens = False
    ids = ours.encode(ours.defuse(text))
    assert ids == expected and ours.decode(ids) == text.replace("\x1d", "")
    # Inside a template's text, its own control tokens stay control tokens.
    framed = ours.encode("<|im_start|>user\n" + ours.defuse(text) + "<|im_end|>")
    assert framed[0] == 1 and framed[-1] == 2 and framed.count(1) == 1 and framed.count(2) == 1


def test_stream_decoder_holds_incomplete_utf8(ours):
    from trellis.bytelevel import BYTE_TO_CHAR

    text = "日本😀 ok"
    # One single-byte token per byte, so every multi-byte character spans several pushes.
    byte_ids = [ours.token_to_id(BYTE_TO_CHAR[b]) for b in text.encode()]
    stream = ours.stream_decoder()
    pieces = [stream.push(i) for i in byte_ids] + [stream.flush()]
    assert "".join(pieces) == text
    assert pieces[:3] == ["", "", "日"]
    # A sequence that ends mid-character is held, then flushed as U+FFFD.
    stream = ours.stream_decoder()
    assert [stream.push(i) for i in byte_ids[6:8]] == ["", ""]
    assert stream.flush() == "\ufffd"


def test_unsupported_pre_tokenizer_is_named(smollm2_tokenizer_data):
    with pytest.raises(ModelError, match="tokenizer.ggml.pre .falcon."):
        Tokenizer({**smollm2_tokenizer_data, "pre": "falcon"})

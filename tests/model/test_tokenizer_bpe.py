"""Llama 3 (`llama-bpe`) and Qwen2 byte-level BPE: the scanners against the regexes of their
tokenizer.json, and whole tokenizers read from synthetic GGUFs against Hugging Face `tokenizers`."""

import random

import pytest

from tests.model.hf_reference import LLAMA3_PATTERN, QWEN2_PATTERN, byte_level_reference
from tests.model.test_tokenizer_spm import CORPUS
from trellis.errors import ModelError
from trellis.model.pretokenize import split_llama3, split_qwen2
from trellis.model.tokenizer import Tokenizer

KINDS = {"llama-bpe": (split_llama3, LLAMA3_PATTERN, True), "qwen2": (split_qwen2, QWEN2_PATTERN, False)}
TEXTS = CORPUS + [
    "Numbers 1234567 and ١٢٣٤٥ and 12.5%, 'S 'RE 'Ll x'd y'M",
    "line\r\nbreaks \r\n\r\n  \n\t\n end\n\n",
    "(paren) [bracket] !!! ??? a.b,c;d:e -- 'quote' \"dq\" ...\n\n",
    "<tool_call>{\"name\": \"f\"}</tool_call><|eot_id|> zyxwvut zyxwvuts",
]


def _generated(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "ab Zé1 23\n\r\t'sSmtR,.-_()!  7x\u00a0日😀"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(count)]


@pytest.mark.parametrize("pre", KINDS)
def test_scanner_equals_the_regex(pre):
    from tokenizers import Regex, pre_tokenizers

    split, pattern, _ = KINDS[pre]
    regex = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    for text in TEXTS + _generated(1, 1000):
        assert split(text) == [piece for piece, _ in regex.pre_tokenize_str(text)], repr(text)


@pytest.fixture(scope="module", params=list(KINDS))
def pair(request, tmp_path_factory):
    """(ours, reference, data) for a synthetic GGUF of that pre-tokenizer."""
    import gguf

    from trellis.kernels.gguf_model import read_tokenizer
    from tests.model.bpe_gguf import write_bpe_gguf
    from trellis.grammar.vocabulary import read_gguf_metadata
    from trellis.model.tokenizer_data import tokenizer_data

    pre = request.param
    path = tmp_path_factory.mktemp("bpe") / f"{pre}.gguf"
    write_bpe_gguf(path, pre, extra_texts=TEXTS)
    data = read_tokenizer(gguf.GGUFReader(str(path)))
    # The build's reader (gguf package) and the pure-Python one give the same tokenizer data.
    assert tokenizer_data(read_gguf_metadata(path, lambda k: k.startswith("tokenizer."))[0]) == data
    _, pattern, ignore_merges = KINDS[pre]
    return Tokenizer(data), byte_level_reference(data, pattern, ignore_merges), data


def test_encode_matches_hf(pair):
    ours, reference, _ = pair
    texts = TEXTS + _generated(2, 300)
    assert [ours.encode(t) for t in texts] == [e.ids for e in reference.encode_batch(texts)]
    for text in TEXTS:
        assert ours.decode(ours.encode(text)) == text


def test_flags_and_ignore_merges(pair):
    ours, _, data = pair
    whole = ours.token_to_id("\u0120zyxwvut")
    llama3 = data["pre"] == "llama-bpe"
    # llama.cpp: Llama 3 adds BOS and takes a word that is a token whole; Qwen2 does neither.
    assert ours.add_bos == llama3 and not ours.add_space_prefix
    assert (ours.encode(" zyxwvut") == [whole]) == llama3
    assert ours.encode("<tool_call>", special=False) == [ours.token_to_id("<tool_call>")]
    assert ours.token_to_id("<tool_call>") not in ours.special_ids


def test_unknown_pre_is_named(pair):
    _, _, data = pair
    with pytest.raises(ModelError, match="tokenizer.ggml.pre 'deepseek-llm'"):
        Tokenizer({**data, "pre": "deepseek-llm"})

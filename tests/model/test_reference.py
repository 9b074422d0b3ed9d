"""The numpy reference forward pass: quantization layouts, KV-cache consistency, and SmolLM2's answer."""

import gguf
import numpy as np
import pytest

from tests.model.reference import ReferenceLlama
from tests.model.tiny_gguf import write_tiny_llama


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    write_tiny_llama(path)
    return path


def _q4_1_by_hand(raw: np.ndarray) -> np.ndarray:
    """GUIDE's Q4_1 layout: f16 d, f16 m, 16 nibble bytes; j<16 low nibble of byte j, j>=16 high of j-16."""
    blocks = raw.reshape(-1, 20)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 4:]
    nibbles = np.concatenate([q & 0xF, q >> 4], axis=1).astype(np.float32)
    return (d * nibbles + m).reshape(raw.shape[0], -1)


def _q8_0_by_hand(raw: np.ndarray) -> np.ndarray:
    blocks = raw.reshape(-1, 34)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(raw.shape[0], -1)


def test_quantized_layouts_match_gguf(tiny_path):
    reader = gguf.GGUFReader(str(tiny_path))
    seen = set()
    for t in reader.tensors:
        by_hand = {"Q4_1": _q4_1_by_hand, "Q8_0": _q8_0_by_hand}.get(t.tensor_type.name)
        if by_hand:
            seen.add(t.tensor_type.name)
            expected = gguf.dequantize(t.data, t.tensor_type).reshape(by_hand(t.data).shape)
            np.testing.assert_array_equal(by_hand(t.data), expected)
    assert seen == {"Q4_1", "Q8_0"}


def test_incremental_decode_matches_full_forward(tiny_path):
    model = ReferenceLlama(tiny_path)
    tokens = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2]
    full = model.forward(tokens)
    model.reset()
    parts = [model.forward(tokens[:5]), model.forward(tokens[5:9])] + [model.forward([t]) for t in tokens[9:]]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=1e-5, atol=1e-5)
    assert model.position == len(tokens)


def test_logits_depend_on_every_layer_and_position(tiny_path):
    model = ReferenceLlama(tiny_path)
    base = model.forward([5, 6, 7])[-1]
    model.reset()
    assert not np.allclose(model.forward([9, 6, 7])[-1], base, atol=1e-4)  # attention reaches back
    model.reset()
    model.w["blk.1.ffn_down.weight"] = model.w["blk.1.ffn_down.weight"] * 0
    assert not np.allclose(model.forward([5, 6, 7])[-1], base, atol=1e-4)


def test_interleaved_rope_rotates_pairs(tiny_path):
    model = ReferenceLlama(tiny_path)
    x = np.zeros((1, 1, 16), np.float32)
    x[0, 0, 2] = 1.0  # pair 1: (x2, x3); frequency theta^(-2/16)
    out = model._rope(x, np.array([3]))
    angle = 3 * 10000.0 ** (-2 / 16)
    np.testing.assert_allclose(out[0, 0, 2:4], [np.cos(angle), np.sin(angle)], rtol=1e-6)
    assert np.count_nonzero(out) == 2


@pytest.mark.slow
def test_smollm2_answers_paris(smollm2_gguf, smollm2_tokenizer_data):
    from trellis.model.chatml import render_chatml
    from trellis.model.tokenizer import Tokenizer

    tok = Tokenizer(smollm2_tokenizer_data)
    prompt = render_chatml([{"role": "user", "content": "What is the capital of France? Answer in one word."}])
    model = ReferenceLlama(smollm2_gguf)
    out = model.greedy(tok.encode(prompt), max_tokens=12, eos=tok.eos_token_id)
    assert tok.decode(out) == "The capital of France is Paris.<|im_end|>"


@pytest.mark.slow
def test_gemma3_270m_continues_coherently():
    """The real Gemma 3 (sliding-window and global layers, Q/K norms, sandwich norms, GELU, NeoX
    RoPE) through the reference: a coherent greedy continuation."""
    from tests.model.gemma3_reference import continue_text, load

    model, tok = load()
    assert model.config.architecture == "gemma3"
    assert continue_text(model, tok, "The three primary colors are", 6) == " red, blue, and yellow"

"""The native pass encoder (kernels/runtime, built by build.py) against the Python loop it replaces."""

import numpy as np

PROMPT = [1, 40, 41, 200, 7, 268, 3, 99, 100, 5, 17, 2, 0, 64, 128, 255] * 3  # 48 tokens: chunks and copies


def test_the_native_encoder_is_built_and_loaded(wgpu_backend):
    # build.py test builds it; without it the runtime still works, through the slower Python loop.
    assert wgpu_backend.native_encoder


def run_sequence(executor) -> list[bytes]:
    """Logits of a chunked prefill, decode steps and a masked read-back, as raw bytes."""
    executor.reset()
    out = [executor.prefill(PROMPT).tobytes()]
    for token in (3, 99, 268, 7):
        out.append(executor.decode(token).tobytes())
    mask = np.zeros((executor.vocab_size + 31) // 32, np.int32)
    mask[0] = 0b1011
    out.append(executor.decode(5, bitmask=mask).tobytes())
    return out


def test_native_encoder_gives_the_python_loops_logits_bit_for_bit(tiny_executor, wgpu_backend, monkeypatch):
    native = run_sequence(tiny_executor)
    monkeypatch.setattr(wgpu_backend, "native_encoder", False)
    python = run_sequence(tiny_executor)
    assert len(set(python)) == len(python)  # every step differs: a skipped dispatch could not go unnoticed
    assert native == python

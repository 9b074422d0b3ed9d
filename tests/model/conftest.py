"""Shared fixtures: the embedded SmolLM2 GGUF and the tokenizer data read from it."""

import os

# OpenBLAS's threads make the numpy reference's small matmuls ~100x slower on a busy 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402

from tests.model.smollm2 import smollm2_gguf_path


@pytest.fixture(scope="session")
def smollm2_gguf() -> str:
    return smollm2_gguf_path()


@pytest.fixture(scope="session")
def smollm2_tokenizer_data(smollm2_gguf) -> dict:
    import gguf

    from trellis.kernels.gguf_model import read_tokenizer

    return read_tokenizer(gguf.GGUFReader(smollm2_gguf))

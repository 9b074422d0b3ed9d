"""The tiny model built once per session, and one executor on lavapipe (shader compilation is slow)."""

import os

# OpenBLAS's threads make the numpy reference's small matmuls ~100x slower on a busy 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402

from kernels.llm import build_model
from tests.model.tiny_gguf import write_tiny_llama


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """(gguf path, artifacts folder) of the tiny random-weight Llama."""
    root = tmp_path_factory.mktemp("tiny-runtime")
    write_tiny_llama(root / "tiny.gguf")
    build_model.main(["--gguf", str(root / "tiny.gguf"), "--out", str(root / "out")])
    return root / "tiny.gguf", root / "out"


@pytest.fixture(scope="session")
def wgpu_backend():
    from trellis.runtime.wgpu_backend import WgpuBackend

    return WgpuBackend()


@pytest.fixture(scope="session")
def tiny_executor(tiny_model, wgpu_backend):
    from trellis.runtime import Artifacts, Executor

    return Executor(Artifacts.from_dir(tiny_model[1]), wgpu_backend, context=96)

"""Suite-wide settings, and the fixtures the runtime and engine tests share."""

import os

# OpenBLAS's threads make the numpy reference's small matmuls ~100x slower on a busy 2-core
# machine; set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences wgpu-native's warnings

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: real-model tests (seconds to a minute each); they run in CI too")


# Built once per session: building kernels and compiling shaders on lavapipe is the slow part.

@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """(gguf path, artifacts folder) of the tiny random-weight Llama."""
    from trellis.kernels import build_model
    from tests.model.tiny_gguf import write_tiny_llama

    root = tmp_path_factory.mktemp("tiny-runtime")
    write_tiny_llama(root / "tiny.gguf")
    build_model.main(["--gguf", str(root / "tiny.gguf"), "--out", str(root / "out")])
    return root / "tiny.gguf", root / "out"


@pytest.fixture(scope="session")
def wgpu_backend():
    from trellis.runtime.wgpu_backend import WgpuBackend

    return WgpuBackend()

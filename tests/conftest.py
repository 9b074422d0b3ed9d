"""Suite-wide settings."""

import os

# OpenBLAS's threads make the numpy reference's small matmuls ~100x slower on a busy 2-core
# machine; set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences wgpu-native's warnings


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: real-model tests (seconds to a minute each); they run in CI too")

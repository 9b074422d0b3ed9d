"""One executor of the tiny model on lavapipe for the runtime tests."""

import pytest


@pytest.fixture(scope="session")
def tiny_executor(tiny_model, wgpu_backend):
    from trellis.runtime import Artifacts, Executor

    return Executor(Artifacts.from_dir(tiny_model[1]), wgpu_backend, context=96)

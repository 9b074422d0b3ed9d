"""One engine over the tiny random-weight model on lavapipe, shared by the engine tests."""

import pytest


@pytest.fixture(scope="session")
def tiny_engine(tiny_model, wgpu_backend):
    from trellis.engine import Engine

    return Engine(tiny_model[1], backend=wgpu_backend, context=1280)


@pytest.fixture
def engine(tiny_engine):
    tiny_engine.reset_chat()
    return tiny_engine

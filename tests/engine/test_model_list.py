"""The engine's model list and reload (web-llm's appConfig.model_list and engine.reload): ids name
built model folders; reload switches in place on the same backend; an unknown id is a typed error."""

import pytest

from trellis.errors import InvalidRequestError, ModelNotFoundError

USER = [{"role": "user", "content": "Hi"}]


def test_reload_switches_models_by_id(tiny_model, wgpu_backend):
    from trellis.engine import Engine

    folder = tiny_model[1]
    engine = Engine("tiny-a", backend=wgpu_backend, context=256, models={"tiny-a": folder, "tiny-b": folder})
    assert engine.model_id == "tiny-a" and list(engine.models) == ["tiny-a", "tiny-b"]
    first = engine.chat.completions.create(messages=USER, model="tiny-a", max_tokens=4, seed=1)
    assert first["model"] == "tiny-a"
    backend = engine.executor.backend
    engine.reload("tiny-b")
    assert engine.model_id == "tiny-b" and engine.executor.backend is backend and engine.executor.context == 256
    again = engine.chat.completions.create(messages=USER, model="tiny-b", max_tokens=4, seed=1)
    assert again["model"] == "tiny-b"
    # The same weights and seed: the same answer (the reload left no state of the first behind).
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
    with pytest.raises(InvalidRequestError) as e:
        engine.chat.completions.create(messages=USER, model="tiny-a", max_tokens=4)
    assert e.value.field == "model"
    with pytest.raises(ModelNotFoundError, match=r"'llama-3-8b'.*available: tiny-a, tiny-b"):
        engine.reload("llama-3-8b")
    assert engine.model_id == "tiny-b"  # a refused reload keeps the model loaded
    engine.reload(folder)  # a folder works too, named by its folder
    assert engine.model_id == folder.name

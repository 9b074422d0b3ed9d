"""Parity: the browser engine (Pyodide + Chromium's WebGPU on SwiftShader) and the desktop engine
(CPython + wgpu-native on lavapipe) run the same py/trellis code over the same tiny model folder, so
for the same prompt, seed and greedy decoding they must produce the same tokens."""

import pytest

from trellis.engine import Engine

from .test_browser import SCHEMA, ask

REQUESTS = [
    pytest.param({"messages": [{"role": "user", "content": "Tell me a story about a fox."}], "max_tokens": 24,
                  "ignore_eos": True}, id="free-24-tokens"),
    pytest.param({"messages": [{"role": "user", "content": "A person, as JSON."}], "max_tokens": 48,
                  "response_format": {"type": "json_object", "schema": SCHEMA}, "complete_on_length": True},
                 id="json-schema"),
    pytest.param({"messages": [{"role": "user", "content": "A code."}], "max_tokens": 16,
                  "response_format": {"type": "regex", "regex": "[a-z]{3,6}-[0-9]{2,4}"}}, id="regex"),
]


@pytest.fixture(scope="module")
def desktop(tiny_model, wgpu_backend):
    return Engine(tiny_model[1], backend=wgpu_backend)  # the default context, as the worker's engine


@pytest.mark.parametrize("request_", REQUESTS)
def test_browser_and_desktop_produce_the_same_tokens(page, desktop, request_):
    request = {**request_, "temperature": 0, "seed": 7, "logprobs": True}
    # Until the prefill kernels are compiled the browser prefills token by token: the same numbers up to
    # rounding, but parity is about the same kernels, so wait for them.
    page.wait_for_function("engine.info.timings.allKernelsMs !== null")
    page.evaluate("async () => { await engine.resetChat(); }")
    desktop.reset_chat()
    browser = ask(page, **request)["value"]
    native = desktop.chat.completions.create(**request)
    b, d = browser["choices"][0], native["choices"][0]
    assert b["message"]["content"] == d["message"]["content"]
    assert browser["usage"]["completion_tokens"] == native["usage"]["completion_tokens"]
    assert b["finish_reason"] == d["finish_reason"]
    # The token sequence itself, as the logprobs name it (bytes of each sampled token).
    tokens = lambda choice: [t["bytes"] for t in (choice["logprobs"] or {}).get("content") or []]  # noqa: E731
    assert tokens(b) == tokens(d) and len(tokens(b)) > 0
    assert browser["usage"]["completion_tokens"] >= (24 if "ignore_eos" in request else 1)

"""Greedy decoding with the token chosen on the GPU (engine/greedy.py) against the host's argmax.

The host path is the same request with `logprobs: true` (it needs the logits, so the host samples);
greedy sampling picks the same tokens either way, so every answer must match token for token,
whatever speculative steps the GPU ran past the end.
"""

import pytest

USER = [{"role": "user", "content": "Tell me about the weather."}]


def both(engine, **request):
    """(GPU-greedy reply, host-greedy reply) of one request, each from an empty KV cache."""
    request = {"messages": USER, "temperature": 0, **request}
    engine.reset_chat()
    gpu = engine.chat.completions.create(**request)
    engine.reset_chat()
    host = engine.chat.completions.create(**request, logprobs=True)
    return gpu, host


def tokens(engine, reply) -> list[int]:
    return engine.tokenizer.encode(reply.choices[0].message.content)


@pytest.fixture
def spy(engine, monkeypatch):
    """Counts the steps the executor ran with the GPU's argmax."""
    calls = []
    original = engine.executor.submit_greedy
    monkeypatch.setattr(engine.executor, "submit_greedy", lambda *a, **k: calls.append(a) or original(*a, **k))
    return calls


@pytest.mark.parametrize("request_", [
    {"max_tokens": 40},
    {"max_tokens": 2},
    {"max_tokens": 64, "ignore_eos": True},
    {"max_tokens": 200},
], ids=["40", "2", "ignore_eos", "until_eos"])
def test_gpu_greedy_matches_host_greedy(engine, spy, request_):
    gpu, host = both(engine, **request_)
    assert spy, "the request did not take the GPU path"
    assert gpu.choices[0].message.content == host.choices[0].message.content
    assert gpu.choices[0].finish_reason == host.choices[0].finish_reason
    assert gpu.usage.completion_tokens == host.usage.completion_tokens
    assert gpu.usage.extra["decode_tokens_per_s"] > 0


def test_ignore_eos_never_yields_a_stop_token(engine):
    gpu, _ = both(engine, max_tokens=64, ignore_eos=True)
    assert gpu.usage.completion_tokens == 64 and gpu.choices[0].finish_reason == "length"


def test_stop_string_cuts_like_the_host(engine):
    probe, _ = both(engine, max_tokens=30)
    text = probe.choices[0].message.content
    stop = next(c for c in text[len(text) // 2:] if not c.isspace())  # a character the answer reaches
    gpu, host = both(engine, max_tokens=30, stop=[stop])
    assert gpu.choices[0].message.content == host.choices[0].message.content
    assert gpu.choices[0].finish_reason == host.choices[0].finish_reason == "stop"


def test_speculative_steps_leave_the_kv_cache_consistent(engine):
    """A stop string ends the first answer while later steps are in flight; a follow-up turn reuses
    the KV cache's prefix, which must not hold those steps (the same conversation from an empty cache
    gives the same answer)."""
    probe, _ = both(engine, max_tokens=40)
    text = probe.choices[0].message.content
    stop = next(c for c in text[len(text) // 2:] if not c.isspace())
    engine.reset_chat()
    first = engine.chat.completions.create(messages=USER, temperature=0, max_tokens=40, stop=[stop])
    assert first.choices[0].finish_reason == "stop"
    assert engine.executor.position == len(engine._kv_ids)
    turn = [*USER, {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "And tomorrow?"}]
    warm = engine.chat.completions.create(messages=turn, temperature=0, max_tokens=24)
    assert warm.usage.extra["prefill_tokens"] < warm.usage.prompt_tokens  # the prefix was kept
    engine.reset_chat()
    cold = engine.chat.completions.create(messages=turn, temperature=0, max_tokens=24, logprobs=True)
    assert warm.choices[0].message.content == cold.choices[0].message.content


def test_sampling_requests_stay_on_the_host(engine, spy):
    engine.chat.completions.create(messages=USER, temperature=0.7, max_tokens=6, seed=1)
    engine.chat.completions.create(messages=USER, temperature=0, max_tokens=6, frequency_penalty=0.5)
    engine.chat.completions.create(messages=USER, temperature=0, max_tokens=6, logit_bias={"5": 3})
    engine.chat.completions.create(messages=USER, temperature=0, max_tokens=6,
                                   response_format={"type": "json_object"})
    assert not spy

"""One engine, several requests: they never interleave on the model's state, stops are never
lost, and the KV cache's prefix reuse stays right across requests (tiny model, lavapipe).

The oracle for "not corrupted" is the same greedy request answered alone on a fresh cache.
"""

import json
import threading

import pydantic
import pytest

from trellis.errors import EngineBusyError

USER = [{"role": "user", "content": "Tell me about the weather."}]
OTHER = [{"role": "user", "content": "Name three rivers."}]
GREEDY = {"temperature": 0, "max_tokens": 16, "ignore_eos": True}


def alone(engine, messages=USER, **request):
    engine.reset_chat()
    return engine.chat.completions.create(messages=messages, **{**GREEDY, **request}).choices[0].message.content


def content(chunks):
    return "".join(c.choices[0].delta.get("content") or "" for c in chunks if c.choices)


@pytest.mark.parametrize("format", [None, {"type": "json_object"}])
def test_a_request_during_an_open_stream_is_refused_and_the_stream_stays_whole(engine, format):
    extra = {"response_format": format} if format else {}
    expected = alone(engine, **extra)
    stream = engine.chat.completions.create(messages=USER, stream=True, **GREEDY, **extra)
    head = [next(stream) for _ in range(4)]
    with pytest.raises(EngineBusyError):
        engine.chat.completions.create(messages=OTHER, **GREEDY)
    with pytest.raises(EngineBusyError):
        engine.completions.create(prompt="The sky", max_tokens=3, stream=True)
    assert content(head + list(stream)) == expected
    # After the stream, the refused request runs, and equals its answer alone.
    after = engine.chat.completions.create(messages=OTHER, **GREEDY).choices[0].message.content
    assert after == alone(engine, OTHER)


def test_closing_a_stream_midway_frees_the_engine_and_its_cache(engine):
    expected = alone(engine)
    stream = engine.chat.completions.create(messages=USER, stream=True, **GREEDY)
    next(stream), next(stream)
    stream.close()  # a caller that stops reading (greedy steps may be queued on the GPU)
    assert engine.chat.completions.create(messages=USER, **GREEDY).choices[0].message.content == expected


def test_another_thread_waits_its_turn(engine):
    expected_other = alone(engine, OTHER)
    expected = alone(engine)
    stream = engine.chat.completions.create(messages=USER, stream=True, **GREEDY)
    head = [next(stream) for _ in range(3)]
    answers = []
    waiter = threading.Thread(target=lambda: answers.append(
        engine.chat.completions.create(messages=OTHER, **GREEDY).choices[0].message.content))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and not answers  # blocked on the open stream's turn
    assert content(head + list(stream)) == expected
    waiter.join(60)
    assert answers == [expected_other]


def test_an_interrupt_before_the_first_token_is_not_lost(engine):
    stream = engine.chat.completions.create(messages=USER, stream=True, max_tokens=200, ignore_eos=True,
                                            stream_options={"include_usage": True})
    engine.interrupt_generate()  # after create(), before the generation starts
    chunks = list(stream)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "abort" and chunks[-1].usage.completion_tokens == 0
    # Jobs made after the interrupt are not affected by it.
    r = engine.chat.completions.create(messages=USER, max_tokens=5, ignore_eos=True)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5


def test_a_cancelled_job_stops_at_its_next_token(engine):
    job = engine.chat_job({"messages": USER, "max_tokens": 100, "ignore_eos": True})
    events = engine.run(job)
    texts = []
    while True:
        try:
            event = events.__anext__().send(None)
        except StopIteration as e:
            event = e.value
        except StopAsyncIteration:
            break
        if hasattr(event, "outcomes"):
            done = event
            continue
        texts.append(event.text)
        if len(texts) == 2:
            job.cancel()
    (out,) = done.outcomes
    # No token after the cancel (a text piece may hold several tokens; the end flushes a partial
    # character at most).
    assert out.finish_reason == "abort" and len(texts) <= 3 and len(out.tokens) < 8


def test_prefix_reuse_stays_right_across_requests(engine):
    system = [{"role": "system", "content": "You answer briefly."}]
    a, b = system + USER, system + OTHER
    expected_a, expected_b = alone(engine, a), alone(engine, b)
    engine.reset_chat()
    got = [engine.chat.completions.create(messages=m, **GREEDY) for m in (a, b, a, a, b)]
    assert [r.choices[0].message.content for r in got] == [expected_a, expected_b, expected_a, expected_a,
                                                             expected_b]
    # The shared system prompt was reused, not prefilled again (at least 8 tokens of it).
    assert got[1].usage.extra["prefill_tokens"] <= got[1].usage.prompt_tokens - 8


def test_a_pydantic_model_as_response_format(engine):
    class Forecast(pydantic.BaseModel):
        sunny: bool
        level: int = pydantic.Field(ge=0, le=9)
        kind: str = pydantic.Field(pattern="^(rain|snow)$")

    r = engine.chat.completions.create(messages=USER, response_format=Forecast, max_tokens=200, seed=5,
                                       complete_on_length=True)
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    parsed = choice.message.parsed
    assert isinstance(parsed, Forecast) and parsed == Forecast.model_validate(json.loads(choice.message.content))


def test_closing_a_stream_frees_the_engine_under_an_idle_event_loops_hooks(engine):
    """An event loop that is not running but left its async-generator hooks set (Playwright's sync
    API in the same process does) defers the finalization of dropped async generators forever: a
    stream's inner generators must be closed explicitly, or the engine's turn and its queued GPU
    steps would never be given back."""
    import sys

    expected = alone(engine)
    hooks = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=lambda agen: None, finalizer=lambda agen: None)  # never finalizes
    try:
        stream = engine.chat.completions.create(messages=USER, stream=True, **GREEDY)
        next(stream), next(stream)
        stream.close()
        assert engine.chat.completions.create(messages=USER, **GREEDY).choices[0].message.content == expected
    finally:
        sys.set_asyncgen_hooks(*hooks)

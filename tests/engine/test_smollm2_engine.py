"""The embedded SmolLM2 through the engine on lavapipe: web-llm's structured-output examples (slow)."""

import json

import jsonschema
import pytest

from trellis.engine.examples import HERMIONE_REQUEST, PERSON_SCHEMA, WEATHER_REQUEST, WEATHER_TOOLS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2_engine(wgpu_backend):
    from trellis.kernels import build_model
    from tests.model.smollm2 import smollm2_gguf_path
    from trellis.engine import Engine

    build_model.main(["--gguf", smollm2_gguf_path()])  # builds, or finds the build up to date
    return Engine(build_model.DEFAULT_OUT, backend=wgpu_backend, context=512)


def test_hermione_json(smollm2_engine):
    r = smollm2_engine.chat.completions.create(**HERMIONE_REQUEST, temperature=0, complete_on_length=True)
    person = json.loads(r.choices[0].message.content)
    jsonschema.validate(person, PERSON_SCHEMA)
    assert "Hermione" in person["name"], person
    print(r.choices[0].message.content, r.usage)


def test_hermione_json_as_web_llm_sends_it(smollm2_engine):
    """web-llm's example as its users send it: greedy, 160 tokens, no Trellis extension. Its
    json_object + schema is strict by default (web-xgrammar's strictMode), so the small model
    cannot wander into invented keys: the object closes by itself and parses."""
    request = dict(HERMIONE_REQUEST, max_tokens=160)
    r = smollm2_engine.chat.completions.create(**request, temperature=0)
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop", text
    person = json.loads(text)
    jsonschema.validate(person, PERSON_SCHEMA)
    assert set(person) == set(PERSON_SCHEMA["properties"]), person
    assert set(person["wand"]) == {"wood", "core", "length"}, person
    print(text, r.usage)


def test_weather_tool_calls(smollm2_engine):
    r = smollm2_engine.chat.completions.create(**WEATHER_REQUEST, temperature=0, complete_on_length=True)
    message = r.choices[0].message
    assert message.tool_calls and r.choices[0].finish_reason in ("tool_calls", "length"), message
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in WEATHER_TOOLS}
    for call in message.tool_calls:
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, schemas[call.function.name])
    # A 135M model picks arguments poorly (greedy, it calls get_time with an empty location):
    # the grammar guarantees the calls' shape and types, not their truth.
    print(message, r.usage)


def _repeated_trigrams(text: str) -> float:
    words = text.split()
    grams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def test_the_models_sampling_defaults_keep_it_out_of_loops(smollm2_engine):
    """Greedy, the 135M model repeats itself (a poem's lines over and over); the defaults the build
    records for it (build_model.EMBEDDED_SAMPLING: its card's temperature and top_p, a repetition
    penalty) are what a request that says nothing gets, and they keep it out of the loop."""
    from trellis.kernels.build_model import EMBEDDED_SAMPLING

    assert smollm2_engine.sampling_defaults == EMBEDDED_SAMPLING
    messages = [{"role": "user", "content": "Write a poem about the sea."}]
    smollm2_engine.reset_chat()
    greedy = smollm2_engine.chat.completions.create(messages=messages, max_tokens=80, temperature=0,
                                                    repetition_penalty=1.0).choices[0].message.content
    assert _repeated_trigrams(greedy) > 0.4, greedy
    for seed in (1, 2):
        smollm2_engine.reset_chat()
        text = smollm2_engine.chat.completions.create(messages=messages, max_tokens=80,
                                                      seed=seed).choices[0].message.content
        assert _repeated_trigrams(text) < 0.25, text

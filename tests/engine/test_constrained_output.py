"""Whatever the (random) model samples, constrained outputs obey their constraint.

Tiny random-weight model, temperature 1, several seeds. JSON outputs use `complete_on_length`,
so every answer, cut by max_tokens or not, must parse and validate (jsonschema); schemas come from
the JSON Schema Test Suite (draft 2020-12) and a fixed sample of MaskBench's dev split. EBNF
outputs must be in the language (the Earley reference), regex outputs must `re.fullmatch`, and
tool-calling outputs must hold calls whose arguments validate.
"""

import json
import random
import re

import jsonschema
import pytest

from tests.grammar.json_schema_suite import load_groups
from tests.grammar.reference import Reference
from trellis.errors import GrammarLimitError, InvalidRequestError, UnsupportedSchemaError
from trellis.grammar.ebnf import ARITHMETIC_EBNF, parse_ebnf
from trellis.grammar.matcher import GrammarMatcher

USER = [{"role": "user", "content": "Answer."}]
SEEDS = (1, 2)


def closing_tokens(engine, response_format) -> int:
    """Tokens of the shortest text the format allows (what complete_on_length must keep room for)."""
    grammar, _ = engine.constraints.grammar(engine.constraints.read(response_format))
    matcher = GrammarMatcher(grammar)
    return len(engine.tokenizer.encode_bytes(matcher.shortest_completion()))


def check_schema_outputs(engine, schema, label: str) -> str:
    """'refused', 'too-long', or 'checked' after asserting every sampled answer validates."""
    rf = {"type": "json_object", "schema": schema}
    try:
        need = closing_tokens(engine, rf)
    except (UnsupportedSchemaError, GrammarLimitError):
        return "refused"
    except InvalidRequestError as e:
        assert "admits no" in str(e) or "no JSON value is valid" in str(e), (label, e)
        return "refused"
    room = 216  # a short answer keeps the test fast
    if need > room:
        return "too-long"
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(
        schema, format_checker=jsonschema.FormatChecker())
    for seed in SEEDS:
        r = engine.chat.completions.create(messages=USER, response_format=rf, complete_on_length=True, seed=seed,
                                           temperature=1.0, max_tokens=min(room, need + 24))
        text = r.choices[0].message.content
        assert r.choices[0].finish_reason in ("stop", "length"), (label, r.choices[0].finish_reason)
        value = json.loads(text)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, (label, seed, text, errors)
    return "checked"


def test_json_schema_suite_outputs_validate(engine):
    groups = [g for g in load_groups() if g[1] == "2020-12"]
    chosen = random.Random(20261130).sample(groups, 60)
    outcomes = [check_schema_outputs(engine, g[3]["schema"], f"{g[0]}#{g[2]} {g[3]['description']}")
                for g in chosen]
    assert outcomes.count("checked") >= 35, outcomes


def test_maskbench_sample_outputs_validate(engine):
    from benchmarks.json_schema_bench import DATA, load_split, select

    assert DATA.exists(), f"{DATA} is missing (the shared data folder sits beside the checkout)"
    entries = load_split()
    chosen = [entries[i] for i in select(len(entries), 16, 7)]
    outcomes = [check_schema_outputs(engine, e["schema"], e["id"]) for e in chosen]
    assert outcomes.count("checked") >= 8, outcomes


# Keywords enforced by checks in the core (tests/grammar/test_checks.py). Not here: a multipleOf
# beyond an automaton's reach, where neither the mask nor complete_on_length can steer a number
# to a multiple (the check only refuses the others when they end).
CHECKED_SCHEMAS = [
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "minItems": 2, "maxItems": 6},
    {"type": "array", "items": {"type": ["string", "number"]}, "uniqueItems": True, "minItems": 2},
    {"type": "object", "minProperties": 3, "maxProperties": 4, "additionalProperties": {"type": "integer"}},
]


def test_checked_outputs_validate(engine):
    """Random answers, cut by max_tokens and completed: their checks hold (unique items,
    distinct keys counted)."""
    outcomes = [check_schema_outputs(engine, schema, json.dumps(schema)) for schema in CHECKED_SCHEMAS]
    assert outcomes == ["checked"] * len(CHECKED_SCHEMAS), outcomes


def test_ebnf_outputs_are_in_the_language(engine):
    grammars = [ARITHMETIC_EBNF, 'root ::= "(" item ("," item)* ")"\nitem ::= [a-z]+ | root']
    for text in grammars:
        reference = Reference(parse_ebnf(text))
        for seed in SEEDS:
            r = engine.chat.completions.create(messages=USER, response_format={"type": "grammar", "grammar": text},
                                               complete_on_length=True, seed=seed, temperature=1.0, max_tokens=40)
            out = r.choices[0].message.content
            assert reference.accepts(out.encode()), (text, seed, out)


def test_regex_outputs_fullmatch(engine):
    for pattern in (r"[a-z]{2,6}@[a-z]{2,5}\.(com|org)", r"\d{3}-\d{4}", r"(yes|no|maybe)( because [a-z ]{1,20})?"):
        for seed in SEEDS:
            r = engine.chat.completions.create(messages=USER, response_format={"type": "regex", "regex": pattern},
                                               complete_on_length=True, seed=seed, temperature=1.0, max_tokens=30)
            assert re.fullmatch(pattern, r.choices[0].message.content), (pattern, r.choices[0].message.content)


WEATHER_TOOLS = [  # shorter strings than web-llm's, so that random calls stay short
    {"type": "function", "function": {
        "name": "get_current_weather", "description": "Get the current weather in a given location",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA",
                         "maxLength": 12},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location", "unit"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the current time in a given location",
        "parameters": {"type": "object", "properties": {"location": {"type": "string", "maxLength": 12}},
                       "required": ["location"]}}},
]


def test_required_tool_calls_are_valid(engine):
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in WEATHER_TOOLS}
    for seed in SEEDS:
        r = engine.chat.completions.create(messages=USER, tools=WEATHER_TOOLS, tool_choice="required", seed=seed,
                                           temperature=1.0, max_tokens=120, complete_on_length=True)
        message = r.choices[0].message
        assert message.tool_calls, (seed, message)
        assert r.choices[0].finish_reason in ("tool_calls", "length")
        for call in message.tool_calls:
            assert call.type == "function" and call.id
            jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


def test_formats_that_admit_nothing_are_refused_clearly(engine):
    # Compiled, they are exact (every token refused), but no answer can satisfy them.
    never = {"allOf": [{"type": "string"}, False]}
    with pytest.raises(InvalidRequestError, match="no JSON value is valid") as e:
        engine.chat.completions.create(messages=USER, response_format={"type": "json_object", "schema": never})
    assert e.value.field == "response_format"
    endless = {"type": "grammar", "grammar": 'root ::= "x" root'}  # its only rule never ends
    with pytest.raises(InvalidRequestError, match="the grammar matches no string"):
        engine.chat.completions.create(messages=USER, response_format=endless)
    assert engine.chat.completions.create(messages=USER, max_tokens=2).usage.completion_tokens <= 2

"""Each family's tool-call syntax: read from its real template, enforced by the grammar, parsed back.

Oracles: the real templates' own rendering of a tool call in the history (the syntax the model
was trained on) and the `jsonschema` validator for the arguments."""

import json

import jsonschema
import pytest

from trellis.engine.tool_syntax import Hermes, Llama3Json, MistralArgs, MistralList, syntax_for_template
from trellis.grammar import GrammarCompiler, GrammarMatcher
from trellis.grammar.vocabulary import Vocabulary
from trellis.model.chat_template import ChatTemplate

from . import chat_template_cases as cases

SMOLLM2 = json.loads(cases.DATA.read_text())["smollm2_template"]
FAMILY = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes", "Qwen-Qwen3-0.6B.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3_json", "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3_json",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral_list",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral_args",
    "smollm2": None, "HuggingFaceTB-SmolLM3-3B.jinja": None, "google-gemma-2-2b-it.jinja": None,
    "microsoft-Phi-3.5-mini-instruct.jinja": None,
}
PARIS = {"city": "Paris", "unit": "celsius"}
# How each syntax writes one call, and two (None: the family allows one call per turn).
WRITTEN = {
    "hermes": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>',
               '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'),
    "llama3_json": ('{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}', None),
    "mistral_list": ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]',
                     '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}, '
                     '{"name": "get_weather", "arguments": {"city": "Rome"}}]'),
    "mistral_args": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}',
                     '[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}'),
}
SYNTAXES = {s.name: s for s in (Hermes(), Llama3Json(), MistralList(), MistralArgs())}


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(Vocabulary.from_token_bytes([bytes([i]) for i in range(256)]))


def accepts(compiler, response_format, text: str) -> bool:
    grammar, _ = compiler.compile_response_format(response_format)
    m = GrammarMatcher(grammar)
    return m.accept_string(text.encode()) and m.can_terminate()


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_the_family_is_read_from_the_template(name):
    source = cases.template_source(name, SMOLLM2)
    found = syntax_for_template(source) if ChatTemplate(source).supports_tools else None
    assert (found.name if found else None) == FAMILY[name]


@pytest.mark.parametrize("name", [n for n, f in sorted(FAMILY.items()) if f])
def test_the_templates_own_history_parses_back(name):
    """The call as the real template writes it in the history parses into the same OpenAI call."""
    syntax = syntax_for_template(cases.template_source(name))
    bos, eos = cases.FAMILIES[name]
    t = ChatTemplate(cases.template_source(name), bos_token=bos, eos_token=eos, now=lambda: cases.FIXED_NOW)
    case = cases.CONVERSATIONS["tool_calls_and_results"]
    prompt = t.render(case["messages"], tools=case["tools"])
    content, calls = syntax.parse(prompt, cases.TOOLS)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("get_weather", PARIS)]
    assert content  # the rest of the prompt (the tool listing's text is no call)
    ids = [c["id"] for c in calls]
    if name.startswith(("mistral", "Mistral")):  # ids that Mistral's templates take back
        assert all(len(i) == 9 and i.isalnum() for i in ids)
    else:
        assert ids == ["call_0"]


@pytest.mark.parametrize("family", sorted(WRITTEN))
def test_the_grammar_enforces_the_familys_calls(compiler, family):
    syntax, (one, two) = SYNTAXES[family], WRITTEN[family]
    auto = syntax.response_format(cases.TOOLS, "auto")
    assert accepts(compiler, auto, one) and accepts(compiler, auto, "Just text, no call.")
    if two is not None:
        assert accepts(compiler, auto, two)
    else:  # one call per turn
        assert not accepts(compiler, auto, one + " " + one)
    assert not accepts(compiler, auto, one.replace("get_weather", "get_time"))  # no such function
    assert not accepts(compiler, auto, one.replace('"Paris"', "3"))  # arguments off the schema
    assert not accepts(compiler, auto, one.replace('"celsius"', '"kelvin"'))
    required = syntax.response_format(cases.TOOLS, "required")
    assert accepts(compiler, required, one) and not accepts(compiler, required, "Just text, no call.")
    named = syntax.response_format(cases.TOOLS, {"type": "function", "function": {"name": "add"}})
    assert not accepts(compiler, named, one)
    if two is not None:
        assert not accepts(compiler, syntax.response_format(cases.TOOLS, "auto", parallel_tool_calls=False), two)
    content, calls = syntax.parse(f"Let me check. {one}", cases.TOOLS)
    assert content == "Let me check." and len(calls) == 1
    assert json.loads(calls[0]["function"]["arguments"]) == PARIS
    jsonschema.validate(PARIS, cases.TOOLS[0]["function"]["parameters"])
    if two is not None:
        _, calls = syntax.parse(two, cases.TOOLS)
        assert [c["function"]["name"] for c in calls] == ["add", "get_weather"]


@pytest.mark.parametrize("family", sorted(WRITTEN))
def test_calls_that_do_not_parse_stay_text(family):
    syntax, (one, _) = SYNTAXES[family], WRITTEN[family]
    cut = one[: len(one) // 2]
    assert syntax.parse(cut, cases.TOOLS) == (cut.strip(), [])
    unknown = one.replace("get_weather", "get_time")
    assert syntax.parse(unknown, cases.TOOLS) == (unknown, [])


def test_mistral_control_markers_are_emittable_in_tool_calls_only():
    """Mistral's tokenizers hold [TOOL_CALLS] and [ARGS] as control tokens: the grammar of a tool
    call takes them as single tokens (what the model writes) where the syntax has them, and the
    call's decoder keeps them for the parser; elsewhere they stay control tokens."""
    from tests.model.tiny_gguf import tiny_tokenizer
    from trellis.engine.engine import grammar_vocabulary, marker_ids
    from trellis.engine.tool_syntax import MistralArgs
    from trellis.model.tokenizer import Tokenizer

    tokens, types, merges = tiny_tokenizer()
    tokens, types = tokens + ["[TOOL_CALLS]", "[ARGS]"], types + [3, 3]
    tokenizer = Tokenizer({"model": "gpt2", "pre": "smollm", "tokens": tokens, "token_types": types,
                           "merges": merges, "bos_token_id": 1, "eos_token_id": 2})
    calls, args = len(tokens) - 2, len(tokens) - 1
    syntax = MistralArgs()
    assert marker_ids(tokenizer, syntax) == {calls, args} and marker_ids(tokenizer, None) == frozenset()
    vocab = grammar_vocabulary(tokenizer, (2,), len(tokens), marker_ids(tokenizer, syntax))
    compiler = GrammarCompiler(vocab)
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}
    grammar, _ = compiler.compile_response_format(syntax.response_format([tool], "required"))
    matcher = GrammarMatcher(grammar)
    assert calls in matcher.allowed_tokens()
    ids = [calls] + tokenizer.encode("f", special=False) + [args] + tokenizer.encode('{"a": 7}', special=False)
    for t in ids:
        assert matcher.accept_token(t), t
    assert matcher.can_terminate()
    decoder = tokenizer.stream_decoder(skip_special=True, keep={calls, args})
    text = "".join(decoder.push(t) for t in ids)
    assert text == '[TOOL_CALLS]f[ARGS]{"a": 7}'
    content, parsed = syntax.parse(text, [tool])
    assert parsed[0]["function"]["name"] == "f" and json.loads(parsed[0]["function"]["arguments"]) == {"a": 7}
    # Without the tool syntax they are control tokens: never text, dropped by the decoder.
    plain = grammar_vocabulary(tokenizer, (2,), len(tokens))
    assert calls in plain.special_ids and tokenizer.stream_decoder(skip_special=True).push(calls) == ""

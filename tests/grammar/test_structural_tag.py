"""Structural tags: free text with enforced tags (tool calls), against independent oracles.

Oracles: `jsonschema` for the tool arguments, Python's `str.find` for "no trigger in free text",
and brute-force masks over the whole SmolLM2 vocabulary for the trigger property at token level.
"""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

from trellis.errors import InvalidRequestError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.frontends import grammar_of
from trellis.grammar.structural_tag import normalize_structural_tag

# web-llm's function-calling example tools.
GET_WEATHER = {
    "type": "object",
    "properties": {
        "location": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location"],
    "additionalProperties": False,
}
GET_TIME = {
    "type": "object",
    "properties": {"timezone": {"type": "string"}},
    "required": ["timezone"],
    "additionalProperties": False,
}
TOOLS = {"get_weather": GET_WEATHER, "get_time": GET_TIME}
TRIGGER = "<function="
END = "</function>"


def tool_tag(**format_options) -> dict:
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [TRIGGER],
        "tags": [{"begin": f"<function={name}>", "content": {"type": "json_schema", "json_schema": schema},
                  "end": END} for name, schema in TOOLS.items()],
        **format_options}}


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.smollm2()


@pytest.fixture(scope="module")
def compiler(vocab):
    return GrammarCompiler(vocab)


def compile_tag(compiler, tag):
    return compiler.compile_structural_tag(tag)


def greedy_tokenize(vocab, data: bytes) -> list[int]:
    by_bytes = {b: i for i, b in enumerate(vocab.token_bytes) if b and i not in vocab.special_ids}
    out, i = [], 0
    while i < len(data):
        for n in range(min(16, len(data) - i), 0, -1):
            if data[i:i + n] in by_bytes:
                out.append(by_bytes[data[i:i + n]])
                i += n
                break
        else:
            raise AssertionError(f"no token for byte {data[i]}")
    return out


def allowed_tokens(m: GrammarMatcher) -> np.ndarray:
    mask = np.zeros(m.bitmask_words, dtype=np.int32)
    m.fill_next_token_bitmask(mask)
    return np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little"))


def complete(compiled, text: str | bytes) -> bool:
    """The text is accepted and complete (a stop token may follow)."""
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.can_terminate()


def prefix_ok(compiled, text: str | bytes) -> bool:
    return GrammarMatcher(compiled).accept_string(text)


# ---- random documents -----------------------------------------------------------------------

FREE_ALPHABET = list("abc xyz<>=/\n\t{}\"'") + ["function", "<func", "é", "日本", "🚀", "<function", "=get"]


def random_free_text(rng: random.Random) -> str:
    text = "".join(rng.choice(FREE_ALPHABET) for _ in range(rng.randint(0, 12)))
    while TRIGGER in text:
        text = text.replace(TRIGGER, "<functio")
    return text


def random_args(rng: random.Random, name: str) -> dict:
    word = "".join(rng.choice("abcdé日 \"\\/") for _ in range(rng.randint(0, 8)))
    if name == "get_time":
        return {"timezone": word}
    args = {"location": word}
    if rng.random() < 0.5:
        args["unit"] = rng.choice(["celsius", "fahrenheit"])
    return args


def random_document(rng: random.Random, n_tags: int) -> tuple[str, list[tuple[str, dict]]]:
    parts, calls = [random_free_text(rng)], []
    for _ in range(n_tags):
        name = rng.choice(sorted(TOOLS))
        args = random_args(rng, name)
        jsonschema.validate(args, TOOLS[name])  # the oracle agrees the arguments are valid
        separators = (",", ":") if rng.random() < 0.5 else None
        parts.append(f"<function={name}>{json.dumps(args, ensure_ascii=False, separators=separators)}{END}")
        parts.append(random_free_text(rng))
        calls.append((name, args))
    return "".join(parts), calls


def test_tool_calls_random_free_text_then_tags_token_by_token(compiler, vocab):
    compiled = compile_tag(compiler, tool_tag())
    rng = random.Random(1234)
    for _ in range(25):
        doc, calls = random_document(rng, rng.randint(0, 3))
        m = GrammarMatcher(compiled)
        for k, t in enumerate(greedy_tokenize(vocab, doc.encode())):
            if k % 7 == 0:  # the mask agrees with accept_token
                assert t in allowed_tokens(m), (doc, k)
            assert m.accept_token(t), doc
        assert m.can_terminate(), doc
        assert m.accept_token(vocab.stop_ids[0]) and m.is_terminated()


def test_tool_call_arguments_must_be_json_objects(compiler):
    compiled = compile_tag(compiler, tool_tag())
    assert complete(compiled, 'ok <function=get_time>{"timezone": "UTC"}</function> done')
    assert not prefix_ok(compiled, "<function=get_time>[1]")          # not an object
    assert not prefix_ok(compiled, "<function=get_time>{oops")        # not JSON
    assert not prefix_ok(compiled, "<function=get_date>")             # no such tag
    assert not prefix_ok(compiled, '<function=get_time>{"timezone": "x"}</func>')  # wrong end
    assert not complete(compiled, '<function=get_time>{"timezone": "x"}')          # unclosed


def test_tool_call_arguments_follow_their_schema(compiler):
    compiled = compile_tag(compiler, tool_tag())
    rng = random.Random(99)
    for _ in range(20):
        name = rng.choice(sorted(TOOLS))
        bad = dict(random_args(rng, name), extra=1)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, TOOLS[name])
        assert not complete(compiled, f"<function={name}>{json.dumps(bad)}{END}")
    assert not complete(compiled, f'<function=get_weather>{{"location": "x", "unit": "kelvin"}}{END}')
    assert not complete(compiled, f'<function=get_time>{{}}{END}')


def test_model_generated_tool_calls_validate(compiler, vocab):
    """Random mask-driven generation: free text, the trigger, then the engine's own choices for
    the tag name and the JSON arguments; the parsed calls must validate (jsonschema)."""
    compiled = compile_tag(compiler, tool_tag())
    rng = random.Random(2026)
    closers = {i for i, b in enumerate(vocab.token_bytes)
               if b and i not in vocab.special_ids and len(b) <= 2 and any(c in b for c in b'"}>')}
    stops = set(vocab.stop_ids)
    generated = 0
    decoder = json.JSONDecoder()

    def parse(data: bytes):
        """(name, args, rest) once the first tag is complete, else None."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        head, _, rest = text.partition(TRIGGER)
        assert TRIGGER not in head
        name, _, body = rest.partition(">")
        try:
            args, end = decoder.raw_decode(body)
        except ValueError:
            return None
        return (name, args, body[end + len(END):]) if body[end:].startswith(END) else None

    for _ in range(12):
        m = GrammarMatcher(compiled)
        data = (random_free_text(rng) + TRIGGER).encode()
        assert m.accept_string(data)
        done = None
        for _step in range(300):
            done = parse(data)
            if done:
                break
            allowed = allowed_tokens(m).tolist()
            pool = [t for t in allowed if t in closers] if rng.random() < 0.5 else []
            t = rng.choice(pool or [t for t in allowed if t not in stops])
            assert m.accept_token(t)
            data += vocab.token_bytes[t]
        if not done:
            continue
        generated += 1
        name, args, rest = done
        assert TRIGGER not in rest  # free text again (only part of one token)
        assert isinstance(args, dict)
        jsonschema.validate(args, TOOLS[name])
    assert generated >= 6


def test_trigger_never_appears_in_free_text_at_token_level(compiler, vocab):
    """Brute force over the whole vocabulary: from free-text states, a token is allowed iff the
    text it makes either contains no trigger, or its first trigger starts a tag begin."""
    compiled = compile_tag(compiler, tool_tag())
    begins = [f"<function={name}>" for name in TOOLS]
    for prefix in ["", "hello <", "x <func", "a <function", 'done <function=get_time>{"timezone": "Z"}</function>. <fu']:
        m = GrammarMatcher(compiled)
        assert m.accept_string(prefix)
        allowed = set(allowed_tokens(m).tolist())
        base = prefix.encode()
        start = base.rfind(b"</function>") + len(b"</function>") if b"</function>" in base else 0
        for t, b in enumerate(vocab.token_bytes):
            if not b or t in vocab.special_ids:
                continue
            text = (base + b)[start:]
            pos = text.find(TRIGGER.encode())
            try:
                text.decode("utf-8")
                utf8_ok = True
            except UnicodeDecodeError as e:  # an incomplete last character is a valid prefix
                utf8_ok = e.reason == "unexpected end of data"
            if pos < 0:
                expected = utf8_ok
            else:
                after = text[pos:]
                if any(after.startswith(bg.encode()) for bg in begins):
                    continue  # reaches into the arguments: not a free-text question
                expected = any(bg.encode().startswith(after) for bg in begins)
            assert (t in allowed) == expected, (prefix, b)


# ---- semantics of the options ----------------------------------------------------------------

def simple_tag(**options) -> dict:
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<t"],
        "tags": [{"begin": "<t>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</t>"}],
        **options}}


def test_default_any_number_of_tags(compiler):
    c = compile_tag(compiler, simple_tag())
    for text in ["", "free", "a<t>1</t>b<t>22</t>c", "<t>1</t><t>2</t>", "x <"]:
        assert complete(c, text), text
    assert prefix_ok(c, "x <t") and not complete(c, "x <t")  # the trigger has occurred
    for text in ["<tx", "a<t>x</t>", "<t>1</t", "a<t>"]:
        assert not complete(c, text), text


def test_at_least_one(compiler):
    c = compile_tag(compiler, simple_tag(at_least_one=True))
    assert not complete(c, "")
    assert not complete(c, "just text")
    assert prefix_ok(c, "just text")
    assert complete(c, "<t>1</t>")
    assert complete(c, "before <t>1</t> after <t>2</t> end")


def test_stop_after_first(compiler):
    c = compile_tag(compiler, simple_tag(stop_after_first=True))
    assert complete(c, "") and complete(c, "text only")
    assert complete(c, "text <t>12</t>")
    assert not prefix_ok(c, "text <t>12</t>x")
    m = GrammarMatcher(c)
    assert m.accept_string("<t>5</t>")
    assert m.accept_token(compiler.vocab.stop_ids[0]) and m.is_terminated()


def test_at_least_one_and_stop_after_first(compiler):
    c = compile_tag(compiler, simple_tag(at_least_one=True, stop_after_first=True))
    assert not complete(c, "text")
    assert complete(c, "text<t>3</t>")
    assert not prefix_ok(c, "text<t>3</t> ")


def test_overlapping_trigger_first_occurrence_dispatches(compiler):
    tag = {"format": {"type": "triggered_tags", "triggers": ["aba"],
                      "tags": [{"begin": "abaX", "content": {"type": "const_string", "value": "!"}, "end": ";"}]}}
    c = compile_tag(compiler, tag)
    assert complete(c, "ab")
    assert complete(c, "abaX!;")
    assert complete(c, "zzabaX!;ab")
    # "ab" + "abaX..." = "ababaX...": the trigger first occurs at 0, so "ba" must follow it.
    assert not prefix_ok(c, "ababaX")


def test_content_kinds_and_legacy_form(compiler):
    tag = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<"],
        "tags": [
            {"begin": "<c>", "content": {"type": "const_string", "value": "yes"}, "end": "</c>"},
            {"begin": "<g>", "content": {"type": "grammar", "grammar": 'root ::= "(" root ")" | "x"'}, "end": "</g>"},
            {"begin": "<a>", "content": {"type": "any_text"}, "end": ["</a>", "</A>"]},
            {"begin": "<s>", "content": {"type": "sequence", "elements": [
                {"type": "const_string", "value": "k="}, {"type": "regex", "pattern": "[a-z]{2}"}]}, "end": "</s>"},
        ]}}
    c = compile_tag(compiler, tag)
    assert complete(c, "<c>yes</c> <g>((x))</g> <a>any < text</A> <s>k=ab</s>")
    assert not complete(c, "<c>no</c>")
    assert not complete(c, "<g>((x)</g>")
    # the first end string closes an any_text tag; then "b" is free text and "</a>" is not a tag
    assert not complete(c, "<a>a</a>b</a>")
    assert not complete(c, "<s>k=abc</s>")
    assert not complete(c, "free < text")   # "<" alone is a trigger here

    legacy = {"type": "structural_tag", "triggers": ["<function="], "structures": [
        {"begin": "<function=get_time>", "schema": json.dumps(GET_TIME), "end": END}]}
    normalized = normalize_structural_tag(legacy)
    assert normalized["format"]["type"] == "triggered_tags"
    assert normalized["format"]["tags"][0]["content"] == {"type": "json_schema", "json_schema": GET_TIME}
    c = compile_tag(compiler, legacy)
    assert complete(c, 'hi <function=get_time>{"timezone": "UTC"}</function>')
    assert not prefix_ok(c, "<function=get_weather>")


def test_excludes_and_utf8(compiler):
    c = compile_tag(compiler, simple_tag(excludes=["bad"]))
    assert complete(c, "good 日本語 🚀 <t>1</t> fine")
    assert not prefix_ok(c, "so bad")
    assert prefix_ok(c, "so ba")
    assert not prefix_ok(c, b"\xff")
    assert not prefix_ok(c, b"\xc3\x28")


# ---- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("tag, field", [
    ({"format": {"type": "triggered_tags", "tags": []}}, "format.triggers"),
    ({"format": {"type": "triggered_tags", "triggers": [], "tags": [{}]}}, "format.triggers"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": []}}, "format.tags"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "[x]", "content": {"type": "const_string", "value": "a"}, "end": "]"}]}}, "format.tags[0].begin"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f>", "content": {"type": "python"}, "end": "]"}]}}, "format.tags[0].content.type"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f>", "content": {"type": "regex", "pattern": "(a"}, "end": "]"}]}}, "format.tags[0].content.pattern"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f>", "content": {"type": "grammar", "grammar": "root ::= undefined_rule"}, "end": "]"}]}},
     "format.tags[0].content.grammar"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f>", "content": {"type": "regex", "pattern": "a"}}]}}, "format.tags[0].end"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "at_least_one": "yes", "tags": [
        {"begin": "<f>", "content": {"type": "regex", "pattern": "a"}, "end": "]"}]}}, "format.at_least_one"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "colour": 1, "tags": [
        {"begin": "<f>", "content": {"type": "regex", "pattern": "a"}, "end": "]"}]}}, "format.colour"),
    ({"format": {"type": "triggered_tags", "triggers": ["<f"], "tags": [
        {"begin": "<f>", "content": {"type": "json_schema", "json_schema": "{nope"}, "end": "]"}]}},
     "format.tags[0].content.json_schema"),
    ({"type": "json", "format": {}}, "type"),
    ({"triggers": ["<f"]}, "structures"),
    ({"structures": [{"begin": "<f>", "end": "</f>"}], "triggers": ["<f"]}, "structures[0].schema"),
    ({"structures": [{"begin": "[f]", "schema": {}, "end": "</f>"}], "triggers": ["<f"]}, "structures[0].begin"),
    ({"structures": [{"begin": "<f>", "schema": "{x", "end": "</f>"}], "triggers": ["<f"]}, "structures[0].schema"),
    ({"type": "triggered_tags", "triggers": ["<f"], "tags": "x"}, "format.tags"),
    ("{not json", "structural_tag"),
    ({}, "format"),
])
def test_invalid_tags_name_the_field(tag, field):
    with pytest.raises(InvalidRequestError) as info:
        grammar_of("structural_tag", tag)
    assert info.value.field == field, str(info.value)


def test_tag_as_json_text_or_bare_format():
    text = json.dumps(simple_tag())
    assert normalize_structural_tag(text) == normalize_structural_tag(simple_tag())
    assert normalize_structural_tag(simple_tag()["format"]) == normalize_structural_tag(simple_tag())


def test_wasm_core_agrees_with_native(vocab, compiler):
    """The same structural-tag grammar on the wasm build (wasmtime) gives the same masks."""
    wasm = GrammarCompiler(vocab, core="wasmtime")
    tag = simple_tag(at_least_one=True)
    native_c, wasm_c = compile_tag(compiler, tag), compile_tag(wasm, tag)
    for text in ["", "hi <", "hi <t>1", "hi <t>1</t> x"]:
        a, b = GrammarMatcher(native_c), GrammarMatcher(wasm_c)
        assert a.accept_string(text) and b.accept_string(text)
        assert np.array_equal(allowed_tokens(a), allowed_tokens(b)), text
        assert a.can_terminate() == b.can_terminate()


def test_nested_formats_reasoning_then_one_tool_call(compiler):
    """sequence(tag with any_text, triggered_tags), `or`, and a trigger that is a prefix of another."""
    tag = {"format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        {"type": "triggered_tags", "triggers": ["<tool>"], "at_least_one": True, "stop_after_first": True,
         "tags": [{"begin": "<tool>", "content": {"type": "regex", "pattern": "[0-9]+"}, "end": "</tool>"}]}]}}
    c = compile_tag(compiler, tag)
    assert complete(c, "<think>hmm </thin> <tool> ok</think>sure <tool>42</tool>")
    assert not complete(c, "<think>x</think>no tool")
    assert not prefix_ok(c, "<think>x</think><tool>4a")
    assert not prefix_ok(c, "<think>x</think><tool>4</tool> more")
    c = compile_tag(compiler, {"format": {"type": "or", "elements": [
        {"type": "const_string", "value": "A"}, {"type": "regex", "pattern": "b+"}]}})
    assert complete(c, "A") and complete(c, "bbb") and not prefix_ok(c, "Ab")
    c = compile_tag(compiler, {"format": {"type": "triggered_tags", "triggers": ["<f", "<fun"], "tags": [
        {"begin": "<fun>", "content": {"type": "const_string", "value": "x"}, "end": "</f>"},
        {"begin": "<f>", "content": {"type": "const_string", "value": "y"}, "end": "</f>"}]}})
    assert complete(c, "a<fun>x</f>b<f>y</f>") and not prefix_ok(c, "<fun>y")

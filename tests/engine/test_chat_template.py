"""Chat templates rendered with Jinja equal transformers' apply_chat_template on real templates."""

import json

import pytest

from trellis.errors import InvalidRequestError
from trellis.model.chat_template import ChatTemplate, template_messages

from . import chat_template_cases as cases

RECORDS = json.loads(cases.DATA.read_text())
SMOLLM2 = RECORDS["smollm2_template"]


def template(name: str) -> ChatTemplate:
    bos, eos = cases.FAMILIES[name]
    return ChatTemplate(cases.template_source(name, SMOLLM2), bos_token=bos, eos_token=eos,
                        now=lambda: cases.FIXED_NOW)


def render(t: ChatTemplate, case: dict) -> dict:
    try:
        return {"text": t.render(case["messages"], tools=case.get("tools"), **case.get("variables", {}))}
    except InvalidRequestError as e:
        assert e.field == "messages"
        return {"error": str(e)}


def test_the_records_cover_every_template_and_conversation():
    assert cases.TEMPLATES.is_dir(), f"the chat templates are not at {cases.TEMPLATES} (../shared beside the checkout)"
    on_disk = {p.name for p in cases.TEMPLATES.glob("*.jinja")}
    assert on_disk == set(cases.FAMILIES) - {"smollm2"}
    assert set(RECORDS["renderings"]) == {f"{t}::{c}" for t in cases.FAMILIES for c in cases.CONVERSATIONS}
    assert sum("text" in r for r in RECORDS["renderings"].values()) >= 60  # most conversations render


@pytest.mark.parametrize("key", sorted(RECORDS["renderings"]))
def test_rendering_equals_transformers(key):
    name, conv = key.split("::")
    expected = RECORDS["renderings"][key]
    got = render(template(name), cases.CONVERSATIONS[conv])
    if "text" in expected:
        assert got == expected
    else:  # the template refused the conversation: the same refusal, as InvalidRequestError
        assert "error" in got and expected["error"] in got["error"], got


def test_smollm2_template_is_its_ggufs_and_renders_todays_chatml():
    assert cases.smollm2_template_from_gguf() == SMOLLM2
    t = ChatTemplate(SMOLLM2, bos_token="<|im_start|>", eos_token="<|im_end|>")
    default = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert t.default_system == default and not t.supports_tools
    assert t.stop_tokens == ("<|im_end|>", "<|endoftext|>")
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    assert t.render(msgs) == (f"<|im_start|>system\n{default}<|im_end|>\n<|im_start|>user\n{msgs[0]['content']}"
                              "<|im_end|>\n<|im_start|>assistant\n")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
            {"role": "user", "content": "V"}]
    assert t.render(msgs, add_generation_prompt=False) == \
        "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)


def test_template_errors_name_messages():
    with pytest.raises(InvalidRequestError, match="no chat template") as e:
        ChatTemplate(None).render([{"role": "user", "content": "hi"}])
    assert e.value.field == "messages"
    with pytest.raises(InvalidRequestError, match="not valid Jinja") as e:
        ChatTemplate("{% for m in messages %}{{ m.content }").render([{"role": "user", "content": "hi"}])
    assert e.value.field == "messages"
    with pytest.raises(InvalidRequestError, match="only users") as e:
        ChatTemplate("{{ raise_exception('only users') }}").render([{"role": "user", "content": "hi"}])
    assert e.value.field == "messages"
    with pytest.raises(InvalidRequestError, match="does not have") as e:
        ChatTemplate("{{ messages[0].content.strip() + nothing.here }}").render([{"role": "user", "content": "x"}])
    assert e.value.field == "messages"
    with pytest.raises(InvalidRequestError) as e:  # a type error inside the template
        ChatTemplate("{{ messages[0].content + 1 }}").render([{"role": "user", "content": "x"}])
    assert e.value.field == "messages"


def test_the_sandbox_and_hugging_faces_helpers():
    msgs = [{"role": "user", "content": "x"}]
    with pytest.raises(InvalidRequestError):  # no way out of the sandbox
        ChatTemplate("{{ messages.__class__.__mro__ }}").render(msgs)
    with pytest.raises(InvalidRequestError):
        ChatTemplate("{% set ns = namespace(_x=1) %}").render(msgs)
    with pytest.raises(InvalidRequestError):  # immutable: the conversation cannot be edited
        ChatTemplate("{{ messages.append(1) }}").render(msgs)
    t = ChatTemplate("{{ {'b': 'é<&>', 'a': [1, 2]} | tojson }}|{{ {'b': 1, 'a': 2} | tojson(indent=2, sort_keys=true) }}"
                     "|{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}"
                     "{% endif %}{{ i }}{% endfor %}|{{ strftime_now('%Y-%m-%d') }}|{{ dict(a=1) | tojson }}"
                     "|{{ bos_token }}{{ eos_token }}|{{ add_generation_prompt }}",
                     bos_token="<s>", eos_token="</s>", now=lambda: cases.FIXED_NOW)
    assert t.render(msgs) == ('{"b": "é<&>", "a": [1, 2]}|{\n  "a": 2,\n  "b": 1\n}|02|2026-03-14|{"a": 1}|<s></s>'
                              "|True")
    # trim_blocks and lstrip_blocks: a block tag's line leaves no blank line or indentation
    assert ChatTemplate("A\n  {% if true %}\nB\n  {% endif %}\nC").render(msgs) == "A\nB\nC"


def test_template_messages_give_templates_objects():
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": [1, "é"]}'}}]},
            {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": None}]
    assert template_messages(msgs) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": [1, "é"]}}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"}]


def test_smollm2_prompts_are_byte_identical_to_the_hand_written_chatml():
    """Every prompt the engine made for SmolLM2 before (ChatML by hand) is unchanged, tools included."""
    from trellis.engine.tools import render_tool_messages
    from trellis.model.chatml import render_chatml

    t = ChatTemplate(SMOLLM2, bos_token="<|im_start|>", eos_token="<|im_end|>")
    for name, case in cases.CONVERSATIONS.items():
        messages = [{"role": m["role"], "content": m["content"]} for m in case["messages"] if m["role"] != "tool"
                    and not m.get("tool_calls")]
        if messages[-1]["role"] == "user":
            assert t.render(messages) == render_chatml(messages), name
    request = [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
                   "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
               {"role": "tool", "content": "18C", "tool_call_id": "c"}]
    for choice in ("auto", "required", {"type": "function", "function": {"name": "add"}}):
        plain = render_tool_messages(request, cases.TOOLS, choice, default_system=t.default_system)
        assert t.render(plain) == render_chatml(plain)

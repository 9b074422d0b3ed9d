"""The chat-template conformance cases: real templates x conversations, and how transformers renders them.

The expected renderings in data/chat_template_renderings.json were made once by running this
module as a script, with transformers 5.25.0 and jinja2 3.1.6 installed:

    python tests/engine/chat_template_cases.py      # from the repository root

For each case it calls transformers' `PreTrainedTokenizerFast.apply_chat_template(messages,
tools=..., tokenize=False, add_generation_prompt=True, **variables)` on a tokenizer whose only
special tokens are the family's BOS and EOS texts, with `strftime_now` reading a fixed clock
(FIXED_NOW), and records the text, or the error message when the template refuses the
conversation. The tests compare Trellis's renderer with these records (CI needs no transformers);
rerunning this script where transformers is installed and diffing the data file checks the records.

Templates: the real ones in ../shared/data/chat-templates (unchanged, see its SOURCE.txt), plus
SmolLM2-135M-Instruct's own, read from its GGUF (stored in the data file: the test checks the
GGUF still carries it).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE.parents[2] / "shared" / "data" / "chat-templates"
DATA = HERE / "data" / "chat_template_renderings.json"
FIXED_NOW = datetime(2026, 3, 14, 15, 9, 26)

# template file (or "smollm2") -> (bos_token, eos_token) of the model family (None: the tokenizer has none).
FAMILIES = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "HuggingFaceTB-SmolLM3-3B.jinja": (None, "<|im_end|>"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("<s>", "</s>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": (None, "<|im_end|>"),
    "Qwen-Qwen3-0.6B.jinja": (None, "<|im_end|>"),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "microsoft-Phi-3.5-mini-instruct.jinja": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("<s>", "</s>"),
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "description": "First"}, "b": {"type": "integer", "description": "Second"}},
            "required": ["a", "b"]}}},
]

# Conversations as templates receive them (trellis.model.chat_template.template_messages's form).
# Tool call ids are 9 alphanumerics: Mistral's templates refuse others.
CONVERSATIONS = {
    "single_user": {"messages": [{"role": "user", "content": "Hello! Who are you?"}]},
    "multi_turn_system": {"messages": [
        {"role": "system", "content": "You are a terse assistant. Answer in one line."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy? Ünïcödé: 東京 ✓"}]},
    "multi_turn_no_system": {"messages": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one, please."}]},
    "with_tools": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You help with weather and sums."},
        {"role": "user", "content": "What's the weather in Paris?"}]},
    "tools_no_system": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "What is 2 + 3?"}]},
    "tool_calls_and_results": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Paris, in celsius?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call0abc1", "type": "function", "function": {
            "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "call0abc1", "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"}]},
    "tool_round_then_user": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You help with weather and sums."},
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call0abc2", "type": "function", "function": {
            "name": "add", "arguments": {"a": 2, "b": 3}}}]},
        {"role": "tool", "tool_call_id": "call0abc2", "name": "add", "content": "5"},
        {"role": "assistant", "content": "2 + 3 = 5."},
        {"role": "user", "content": "Thanks!"}]},
    "thinking_off": {"variables": {"enable_thinking": False}, "messages": [
        {"role": "user", "content": "Say hi."}]},
}


def template_source(name: str, smollm2_source: str | None = None) -> str:
    if name == "smollm2":
        return smollm2_source
    return (TEMPLATES / name).read_text()


def smollm2_template_from_gguf() -> str:
    from trellis.grammar.vocabulary import read_gguf_metadata
    from trellis.model.embedded import smollm2_gguf_path

    meta, _ = read_gguf_metadata(str(smollm2_gguf_path()), want=lambda key: key == "tokenizer.chat_template")
    return meta["tokenizer.chat_template"]


def transformers_render(source: str, bos: str | None, eos: str | None, case: dict) -> dict:
    """{"text": ...} or {"error": message}: transformers' apply_chat_template on the case."""
    from unittest import mock

    import tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import chat_template_utils

    vocab = {"<unk>": 0, **{t: i + 1 for i, t in enumerate(t for t in (bos, eos) if t)}}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    specials = {k: v for k, v in (("bos_token", bos), ("eos_token", eos)) if v}
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, chat_template=source, **specials)

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    with mock.patch.object(chat_template_utils, "datetime", Clock):
        try:
            text = tok.apply_chat_template(case["messages"], tools=case.get("tools"), tokenize=False,
                                           add_generation_prompt=True, **case.get("variables", {}))
        except Exception as e:  # the template refused the conversation
            return {"error": str(e)}
    return {"text": text}


def make_records() -> dict:
    import jinja2
    import transformers

    smollm2 = smollm2_template_from_gguf()
    records = {}
    for name, (bos, eos) in FAMILIES.items():
        source = template_source(name, smollm2)
        for conv, case in CONVERSATIONS.items():
            records[f"{name}::{conv}"] = transformers_render(source, bos, eos, case)
    return {"made_with": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
            "fixed_now": FIXED_NOW.isoformat(), "smollm2_template": smollm2, "renderings": records}


if __name__ == "__main__":
    import sys

    root = HERE.parents[1]
    sys.path[:0] = [str(root / "py"), str(root)]
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(make_records(), ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {DATA.relative_to(root)}")

"""ChatML prompts, as SmolLM2's chat template renders them (no Jinja needed under Pyodide)."""

SMOLLM2_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def render_chatml(messages: list[dict], add_generation_prompt: bool = True,
                  default_system: str | None = SMOLLM2_DEFAULT_SYSTEM) -> str:
    """`messages` are {"role", "content"} dicts; a default system message is inserted when none leads."""
    parts = []
    if default_system is not None and (not messages or messages[0]["role"] != "system"):
        parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
    for m in messages:
        parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class ChatTemplate:
    """A model's chat format, read from its manifest's Jinja template without running Jinja.

    Only ChatML is supported (SmolLM2, Qwen, and the tests' tiny model); its default system prompt
    is the literal system block the template inserts when the conversation has none.
    """

    def __init__(self, default_system: str | None, stop_tokens: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")):
        self.default_system, self.stop_tokens = default_system, stop_tokens

    @classmethod
    def from_manifest(cls, manifest: dict, tokens) -> "ChatTemplate":
        import re

        from trellis.errors import ModelError

        template = manifest.get("chat_template")
        if template is None:
            if "<|im_start|>" not in tokens:
                raise ModelError("the model has no chat template and no ChatML tokens: use completions.create")
            return cls(None)
        if "<|im_start|>" not in template:
            raise ModelError("the model's chat template is not ChatML, the only format Trellis renders")
        found = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template, re.S)
        return cls(found.group(1) if found else None)

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        return render_chatml(messages, add_generation_prompt, self.default_system)

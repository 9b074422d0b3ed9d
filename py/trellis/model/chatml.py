"""ChatML written by hand, as SmolLM2's chat template renders it: the fixed prompt form of `trellis
generate` and of the runtime tests. The engine renders each model's own template (chat_template.py)."""

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

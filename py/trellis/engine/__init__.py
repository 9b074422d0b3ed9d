"""The engine: OpenAI / web-llm chat and text completions on top of the runtime and the grammar."""

from trellis.engine.engine import AsyncEngine, Engine

__all__ = ["AsyncEngine", "Engine"]

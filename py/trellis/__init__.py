"""Trellis: an in-browser LLM engine with guaranteed structured output."""

__version__ = "0.1.0"

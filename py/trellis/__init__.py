"""Trellis: an in-browser LLM engine with guaranteed structured output."""

__version__ = "0.1.0"


def __getattr__(name):
    # `trellis.Engine` without importing the engine (and the runtime) on `import trellis`.
    if name in ("Engine", "AsyncEngine"):
        from trellis import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'trellis' has no attribute {name!r}")

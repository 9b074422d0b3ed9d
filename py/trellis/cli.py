"""`trellis` on the desktop: one command line, subcommands from the modules that own them."""

from __future__ import annotations

import sys

COMMANDS = {  # name -> ("module" or "module:function" taking argv, help)
    "chat": ("trellis.engine.cli:chat", "chat with the model in the terminal, streaming"),
    "run": ("trellis.engine.cli:run", "answer one prompt, optionally with a response format, and print stats"),
    "serve": ("trellis.serve.cli", "serve a model over an OpenAI-compatible HTTP API (the openai SDK, ...)"),
    "generate": ("trellis.runtime.generate", "stream the continuation of a ChatML prompt (wgpu-native)"),
    "grammar-demo": ("trellis.demo", "sample random tokens that a grammar allows (no model needed)"),
    "build-model": ("trellis.kernels.build_model", "compile a GGUF model's kernels to WGSL and pack its weights"),
}
# The extra that brings each command's packages, for the message when one is missing.
EXTRAS = {"build-model": "models", "chat": "desktop", "run": "desktop", "serve": "desktop", "generate": "desktop"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        lines = [f"  {name:<14} {help}" for name, (_, help) in COMMANDS.items()]
        print("usage: trellis COMMAND [options]\n\ncommands:\n" + "\n".join(lines))
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    import importlib

    module, _, function = COMMANDS[argv[0]][0].partition(":")
    try:  # commands import their optional packages as they go
        return getattr(importlib.import_module(module), function or "main")(argv[1:]) or 0
    except ImportError as e:
        if not e.name or e.name.split(".")[0] == "trellis":
            raise
        extra = EXTRAS.get(argv[0])
        how = f"pip install 'trellis-llm[{extra}]'" if extra else f"pip install {e.name}"
        print(f"trellis {argv[0]}: needs the package {e.name!r}: {how}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""`trellis chat` (interactive, streaming) and `trellis run` (one request) on the desktop engine."""

from __future__ import annotations

import argparse
import json
import sys


def _engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="built model folder (default: the embedded SmolLM2)")
    parser.add_argument("--context", type=int, default=2048, help="KV-cache size in tokens")
    parser.add_argument("--max-tokens", type=int, help="tokens per answer (default: until the context fills)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--system", help="system message (default: the model's)")


def _engine(args):
    from trellis.engine import Engine

    return Engine(args.model, context=args.context)


def _sampling(args) -> dict:
    request = {"temperature": args.temperature, "top_p": args.top_p, "seed": args.seed, "max_tokens": args.max_tokens}
    return {k: v for k, v in request.items() if v is not None}


def _stream(engine, request: dict, out) -> tuple[str, dict]:
    """Print the answer as it streams; returns its text and the usage."""
    text, usage, finish = [], {}, None
    for chunk in engine.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}):
        for choice in chunk["choices"]:
            piece = choice["delta"].get("content") or ""
            out.write(piece)
            out.flush()
            text.append(piece)
            finish = choice["finish_reason"] or finish
            for call in choice["delta"].get("tool_calls") or ():
                out.write(f"\n[tool call] {call['function']['name']}({call['function']['arguments']})")
        usage = chunk.get("usage") or usage
    out.write("\n")
    if finish and finish != "stop":
        out.write(f"[finish_reason: {finish}]\n")
    return "".join(text), usage


def _stats_line(usage: dict) -> str:
    x = usage.get("extra", {})
    line = (f"[{usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} tokens; prefill "
            f"{x.get('prefill_tokens_per_s', 0):.1f} tok/s, decode {x.get('decode_tokens_per_s', 0):.1f} tok/s, "
            f"first token {x.get('time_to_first_token_s', 0):.2f} s")
    if x.get("grammar_cache_hit") is not None:
        line += (f", grammar init {1000 * x['grammar_init_s']:.1f} ms ({'cached' if x['grammar_cache_hit'] else 'new'})"
                 f", {1e6 * x['grammar_per_token_s']:.0f} us/token")
    return line + "]"


def _response_format(args) -> dict | None:
    def load(path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    if args.response_format:
        return json.loads(load(args.response_format))
    if args.json_schema:
        return {"type": "json_object", "schema": load(args.json_schema)}
    if args.grammar:
        return {"type": "grammar", "grammar": load(args.grammar)}
    if args.regex:
        return {"type": "regex", "regex": args.regex}
    return None


def run(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="trellis run", description="answer one prompt, optionally constrained")
    parser.add_argument("--prompt", required=True, help="the user message")
    _engine_options(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--response-format", metavar="FILE", help="a JSON file holding a response_format object")
    group.add_argument("--json-schema", metavar="FILE", help="a JSON Schema file (JSON output)")
    group.add_argument("--grammar", metavar="FILE", help="an EBNF grammar file")
    group.add_argument("--regex", metavar="RE", help="a regular expression the output must match")
    parser.add_argument("--complete-on-length", action="store_true",
                        help="close a constrained structure within --max-tokens instead of cutting it")
    args = parser.parse_args(argv)

    from trellis.errors import TrellisError

    try:
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
            {"role": "user", "content": args.prompt}]
        request = {"messages": messages, **_sampling(args)}
        rf = _response_format(args)
        if rf is not None:
            request["response_format"] = rf
        if args.complete_on_length:
            request["complete_on_length"] = True
        engine = _engine(args)
        _, usage = _stream(engine, request, sys.stdout)
    except (TrellisError, OSError, ValueError) as e:
        print(f"trellis run: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(_stats_line(usage), file=sys.stderr)
    return 0


def chat(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="trellis chat", description="chat in the terminal (empty line or ^D quits; "
                                     "/reset forgets the conversation)")
    _engine_options(parser)
    parser.add_argument("--stats", action="store_true", help="print speeds after each answer")
    args = parser.parse_args(argv)

    from trellis.errors import TrellisError

    try:
        engine = _engine(args)
    except (TrellisError, OSError) as e:
        print(f"trellis chat: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    system = [{"role": "system", "content": args.system}] if args.system else []
    history: list[dict] = []
    while True:
        try:
            line = input("> ")
        except EOFError:
            break
        if not line.strip():
            break
        if line.strip() == "/reset":
            history.clear()
            engine.reset_chat()
            continue
        history.append({"role": "user", "content": line})
        try:
            text, usage = _stream(engine, {"messages": system + history, **_sampling(args)}, sys.stdout)
        except KeyboardInterrupt:
            engine.interrupt_generate()
            history.pop()
            print("\n[interrupted]")
            continue
        except TrellisError as e:
            history.pop()
            print(f"error: {type(e).__name__}: {e}")
            continue
        history.append({"role": "assistant", "content": text})
        if args.stats:
            print(_stats_line(usage))
    return 0

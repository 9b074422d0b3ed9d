"""`trellis generate` on the tiny model: the streamed text is the reference's greedy continuation."""

import numpy as np

from tests.model.reference import ReferenceLlama
from trellis.model.chatml import render_chatml
from trellis.model.tokenizer import Tokenizer
from trellis.runtime import Artifacts
from trellis.runtime.generate import main


def test_generate_streams_the_greedy_continuation(tiny_model, capsys):
    gguf_path, out = tiny_model
    assert main(["--prompt", "hi there", "--model", str(out), "--max-tokens", "6", "--context", "128"]) == 0
    printed = capsys.readouterr().out

    tok = Tokenizer(Artifacts.from_dir(out).tokenizer_data())
    ids = tok.encode(render_chatml([{"role": "user", "content": "hi there"}]))
    reference = ReferenceLlama(gguf_path)
    logits, expected = reference.forward(ids)[-1], []
    while len(expected) < 6:
        token = int(np.argmax(logits))
        if token == tok.eos_token_id:
            break
        expected.append(token)
        logits = reference.forward([token])[-1]
    text = tok.decode(expected, skip_special=True)
    # Invalid UTF-8 from random weights decodes to U+FFFD in both.
    assert printed == text + "\n"

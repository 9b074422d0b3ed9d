"""Run built models on WebGPU: one plan executor, pluggable backends (wgpu-py here, JS WebGPU in the browser)."""

from trellis.runtime.artifacts import DEFAULT_MODEL_DIR, Artifacts
from trellis.runtime.executor import Executor


def load_model(path=None, context: int | None = None, backend=None) -> Executor:
    """An executor for the model built in `path` (default: the embedded SmolLM2), on wgpu-py by default."""
    if backend is None:
        from trellis.runtime.wgpu_backend import WgpuBackend

        backend = WgpuBackend()
    return Executor(Artifacts.from_dir(path), backend, context)


__all__ = ["Artifacts", "DEFAULT_MODEL_DIR", "Executor", "load_model"]

"""The small interface a GPU backend implements for the plan executor.

Kept to what both wgpu-py (desktop) and the browser's WebGPU (through Pyodide) do cheaply: buffers,
compute pipelines from WGSL, prebuilt dispatches, and "submit these (copying that out)" plus a
read-back that may be awaitable (the browser can only wait for the GPU asynchronously).
Handles are opaque to the executor.
"""

from typing import Awaitable, Protocol, Sequence


class Backend(Protocol):
    # vendor, architecture, device, description; and "subgroup_size" where the device runs WGSL's
    # subgroup builtins with that one size and lanes in local-index order (the kernel variants
    # that share loads across lanes need both).
    adapter_info: dict
    limits: dict
    # Optionally `kernel_variant`: where the host chose the model's kernel variant before the engine
    # existed (the browser's worker compiles its pipelines meanwhile), its name, or None for the
    # default kernels; the executor runs that. Absent: the executor chooses by `adapter_info`
    # (Artifacts.variant_for, the one rule).

    def create_buffer(self, label: str, size: int, data: bytes | None = None) -> object:
        """A storage buffer of `size` bytes (a multiple of 4), zero-filled or holding `data`."""

    def write_buffer(self, buffer, offset: int, data: bytes) -> None:
        """Queue a write; it lands before any work submitted later."""

    def create_kernel(self, label: str, wgsl: str, entry_point: str) -> object:
        """A compute pipeline."""

    def create_dispatch(self, kernel, buffers: Sequence[object], uniform: bytes, uniform_binding: int,
                        grid: Sequence[int]) -> object:
        """A ready-to-run dispatch: storage buffers bound at 0..n-1 in order, then the uniform."""

    def create_copy(self, source, source_offset: int, target, target_offset: int, size: int) -> object:
        """A ready-to-run buffer copy, to place between dispatches in a `submit`."""

    def submit(self, dispatches: Sequence[object], read: tuple[object, int] | None = None) -> object:
        """Submit the dispatches and copies in order, as one submission, without waiting; with
        `read=(buffer, size)`, also copy the buffer's first bytes out, and return a handle for
        `read_back` (else None)."""

    def read_back(self, pending) -> bytes | Awaitable[bytes]:
        """The bytes a `submit` copied out, once the GPU is done (awaitable on asynchronous backends).
        Several reads may be outstanding; they are collected in the order they were submitted."""

    def discard(self, pending) -> None:
        """Forget a read that will not be collected (optional: without it, its buffer is not reused)."""

    def destroy(self) -> None:
        """Release the GPU memory."""


class StagingPool:
    """The free read-back buffers of a backend, with their capacities kept in Python (a browser
    buffer's size is a call into JS away, and this runs every token). Several reads may be in flight,
    each holding one; `take` gives the smallest that holds `size` bytes, so a token id's read leaves
    the logits' large buffer to the logits, or a new one from `create(capacity)`."""

    def __init__(self, create):
        self._create, self._free = create, []  # [(capacity, buffer)]

    def take(self, size: int) -> tuple:
        fits = [i for i, (capacity, _) in enumerate(self._free) if capacity >= size]
        if fits:
            return self._free.pop(min(fits, key=lambda i: self._free[i][0]))
        capacity = (size + 3) // 4 * 4
        return capacity, self._create(capacity)

    def give(self, entry: tuple) -> None:
        self._free.append(entry)


PROBE_INVOCATIONS = 64  # subgroup_probe.wgsl's workgroup size: it writes 64 sizes, then 64 lanes


def subgroup_size_of(words) -> int | None:
    """What the subgroup probe's output (subgroup_probe.wgsl, 2 x 64 u32 words, run by each backend)
    means: the device's subgroup size if every subgroup of the workgroup has that one size and its
    lanes follow the local index (what TVM's subgroup code assumes), else None. The one reading of
    it, for the desktop backend and the browser's worker alike."""
    n = PROBE_INVOCATIONS
    words = list(words or ())
    if len(words) < 2 * n:
        return None
    size = words[0]
    if size and all(words[i] == size and words[n + i] == i % size for i in range(n)):
        return size
    return None

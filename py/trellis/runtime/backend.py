"""The small interface a GPU backend implements for the plan executor.

Kept to what both wgpu-py (desktop) and the browser's WebGPU (through Pyodide) do cheaply: buffers,
compute pipelines from WGSL, prebuilt dispatches, and one "run these, then read that back" call.
Handles are opaque to the executor.
"""

from typing import Protocol, Sequence


class Backend(Protocol):
    adapter_info: dict
    limits: dict

    def create_buffer(self, label: str, size: int, data: bytes | None = None) -> object:
        """A storage buffer of `size` bytes (a multiple of 4), zero-filled or holding `data`."""

    def write_buffer(self, buffer, offset: int, data: bytes) -> None:
        """Queue a write; it lands before any work submitted later."""

    def create_kernel(self, label: str, wgsl: str, entry_point: str) -> object:
        """A compute pipeline."""

    def create_dispatch(self, kernel, buffers: Sequence[object], uniform: bytes, uniform_binding: int,
                        grid: Sequence[int]) -> object:
        """A ready-to-run dispatch: storage buffers bound at 0..n-1 in order, then the uniform."""

    def run(self, dispatches: Sequence[object], read: tuple[object, int] | None = None) -> bytes | None:
        """Submit the dispatches in order; with `read=(buffer, size)`, wait and return its first bytes."""

    def destroy(self) -> None:
        """Release the GPU memory."""

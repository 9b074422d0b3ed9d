"""The desktop backend: wgpu-py over wgpu-native (Vulkan, Metal, D3D12; lavapipe on CPU-only machines)."""

import os
from typing import NamedTuple

from trellis.errors import RuntimeBackendError


class _Dispatch(NamedTuple):
    kernel: object
    group: object
    grid: tuple
    uniform: object
    raw: tuple  # (pipeline handle, bind group handle, x, y, z) for the raw encoding calls


class _Copy(NamedTuple):
    source: object
    source_offset: int
    target: object
    target_offset: int
    size: int


class WgpuBackend:
    def __init__(self, power_preference: str = "high-performance", timestamps: bool = False):
        """`timestamps` asks for GPU timestamp queries (benchmarks), where the adapter has them."""
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences wgpu-native's warning on headless Linux
        try:
            import wgpu
        except ImportError as e:
            raise RuntimeBackendError("the desktop runtime needs the 'wgpu' package (pip install wgpu)") from e
        self._wgpu = wgpu
        adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        if adapter is None:
            raise RuntimeBackendError("no WebGPU adapter found (on Linux without a GPU: apt-get install mesa-vulkan-drivers)")
        info = adapter.info
        self.adapter_info = {k: info[k] for k in ("vendor", "architecture", "device", "description", "adapter_type",
                                                  "backend_type") if k in info}
        have = adapter.limits
        # Kernels stay within WebGPU's default limits except, for long contexts, buffer sizes.
        want = {"max-storage-buffer-binding-size": have["max-storage-buffer-binding-size"],
                "max-buffer-size": have["max-buffer-size"]}
        features = ["timestamp-query"] if timestamps and "timestamp-query" in adapter.features else []
        self.device = adapter.request_device_sync(required_limits=want, required_features=features)
        self.timestamps = bool(features)
        self.limits = dict(self.device.limits)
        self._queue = self.device.queue
        self._storage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        self._staging = None
        self.allocated_bytes = 0
        # The pass commands and small writes go straight to wgpu-native: wgpu-py's checked wrappers cost
        # ~8 µs a call (729 calls a SmolLM2 step). WebGPU reports a pass's errors at `finish()`, which
        # stays checked; a small write's errors reach the device's error handler.
        from wgpu.backends.wgpu_native._ffi import ffi, lib
        self._ffi, self._write = ffi, lib.wgpuQueueWriteBuffer
        self._raw = (lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup,
                     lib.wgpuComputePassEncoderDispatchWorkgroups, ffi.NULL)

    def create_buffer(self, label, size, data=None):
        size = max(4, (size + 3) // 4 * 4)
        if size > self.limits["max-storage-buffer-binding-size"]:
            raise RuntimeBackendError(f"buffer {label!r} needs {size} bytes, above the adapter's binding limit "
                                      f"{self.limits['max-storage-buffer-binding-size']}")
        buffer = self.device.create_buffer(label=label, size=size, usage=self._storage)
        self.allocated_bytes += size
        if data:
            self._queue.write_buffer(buffer, 0, data)
        return buffer

    def write_buffer(self, buffer, offset, data):
        if len(data) > 256:
            self._queue.write_buffer(buffer, offset, data)
        else:  # the per-step words: wgpu-py's checked path costs ~0.1 ms a call
            self._write(self._queue._internal, buffer._internal, offset, self._ffi.from_buffer(data), len(data))

    def create_kernel(self, label, wgsl, entry_point):
        module = self.device.create_shader_module(label=label, code=wgsl)
        return self.device.create_compute_pipeline(
            label=label, layout="auto", compute={"module": module, "entry_point": entry_point})

    def create_dispatch(self, kernel, buffers, uniform, uniform_binding, grid):
        wgpu = self._wgpu
        ubuf = self.device.create_buffer(size=max(16, len(uniform)), usage=wgpu.BufferUsage.UNIFORM
                                         | wgpu.BufferUsage.COPY_DST)
        self._queue.write_buffer(ubuf, 0, uniform)
        entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                   for i, b in enumerate(buffers)]
        entries.append({"binding": uniform_binding, "resource": {"buffer": ubuf, "offset": 0, "size": ubuf.size}})
        group = self.device.create_bind_group(layout=kernel.get_bind_group_layout(0), entries=entries)
        x, y, z = (tuple(grid) + (1, 1))[:3]
        return _Dispatch(kernel, group, (x, y, z), ubuf, (kernel._internal, group._internal, x, y, z))

    def create_copy(self, source, source_offset, target, target_offset, size):
        return _Copy(source, source_offset, target, target_offset, size)

    def submit(self, dispatches, read=None):
        encoder = self.device.create_command_encoder()
        compute = handle = None
        set_pipeline, set_group, dispatch, null = self._raw
        for item in dispatches:
            if isinstance(item, _Copy):
                if compute is not None:
                    compute.end()
                    compute = None
                encoder.copy_buffer_to_buffer(*item)
                continue
            if compute is None:
                compute = encoder.begin_compute_pass()
                handle = compute._internal
            pipeline, group, x, y, z = item.raw
            set_pipeline(handle, pipeline)
            set_group(handle, 0, group, 0, null)
            dispatch(handle, x, y, z)
        if compute is not None:
            compute.end()
        pending = None
        if read is not None:
            buffer, size = read
            staging = self._staging_buffer(size)
            encoder.copy_buffer_to_buffer(buffer, 0, staging, 0, size)
            pending = (staging, size)
        self._queue.submit([encoder.finish()])
        return pending

    def read_back(self, pending):
        staging, size = pending
        staging.map_sync(self._wgpu.MapMode.READ, 0, size)
        try:
            return bytes(staging.read_mapped(0, size))
        finally:
            staging.unmap()

    def run(self, dispatches, read=None):
        """Submit and, with `read`, wait for the copy (a convenience for synchronous callers)."""
        pending = self.submit(dispatches, read)
        return None if pending is None else self.read_back(pending)

    def _staging_buffer(self, size):
        if self._staging is None or self._staging.size < size:
            wgpu = self._wgpu
            self._staging = self.device.create_buffer(
                size=(size + 3) // 4 * 4, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        return self._staging

    def destroy(self):
        self.device.destroy()

"""The desktop backend: wgpu-py over wgpu-native (Vulkan, Metal, D3D12; lavapipe on CPU-only machines)."""

import os
from pathlib import Path
from typing import NamedTuple

from trellis import paths
from trellis.errors import RuntimeBackendError
from trellis.runtime.backend import PROBE_INVOCATIONS, StagingPool, subgroup_size_of

# The native pass encoder (kernels/runtime/encode_pass.c, built by build.py); without it, a Python loop.
_ENCODE_CDEF = """
typedef void (*set_pipeline_fn)(void *pass, void *pipeline);
typedef void (*set_group_fn)(void *pass, uint32_t index, void *group, size_t offset_count, const uint32_t *offsets);
typedef void (*dispatch_fn)(void *pass, uint32_t x, uint32_t y, uint32_t z);
void trellis_encode_pass(void *pass, size_t n, void *const *pipelines, void *const *groups, const uint32_t *xyz,
                         set_pipeline_fn set_pipeline, set_group_fn set_group, dispatch_fn dispatch);
"""
SUBGROUP_PROBE = Path(__file__).with_name("subgroup_probe.wgsl")  # web/worker.js runs it too
# Naga runs the subgroup builtins but accepts neither their enable-extension nor the diagnostic
# rule that Tint (the browser) needs for kernels that shuffle under non-uniform branches.
_NAGA_UNSUPPORTED = ("enable subgroups;", "diagnostic(off, subgroup_uniformity);")
# Prepared plans kept: a decode step uses two or three plan lists; a kept list keeps its bind groups
# (and so its buffers) alive, hence a bound rather than every list ever submitted.
_KEPT_PLANS = 8


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


def encoder_library_path() -> Path:
    """Where build.py puts the pass encoder (trellis.paths), or $TRELLIS_ENCODE_LIB."""
    env = os.environ.get("TRELLIS_ENCODE_LIB")
    if env:
        return Path(env)
    return paths.built_file("libtrellis_encode.so")


class WgpuBackend:
    def __init__(self, power_preference: str = "high-performance", timestamps: bool = False):
        """`timestamps` asks for GPU timestamp queries (benchmarks), where the adapter has them."""
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences wgpu-native's warning on headless Linux
        try:
            import wgpu
        except ImportError as e:
            raise RuntimeBackendError("the desktop runtime needs the 'wgpu' package: pip install 'trellis-llm[desktop]'") from e
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
        features = [f for f, wanted in (("timestamp-query", timestamps), ("subgroup", True))
                    if wanted and f in adapter.features]
        self.device = adapter.request_device_sync(required_limits=want, required_features=features)
        self.timestamps = "timestamp-query" in features
        self.limits = dict(self.device.limits)
        self._queue = self.device.queue
        self._storage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        self._staging = StagingPool(lambda capacity: self.device.create_buffer(
            size=capacity, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST))
        self.allocated_bytes = 0
        # The pass commands and small writes go straight to wgpu-native: wgpu-py's checked wrappers cost
        # ~8 µs a call (729 calls a SmolLM2 step). WebGPU reports a pass's errors at `finish()`, which
        # stays checked; a small write's errors reach the device's error handler.
        from wgpu.backends.wgpu_native._ffi import ffi, lib
        self._ffi, self._write = ffi, lib.wgpuQueueWriteBuffer
        self._raw = (lib.wgpuComputePassEncoderSetPipeline, lib.wgpuComputePassEncoderSetBindGroup,
                     lib.wgpuComputePassEncoderDispatchWorkgroups, ffi.NULL)
        # Even so, those calls cost ~0.6 µs each through cffi: with the native encoder a pass is one call.
        # `native_encoder` says which path `submit` takes (False: the Python loop).
        self._encoder = self._load_encoder()
        self.native_encoder = self._encoder is not None
        self._plans = {}  # id(list) -> (list, length, segments), most recently used last
        self._uniforms = {}  # uniform bytes -> buffer
        if "subgroup" in features:
            try:
                size = self._subgroup_size()
            except (wgpu.GPUError, RuntimeError):  # a device that cannot run it runs the default kernels
                size = None
            if size:
                self.adapter_info["subgroup_size"] = size

    def _subgroup_size(self) -> int | None:
        """The device's subgroup size as the probe's output means it (backend.subgroup_size_of)."""
        wgpu = self._wgpu
        out = self.device.create_buffer(size=4 * 2 * PROBE_INVOCATIONS,
                                        usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        pipeline = self.create_kernel("subgroup-probe", SUBGROUP_PROBE.read_text(), "main")
        group = self.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": out, "offset": 0, "size": out.size}}])
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(1)
        compute.end()
        self._queue.submit([encoder.finish()])
        return subgroup_size_of(memoryview(self._queue.read_buffer(out)).cast("I"))

    def _load_encoder(self):
        """(ffi, encode function, wgpu-native's three pass calls) or None when the library isn't built."""
        path = encoder_library_path()
        if not path.exists():
            if os.environ.get("TRELLIS_ENCODE_LIB"):
                raise RuntimeBackendError(f"TRELLIS_ENCODE_LIB names {path}, which does not exist")
            return None
        import cffi

        ffi = cffi.FFI()
        ffi.cdef(_ENCODE_CDEF)
        lib = ffi.dlopen(str(path))
        calls = (ffi.cast(kind, fn) for kind, fn in zip(("set_pipeline_fn", "set_group_fn", "dispatch_fn"),
                                                         self._raw))
        return ffi, lib.trellis_encode_pass, tuple(calls)

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
        for directive in _NAGA_UNSUPPORTED:
            wgsl = wgsl.replace(directive, "")
        module = self.device.create_shader_module(label=label, code=wgsl)
        return self.device.create_compute_pipeline(
            label=label, layout="auto", compute={"module": module, "entry_point": entry_point})

    def create_dispatch(self, kernel, buffers, uniform, uniform_binding, grid):
        # Dispatches with the same uniform bytes share a buffer: wgpu-core tracks every distinct
        # buffer a submission uses, each step.
        ubuf = self._uniforms.get(uniform)
        if ubuf is None:
            wgpu = self._wgpu
            ubuf = self._uniforms[uniform] = self.device.create_buffer(
                size=max(16, len(uniform)), usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
            self._queue.write_buffer(ubuf, 0, uniform)
        entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                   for i, b in enumerate(buffers)]
        entries.append({"binding": uniform_binding, "resource": {"buffer": ubuf, "offset": 0, "size": ubuf.size}})
        group = self.device.create_bind_group(layout=kernel.get_bind_group_layout(0), entries=entries)
        x, y, z = (tuple(grid) + (1, 1))[:3]
        return _Dispatch(kernel, group, (x, y, z), ubuf, (kernel._internal, group._internal, x, y, z))

    def create_copy(self, source, source_offset, target, target_offset, size):
        return _Copy(source, source_offset, target, target_offset, size)

    def _segments(self, dispatches):
        """The plan as copies and runs of dispatches, a run as the arrays the native encoder reads.
        Kept per list object, as the executor reuses its plan lists; the entry holds the list, so
        its id cannot be reused while kept."""
        entry = self._plans.pop(id(dispatches), None)
        if entry is None or entry[0] is not dispatches or entry[1] != len(dispatches):
            ffi = self._encoder[0]
            segments, run = [], []
            for item in [*dispatches, None]:
                if isinstance(item, _Dispatch):
                    run.append(item.raw)
                    continue
                if run:  # the arrays hold the handles; the list's dispatches keep them alive
                    segments.append((len(run), ffi.new("void *[]", [r[0] for r in run]),
                                     ffi.new("void *[]", [r[1] for r in run]),
                                     ffi.new("uint32_t[]", [v for r in run for v in r[2:]])))
                    run = []
                if item is not None:
                    segments.append(item)
            entry = (dispatches, len(dispatches), segments)
            while len(self._plans) >= _KEPT_PLANS:
                del self._plans[next(iter(self._plans))]
        self._plans[id(dispatches)] = entry
        return entry[2]

    def submit(self, dispatches, read=None):
        encoder = self.device.create_command_encoder()
        if self.native_encoder and dispatches:
            self._encode_native(encoder, dispatches)
        else:
            self._encode_python(encoder, dispatches)
        pending = None
        if read is not None:
            buffer, size = read
            entry = self._staging.take(size)
            encoder.copy_buffer_to_buffer(buffer, 0, entry[1], 0, size)
            pending = (entry, size)
        self._queue.submit([encoder.finish()])
        return pending

    def _encode_native(self, encoder, dispatches):
        _, encode, calls = self._encoder
        for segment in self._segments(dispatches):
            if isinstance(segment, _Copy):
                encoder.copy_buffer_to_buffer(*segment)
                continue
            compute = encoder.begin_compute_pass()
            encode(compute._internal, *segment, *calls)
            compute.end()

    def _encode_python(self, encoder, dispatches):
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

    def read_back(self, pending):
        entry, size = pending
        staging = entry[1]
        staging.map_sync(self._wgpu.MapMode.READ, 0, size)
        try:
            return bytes(staging.read_mapped(0, size))
        finally:
            staging.unmap()
            self._staging.give(entry)

    def discard(self, pending):
        """A read that will not be collected: its buffer goes back to the pool unmapped."""
        self._staging.give(pending[0])

    def run(self, dispatches, read=None):
        """Submit and, with `read`, wait for the copy (a convenience for synchronous callers)."""
        pending = self.submit(dispatches, read)
        return None if pending is None else self.read_back(pending)

    def destroy(self):
        self.device.destroy()

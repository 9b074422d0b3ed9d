"""The browser backend: the page's WebGPU (a `GPUDevice`) driven from Pyodide.

Mirrors wgpu_backend.py. Python->JS calls cost microseconds each and a decode step runs hundreds of
dispatches, so bind groups are built once per dispatch, and a small JS helper encodes a whole
plan (a JS array kept per plan list) in one call. Reading back is asynchronous in the browser:
`read_back` returns a coroutine that awaits `mapAsync`.
"""

from trellis.errors import RuntimeBackendError
from trellis.runtime.backend import StagingPool

# Encodes a plan in one call; builds one dispatch's bind group (bindings 0..n-1, then the uniform).
_HELPER_JS = """({
  encode(device, plan, source, size, staging) {
    const encoder = device.createCommandEncoder();
    let pass = null;
    for (const d of plan) {
      if (d.source) {  // a buffer copy between dispatches
        if (pass) { pass.end(); pass = null; }
        encoder.copyBufferToBuffer(d.source, d.sourceOffset, d.target, d.targetOffset, d.size);
        continue;
      }
      pass = pass || encoder.beginComputePass();
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, d.group);
      pass.dispatchWorkgroups(d.x, d.y, d.z);
    }
    if (pass) pass.end();
    if (source) encoder.copyBufferToBuffer(source, 0, staging, 0, size);
    device.queue.submit([encoder.finish()]);
  },
  dispatch(device, pipeline, buffers, uniform, uniformBinding, x, y, z) {
    const entries = Array.from(buffers, (buffer, binding) => ({binding, resource: {buffer}}));
    entries.push({binding: uniformBinding, resource: {buffer: uniform}});
    const group = device.createBindGroup({layout: pipeline.getBindGroupLayout(0), entries});
    return {pipeline, group, x, y, z};
  },
  // Chromium resolves a mapAsync when its GPU process next checks the queue, about 2 ms apart
  // (measured: 2.3 ms for 23 trivial dispatches), or when a map request reaches it after the work is
  // done (0.2 ms). So for the first PROBE_MS, map and unmap an idle 4-byte buffer back to back: each
  // round trip makes the GPU process check (23 dispatches: 0.45 ms). Later the plain polling is
  // close enough, and probing would take CPU from long steps on a software adapter. With `probe`
  // false (later steps already queued behind this one keep the GPU busy) it only waits.
  mapped(device, staging, size, probe) {
    const PROBE_MS = probe ? 20 : 0;
    const mapped = staging.mapAsync(GPUMapMode.READ, 0, size);
    let pending = true;
    const settle = () => { pending = false; };
    mapped.then(settle, settle);
    this.probe = this.probe || device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ });
    return (async () => {
      const t0 = performance.now();
      try {
        while (pending && performance.now() - t0 < PROBE_MS) {
          await this.probe.mapAsync(GPUMapMode.READ);
          this.probe.unmap();
        }
      } catch (e) {}  // the device is gone: `mapped` rejects with the reason
      return mapped;
    })();
  },
  watch(device, errors) {
    device.addEventListener('uncapturederror', (e) => errors.push(e.error.message));
    device.lost.then((info) => errors.push('device lost: ' + info.message));
  },
})"""

# Limits reported in wgpu-py's spelling (max-storage-buffer-binding-size, ...).
_LIMITS = ("maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
           "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupsPerDimension",
           "maxStorageBuffersPerShaderStage", "maxBindGroups")


def _hyphenated(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name)


class WebGPUBackend:
    def __init__(self, device, adapter_info: dict | None = None, pipelines=None,
                 kernel_variant: str | None | bool = True):
        """`device`: a GPUDevice (a JsProxy) the worker requested with the limits it needs;
        `pipelines`: optionally a JS Map of kernel name -> compute pipeline (or {compileError}) that
        the worker fills as its createComputePipelineAsync calls finish; kernels it lacks compile here,
        except that the executor waits (`kernel_ready`) for those it can do without for a while;
        `kernel_variant`: the model's kernel variant those pipelines are for (None: the default
        kernels), which the executor then runs; True: the executor chooses by `adapter_info`."""
        try:
            import js
            from pyodide.code import run_js
            from pyodide.ffi import JsProxy, to_js
        except ImportError as e:
            raise RuntimeBackendError("the WebGPU backend runs only under Pyodide (use WgpuBackend)") from e
        self._js, self._to_js, self._JsProxy = js, to_js, JsProxy
        self._pipelines, self.kernel_variant = pipelines, kernel_variant
        self.compiled_here = []  # kernels the worker had not compiled when asked for: compiled here
        self.device, self._queue = device, device.queue
        self._helper = run_js(_HELPER_JS)
        self._errors = js.Array.new()  # WebGPU validation errors and device loss, raised on the next read
        self._helper.watch(device, self._errors)
        info = adapter_info
        if info is None and getattr(device, "adapterInfo", None) is not None:
            a = device.adapterInfo
            info = {k: str(getattr(a, k, "") or "") for k in ("vendor", "architecture", "device", "description")}
        self.adapter_info = dict(info or {})
        self.limits = {_hyphenated(k): int(getattr(device.limits, k)) for k in _LIMITS
                       if getattr(device.limits, k, None) is not None}
        usage = js.GPUBufferUsage
        self._storage = usage.STORAGE | usage.COPY_DST | usage.COPY_SRC
        self._uniform_usage = usage.UNIFORM | usage.COPY_DST
        self._map_usage = usage.MAP_READ | usage.COPY_DST
        self._uniforms = {}  # uniform bytes -> buffer: dispatches of one kernel share theirs
        self._plans = {}  # id(list) -> (list, JS array)
        self._empty = js.Array.new()
        self._staging = StagingPool(lambda capacity: self._buffer("read-back", capacity, self._map_usage))
        self._in_flight = 0  # reads submitted and not yet collected or discarded
        self.allocated_bytes = 0

    def _object(self, d: dict):
        return self._to_js(d, dict_converter=self._js.Object.fromEntries)

    def _buffer(self, label, size, usage):
        return self.device.createBuffer(self._object({"label": label, "size": size, "usage": usage}))

    def create_buffer(self, label, size, data=None):
        size = max(4, (size + 3) // 4 * 4)
        limit = self.limits.get("max-storage-buffer-binding-size")
        if limit is not None and size > limit:
            raise RuntimeBackendError(f"buffer {label!r} needs {size} bytes, above the adapter's binding limit {limit}")
        buffer = self._buffer(label, size, self._storage)
        self.allocated_bytes += size
        if data:
            self.write_buffer(buffer, 0, data)
        return buffer

    def write_buffer(self, buffer, offset, data):
        """`data`: bytes-like (copied into a Uint8Array) or already a JS typed array (weights)."""
        self._queue.writeBuffer(buffer, offset, data if isinstance(data, self._JsProxy) else self._to_js(data))

    def kernel_ready(self, label) -> bool:
        """Whether `label` needs no compiling here: the worker compiled it (or failed to) or compiles nothing."""
        return self._pipelines is None or self._pipelines.has(label)

    def create_kernel(self, label, wgsl, entry_point):
        if self._pipelines is not None and self._pipelines.has(label):
            pipeline = self._pipelines.get(label)
            failure = getattr(pipeline, "compileError", None)  # the worker's compile failed
            if failure is not None:
                raise RuntimeBackendError(f"kernel {label} failed to compile: {failure}")
            return pipeline
        self.compiled_here.append(label)
        module = self.device.createShaderModule(self._object({"label": label, "code": wgsl}))
        return self.device.createComputePipeline(self._object(
            {"label": label, "layout": "auto", "compute": {"module": module, "entryPoint": entry_point}}))

    def create_dispatch(self, kernel, buffers, uniform, uniform_binding, grid):
        uniform = bytes(uniform)
        ubuf = self._uniforms.get(uniform)
        if ubuf is None:
            ubuf = self._uniforms[uniform] = self._buffer("uniform", max(16, len(uniform)), self._uniform_usage)
            self.write_buffer(ubuf, 0, uniform)
        x, y, z = (list(grid) + [1, 1])[:3]
        return self._helper.dispatch(self.device, kernel, self._to_js(list(buffers)), ubuf, uniform_binding, x, y, z)

    def create_copy(self, source, source_offset, target, target_offset, size):
        return self._object({"source": source, "sourceOffset": source_offset, "target": target,
                             "targetOffset": target_offset, "size": size})

    def _plan(self, dispatches):
        """The JS array of a plan; kept per list object, as the executor reuses its plan lists."""
        if not dispatches:
            return self._empty
        entry = self._plans.get(id(dispatches))
        if entry is None or entry[0] is not dispatches or entry[1].length != len(dispatches):
            entry = self._plans[id(dispatches)] = (dispatches, self._to_js(list(dispatches)))
        return entry[1]

    def submit(self, dispatches, read=None):
        if read is None:
            self._helper.encode(self.device, self._plan(dispatches), None, 0, None)
            return None
        buffer, size = read
        entry = self._staging.take(size)
        self._helper.encode(self.device, self._plan(dispatches), buffer, size, entry[1])
        self._in_flight += 1
        return entry, size

    def read_back(self, pending):
        return self._read(*pending)

    async def _read(self, entry, size):
        staging = entry[1]
        self._in_flight -= 1
        try:  # probe only when nothing queued behind this read keeps the GPU busy meanwhile
            await self._helper.mapped(self.device, staging, size, self._in_flight == 0)
        except Exception as e:  # a JsException: the device was lost or the copy failed validation
            raise RuntimeBackendError(f"reading back from the GPU failed: {self._error_text() or e}") from None
        try:
            data = self._js.Uint8Array.new(staging.getMappedRange(0, size)).to_bytes()
        finally:
            staging.unmap()
            self._staging.give(entry)
        error = self._error_text()
        if error:
            raise RuntimeBackendError(f"WebGPU reported: {error}")
        return data

    def _error_text(self) -> str:
        if not self._errors.length:
            return ""
        text = "; ".join(str(m) for m in self._errors.to_py())
        self._errors.length = 0
        return text

    def discard(self, pending):
        """A read that will not be collected: its buffer goes back to the pool, never mapped."""
        self._in_flight -= 1
        self._staging.give(pending[0])

    async def check(self):
        """Waits for the queued work, then raises what WebGPU reported (e.g. a shader that failed to compile)."""
        await self._queue.onSubmittedWorkDone()
        error = self._error_text()
        if error:
            raise RuntimeBackendError(f"WebGPU reported: {error}")

    def destroy(self):
        self.device.destroy()

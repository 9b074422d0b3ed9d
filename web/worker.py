"""The Python half of web/worker.js: builds the engine in Pyodide and answers the worker's requests.

Packed into the site's trellis.zip as the top-level module `trellis_worker`. Requests arrive and
responses leave as JSON text, so nothing crosses the JS boundary as a proxy that must be freed.
"""

import json
import time

from trellis.engine import AsyncEngine
from trellis.errors import InvalidRequestError
from trellis.model import chat_template
from trellis.runtime.artifacts import Artifacts
from trellis.runtime.backend import subgroup_size_of
from trellis.runtime.webgpu_backend import WebGPUBackend

_ERROR_FIELDS = ("field", "keyword", "pointer", "line", "column")
engine = None
# jinja2 (packed in trellis.zip by web/site.py) imported now, so that Python's memory snapshot holds it.
chat_template.environment()


def kernel_variant(files, device_json: str) -> str:
    """Which kernels the worker compiles, decided here once by the desktop's rule
    (Artifacts.variant_for) before any pipeline of a kernel that a variant replaces is compiled.
    `files`: the JS Map of the model's small files (the manifest at least); `device_json`:
    {"adapter": the adapter's vendor, architecture, device, description..., "probe": the subgroup
    probe's raw output (128 words) or null}. Returns JSON: {"value": {"adapter": the adapter's facts
    with the subgroup size the probe means, "variant": its name or null, "kernels": {kernel: its
    replacement}}} (what the worker then passes to `build`) or {"error": error record}."""
    try:
        device = json.loads(device_json)
        adapter = dict(device["adapter"])
        size = subgroup_size_of(device.get("probe"))
        if size:
            adapter["subgroup_size"] = size
        name, swaps = Artifacts(_reader(files)).variant_for(adapter)
        return json.dumps({"value": {"adapter": adapter, "variant": name, "kernels": swaps}})
    except Exception as e:
        return json.dumps({"error": error_record(e)})


def _reader(files):
    def read(name: str) -> bytes:
        data = files.get(name)
        if data is None:
            raise OSError(f"{name} was not fetched")
        return data.to_bytes()

    return read


async def build(files, device, pipelines, kernels, choice_json: str, context: int, model_id: str = "") -> str:
    """`files`: a JS Map of the model folder's files (name -> Uint8Array), sha256 already checked;
    `pipelines`: a JS Map of the kernels the worker compiles meanwhile (kernel name -> pipeline);
    `kernels`: a JS promise, settled once the decode and mask plans' kernels are in `pipelines`: the
    buffers, weights, tokenizer and grammar compiler are built before it, the plans after;
    `choice_json`: `kernel_variant`'s value (the adapter's facts and the variant the pipelines are for);
    `model_id`: the site's name for the model (its `/models/<id>/` folder), as the desktop uses the folder's name.
    Returns JSON: {"value": facts about the engine} or {"error": error record}."""
    global engine

    try:
        choice = json.loads(choice_json)
        backend = WebGPUBackend(device, choice["adapter"] or None, pipelines, kernel_variant=choice["variant"])
        # The worker verified every shard's sha256 (crypto.subtle).
        artifacts = Artifacts(_reader(files), verify=False, id=model_id or None,
                              read_shard=lambda name: _JsShard(files.get(name)))
        sizing = {"context": context} if context else {}  # else the engine's default KV cache size
        built = AsyncEngine(artifacts=artifacts, backend=backend, grammar_core="pyodide", prepare=False, **sizing)
        await kernels
        built.executor.prepare()
        await backend.check()  # shader compile errors surface here rather than at the first request
    except Exception as e:
        return json.dumps({"error": error_record(e)})
    engine = built
    m = built.executor
    return json.dumps({"value": {"model": built.model_id, "context": m.context, "vocab_size": m.vocab_size,
                                 "weight_bytes": m.weight_bytes, "dispatches_per_token": m.dispatches_per_token,
                                 "adapter": backend.adapter_info, "variant": m.variant,
                                 "kernels_compiled_in_python": backend.compiled_here,
                                 "sampling": built.sampling_defaults}})


class _JsShard:
    """A fetched weight shard (a JS Uint8Array) sliced without copying it into Python: its slices go to
    the GPU as they are (the copies into Python and back cost about 0.2 s of SmolLM2's start-up)."""

    def __init__(self, array):
        if array is None:
            raise OSError("a weight shard was not fetched")
        self.array = array

    def __len__(self) -> int:
        return self.array.length

    def __getitem__(self, part: slice):
        return self.array.subarray(part.start, part.stop)


def error_record(e: BaseException) -> dict:
    """A Python exception as the worker posts it: the type's name, its message and where."""
    record = {"name": type(e).__name__, "message": str(e)}
    for key in _ERROR_FIELDS:
        value = getattr(e, key, None)
        if value is not None:
            record[key] = value
    return record


async def request(kind: str, text: str, on_chunk) -> str:
    """Runs one request; streamed chunks go to `on_chunk(json_text)`. Returns JSON:
    {"value": completion} (null when streamed) or {"error": error record}."""
    try:
        req = json.loads(text)
        if not isinstance(req, dict):
            raise InvalidRequestError("must be an object", "request")
        face = engine.chat.completions if kind == "chat" else engine.completions
        result = await face.create(**req)
        if req.get("stream"):
            try:
                async for chunk in result:
                    on_chunk(json.dumps(chunk))
            finally:  # gives the engine's turn back even if a chunk could not be posted
                await result.aclose()
            return '{"value": null}'
        return json.dumps({"value": result})
    except Exception as e:  # every failure answers the request; the engine stays usable
        return json.dumps({"error": error_record(e)})


def interrupt() -> None:
    engine.interrupt_generate()


def reset_chat() -> None:
    engine.reset_chat()


def stats() -> str:
    return json.dumps({"text": engine.runtime_stats_text(), "stats": engine.runtime_stats()})


def validate(text: str, response_format_json: str) -> str:
    """Whether `text` is in the language of `response_format`'s grammar (a schema's whole language,
    strict mode off), through the engine's constraint service (constraints.validate: its grammar
    cached or compiled). For JSON Schema this proves the text is a JSON value the schema accepts,
    as far as the grammar is exact (keywords it cannot enforce are refused at compile time with
    UnsupportedSchemaError). Returns JSON: {"value": {"kind", "accepted", "complete", "valid",
    "grammar": "cached" | "compiled", "ms"}} ({"kind": null} for plain text) or {"error": ...}."""
    try:
        started = time.perf_counter()
        result = engine.constraints.validate(text, json.loads(response_format_json))
        if result["kind"] is not None:
            result["ms"] = (time.perf_counter() - started) * 1000
        return json.dumps({"value": result})
    except Exception as e:
        return json.dumps({"error": error_record(e)})

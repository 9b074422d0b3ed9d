"""The wasm grammar core: under wasmtime (desktop, tests) or Pyodide (browser, node).

Both copy bytes in and out of the module's linear memory through tg_alloc / tg_free. The module
is single-threaded and these transports keep scratch memory (the bitmask area) between calls:
load_core wraps them in a SerializedCore, which runs one operation at a time.
"""

from __future__ import annotations

import atexit
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..errors import TrellisError
from .abi import SIGNATURES, writable_words


class _LinearMemory:
    """Shared logic; subclasses provide _fn(name)(*args), _read(ptr, n), _write(ptr, data)."""

    mask_ptr = 0
    mask_words = 0

    def call(self, name: str, *args) -> int:
        result = self._fn(name)(*args)
        return 0 if result is None else int(result)

    def read_cstring(self, pointer: int) -> str:
        if not pointer:
            return ""
        out = bytearray()
        while True:
            chunk = self._read(pointer + len(out), 64)
            end = chunk.find(0)
            if end >= 0:
                out += chunk[:end]
                return out.decode("utf-8", "replace")
            out += chunk

    @contextmanager
    def buffers(self, *datas: bytes):
        pointers = []
        try:
            for data in datas:
                p = self.call("tg_alloc", max(1, len(data)))
                if not p:
                    raise MemoryError("grammar core: out of wasm memory")
                pointers.append(p)
                if data:
                    self._write(p, bytes(data))
            yield pointers
        finally:
            for p in pointers:
                self.call("tg_free", p)

    @contextmanager
    def output(self, capacity: int):
        with self.buffers(bytes(max(1, capacity))) as (p,):
            yield p, lambda n: self._read(p, n)

    def fill_mask(self, matcher: int, buffer, n_words: int) -> int:
        view = writable_words(buffer, n_words)
        if self.mask_words < n_words:  # one scratch area, grown on demand
            if self.mask_ptr:
                self.call("tg_free", self.mask_ptr)
            self.mask_ptr, self.mask_words = self.call("tg_alloc", 4 * n_words), n_words
        rc = self.call("tg_matcher_fill_mask", matcher, self.mask_ptr, n_words)
        if rc == 0:
            self._copy_out(self.mask_ptr, view[: 4 * n_words])
        return rc

    def _copy_out(self, pointer: int, view: memoryview) -> None:
        view[:] = self._read(pointer, len(view))


class WasmtimeTransport(_LinearMemory):
    name = "wasmtime"

    def __init__(self, path: Path):
        import wasmtime

        if not Path(path).exists():
            raise TrellisError(f"grammar wasm not built: {path} is missing; {paths.grammar_hint()}")
        self.engine = engine = wasmtime.Engine()
        self.store = wasmtime.Store(engine)
        self.store.set_wasi(wasmtime.WasiConfig())
        self.linker = linker = wasmtime.Linker(engine)
        linker.define_wasi()
        self.module = module = wasmtime.Module.from_file(engine, str(path))
        self.instance = linker.instantiate(self.store, module)
        self.exports = self.instance.exports(self.store)
        self.memory = self.exports["memory"]
        self.exports["_initialize"](self.store)
        self._fns = {}
        atexit.register(self._close)

    def _close(self):
        # Tear wasmtime down while its module globals still exist (its finalizers need them).
        self._fns.clear()
        self.exports = self.memory = self.instance = None
        for obj in (self.store, self.linker, self.module, self.engine):
            obj.close()

    def _fn(self, name):
        fn = self._fns.get(name)
        if fn is None:
            raw, store = self.exports[name], self.store
            result = SIGNATURES[name][0]

            def fn(*args):
                # wasm i32 is signed: pointers above 2 GiB cross as negative numbers.
                value = raw(store, *(a - (1 << 32) if a > 0x7FFFFFFF else a for a in args))
                return value & 0xFFFFFFFF if result == "p" and value is not None else value

            self._fns[name] = fn
        return fn

    def _read(self, pointer: int, n: int) -> bytes:
        return bytes(self.memory.read(self.store, pointer, pointer + n))

    def _write(self, pointer: int, data: bytes) -> None:
        self.memory.write(self.store, data, pointer)


class PyodideTransport(_LinearMemory):
    """Inside Pyodide: web/grammar.js instantiates the module and exposes it as
    `globalThis.trellisGrammarCore` ({exports, memory})."""

    name = "pyodide"

    def __init__(self):
        import js  # only exists under Pyodide

        core = getattr(js, "trellisGrammarCore", None)
        if core is None:
            raise TrellisError("the grammar wasm module is not loaded (web/grammar.js sets globalThis.trellisGrammarCore)")
        self.exports = core.exports
        self._js = js
        self._fns = {}
        self._view = (None, None)  # ((pointer, size), Uint8Array over the wasm memory)

    def _fn(self, name):
        fn = self._fns.get(name)
        if fn is None:
            fn = self._fns[name] = getattr(self.exports, name)
        return fn

    def _copy_out(self, pointer: int, view: memoryview) -> None:
        # One copy, straight from wasm memory into the caller's buffer, through a JS view kept for the
        # last (pointer, size): each call across to JS costs microseconds, and this runs every token.
        # Once the memory has grown, the view's buffer is detached and assign_to raises (a JS
        # TypeError): then the view is made again.
        key, js_view = self._view
        if key == (pointer, len(view)):
            try:
                js_view.assign_to(view)
                return
            except Exception:
                pass
        js_view = self._js.Uint8Array.new(self.exports.memory.buffer, pointer, len(view))
        self._view = ((pointer, len(view)), js_view)
        js_view.assign_to(view)

    def _heap(self):
        return self._js.Uint8Array.new(self.exports.memory.buffer)

    def _read(self, pointer: int, n: int) -> bytes:
        return self._heap().subarray(pointer, pointer + n).to_bytes()

    def _write(self, pointer: int, data: bytes) -> None:
        self._heap().subarray(pointer, pointer + len(data)).assign(data)

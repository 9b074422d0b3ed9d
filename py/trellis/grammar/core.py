"""Binding to the C++ grammar core (kernels/grammar), one code path over three transports:
the native library (ctypes), the wasm module under wasmtime (tests, desktop), and the wasm
module under Pyodide (browser; see web/grammar.js).

A transport only knows how to call an exported C function with integer arguments and how
to move bytes in and out of the core's memory; everything else lives in `Core`.

Threads: the native core is thread-safe (a grammar shared, a matcher per thread; its last
error is per thread), so `Core` over it takes no lock. The wasm module is single-threaded and
keeps one last error: over it, `SerializedCore` runs one operation at a time.
"""

from __future__ import annotations

import os
import threading
from array import array
from functools import partial
from pathlib import Path

from .. import paths
from ..errors import (GrammarError, GrammarLimitError, InvalidRequestError, SchemaLimitError, TrellisError,
                      VocabularyError)
from .abi import INT32_MAX, NO_COMPLETION, ErrorCode, Stat


class CoreError(TrellisError):
    """The core refused an argument (a bug in the caller, not in the grammar)."""


class CoreArgumentError(CoreError, InvalidRequestError):
    """An argument out of range (a token id outside the vocabulary, a rollback past the
    history) or one the core could not even receive (not an int, or past a C int32, which
    would silently truncate it: refused before the call); `field` names it."""


class Core:
    """The grammar core's operations over one transport."""

    def __init__(self, transport):
        self.t = transport
        self.name = transport.name

    # -- errors --
    def _raise(self, rule_names=None, positions=None, field=None):
        code = self.t.call("tg_last_error_code")
        message = self.t.read_cstring(self.t.call("tg_last_error"))
        rule = self.t.call("tg_last_error_rule")
        if code == ErrorCode.LIMIT:
            where = (positions or {}).get(rule_names[rule]) if 0 <= rule < len(rule_names or ()) else None
            if where and isinstance(where[0], str):  # a schema's rule: its keyword and pointer
                raise SchemaLimitError(message, *where)
            raise GrammarLimitError(message)
        if code in (ErrorCode.IR, ErrorCode.GRAMMAR):
            line = column = None
            if 0 <= rule < len(rule_names or ()):  # rules past the names: the core's own (regions, checks)
                name = rule_names[rule]
                message = f"rule {name!r}: {message}"
                line, column = (positions or {}).get(name, (None, None))
            raise GrammarError(message, line, column)
        if code == ErrorCode.ARGUMENT and field:
            raise CoreArgumentError(message, field)
        raise CoreError(message)

    def _checked(self, result: int, field=None) -> int:
        if result < 0:
            self._raise(field=field)
        return result

    # -- objects --
    def vocab_new(self, vocab_size: int, token_bytes: list[bytes], special_ids, stop_ids) -> int:
        # The core counts in int32: the bitmask's words, (vocab_size + 31) // 32, and byte offsets.
        if not 0 < vocab_size <= INT32_MAX - 31:
            raise VocabularyError(f"vocab_size {vocab_size} is outside the core's range [1, {INT32_MAX - 31}]")
        data = b"".join(token_bytes)
        if len(data) > INT32_MAX:
            raise VocabularyError(f"the tokens hold {len(data)} bytes, more than the core's {INT32_MAX}")
        offsets = array("i", [0])
        total = 0
        for token in token_bytes:
            total += len(token)
            offsets.append(total)
        with self.t.buffers(data, offsets.tobytes(), array("i", special_ids).tobytes(),
                            array("i", stop_ids).tobytes()) as (d, o, sp, st):
            handle = self.t.call("tg_vocab_new", vocab_size, d, o, len(token_bytes), sp,
                                 len(special_ids), st, len(stop_ids))
        if not handle:
            self._raise()
        return handle

    def grammar_compile(self, vocab: int, words: array, rule_names=None, positions=None) -> int:
        with self.t.buffers(words.tobytes()) as (w,):
            handle = self.t.call("tg_grammar_compile", vocab, w, len(words))
        if not handle:
            self._raise(rule_names, positions)
        return handle

    def grammar_compile_json_schema(self, vocab: int, text: bytes, flags: int, max_whitespace: int,
                                    unicode_version: int) -> int | None:
        """The native converter's grammar of a JSON Schema text, or None: declined, or an error,
        which the Python converter's path reports with its own message."""
        with self.t.buffers(text) as (p,):
            handle = self.t.call("tg_grammar_compile_json_schema", vocab, p, len(text), flags, max_whitespace,
                                 unicode_version)
        return handle or None

    def json_schema_top(self, text: bytes, max_depth: int, cap: int = 256) -> str | None:
        """tg_json_schema_top: the JSON text of what the dialect is decided from (the top-level
        `$schema` and `$id`), or None where the core does not read the text as such JSON."""
        with self.t.buffers(text) as (p,):
            n, data = self._sized_output(partial(self.t.call, "tg_json_schema_top", p, len(text), max_depth), cap)
        return None if n < 0 else data.decode("ascii")

    def warm(self, grammar: int, max_states: int) -> int:
        return self._checked(self.t.call("tg_grammar_warm", grammar, max_states))

    def matcher_new(self, grammar: int) -> int:
        handle = self.t.call("tg_matcher_new", grammar)
        if not handle:
            self._raise()
        return handle

    def free(self, kind: str, handle: int) -> None:
        self.t.call(f"tg_{kind}_free", handle)

    def stat(self, grammar: int, which: Stat) -> int:
        return self.t.call("tg_grammar_stat", grammar, int(which))

    # -- matching --
    def fill_mask(self, matcher: int, buffer, n_words: int) -> None:
        self._checked(self.t.fill_mask(matcher, buffer, n_words))

    def accept_token(self, matcher: int, token_id: int) -> bool:
        return self._checked(self.t.call("tg_matcher_accept_token", matcher, token_id), "token_id") == 1

    def accept_bytes(self, matcher: int, data: bytes) -> bool:
        with self.t.buffers(data) as (p,):
            return self._checked(self.t.call("tg_matcher_accept_bytes", matcher, p, len(data))) == 1

    def rollback(self, matcher: int, n: int) -> None:
        self._checked(self.t.call("tg_matcher_rollback", matcher, n), "num_tokens")

    def query(self, what: str, matcher: int) -> int:
        return self._checked(self.t.call(f"tg_matcher_{what}", matcher))

    def reset(self, matcher: int) -> None:
        self._checked(self.t.call("tg_matcher_reset", matcher))

    def jump_forward(self, matcher: int, cap: int = 4096) -> bytes:
        with self.t.output(cap) as (p, read):
            n = self._checked(self.t.call("tg_matcher_jump_forward", matcher, p, cap))
            return read(n)

    def shortest_completion(self, matcher: int, cap: int = 256) -> bytes | None:
        n, data = self._sized_output(partial(self.t.call, "tg_matcher_shortest_completion", matcher), cap)
        if n == NO_COMPLETION:
            return None
        self._checked(n)
        return data

    def _sized_output(self, call, cap: int) -> tuple[int, bytes | None]:
        """(n, the n bytes) that call(out, cap) writes, returning n: the core says how long its answer
        is, and a short buffer is asked again; (n, None) where n is negative (no answer, an error)."""
        while True:
            with self.t.output(cap) as (out, read):
                n = call(out, cap)
                if n < 0:
                    return n, None
                if n <= cap:
                    return n, read(n)
            cap = n


def release(core, kind: str, owner) -> None:
    """Frees `owner._handle` (a "vocab", "grammar" or "matcher") once; for __del__ methods."""
    handle, owner._handle = getattr(owner, "_handle", 0), 0
    if core is not None and handle:
        try:
            core.free(kind, handle)
        except Exception:  # interpreter shutdown may have torn the wasm store down first
            pass


class SerializedCore(Core):
    """A Core over a single-threaded transport (the wasm module): each operation, with the error
    it may read back, runs alone."""

    def __init__(self, transport):
        super().__init__(transport)
        self._lock = threading.RLock()


def _serialized(method):
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    run.__name__, run.__doc__ = method.__name__, method.__doc__
    return run


for _name in ("vocab_new", "grammar_compile", "grammar_compile_json_schema", "json_schema_top", "warm", "matcher_new",
              "free", "stat", "fill_mask", "accept_token", "accept_bytes", "rollback", "query", "reset",
              "jump_forward", "shortest_completion"):
    setattr(SerializedCore, _name, _serialized(getattr(Core, _name)))


def default_library_path(kind: str) -> Path:
    """The core build.py made (trellis.paths: the checkout's build/ or the wheel's package), or the
    file $TRELLIS_GRAMMAR_LIB / $TRELLIS_GRAMMAR_WASM names."""
    env = os.environ.get("TRELLIS_GRAMMAR_LIB" if kind == "native" else "TRELLIS_GRAMMAR_WASM")
    if env:
        return Path(env)
    return paths.built_file("libtrellis_grammar.so" if kind == "native" else "trellis_grammar.wasm")


_cores: dict[str, Core] = {}
_cores_lock = threading.Lock()


def load_core(kind: str = "native") -> Core:
    """The shared Core for a transport kind: "native", "wasmtime" or "pyodide"."""
    with _cores_lock:  # one core per kind, even when threads ask at once
        core = _cores.get(kind)
        if core is None:
            core = _cores[kind] = _new_core(kind)
        return core


def _new_core(kind: str) -> Core:
    if kind == "native":
        from .transport_native import NativeTransport

        return Core(NativeTransport(default_library_path("native")))
    if kind == "wasmtime":
        from .transport_wasm import WasmtimeTransport

        return SerializedCore(WasmtimeTransport(default_library_path("wasm")))
    if kind == "pyodide":
        from .transport_wasm import PyodideTransport

        return SerializedCore(PyodideTransport())
    raise ValueError(f"unknown grammar core {kind!r}: use native, wasmtime or pyodide")

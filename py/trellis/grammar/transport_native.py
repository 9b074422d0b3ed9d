"""The native grammar core through ctypes: pointers go straight to Python's buffers.

ctypes releases the GIL during each call, so threads really run the core at once; the core is
thread-safe for that (one matcher per thread, see matcher.py), and so is this transport: its
only state between calls, the last bitmask's address, is kept per thread.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from pathlib import Path

from .. import paths
from ..errors import TrellisError
from .abi import SIGNATURES, writable_words

_CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int32, "l": ctypes.c_int64, "v": None}


class NativeTransport:
    name = "native"

    def __init__(self, path: Path):
        if not Path(path).exists():
            raise TrellisError(f"grammar core not built: {path} is missing; {paths.grammar_hint()}")
        self.lib = ctypes.CDLL(str(path))
        self.fns = {}
        for name, (result, params) in SIGNATURES.items():
            fn = getattr(self.lib, name)
            fn.restype = _CTYPES[result]
            fn.argtypes = [_CTYPES[k] for k in params]
            self.fns[name] = fn
        self._fill = self.fns["tg_matcher_fill_mask"]
        self._local = threading.local()

    def call(self, name: str, *args) -> int:
        result = self.fns[name](*args)
        return 0 if result is None else result

    def read_cstring(self, pointer: int) -> str:
        return ctypes.string_at(pointer).decode("utf-8", "replace") if pointer else ""

    @contextmanager
    def buffers(self, *datas: bytes):
        # The core only reads these (const pointers): the bytes objects' own memory, no copy (a
        # copy into a buffer of a new size made a ctypes array type: 10 us of each compile).
        keep = [ctypes.c_char_p(bytes(d)) for d in datas]
        yield [ctypes.cast(p, ctypes.c_void_p).value for p in keep]

    @contextmanager
    def output(self, capacity: int):
        buf = ctypes.create_string_buffer(max(1, capacity))
        yield ctypes.addressof(buf), lambda n: buf.raw[:n]

    def fill_mask(self, matcher: int, buffer, n_words: int) -> int:
        # Decoding reuses one bitmask buffer: resolve its address once, not per token. The
        # buffer, its address, its size in words and a keep-alive view are one tuple, read and
        # replaced whole, per thread: threads with buffers of their own never see each other's.
        local = self._local
        last = getattr(local, "last", None)
        if last is None or last[0] is not buffer or n_words > last[2]:
            view = writable_words(buffer, n_words)
            keep = (ctypes.c_char * view.nbytes).from_buffer(view)
            last = local.last = (buffer, ctypes.addressof(keep), view.nbytes // 4, keep)
        return self._fill(matcher, last[1], n_words)


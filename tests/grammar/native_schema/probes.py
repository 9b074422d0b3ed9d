"""The test probes of this folder (probe.cpp, text_probe.cpp, numbers_probe.cpp, regex_probe.cpp), built with the
native schema port's sources into one shared library (building.py); probe.cpp's called here."""

from __future__ import annotations

import ctypes
import functools
import json
from pathlib import Path

from .building import shared_library

HERE = Path(__file__).resolve().parent
PROBES = [HERE / name for name in ("probe.cpp", "text_probe.cpp", "numbers_probe.cpp", "regex_probe.cpp")]


@functools.lru_cache(maxsize=None)  # one library for the test run
def library() -> ctypes.CDLL:
    """Every probe of this folder in one library (one build)."""
    lib = ctypes.CDLL(str(shared_library("probe", PROBES)))
    lib.probe_free.argtypes = [ctypes.c_void_p]
    lib.probe_refs.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.probe_convert.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    for fn in (lib.probe_refs, lib.probe_convert):
        fn.restype = ctypes.c_void_p
    return lib


def taken(p: int):
    """The JSON a probe answered (text it allocated), its memory freed."""
    try:
        return json.loads(ctypes.string_at(p).decode())
    finally:
        library().probe_free(p)


class Probes:
    def __init__(self):
        self.lib = library()

    def _call(self, name: str, text: str, *args):
        data = text.encode("utf-8", "surrogatepass")
        return taken(getattr(self.lib, name)(data, len(data), *args))

    def refs(self, text: str) -> dict:
        return self._call("probe_refs", text)

    def convert(self, text: bytes, flags: int, max_whitespace: int, unicode_version: int) -> dict:
        """probe_convert of a native.request's (text, flags, max_whitespace, unicode_version)."""
        return taken(self.lib.probe_convert(text, len(text), flags, max_whitespace, unicode_version))

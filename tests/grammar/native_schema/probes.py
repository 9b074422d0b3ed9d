"""Builds tests/grammar/native_schema/probe.cpp with the native schema port's sources into a
shared library (under build/, rebuilt when a source changes) and calls its probes."""

from __future__ import annotations

import ctypes
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_SRC = ROOT / "kernels" / "grammar" / "src" / "schema"
PROBE = Path(__file__).with_name("probe.cpp")
OUT = ROOT / "build" / "native_schema" / "libprobe.so"
SOURCES = ("json.cpp", "refs.cpp", "ir_build.cpp", "text.cpp", "numbers.cpp", "converter.cpp")


def library() -> ctypes.CDLL:
    sources = [PROBE, *(SCHEMA_SRC / name for name in SOURCES)]
    cmd = [sys.executable, "-m", "ziglang", "c++", "-std=c++17", "-O1", "-fno-exceptions", "-fno-rtti", "-Wall",
           "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(OUT), *map(str, sources)]
    h = hashlib.sha256(" ".join(cmd).encode())
    for p in sorted([*sources, *SCHEMA_SRC.glob("*.h"), ROOT / "kernels" / "grammar" / "src" / "status.h"]):
        h.update(p.read_bytes())
    stamp = OUT.with_suffix(".stamp")
    if not (OUT.exists() and stamp.exists() and stamp.read_text() == h.hexdigest()):
        OUT.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmd, check=True)
        stamp.write_text(h.hexdigest())
    lib = ctypes.CDLL(str(OUT))
    lib.probe_free.argtypes = [ctypes.c_void_p]
    lib.probe_refs.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.probe_convert.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    for fn in (lib.probe_refs, lib.probe_convert):
        fn.restype = ctypes.c_void_p
    return lib


class Probes:
    def __init__(self):
        self.lib = library()

    def _call(self, name: str, text: str, *args):
        data = text.encode("utf-8", "surrogatepass")
        p = getattr(self.lib, name)(data, len(data), *args)
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            self.lib.probe_free(p)

    def refs(self, text: str) -> dict:
        return self._call("probe_refs", text)

    def convert(self, text: bytes, flags: int, max_whitespace: int) -> dict:
        """probe_convert of a native.request's (text, flags, max_whitespace)."""
        p = self.lib.probe_convert(text, len(text), flags, max_whitespace)
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            self.lib.probe_free(p)

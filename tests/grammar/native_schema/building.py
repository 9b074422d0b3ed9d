"""Builds the native schema port's test drivers and probe libraries with the zig toolchain (as
build.py builds the core), under build/native_schema, again only when a source or the command
changed. The port's wasm build is the core module's (build.py), which holds these sources."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "kernels" / "grammar" / "src"
SCHEMA = SRC / "schema"
OUT = ROOT / "build" / "native_schema"
FLAGS = ["-std=c++17", "-O2", "-fno-exceptions", "-fno-rtti", "-Wall", "-Wextra", "-Werror"]
HEADERS = [*SCHEMA.glob("*.h"), SRC / "ir.h", SRC / "status.h", SRC / "checks.h"]


def zig_build(out: Path, args: list, inputs: list) -> Path:
    """`python -m ziglang c++ FLAGS args -o out`, unless `out` was built by this very command
    from these very inputs (every header of the port counts too)."""
    cmd = [sys.executable, "-m", "ziglang", "c++", *FLAGS, *map(str, args), "-o", str(out)]
    digest = hashlib.sha256("\0".join(cmd).encode())
    for path in sorted({*map(Path, inputs), *HEADERS}):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    stamp = out.with_name(out.name + ".stamp")
    if out.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("TRELLIS_CACHE", Path.home() / ".cache" / "trellis")) / "zig"
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    stamp.write_text(digest.hexdigest())
    return out


NATIVE = ROOT / "build" / "grammar" / "native" / "libtrellis_grammar.so"  # build.py's


def shared_library(name: str, probes: list) -> Path:
    """Test probes linked against the native grammar library (which exports the port's C++
    functions): the port as built and shipped, and no second compile of its sources (a serial
    zig build, over a minute of CI)."""
    assert NATIVE.exists(), f"{NATIVE.relative_to(ROOT)} is not built (python3 build.py grammar)"
    lib = NATIVE.parent
    return zig_build(OUT / f"lib{name}.so", ["-shared", "-fPIC", "-I", SRC, *probes, f"-L{lib}",
                                             "-ltrellis_grammar", f"-Wl,-rpath,{lib}"], [*probes, NATIVE])

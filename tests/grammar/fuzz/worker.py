"""The worker process: reads cases from stdin, compiles and walks each, writes one outcome each.

Messages both ways are a 4-byte little-endian length and a pickle. The worker says "ready"
once the vocabulary is loaded (so that start-up never counts against a case's time bound).
Before each case it arms faulthandler: a crash prints the Python stack to stderr, and so does
a case about to overrun its time bound, which is how the pool locates hangs and crashes.
"""

from __future__ import annotations

import collections
import contextlib
import faulthandler
import os
import pickle
import resource
import struct
import sys
import time
import traceback


@contextlib.contextmanager
def deep_recursion():
    """Pickling a payload nested thousands deep needs more than the default limit; the limit
    is back to normal before the case runs (trellis must cope with the default)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 60000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def read_message(stream):
    header = stream.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack("<I", header)
    data = stream.read(size)
    with deep_recursion():
        return pickle.loads(data)


def write_message(stream, message) -> None:
    with deep_recursion():
        data = pickle.dumps(message)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def limit_memory(megabytes: int) -> None:
    """RLIMIT_AS, except under AddressSanitizer (its shadow memory reserves terabytes)."""
    if megabytes > 0 and "asan" not in os.environ.get("LD_PRELOAD", ""):
        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))


def location(exc: BaseException) -> str:
    """Where an exception comes from: the innermost frame in trellis (else the innermost), as
    path:function:line; for a RecursionError, the function most often on the stack."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/trellis/" in f.filename] or frames
    if not ours:
        return "?"
    if isinstance(exc, RecursionError):
        counts = collections.Counter((short_path(f.filename), f.name) for f in ours[-200:])
        (path, name), _ = counts.most_common(1)[0]
        return f"{path}:{name} (recursion)"
    f = ours[-1]
    return f"{short_path(f.filename)}:{f.name}:{f.lineno}"


def short_path(filename: str) -> str:
    for marker in ("/py/trellis/", "/trellis/", "/tests/"):
        if marker in filename:
            return marker.strip("/").split("/")[-1] + "/" + filename.split(marker, 1)[1]
    return os.path.basename(filename)


def error_outcome(status: str, phase: str, exc: BaseException) -> dict:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return {"status": status, "phase": phase, "error_type": type(exc).__name__,
            "message": str(exc)[:400], "location": location(exc), "traceback": tail[-3000:]}


def run_case(compiler, walker, case, max_steps: int) -> dict:
    from tests.grammar.fuzz.cases import compile_case
    from tests.grammar.fuzz.walk import Disagreement
    from trellis.errors import TrellisError

    started = time.perf_counter()
    try:
        compiled = compile_case(compiler, case)
    except TrellisError as e:
        return {"status": "typed", "phase": "compile", "error_type": type(e).__name__, "message": str(e)[:200]}
    except MemoryError as e:
        return error_outcome("memory", "compile", e)
    except Exception as e:  # noqa: BLE001 - anything else is a finding
        return error_outcome("untyped", "compile", e)
    compile_s = time.perf_counter() - started
    if compiled is None or max_steps <= 0:
        return {"status": "compiled", "compile_s": compile_s, "walk": None}
    try:
        stats = walker.walk(compiled, case.walk_seed, max_steps, case.kind,
                            schema=case.payload if case.kind == "json_schema" else None, options=case.options)
    except Disagreement as e:
        return {"status": "disagreement", "phase": "walk", "check": e.check, "message": e.detail[:600],
                "error_type": "Disagreement", "location": e.check}
    except TrellisError as e:  # a limit met while walking: typed, so allowed
        return {"status": "compiled", "compile_s": compile_s, "walk_error": type(e).__name__, "walk": None}
    except MemoryError as e:
        return error_outcome("memory", "walk", e)
    except Exception as e:  # noqa: BLE001
        return error_outcome("untyped", "walk", e)
    return {"status": "compiled", "compile_s": compile_s, "walk": stats}


def main() -> None:
    limit_memory(int(os.environ.get("TRELLIS_FUZZ_MEMORY_MB", "4096")))
    faulthandler.enable(file=sys.stderr)
    import jsonschema  # noqa: F401 - imported once here, not inside the first case's time bound

    from tests.grammar.fuzz.cases import load_vocabulary
    from tests.grammar.fuzz.walk import Walker
    from trellis.grammar import GrammarCompiler

    vocab = load_vocabulary()
    compiler, walker = GrammarCompiler(vocab), Walker(vocab)
    # The protocol gets its own copy of fd 1; anything else written to stdout (Python or C)
    # goes to stderr, where it cannot corrupt a message.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    write_message(stdout, "ready")
    while True:
        request = read_message(stdin)
        if request is None:
            break
        case, max_steps, timeout_s = request
        # A stack dump just before the pool's deadline says where a hang spends its time.
        faulthandler.dump_traceback_later(max(timeout_s - 0.5, 0.1), file=sys.stderr)
        outcome = run_case(compiler, walker, case, max_steps)
        faulthandler.cancel_dump_traceback_later()
        write_message(stdout, outcome)
    os._exit(0)  # skip interpreter teardown (ctypes finalizers racing module cleanup)


if __name__ == "__main__":
    main()

"""The edges of the C ABI: running out of memory, integers the core's int32 cannot hold, and
the named statistics.

Out of memory: a child process lowers its address-space limit (RLIMIT_AS) just before a call
that needs more, so the core's allocation fails for real. The core must report it as an error
(GrammarLimitError naming memory), not abort, and stay usable once the limit is lifted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trellis.errors import GrammarLimitError, InvalidRequestError, TrellisError, VocabularyError
from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.abi import Stat
from trellis.grammar.core import CoreArgumentError, CoreError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc/self/status")

TOKENS = [b"", b"a", b"b", b"ab", b"[", b'"', b"]", b'"]']
STOP = 0


def small_compiler() -> GrammarCompiler:
    return GrammarCompiler(Vocabulary.from_token_bytes(TOKENS, special_ids=(STOP,), stop_ids=(STOP,)))


# ---- out of memory, in a child process ------------------------------------------------------


def address_space() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def under_memory_limit(headroom: int, call):
    """call() with only `headroom` more bytes of address space; returns what it raised (or None)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (address_space() + headroom, hard))
    try:
        call()
    except TrellisError as e:
        return e
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return None


def child_compile() -> dict:
    """A DFA of 65,662 states with 16 MiB to spare: three runs of bytes leave each (a, b, c:
    two runs would need no row), its rows are as wide as its byte classes, and the alternatives
    of two equal bytes make about 250 of them (a 64 MiB transition table)."""
    compiler = small_compiler()
    wide = "|".join(f"\\x{b:02x}\\x{b:02x}" for b in range(1, 0x80) if chr(b) not in "abc")
    error = under_memory_limit(16 << 20, lambda: compiler.compile_regex(f"[a-c]*b[a-c]{{15}}|{wide}"))
    after = GrammarMatcher(compiler.compile_regex("[ab]*a[ab]{3}"))  # the core goes on working
    return {"error": type(error).__name__, "message": str(error),
            "after": after.accept_string("bbabab") and after.can_terminate()}


def child_walk() -> dict:
    """A string of 64 MiB in an array with uniqueItems (its checks keep all the text) with 80 MiB
    to spare: the copy into the call takes 64 of them, the matcher's text outgrows the rest."""
    compiler = small_compiler()
    matcher = GrammarMatcher(compiler.compile_json_schema({"type": "array", "uniqueItems": True,
                                                           "items": {"type": "string"}}))
    assert matcher.accept_string('["')
    big = b"a" * (64 << 20)
    error = under_memory_limit(80 << 20, lambda: matcher.accept_string(big))
    del big
    refused = None
    try:
        matcher.allowed_tokens()
    except TrellisError as e:
        refused = f"{type(e).__name__}: {e}"
    matcher.reset()
    return {"error": type(error).__name__, "message": str(error), "refused": refused,
            "after": matcher.accept_string('["ab"]') and matcher.can_terminate()}


def run_child(which: str) -> dict:
    import trellis

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(trellis.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, __file__, which], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, f"child died (rc {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_out_of_memory_while_compiling_is_a_limit_error():
    got = run_child("compile")
    assert got["error"] == "GrammarLimitError" and "memory" in got["message"]
    assert got["after"]


def test_out_of_memory_in_a_matcher_is_a_limit_error_until_reset():
    got = run_child("walk")
    assert got["error"] == "GrammarLimitError" and "memory" in got["message"]
    assert got["refused"].startswith("GrammarLimitError") and "reset" in got["refused"]
    assert got["after"]


# ---- integers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiler():
    return small_compiler()


def token(text: bytes) -> int:
    return TOKENS.index(text)


@pytest.mark.parametrize("bad", [2**32 + 1, -1, len(TOKENS), 2**31, -(2**32) + 1, True, 1.0, "1", None])
def test_a_token_id_out_of_range_or_not_an_int_is_refused(compiler, bad):
    m = GrammarMatcher(compiler.compile_regex("(a|b)+"))
    with pytest.raises(CoreArgumentError) as raised:
        m.accept_token(bad)
    assert isinstance(raised.value, InvalidRequestError) and isinstance(raised.value, ValueError)
    assert raised.value.field == "token_id"
    assert m.history_length == 0  # nothing was accepted, truncated or not


def test_numpy_token_ids_are_ints(compiler):
    m = GrammarMatcher(compiler.compile_regex("(a|b)+"))
    assert m.accept_token(np.int64(token(b"a"))) and m.accept_token(np.uint16(token(b"ab")))
    assert not m.accept_token(np.int32(token(b"[")))
    assert m.history_length == 2


@pytest.mark.parametrize("bad", [2**32, 2**32 + 1, -1, 3, True, 1.5])
def test_a_rollback_count_out_of_range_or_not_an_int_is_refused(compiler, bad):
    m = GrammarMatcher(compiler.compile_regex("(a|b)+"))
    assert m.accept_token(token(b"a")) and m.accept_token(token(b"b"))
    with pytest.raises(CoreArgumentError) as raised:
        m.rollback(bad)
    assert raised.value.field == "num_tokens" and isinstance(raised.value, CoreError)
    assert m.history_length == 2
    m.rollback(np.int8(2))
    assert m.history_length == 0


def test_warm_takes_any_int_and_past_int32_means_all(compiler):
    grammar = compiler.compile_builtin_json()
    assert grammar.warm(2**32 + 1) > 1  # not truncated to 1
    assert grammar.warm(-(2**40)) == 0  # all were built
    with pytest.raises(CoreArgumentError):
        grammar.warm(2.0)


def test_a_vocabulary_past_the_cores_int32_is_refused(compiler):
    with pytest.raises(VocabularyError, match="vocab_size"):
        compiler.core.vocab_new(2**31, [b"a"], [], [])


# ---- statistics ------------------------------------------------------------------------------


def test_named_statistics(compiler):
    grammar = compiler.compile_grammar('root ::= "a" b\nb ::= "b" | "b" b')
    core, handle = compiler.core, grammar._handle
    assert core.stat(handle, Stat.RULES) == grammar.stats()["rules"] >= 1
    assert core.stat(handle, Stat.STATES) == grammar.stats()["states"] > 0
    assert core.stat(handle, Stat.MASK_CACHES) == 0
    m = GrammarMatcher(grammar)
    assert m.allowed_tokens() == [token(b"a"), token(b"ab")]
    assert core.stat(handle, Stat.MASK_CACHES) == grammar.stats()["mask_caches"] == 1
    assert core.stat(handle, Stat.EMPTY) == 0 and not grammar.is_empty
    assert compiler.compile_grammar('root ::= "x" root').is_empty


if __name__ == "__main__":
    print(json.dumps({"compile": child_compile, "walk": child_walk}[sys.argv[1]]()))

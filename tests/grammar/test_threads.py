"""One compiled grammar shared by many threads, each with its own matcher.

Eight threads do random walks at once on one freshly compiled grammar, so its lazily built
token-mask caches are built concurrently (ctypes releases the GIL: the core really runs in
parallel). Each walk checks its masks against the matcher itself (the token picked from the
mask is accepted, a token outside it is refused) and records a digest of every mask; the same
walks are then replayed one at a time on another fresh grammar, whose masks must be the same.
A data race shows as a crash, as a mask that disagrees with accept_token, or as a mask that
differs from the single-threaded one.

The walks run in a child process, so a crash fails the test instead of killing pytest. The
library under test is the one the core loader finds (TRELLIS_GRAMMAR_LIB overrides it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

THREADS = 8
STEPS = 48
ROUNDS = 6  # fresh grammars per kind: each starts with every cache cold

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "uniqueItems": True, "items": {"anyOf": [
            {"type": "integer"},
            {"type": "object", "properties": {
                "k": {"type": "string"},
                "v": {"anyOf": [{"type": "number"}, {"type": "boolean"}, {"type": "null"}]},
            }, "required": ["k"]},
        ]}},
        "child": {"type": "object", "properties": {
            "id": {"type": "integer"},
            "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        }, "required": ["id"]},
    },
    "required": ["name", "child"],
}

EBNF = r"""
root   ::= expr
expr   ::= term (ws ("+" | "-") ws term)*
term   ::= factor (ws ("*" | "/") ws factor)*
factor ::= number | string | "(" ws expr ws ")" | "[" ws (expr (ws "," ws expr)*)? ws "]" | call
call   ::= ("min" | "max" | "len" | "concat" | name) "(" ws (expr (ws "," ws expr)*)? ws ")"
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?
string ::= "\"" ([^"\\] | "\\" ["\\nt])* "\""
name   ::= [a-z_] [a-z_0-9]*
ws     ::= [ \t\n]*
"""

GRAMMARS = ("builtin_json", "json_schema", "ebnf")


# ---- the child process ------------------------------------------------------------------


def compile_kind(compiler, kind: str):
    if kind == "builtin_json":
        return compiler.compile_builtin_json()
    if kind == "json_schema":
        return compiler.compile_json_schema(SCHEMA)
    return compiler.compile_grammar(EBNF)


def allowed_ids(mask) -> list[int]:
    import numpy as np

    bits = np.unpackbits(np.frombuffer(mask, dtype=np.uint8), bitorder="little")
    return np.flatnonzero(bits).tolist()


def random_walk(grammar, seed: int, start: threading.Barrier | None):
    """Ops [("accept", id) | ("rollback", n) | ("reset",)], the digest of the mask before each op,
    and the disagreements met between masks and accept_token."""
    from trellis.grammar import GrammarMatcher

    rng = random.Random(seed)
    matcher = GrammarMatcher(grammar)
    mask = matcher.new_bitmask()
    vocab_size = grammar.vocab.vocab_size
    ops, digests, problems = [], [], []
    if start is not None:
        start.wait()
    for step in range(STEPS):
        matcher.fill_next_token_bitmask(mask)
        digests.append(hashlib.sha256(mask.tobytes()).hexdigest()[:16])
        allowed = allowed_ids(mask)
        history = matcher.history_length
        if not allowed or (history and rng.random() < 0.15):
            op = ("rollback", rng.randint(1, min(3, history))) if history else ("reset",)
        else:
            refused = rng.randrange(vocab_size)
            if not mask[refused >> 5] >> (refused & 31) & 1 and matcher.accept_token(refused):
                problems.append(f"step {step}: token {refused} is outside the mask but accepted")
                break
            op = ("accept", rng.choice(allowed))
        if op[0] == "accept" and not matcher.accept_token(op[1]):
            problems.append(f"step {step}: token {op[1]} is in the mask but refused")
            break
        if op[0] == "rollback":
            matcher.rollback(op[1])
        elif op[0] == "reset":
            matcher.reset()
        ops.append(op)
    return ops, digests, problems


def replay(grammar, ops) -> list[str]:
    """The mask digests of `ops` on one matcher, alone."""
    from trellis.grammar import GrammarMatcher

    matcher = GrammarMatcher(grammar)
    mask = matcher.new_bitmask()
    digests = []
    for op in ops:
        matcher.fill_next_token_bitmask(mask)
        digests.append(hashlib.sha256(mask.tobytes()).hexdigest()[:16])
        if op[0] == "accept":
            matcher.accept_token(op[1])
        elif op[0] == "rollback":
            matcher.rollback(op[1])
        else:
            matcher.reset()
    if len(ops) < STEPS:  # the walk stopped on a disagreement: its last mask too
        matcher.fill_next_token_bitmask(mask)
        digests.append(hashlib.sha256(mask.tobytes()).hexdigest()[:16])
    return digests


def concurrent_walks(compiler, kind: str, seed: int) -> list[str]:
    grammar = compile_kind(compiler, kind)
    start = threading.Barrier(THREADS)
    results: list = [None] * THREADS

    def run(i: int) -> None:
        try:
            results[i] = random_walk(grammar, seed * 100 + i, start)
        except Exception as e:  # reported, not lost in the thread
            results[i] = ([], [], [f"thread {i} raised {type(e).__name__}: {e}"])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    problems = [f"{kind} thread {i}: {p}" for i, (_, _, ps) in enumerate(results) for p in ps]
    alone = compile_kind(compiler, kind)  # a second fresh grammar, used by one thread only
    for i, (ops, digests, _) in enumerate(results):
        if digests and replay(alone, ops) != digests:
            problems.append(f"{kind} thread {i}: masks differ from the single-threaded replay")
    return problems


def errors_per_thread() -> list[str]:
    """Threads that make the core fail at once, each its own way, must each read back their own
    error (the core keeps the last error per thread)."""
    from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
    from trellis.grammar.core import CoreError

    compiler = GrammarCompiler(Vocabulary.from_token_bytes([b"", b"a"], special_ids=(0,), stop_ids=(0,)))
    grammar = compiler.compile_regex("a*")
    start = threading.Barrier(THREADS)
    problems: list[str] = []

    def run(i: int) -> None:
        matcher = GrammarMatcher(grammar)
        start.wait()
        for _ in range(2000):
            steps = 1000 + i  # past the history: the core refuses, naming the count
            try:
                compiler.core.rollback(matcher._handle, steps)
                problems.append(f"thread {i}: rollback({steps}) was not refused")
            except CoreError as e:
                if f"roll back {steps} steps" not in str(e):
                    problems.append(f"thread {i}: read another thread's error: {e}")
                    return

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return problems


def child_main(kind: str) -> int:
    if kind == "errors":
        print(json.dumps(errors_per_thread()))
        return 0
    from trellis.grammar import GrammarCompiler, Vocabulary

    compiler = GrammarCompiler(Vocabulary.smollm2(), core="native")
    problems = []
    for round_ in range(ROUNDS):
        problems += concurrent_walks(compiler, kind, round_ + 1)
    print(json.dumps(problems))
    return 0


# ---- the test -----------------------------------------------------------------------------


def run_child(kind: str) -> subprocess.CompletedProcess:
    import trellis

    env = dict(os.environ)
    package_root = str(Path(trellis.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, __file__, kind], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("kind", GRAMMARS)
def test_one_grammar_shared_by_eight_threads(kind):
    done = run_child(kind)
    assert done.returncode == 0, f"child died (rc {done.returncode}):\n{done.stderr[-3000:]}"
    problems = json.loads(done.stdout.strip().splitlines()[-1])
    assert problems == []


def test_each_thread_reads_its_own_last_error():
    done = run_child("errors")
    assert done.returncode == 0, f"child died (rc {done.returncode}):\n{done.stderr[-3000:]}"
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))

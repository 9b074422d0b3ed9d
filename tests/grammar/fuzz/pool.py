"""Persistent worker processes with a time bound per case.

A worker that dies (a signal, or an exit such as AddressSanitizer's) or overruns its case's
time bound is recorded as a crash or a hang, with the tail of its stderr (faulthandler's Python
stack, a sanitizer report), and replaced by a fresh one when next needed.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.grammar.fuzz.worker import read_message, write_message

ROOT = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT_S = 120.0


class _Worker:
    def __init__(self, env: dict):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.grammar.fuzz.worker"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.job = None  # (case, callback, deadline, stderr offset, timeout_s)
        ready = self._read_within(STARTUP_TIMEOUT_S)
        if ready != "ready":
            self.kill()
            raise RuntimeError(f"the fuzz worker did not start: {self.stderr_tail(0)[-2000:]}")

    def _read_within(self, seconds: float):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(seconds)
        sel.close()
        return read_message(self.proc.stdout) if ready else None

    def send(self, case, max_steps: int, timeout_s: float, callback) -> None:
        self.stderr.seek(0, os.SEEK_END)
        self.job = (case, callback, time.monotonic() + timeout_s, self.stderr.tell(), timeout_s)
        write_message(self.proc.stdin, (case, max_steps, timeout_s))

    def stderr_tail(self, offset: int) -> str:
        self.stderr.seek(offset)
        return self.stderr.read()[-6000:].decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self.stderr.close()


class WorkerPool:
    """`size` workers; `submit` hands a case to a free one (waiting if all are busy) and calls
    `callback(case, outcome)` when it is done; `run` does one case and returns its outcome."""

    def __init__(self, size: int = 2, timeout_s: float = 10.0, memory_mb: int = 4096, max_steps: int = 64):
        self.size, self.timeout_s, self.max_steps = size, timeout_s, max_steps
        py = str(ROOT / "py")
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([py, str(ROOT), os.environ.get("PYTHONPATH", "")]),
                    "TRELLIS_FUZZ_MEMORY_MB": str(memory_mb), "OPENBLAS_NUM_THREADS": "1",
                    "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
        self.workers: list[_Worker] = []
        self.restarts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def submit(self, case, callback, *, max_steps: int | None = None, timeout_s: float | None = None) -> None:
        while True:
            idle = next((w for w in self.workers if w.job is None), None)
            if idle is None and len(self.workers) < self.size:
                idle = _Worker(self.env)
                self.workers.append(idle)
            if idle is not None:
                break
            self.poll(1.0)
        idle.send(case, self.max_steps if max_steps is None else max_steps,
                  self.timeout_s if timeout_s is None else timeout_s, callback)

    def run(self, case, **kw) -> dict:
        box = []
        self.submit(case, lambda _case, outcome: box.append(outcome), **kw)
        while not box:
            self.poll(1.0)
        return box[0]

    def drain(self) -> None:
        while any(w.job for w in self.workers):
            self.poll(1.0)

    def poll(self, wait_s: float) -> None:
        """Wait up to `wait_s` for busy workers; finish the cases that are done or overdue."""
        busy = [w for w in self.workers if w.job]
        if not busy:
            return
        now = time.monotonic()
        wait = max(0.0, min([wait_s] + [w.job[2] - now for w in busy]))
        sel = selectors.DefaultSelector()
        for w in busy:
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        ready = {key.data for key, _ in sel.select(wait)}
        sel.close()
        now = time.monotonic()
        for w in busy:
            if w in ready:
                self._finish(w, self._receive(w))
            elif now >= w.job[2]:
                w.kill()
                self._finish(w, {"status": "hang", "phase": "?", "seconds": w.job[4],
                                 "stderr": w.stderr_tail(w.job[3])})

    def _receive(self, w: _Worker) -> dict:
        try:
            outcome = read_message(w.proc.stdout)
        except Exception:  # noqa: BLE001 - a message cut short by the worker's death
            outcome = None
        if outcome is not None:
            return outcome
        code = w.proc.wait()
        cause = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return {"status": "crash", "phase": "?", "cause": cause, "stderr": w.stderr_tail(w.job[3])}

    def _finish(self, w: _Worker, outcome: dict) -> None:
        case, callback = w.job[0], w.job[1]
        w.job = None
        if outcome["status"] in ("crash", "hang"):
            outcome.update(locate(outcome["stderr"]))
            w.close()
            self.workers.remove(w)
            self.restarts += 1
        callback(case, outcome)

    def close(self) -> None:
        for w in self.workers:
            if w.job:
                w.kill()
            w.close()
        self.workers.clear()


_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')
_SANITIZER = re.compile(r"(?:ERROR: AddressSanitizer: [\w-]+|runtime error: [^\n]{0,80}|SUMMARY: \w+Sanitizer: [^\n]+)")


def locate(stderr: str) -> dict:
    """Where a dead or stuck worker was: the sanitizer's summary when there is one, and the
    innermost trellis frame of the last Python stack faulthandler printed (most recent first)."""
    from tests.grammar.fuzz.worker import short_path

    found = {}
    sanitizer = _SANITIZER.findall(stderr)
    if sanitizer:
        found["sanitizer"] = sanitizer[-1]
    marker = "(most recent call first):"
    last_stack = stderr.rsplit(marker, 1)[-1] if marker in stderr else ""
    frames = _FRAME.findall(last_stack)
    # the transports only pass calls through: the core's verb above them says more
    ours = [(path, line, func) for path, line, func in frames if "/trellis/" in path and "/transport_" not in path]
    if ours:
        path, line, func = ours[0]
        found["location"] = f"{short_path(path)}:{func}:{line}"
    if frames:
        found["phase"] = "walk" if any(path.endswith("fuzz/walk.py") for path, _, _ in frames) else "compile"
    return found

"""The engine on its own thread. The model's state (KV cache, executor) serves one job at a time
and the desktop backend is synchronous, so one worker thread loads the engine and runs the jobs,
first in first out; at most `max_queue` wait. The event loop hands a Ticket over and reads its
events back from an asyncio queue; a cancelled ticket leaves the queue at once, or stops its job
at the next token if it is running."""

from __future__ import annotations

import asyncio
import collections
import inspect
import threading
import traceback

from trellis.engine.faces import drive, iterate
from trellis.errors import TrellisError


class QueueFullError(TrellisError):
    """The server's queue of waiting requests is full (HTTP 429)."""


class Ticket:
    """One job handed to the worker: `source` is what the face's `start` gave (an async iterator of
    chunks, or events to collect into a response). Its events, read on the event loop:
    ("chunk", record)..., or ("result", record), or ("error", exception), then ("end", None)."""

    def __init__(self, job, source, collect, loop: asyncio.AbstractEventLoop):
        self.job, self.source, self._collect, self._loop = job, source, collect, loop
        self.events: asyncio.Queue = asyncio.Queue()
        self.ended = False

    def run(self) -> None:
        """On the worker thread: the job to its end (never suspends on the desktop backend)."""
        try:
            if self.job.cancellation.requested:  # its client left while it waited
                self._close()
            elif inspect.isasyncgen(self.source):
                for chunk in iterate(self.source):
                    self._post("chunk", chunk)
            else:
                self._post("result", drive(self._collect(self.job, self.source)))
        except Exception as e:  # the handler shapes it into an error object
            if not isinstance(e, TrellisError):
                traceback.print_exc()
            self._post("error", e)
        finally:
            self.ended = True
            self._post("end", None)

    def skip(self) -> None:
        """Never to run (cancelled while waiting, or refused): close its generators."""
        self._close()
        self.ended = True
        self._post("end", None)

    def _close(self) -> None:
        if inspect.isasyncgen(self.source):
            drive(self.source.aclose())

    def _post(self, kind: str, value) -> None:
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is gone (the server is stopping)
            pass


class EngineWorker:
    """Loads the engine (`load()`), then runs tickets one at a time on one thread."""

    def __init__(self, load, max_queue: int = 64):
        self.engine = None
        self.load_error: BaseException | None = None
        self.max_queue = max_queue
        self.running: Ticket | None = None
        self.served = 0  # jobs run to their end
        self.cancelled = 0  # jobs stopped or dropped because their client left
        self._load = load
        self._waiting: collections.deque[Ticket] = collections.deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name="trellis-engine", daemon=True)
        self.loaded = threading.Event()  # set when the engine is ready or failed to load

    def start(self) -> None:
        self._thread.start()

    @property
    def ready(self) -> bool:
        return self.engine is not None

    def status(self) -> dict:
        with self._cv:
            return {"running": int(self.running is not None), "waiting": len(self._waiting),
                    "max_queue": self.max_queue, "served": self.served, "cancelled": self.cancelled}

    def submit(self, ticket: Ticket) -> None:
        with self._cv:
            if len(self._waiting) >= self.max_queue:
                raise QueueFullError(f"the server's queue is full ({self.max_queue} requests waiting); retry later")
            self._waiting.append(ticket)
            self._cv.notify()

    def cancel(self, ticket: Ticket) -> None:
        """Stop a ticket's job: taken out of the queue if it waits, else stopped at its next token.
        Nothing once it has ended."""
        with self._cv:
            if ticket.ended or ticket.job.cancellation.requested:
                return
            ticket.job.cancel()
            self.cancelled += 1
            try:
                self._waiting.remove(ticket)
            except ValueError:
                return  # running: it stops at its next token
        ticket.skip()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()

    def _main(self) -> None:
        try:
            self.engine = self._load()
        except BaseException as e:  # reported by the command line, which exits
            self.load_error = e
            self.loaded.set()
            return
        self.loaded.set()
        while True:
            with self._cv:
                while not self._waiting and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                self.running = self._waiting.popleft()
            try:
                self.running.run()
            finally:
                with self._cv:
                    self.running = None
                    self.served += 1

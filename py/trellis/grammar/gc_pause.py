"""Python's cyclic garbage collector paused while a grammar is built.

A front-end builds large trees that live for one compile and die by reference counting. With the
collector on, the tree's nodes are promoted through the generations while it is built and then
count towards a full collection, whose cost is the size of the whole process heap (in a server
or a benchmark holding thousands of schemas: hundreds of milliseconds inside one compile). With it
paused, those nodes never reach a generation; cycles, if any, are left for the next collection.

Re-entrant and thread-safe: the collector is restored when the last holder leaves, and only if it
was on when the first came in.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def gc_paused():
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()

"""Compiled grammars kept across requests, least recently used first out.

Keyed by the canonical response-format key, so the same constraint asked in another dialect or
key order is a hit. Each entry keeps one matcher: a hit costs a matcher reset, not a compile.
Bounded by count and by bytes (the grammar's mask caches grow as it is used, so the size is
re-read whenever an entry is touched).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from trellis.grammar.matcher import CompiledGrammar, GrammarMatcher
from trellis.grammar.response_format import (cache_key, grammar_of_normalized, normalize_response_format, refuse_empty,
                                             whole_language)


@dataclass
class Entry:
    grammar: CompiledGrammar
    matcher: GrammarMatcher
    bytes: int = 0


class GrammarCache:
    def __init__(self, compiler, max_entries: int = 32, max_bytes: int = 256 << 20):
        self.compiler, self.max_entries, self.max_bytes = compiler, max_entries, max_bytes
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self.hits = self.misses = self.evictions = 0
        self.last_init_s = 0.0

    @staticmethod
    def key_of(response_format, field: str = "response_format", validating: bool = False):
        """(normalized request or None for plain text, key); raises InvalidRequestError naming the
        field. `validating`: the request a validator checks against (whole_language)."""
        normalized = normalize_response_format(response_format, field)
        if validating:
            normalized = whole_language(normalized)
        return normalized, cache_key(normalized, {"any_whitespace": True})

    def matcher(self, normalized: dict, key: str, field: str = "response_format") -> tuple[GrammarMatcher, bool]:
        """A reset matcher for the request (compiling on a miss) and whether it was a hit."""
        started = time.perf_counter()
        entry = self._entries.pop(key, None)
        hit = entry is not None
        if hit:
            self.hits += 1
            entry.matcher.reset()
        else:
            self.misses += 1
            grammar = self.compiler.compile_ir(grammar_of_normalized(normalized, field=field),
                                               source=f"{normalized['kind']}:{key[:12]}")
            refuse_empty(grammar, normalized, field)
            entry = Entry(grammar, GrammarMatcher(grammar))
        self._entries[key] = entry  # most recently used last
        if not hit:  # a hit's size was measured when its last request ended
            self.refresh(key)
        self.last_init_s = time.perf_counter() - started
        return entry.matcher, hit

    def refresh(self, key: str) -> None:
        """Re-measure an entry (its mask caches grew) and evict beyond the bounds, never `key` itself."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.bytes = self._size(entry.grammar)
        while len(self._entries) > 1 and (len(self._entries) > self.max_entries or self.bytes > self.max_bytes):
            oldest = next(iter(self._entries))
            if oldest == key:
                break
            del self._entries[oldest]
            self.evictions += 1

    @staticmethod
    def _size(grammar: CompiledGrammar) -> int:
        stats = grammar.stats()
        return stats["mask_cache_bytes"] + 64 * stats["states"]

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def peek(self, key: str):
        """The compiled grammar cached under `key`, or None; counts no hit and moves nothing."""
        entry = self._entries.get(key)
        return None if entry is None else entry.grammar

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()

    def stats(self) -> dict:
        return {"entries": len(self._entries), "bytes": self.bytes, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}

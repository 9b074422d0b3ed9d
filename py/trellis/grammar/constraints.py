"""Where a response format becomes a compiled grammar: the one constraint service.

    response_format, any dialect  --read (response_format.py)-->  a normalized request
      --key: sha256 of its canonical JSON-->  --front-end (frontends.py)-->  grammar IR
      --compile (the core)-->  refuse an empty language  -->  a bounded LRU (count and bytes)

Owned by a GrammarCompiler (`compiler.constraints`), as xgrammar's compiler owns its cache: the
engine, the browser worker and GrammarCompiler.compile_response_format all go through it, and no
other cache of compiled grammars exists. Equal requests in other dialects or key orders are one
entry. Validation (`validate`) checks text against a format's whole language (whole_language).

Threads: the cache is shared under a lock; compiles run outside it (two threads missing the same
key at once both compile, and the second's grammar is the one kept).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import InvalidRequestError
from . import ir
from .frontends import grammar_of
from .matcher import CompiledGrammar, GrammarMatcher
from .response_format import cache_key, read_response_format, whole_language

_EMPTY = {"json_schema": "no JSON value is valid against this schema",
          "regex": "the regular expression matches no string", "ebnf": "the grammar matches no string",
          "structural_tag": "the structural tag matches no string"}


@dataclass(frozen=True)
class Constraint:
    """A request's format, validated and keyed (not compiled yet)."""
    normalized: dict  # {"kind": a front-end, "source": ..., its options}
    key: str
    field: str  # the request field it came from ("response_format", "tools")
    source_field: str  # the field holding its source, where the front-end's errors point

    @property
    def kind(self) -> str:
        return self.normalized["kind"]


class ConstraintService:
    """Compiled grammars of requests' formats for one compiler, least recently used first out.
    Bounded by count and by bytes (a grammar's mask caches grow as it is used: sizes are read
    afresh whenever an entry is added)."""

    def __init__(self, compiler, max_entries: int = 32, max_bytes: int = 256 << 20):
        self.compiler, self.max_entries, self.max_bytes = compiler, max_entries, max_bytes
        self._entries: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def read(self, response_format, field: str = "response_format", *, validating: bool = False,
             any_whitespace: bool = True, indent: int | None = None, separators=None) -> Constraint | None:
        """The request's format validated and keyed, or None for plain text; cheap (no compile).
        Raises InvalidRequestError naming the field. `validating`: the format's whole language.
        any_whitespace / indent / separators: a JSON Schema's layout (read_response_format)."""
        normalized, source_field = read_response_format(response_format, field, any_whitespace=any_whitespace,
                                                        indent=indent, separators=separators)
        if normalized is None:
            return None
        if validating:
            normalized = whole_language(normalized)
        return Constraint(normalized, cache_key(normalized), field, source_field)

    def ir_of(self, constraint: Constraint) -> ir.Grammar:
        """The request's grammar IR (its front-end's; errors name the source's field)."""
        kind, source, options = _front_end_call(constraint)
        return grammar_of(kind, source, **options)

    def grammar(self, constraint: Constraint, *, count: bool = True) -> tuple[CompiledGrammar, bool]:
        """(the compiled grammar, whether it was cached), compiling on a miss. A format whose
        language is empty cannot be answered: InvalidRequestError (and it is not cached).
        `count`: in the hit and miss counters (requests are; validation is not)."""
        with self._lock:
            grammar = self._entries.pop(constraint.key, None)
            if grammar is not None:
                self._entries[constraint.key] = grammar  # most recently used last
                self.hits += count
                return grammar, True
            self.misses += count
        kind, source, options = _front_end_call(constraint)
        grammar = self.compiler.compile(kind, source, label=f"{constraint.kind}:{constraint.key[:12]}", **options)
        if grammar.is_empty:  # the grammar itself is exact (its matchers refuse every token)
            raise InvalidRequestError(f"{_EMPTY[constraint.kind]}, so no output can satisfy it", constraint.field)
        with self._lock:
            self._entries[constraint.key] = grammar
            self._evict(keep=constraint.key)
        return grammar, False

    def compile(self, response_format, field: str = "response_format") -> tuple[CompiledGrammar | None, str]:
        """(compiled grammar or None for plain text, cache key) of a request's format."""
        constraint = self.read(response_format, field)
        if constraint is None:
            return None, cache_key(None)
        return self.grammar(constraint)[0], constraint.key

    def validate(self, text: str, response_format) -> dict:
        """Whether `text` is in the format's whole language: a fresh matcher accepts all of its
        bytes and can then terminate. {"kind", "accepted", "complete", "valid", "grammar":
        "cached" | "compiled"} ({"kind": None, "valid": None} for plain text)."""
        constraint = self.read(response_format, validating=True)
        if constraint is None:
            return {"kind": None, "valid": None}
        grammar, hit = self.grammar(constraint, count=False)
        matcher = GrammarMatcher(grammar)
        accepted = matcher.accept_string(text)
        complete = accepted and matcher.can_terminate()
        return {"kind": constraint.kind, "accepted": accepted, "complete": complete, "valid": complete,
                "grammar": "cached" if hit else "compiled"}

    # ---- the cache's bounds and counters -------------------------------------------------------

    def _evict(self, keep: str) -> None:
        sizes = {key: _size(g) for key, g in self._entries.items()}
        total = sum(sizes.values())
        while len(self._entries) > 1 and (len(self._entries) > self.max_entries or total > self.max_bytes):
            oldest = next(iter(self._entries))
            if oldest == keep:
                break
            del self._entries[oldest]
            total -= sizes[oldest]
            self.evictions += 1

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(_size(g) for g in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict:
        return {"entries": len(self._entries), "bytes": self.bytes, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}


def _size(grammar: CompiledGrammar) -> int:
    stats = grammar.stats()
    return stats["mask_cache_bytes"] + 64 * stats["states"]


def _front_end_call(constraint: Constraint) -> tuple:
    """(kind, source, options) reading the request's format with its front-end, errors naming the
    source's field."""
    n = constraint.normalized
    options = {k: v for k, v in n.items() if k not in ("kind", "source")}
    return n["kind"], n.get("source"), {**options, "field": constraint.source_field}

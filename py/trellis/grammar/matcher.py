"""Compiled grammars and their matchers (compiler.py makes the grammars):

    compiler = GrammarCompiler(Vocabulary.smollm2())
    grammar = compiler.compile_grammar(ebnf_text)      # or compile_regex / compile_builtin_json
    matcher = GrammarMatcher(grammar)
    matcher.fill_next_token_bitmask(bitmask)           # int32 words, bit i = token i allowed
    matcher.accept_token(token_id)

Names follow xgrammar's matcher verbs. Compiled grammars own their token-mask cache, filled
lazily and shared by every matcher of the grammar.

Threads (the native core; ctypes releases the GIL, so calls really run in parallel):
  - a GrammarCompiler (and its Vocabulary) and a CompiledGrammar may be shared by any number of
    threads: compile, warm, create matchers and fill masks concurrently. The grammar's caches
    are built under a lock inside the core and read without one once built;
  - a GrammarMatcher is not: it belongs to one thread at a time (one generation's state).
    Give each thread its own matcher over the shared grammar.
The wasm cores ("wasmtime", "pyodide") are single-threaded: their calls are serialized.

Integer arguments are never truncated: a token id outside [0, vocab_size), a rollback count
outside [0, history_length], a bool or a non-int raises CoreArgumentError (an
InvalidRequestError and a CoreError, naming the field). Python refuses what a C int32 cannot
hold; the core refuses the rest, the same way on every transport. When the core runs
out of memory it raises GrammarLimitError ("out of memory ..."), and so it does when the
parser's state passes 16,777,216 frames and edges (an ambiguous grammar fed a long text; "parser
state too large ..."); a matcher whose call was cut short either way refuses further calls until
reset(). One accept that would look at more than 268,435,456 frames, stepped or closed over (an
ambiguous grammar fed a long text at once: "parser work too large ...") is refused the same way,
the matcher as it was before; so is a mask whose token-mask cache would look at more than 33,554,432
frames to build ("mask work too large ...": a count of thousands of copies of an item that may
be empty), and every later mask that needs that cache.
"""

from __future__ import annotations

import operator
from array import array

from .abi import INT32_MAX, INT32_MIN, Stat
from .core import CoreArgumentError, release
from .vocabulary import Vocabulary

_STATS = {"rules": Stat.RULES, "states": Stat.STATES, "mask_caches": Stat.MASK_CACHES,
          "mask_cache_bytes": Stat.MASK_CACHE_BYTES}


def _index(value, field: str, low: int, high: int) -> int:
    """`value` as an int in [low, high], or CoreArgumentError naming `field`. Accepts anything
    with __index__ (numpy integers) but bools."""
    if isinstance(value, bool):
        raise CoreArgumentError(f"expected an int, got {value!r}", field)
    try:
        number = operator.index(value)
    except TypeError:
        raise CoreArgumentError(f"expected an int, got {type(value).__name__}", field) from None
    if not low <= number <= high:
        raise CoreArgumentError(f"{number} out of range [{low}, {high}]", field)
    return number


class CompiledGrammar:
    """A grammar compiled for a vocabulary; keeps its compiler (and so the core) alive."""

    def __init__(self, compiler, handle: int, source: str, compile_seconds: float):
        self.compiler, self._handle, self.source = compiler, handle, source
        self.compile_seconds = compile_seconds

    def __del__(self):
        release(self.compiler.core, "grammar", self)

    @property
    def vocab(self) -> Vocabulary:
        return self.compiler.vocab

    def warm(self, max_states: int = -1) -> int:
        """Build cold token-mask caches now (up to `max_states`, all by default) so that later
        masks are lookups; an engine calls this while the GPU runs the prefill. Returns the
        number built; 0 means the grammar is fully warm. A cache whose walk passes the work limit
        (33,554,432 frames looked at) raises GrammarLimitError, as a mask that needs it would."""
        limit = _index(max_states, "max_states", -(2**63), 2**63 - 1)
        return self.compiler.core.warm(self._handle, limit if 0 <= limit <= INT32_MAX else -1)  # past int32: all

    @property
    def is_empty(self) -> bool:
        """No string matches (e.g. JSON Schema `false`): every matcher refuses every token, so a
        generator must refuse the request instead (the constraint service refuses it: constraints.py)."""
        return bool(self.compiler.core.stat(self._handle, Stat.EMPTY))

    def stats(self) -> dict:
        core = self.compiler.core
        return {key: core.stat(self._handle, which) for key, which in _STATS.items()}


class GrammarMatcher:
    """Follows one generation through a compiled grammar, token by token."""

    def __init__(self, grammar: CompiledGrammar):
        self.grammar = grammar
        self._core = grammar.compiler.core
        self._handle = self._core.matcher_new(grammar._handle)
        self.vocab_size = grammar.vocab.vocab_size
        self.bitmask_words = grammar.compiler.bitmask_words

    def __del__(self):
        release(getattr(self, "_core", None), "matcher", self)

    def fill_next_token_bitmask(self, bitmask) -> None:
        """Writes ceil(vocab_size / 32) int32 words into any writable buffer of 4-byte items."""
        self._core.fill_mask(self._handle, bitmask, self.bitmask_words)

    def new_bitmask(self) -> array:
        return array("i", bytes(4 * self.bitmask_words))

    def accept_token(self, token_id: int) -> bool:
        if type(token_id) is not int or not 0 <= token_id < self.vocab_size:  # the common case costs one test
            token_id = _index(token_id, "token_id", INT32_MIN, INT32_MAX)  # the core refuses the rest of the range
        return self._core.accept_token(self._handle, token_id)

    def accept_string(self, text: str | bytes) -> bool:
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if len(data) > INT32_MAX:
            raise CoreArgumentError(f"{len(data)} bytes, more than the core takes at once ({INT32_MAX})", "text")
        return self._core.accept_bytes(self._handle, data)

    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last `num_tokens` accepted tokens or strings (0 <= num_tokens <= history_length)."""
        self._core.rollback(self._handle, _index(num_tokens, "num_tokens", INT32_MIN, INT32_MAX))

    def is_terminated(self) -> bool:
        return bool(self._core.query("is_terminated", self._handle))

    def can_terminate(self) -> bool:
        """Whether the text so far is complete (a stop token would be accepted now)."""
        return bool(self._core.query("can_terminate", self._handle))

    @property
    def history_length(self) -> int:
        return self._core.query("history_length", self._handle)

    def reset(self) -> None:
        self._core.reset(self._handle)

    def find_jump_forward_string(self) -> str:
        """The text forced next by the grammar, cut to whole UTF-8 characters."""
        data = self._core.jump_forward(self._handle)
        for cut in range(len(data), max(len(data) - 4, -1), -1):
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    def shortest_completion(self) -> bytes | None:
        """Shortest bytes after which the text is complete (b"" if it already is; None once
        terminated): `complete_on_length` forces them so a truncated answer still parses."""
        return self._core.shortest_completion(self._handle)

    def allowed_tokens(self) -> list[int]:
        """Token ids the mask allows now (for tests and debugging)."""
        mask = self.new_bitmask()
        self.fill_next_token_bitmask(mask)
        return [w * 32 + b for w, word in enumerate(mask) if word for b in range(32) if word >> b & 1]

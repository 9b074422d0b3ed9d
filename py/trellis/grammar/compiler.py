"""GrammarCompiler: grammars compiled for one vocabulary, and the compiler's constraint service.

    compiler = GrammarCompiler(Vocabulary.smollm2())
    grammar = compiler.compile_grammar(ebnf_text)     # or compile_regex / compile_json_schema / ...
    grammar, key = compiler.compile_response_format({"type": "json_object"})   # cached

Every compile_* verb reads its source through the front-end registry (frontends.py); request
formats go through `compiler.constraints` (constraints.py), the one cache of compiled grammars.
"""

from __future__ import annotations

import time

from . import ir
from .constraints import ConstraintService
from .core import Core, load_core, release
from .frontends import preload, serialized
from .gc_pause import gc_paused
from .matcher import CompiledGrammar
from .vocabulary import Vocabulary


class GrammarCompiler:
    """Compiles grammars for one vocabulary on one core ("native", "wasmtime", "pyodide")."""

    def __init__(self, vocab: Vocabulary, *, core: str | Core = "native", max_cached_grammars: int = 32,
                 max_cache_bytes: int = 256 << 20):
        self.vocab = vocab
        self.core = core if isinstance(core, Core) else load_core(core)
        self._handle = self.core.vocab_new(vocab.vocab_size, vocab.token_bytes, vocab.special_ids, vocab.stop_ids)
        self.constraints = ConstraintService(self, max_cached_grammars, max_cache_bytes)
        preload()

    def __del__(self):
        release(getattr(self, "core", None), "vocab", self)

    @property
    def bitmask_words(self) -> int:
        return (self.vocab.vocab_size + 31) // 32

    def compile_ir(self, grammar: ir.Grammar, *, source: str = "ir") -> CompiledGrammar:
        started = time.perf_counter()
        with gc_paused():
            words, names = ir.serialize(grammar)
        return self._compile_words(words, names, grammar.positions, source, started)

    def compile(self, kind: str, source=None, *, label: str | None = None, **options) -> CompiledGrammar:
        """`source` read by the front-end `kind` (frontends.KINDS, with its options and `field`),
        compiled. `label`: the compiled grammar's source label (default `kind`)."""
        started = time.perf_counter()
        if kind == "json_schema":
            handle = self._native_json_schema(source, options)
            if handle is not None:
                return CompiledGrammar(self, handle, label or kind, time.perf_counter() - started)
        words, names, positions = serialized(kind, source, **options)
        return self._compile_words(words, names, positions, label or kind, started)

    def _native_json_schema(self, source, options: dict) -> int | None:
        """The schema compiled by the core's native converter, or None where it does not take
        it (json_schema/native.py): then the Python converter runs and reports any error."""
        try:
            from .json_schema import native
        except ImportError:  # the JSON Schema front-end is not built into this copy
            return None
        req = native.request(source, **options, top=self.core.json_schema_top) if native.takes(options) else None
        return None if req is None else self.core.grammar_compile_json_schema(self._handle, *req)

    def _compile_words(self, words, names, positions, source: str, started: float) -> CompiledGrammar:
        handle = self.core.grammar_compile(self._handle, words, names, positions)
        return CompiledGrammar(self, handle, source, time.perf_counter() - started)

    def compile_grammar(self, ebnf: str, root: str = "root") -> CompiledGrammar:
        return self.compile("ebnf", ebnf, root=root)

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        return self.compile("regex", pattern)

    def compile_builtin_json(self) -> CompiledGrammar:
        return self.compile("builtin_json")

    def compile_json_schema(self, schema, *, any_whitespace: bool = True, indent: int | None = None,
                            separators: tuple[str, str] | None = None, strict: bool = False,
                            **options) -> CompiledGrammar:
        """A JSON Schema (dict, JSON text or bool), enforced exactly or refused with
        UnsupportedSchemaError naming the keyword and its JSON pointer. As xgrammar's: with
        `any_whitespace=False`, `indent` and `separators` make the text exactly json.dumps' with
        them (indented arrays and objects nest at most 32 levels); with `any_whitespace=True`
        `indent` is ignored and `separators` are the literals between free whitespace (see
        json_schema_to_grammar)."""
        return self.compile("json_schema", schema, any_whitespace=any_whitespace, indent=indent,
                            separators=separators, strict=strict, **options)

    def compile_structural_tag(self, tag) -> CompiledGrammar:
        """Free text with grammar-constrained tagged regions (web-llm / xgrammar format)."""
        return self.compile("structural_tag", tag)

    def compile_response_format(self, response_format, field: str = "response_format"):
        """Any supported response_format dialect -> (CompiledGrammar, or None for plain text;
        the canonical cache key), through the constraint service's cache. Raises
        InvalidRequestError naming the bad field."""
        return self.constraints.compile(response_format, field)

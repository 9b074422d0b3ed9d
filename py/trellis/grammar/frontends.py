"""Grammar text -> IR, one entry point for every front-end.

GrammarCompiler uses it in Python; web/grammar.js calls `to_ir` through Pyodide so that the
JS API offers the same compile_* verbs while the front-ends stay in one (Python) place.
"""

from __future__ import annotations

from . import ir

KINDS = ("ebnf", "regex", "builtin_json")


def grammar_of(kind: str, source: str = "") -> ir.Grammar:
    if kind == "ebnf":
        from .ebnf import parse_ebnf

        return parse_ebnf(source)
    if kind == "regex":
        from .regex import parse_regex

        return parse_regex(source)
    if kind == "builtin_json":
        from .builtin_json import builtin_json_grammar

        return builtin_json_grammar()
    raise ValueError(f"unknown grammar kind {kind!r}: use one of {', '.join(KINDS)}")


def to_ir(kind: str, source: str = "") -> tuple[bytes, list[str]]:
    """IR words (int32, native byte order) and the rule names, for hosts outside Python."""
    words, names = ir.serialize(grammar_of(kind, source))
    return words.tobytes(), names

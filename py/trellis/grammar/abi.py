"""The grammar core's C ABI as Python calls it (kernels/grammar/include/trellis_grammar.h).

A leaf: the transports and `core` depend on it, it depends on nothing. The header's enums and
constants are mirrored here by name (tests/grammar/test_abi_constants.py checks them against the
header and web/grammar.js).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class ErrorCode(IntEnum):
    """enum tg_error_code: what tg_last_error_code() says after a failed call."""
    OK = 0
    ARGUMENT = 1  # a bad argument (null handle, id out of range, short buffer)
    IR = 2  # malformed IR words
    GRAMMAR = 3  # well-formed IR that is not a usable grammar
    LIMIT = 4  # a size limit was exceeded, or memory ran out
    INTERNAL = 5  # a bug inside the core
    DECLINED = 6  # the native JSON Schema converter does not cover the schema: convert it in Python


class SchemaFlag(IntFlag):
    """enum tg_schema_flag: tg_grammar_compile_json_schema's options."""
    ANY_WHITESPACE = 1
    STRICT = 2
    DRAFT7 = 4  # draft-07 semantics (and draft-06, draft-04)
    INTEGERS_WITHOUT_FRACTION = 8  # draft-04: 1.0 is not an integer
    FORMAT_ASSERTION = 16  # `format` asserts (else an annotation)
    CANONICAL_INTEGERS = 32  # integers written without ".0"


class Stat(IntEnum):
    """enum tg_grammar_stat_id: what tg_grammar_stat reports."""
    RULES = 0  # rules with automata
    STATES = 1  # DFA states
    MASK_CACHES = 2  # token-mask caches computed so far
    MASK_CACHE_BYTES = 3  # their size in bytes
    EMPTY = 4  # 1 when no string matches


NO_COMPLETION = -100  # TG_NO_COMPLETION: tg_matcher_shortest_completion found none

# Exported function -> (result kind, argument kinds); "p" pointer, "i" int32, "l" int64, "v" void.
SIGNATURES = {
    "tg_last_error": ("p", ""),
    "tg_last_error_code": ("i", ""),
    "tg_last_error_rule": ("i", ""),
    "tg_alloc": ("p", "i"),
    "tg_free": ("v", "p"),
    "tg_vocab_new": ("p", "ipp" "ipi" "pi"),
    "tg_vocab_free": ("v", "p"),
    "tg_grammar_compile": ("p", "ppi"),
    "tg_grammar_compile_json_schema": ("p", "ppiiii"),
    "tg_json_schema_top": ("i", "piipi"),
    "tg_grammar_free": ("v", "p"),
    "tg_grammar_stat": ("l", "pi"),
    "tg_grammar_warm": ("i", "pi"),
    "tg_matcher_new": ("p", "p"),
    "tg_matcher_free": ("v", "p"),
    "tg_matcher_fill_mask": ("i", "ppi"),
    "tg_matcher_accept_token": ("i", "pi"),
    "tg_matcher_accept_bytes": ("i", "ppi"),
    "tg_matcher_rollback": ("i", "pi"),
    "tg_matcher_history_length": ("i", "p"),
    "tg_matcher_is_terminated": ("i", "p"),
    "tg_matcher_can_terminate": ("i", "p"),
    "tg_matcher_reset": ("i", "p"),
    "tg_matcher_jump_forward": ("i", "ppi"),
    "tg_matcher_shortest_completion": ("i", "ppi"),
}


def writable_words(buffer, n_words: int) -> memoryview:
    """The caller's bitmask as a flat writable byte view, checked for size."""
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError("the bitmask must support the buffer protocol (numpy array, array('i'), memoryview)") from None
    if view.readonly:
        raise ValueError("the bitmask buffer is read-only")
    if not view.c_contiguous:
        raise ValueError("the bitmask buffer must be contiguous")
    if view.itemsize != 4:
        raise ValueError(f"the bitmask must hold 32-bit words, not {view.itemsize}-byte items")
    view = view.cast("B")
    if view.nbytes < 4 * n_words:
        raise ValueError(f"the bitmask needs {n_words} int32 words, got {view.nbytes // 4}")
    return view

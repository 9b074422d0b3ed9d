"""The one registry from a kind of grammar source to its front-end (source -> grammar IR).

    kind            source                          options
    ebnf            EBNF text                       root
    regex           a regular expression
    json_schema     a JSON Schema (dict or bool)    json_schema_to_grammar's (strict, any_whitespace, ...)
    builtin_json    -                               (any JSON value)
    json_object     -                               (any JSON object, no key twice in one object)
    structural_tag  a normalized structural tag     canonical_integers, any_whitespace (for its schemas)

The compiler's compile_* verbs, the response formats (constraints.py), and the structural tags'
embedded formats all come here; web/grammar.js calls `to_ir` through Pyodide so that the JS API
offers the same verbs while the front-ends stay in one (Python) place. With a request `field`,
a malformed source becomes InvalidRequestError naming that field (written once, here).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from ..errors import GrammarError, GrammarLimitError, InvalidRequestError, UnsupportedSchemaError
from . import ir
from .gc_pause import gc_paused
from .ir import Ref, byte_set, repeat, seq
from .json_values import schema_of


@dataclass(frozen=True)
class FrontEnd:
    what: str  # in error messages: "invalid <what>: ..."
    build: Callable[..., ir.Grammar]  # (source, **options) -> IR
    nested_fields: bool = False  # names fields inside its source itself (build takes `field`)


def _ebnf(source: str, root: str = "root") -> ir.Grammar:
    from .ebnf import parse_ebnf

    return parse_ebnf(source, root)


def _regex(source: str) -> ir.Grammar:
    from .regex import parse_regex

    return parse_regex(source)


def _json_schema(source, **options) -> ir.Grammar:
    try:
        from .json_schema import json_schema_to_grammar
    except ImportError as e:  # the JSON Schema front-end is not built into this copy
        raise UnsupportedSchemaError(f"the JSON Schema front-end is not available ({e})") from e
    return json_schema_to_grammar(schema_of(source), **options)


def _builtin_json(source=None) -> ir.Grammar:
    from .builtin_json import builtin_json_grammar

    return builtin_json_grammar()


def _json_object(source=None) -> ir.Grammar:
    """Any JSON object (not any value) with no key twice in one object, JSON's whitespace around it."""
    from .builtin_json import builtin_json_grammar

    g = builtin_json_grammar(distinct_keys=True)
    ws = repeat(byte_set([(0x20, 0x20), (0x09, 0x0A), (0x0D, 0x0D)]), 0, None)
    return ir.Grammar({**g.rules, "json_object_root": seq(ws, Ref("object"), ws)}, "json_object_root",
                      prelude=g.prelude)


def _structural_tag(source, *, canonical_integers: bool = False, any_whitespace: bool = True,
                    field: str | None = None) -> ir.Grammar:
    from .structural_tag import structural_tag_to_grammar

    def part(kind: str, source, field: str) -> ir.Grammar:
        options = ({"strict": False, "canonical_integers": canonical_integers, "any_whitespace": any_whitespace}
                   if kind == "json_schema" else {})
        return grammar_of(kind, source, field=field, **options)

    return structural_tag_to_grammar(source, part=part, field=field or "")


FRONT_ENDS = {
    "ebnf": FrontEnd("EBNF grammar", _ebnf),
    "regex": FrontEnd("regular expression", _regex),
    "json_schema": FrontEnd("JSON Schema", _json_schema),
    "builtin_json": FrontEnd("JSON grammar", _builtin_json),
    "json_object": FrontEnd("JSON object grammar", _json_object),
    "structural_tag": FrontEnd("structural tag", _structural_tag, nested_fields=True),
}
KINDS = tuple(FRONT_ENDS)


def grammar_of(kind: str, source=None, *, field: str | None = None, **options) -> ir.Grammar:
    """The IR of `source` read as `kind`. With `field` (the request field the source came from):
    a malformed source raises InvalidRequestError naming it, and a schema keyword that cannot be
    enforced UnsupportedSchemaError with `field` set; without, the front-end's own error."""
    front = FRONT_ENDS.get(kind)
    if front is None:
        raise ValueError(f"unknown grammar kind {kind!r}: use one of {', '.join(KINDS)}")
    if front.nested_fields:
        options["field"] = field
    try:
        return front.build(source, **options)
    except UnsupportedSchemaError as e:  # a keyword that cannot be enforced: where, as the schema's own pointer
        if field is not None and getattr(e, "field", None) is None:
            e.field = field
        raise
    except GrammarLimitError:
        raise  # a size limit, not a malformed source
    except GrammarError as e:
        if field is None:
            raise
        raise InvalidRequestError(f"invalid {front.what}: {e}", field) from e


def preload() -> None:
    """Import every front-end now (a compiler does, when it is made): the first request then does
    not pay for it (the JSON Schema front-end takes about 50 ms to import from source). One that
    is not built into this copy is left out; its requests say so."""
    for module in ("ebnf", "regex", "json_schema", "builtin_json", "structural_tag"):
        try:
            importlib.import_module(f"{__package__}.{module}")
        except ImportError:
            pass


def serialized(kind: str, source=None, **options) -> tuple:
    """grammar_of's IR serialized: (words, rule names, rule positions). The IR is built and
    dropped with the cyclic collector paused (gc_pause.py), so that none of it outlives the pause."""
    with gc_paused():
        grammar = grammar_of(kind, source, **options)
        words, names = ir.serialize(grammar)
        positions = grammar.positions
        del grammar  # now: a `return` here would free it only after the collector resumed, and the
        # collector would first walk the whole tree (about 1.5 ms in a large schema's compile)
    return words, names, positions


def to_ir(kind: str, source: str = "") -> tuple[bytes, list[str]]:
    """IR words (int32, native byte order) and the rule names, for hosts outside Python."""
    words, names, _ = serialized(kind, source)
    return words.tobytes(), names

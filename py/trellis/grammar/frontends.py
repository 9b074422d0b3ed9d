"""Grammar text -> IR, one entry point for every front-end; and the check that a request's
value is JSON (`walk_json`), which the JSON-taking front-ends share.

GrammarCompiler uses it in Python; web/grammar.js calls `to_ir` through Pyodide so that the
JS API offers the same compile_* verbs while the front-ends stay in one (Python) place.
"""

from __future__ import annotations

from . import ir

KINDS = ("ebnf", "regex", "builtin_json")
# Objects and arrays one inside the other in a JSON request value (a schema, a structural tag):
# deeper is refused, shallower is handled (the walks that recurse get room for it).
MAX_JSON_NESTING = 2000


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


class NotJson(ValueError):
    """A value that JSON cannot hold (a set, bytes, a tuple, NaN, infinity, a non-string key),
    at `path` (a JSON pointer below the value walked)."""

    def __init__(self, path: str, what: str):
        self.path, self.what = path, what
        super().__init__(f"not JSON: {what} at {path or 'the top'}")


def walk_json(value, path: str = "", *, fields: bool = False, leaves: tuple = (str, int, float)):
    """Every value inside `value`, itself first, as (value, path, depth): without recursion, since
    how deep a request nests is the caller's. Paths are JSON pointers below `path`, or request
    fields (".key", "[i]") with `fields`. Raises NotJson where a value is not JSON; `leaves` may
    add types a caller parses later (JSON text as bytes)."""
    todo = [(value, path, 0)]
    while todo:
        v, at, depth = todo.pop()
        if isinstance(v, dict):
            for k in v:
                if not isinstance(k, str):
                    raise NotJson(at, f"a {type(k).__name__} key {k!r}")
            yield v, at, depth
            todo.extend((x, f"{at}.{k}" if fields else f"{at}/{_escape(k)}", depth + 1)
                        for k, x in reversed(v.items()))
        elif isinstance(v, list):
            yield v, at, depth
            todo.extend((x, f"{at}[{i}]" if fields else f"{at}/{i}", depth + 1)
                        for i, x in reversed(list(enumerate(v))))
        elif isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            raise NotJson(at, str(v))
        elif v is None or isinstance(v, leaves):  # bool is an int
            yield v, at, depth
        else:
            raise NotJson(at, f"a Python {type(v).__name__}")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")

"""JSON values inside requests (a schema, a structural tag, a response format): the check that a
value is JSON, the bound on how deep it nests, parsing JSON text, and the InvalidRequestError that
names the request field. A leaf: every front-end that takes JSON shares it.
"""

from __future__ import annotations

import json

from ..errors import GrammarLimitError, InvalidRequestError
from . import ir

# Objects and arrays one inside the other in a JSON request value (a schema, a structural tag):
# deeper is refused, shallower is handled (the walks that recurse get room for it).
MAX_JSON_NESTING = 2000


def fail(message: str, field: str):
    raise InvalidRequestError(message, field)


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


def schema_of(value):
    """A pydantic model class stands for its JSON Schema (`model_json_schema()`, as xgrammar and
    the openai SDK take it); any other value is itself. pydantic is never imported here."""
    return value.model_json_schema() if is_model_class(value) else value


def is_model_class(value) -> bool:
    """A pydantic model class (anything with `model_json_schema`; pydantic is never imported)."""
    return isinstance(value, type) and callable(getattr(value, "model_json_schema", None))


def parse_json(value, field: str):
    """`value`, parsed when it is JSON text; it must be JSON (InvalidRequestError naming the place;
    inner JSON text given as bytes is parsed where it is read, a pydantic model class where a
    schema is read: schema_of) and nest at most MAX_JSON_NESTING deep (GrammarLimitError)."""
    if isinstance(value, (str, bytes)):
        try:
            with ir.nesting_guard(f"{field}: the JSON text", ir.NESTING_FRAMES):
                value = json.loads(value)
        except ValueError as e:
            fail(f"not valid JSON ({e})", field)
    try:
        for v, at, depth in walk_json(value, fields=True, leaves=(str, int, float, bytes, type)):
            if isinstance(v, type) and not is_model_class(v):
                raise NotJson(at, f"a Python class {v.__name__}")
            if depth > MAX_JSON_NESTING:
                raise GrammarLimitError(f"{field}{at}: nested deeper than {MAX_JSON_NESTING} objects and arrays "
                                        "(a limit)")
    except NotJson as e:
        fail(f"not JSON: {e.what}", f"{field}{e.path}")
    return value


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")

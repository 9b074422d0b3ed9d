"""xgrammar's JSON layout options, `indent` and `separators` (json.dumps' meaning), checked where
they enter: the JSON Schema front-end (json_schema/_layout.py builds them) and the request
reader (response_format.py, which keys them). Malformed: InvalidRequestError naming the option."""

from __future__ import annotations

from ..errors import InvalidRequestError

MAX_INDENT = 64
_JSON_WS = " \t\n\r"


def check_indent(indent):
    if indent is not None and (isinstance(indent, bool) or not isinstance(indent, int)
                               or not 0 <= indent <= MAX_INDENT):
        raise InvalidRequestError(f"must be an integer from 0 to {MAX_INDENT} or None, got {indent!r}", "indent")
    return indent


def check_separators(separators) -> tuple[str, str] | None:
    """A pair (item separator, key separator), as a tuple; or None. Each must be its JSON
    punctuation ("," and ":") with JSON whitespace around it, so that the text stays JSON: the
    core's checks (distinct keys, unique items) read it as JSON. (xgrammar takes any strings.)"""
    if separators is None:
        return None
    if not isinstance(separators, (tuple, list)) or len(separators) != 2 or not all(
            isinstance(s, str) for s in separators):
        raise InvalidRequestError(f"must be a pair of strings (item separator, key separator), got {separators!r}",
                                  "separators")
    for s, mark in zip(separators, ",:"):
        if s.strip(_JSON_WS) != mark:
            raise InvalidRequestError(f"{s!r} must be {mark!r} with only JSON whitespace (space, tab, newline, "
                                      "carriage return) around it, so that the text stays JSON", "separators")
    return tuple(separators)

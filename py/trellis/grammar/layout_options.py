"""xgrammar's JSON layout options, `indent` and `separators` (json.dumps' meaning), checked where
they enter: the JSON Schema front-end (json_schema/_layout.py builds them) and the request
reader (response_format.py, which keys them). Malformed: InvalidRequestError naming the option."""

from __future__ import annotations

from ..errors import InvalidRequestError

MAX_INDENT = 64


def check_indent(indent):
    if indent is not None and (isinstance(indent, bool) or not isinstance(indent, int)
                               or not 0 <= indent <= MAX_INDENT):
        raise InvalidRequestError(f"must be an integer from 0 to {MAX_INDENT} or None, got {indent!r}", "indent")
    return indent


def check_separators(separators) -> tuple[str, str] | None:
    """A pair (item separator, key separator) of strings without NUL, as a tuple; or None."""
    if separators is None:
        return None
    if not isinstance(separators, (tuple, list)) or len(separators) != 2 or not all(
            isinstance(s, str) for s in separators):
        raise InvalidRequestError(f"must be a pair of strings (item separator, key separator), got {separators!r}",
                                  "separators")
    for s in separators:
        if "\x00" in s:
            raise InvalidRequestError("must not contain NUL", "separators")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequestError("must be UTF-8 text (a lone surrogate is not)", "separators") from None
    return tuple(separators)

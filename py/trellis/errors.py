"""Typed errors: each says what went wrong and where."""


class TrellisError(Exception):
    """Base of every error Trellis raises on purpose."""


class GrammarError(TrellisError, ValueError):
    """A grammar (EBNF, regex, IR) is malformed or exceeds a limit.

    `line` and `column` (1-based) locate the problem in the source text when known.
    """

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.message, self.line, self.column = message, line, column
        where = f" at line {line}, column {column}" if line is not None else ""
        super().__init__(f"{message}{where}")


class GrammarLimitError(GrammarError):
    """A grammar is well-formed but too large (states, size, time) to compile."""


class VocabularyError(TrellisError, ValueError):
    """A vocabulary cannot be loaded or is inconsistent."""

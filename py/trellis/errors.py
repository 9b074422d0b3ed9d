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


class ModelError(TrellisError, ValueError):
    """A model file or build artifact is unsupported or inconsistent (names the tensor, field or file)."""


class SequenceLengthError(TrellisError, ValueError):
    """A prompt or generation would exceed the context window the KV cache was sized for."""


class RuntimeBackendError(TrellisError, RuntimeError):
    """The GPU backend cannot run a plan (no adapter, a limit exceeded, a failed dispatch)."""


class EngineBusyError(TrellisError, RuntimeError):
    """A request was started on an engine while the same thread's earlier one (an open stream) still
    holds the model's state; finish or close that stream first. Another thread's request waits its
    turn instead (the HTTP server queues requests)."""


class ModelNotFoundError(TrellisError, FileNotFoundError):
    """A model file Trellis expects (e.g. the embedded default) is not installed."""


class InvalidRequestError(TrellisError, ValueError):
    """A request (response_format, structural tag, ...) is malformed; `field` names where, e.g.
    "response_format.json_schema.schema" or "format.tags[1].begin"."""

    def __init__(self, message: str, field: str | None = None):
        self.message, self.field = message, field
        super().__init__(f"{field}: {message}" if field else message)


class UnsupportedSchemaError(TrellisError, ValueError):
    """A JSON Schema uses a keyword (at a JSON pointer) that cannot be enforced exactly."""

    def __init__(self, message: str, keyword: str | None = None, pointer: str | None = None):
        self.message, self.keyword, self.pointer = message, keyword, pointer
        where = f" (keyword {keyword!r} at {pointer or '#'})" if keyword else ""
        super().__init__(f"{message}{where}")


class SchemaLimitError(GrammarLimitError, UnsupportedSchemaError):
    """A JSON Schema exceeds a size or depth limit of the front-end: a GrammarLimitError (the
    limit and its number are in the message) that also names the keyword and JSON pointer."""

    def __init__(self, message: str, keyword: str | None = None, pointer: str | None = None):
        UnsupportedSchemaError.__init__(self, message, keyword, pointer)
        self.line = self.column = None

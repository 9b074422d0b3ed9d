"""Grammar-constrained decoding: front-ends (EBNF, regex, JSON) -> IR -> the C++ core."""

from ..errors import GrammarError, GrammarLimitError, InvalidRequestError, UnsupportedSchemaError, VocabularyError
from .matcher import CompiledGrammar, GrammarCompiler, GrammarMatcher
from .vocabulary import Vocabulary

__all__ = [
    "CompiledGrammar",
    "GrammarCompiler",
    "GrammarError",
    "GrammarLimitError",
    "GrammarMatcher",
    "InvalidRequestError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "VocabularyError",
]

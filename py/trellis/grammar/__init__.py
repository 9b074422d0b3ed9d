"""Grammar-constrained decoding: front-ends (EBNF, regex, JSON) -> IR -> the C++ core."""

from ..errors import GrammarError, GrammarLimitError, InvalidRequestError, UnsupportedSchemaError, VocabularyError
from .compiler import GrammarCompiler
from .matcher import CompiledGrammar, GrammarMatcher
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

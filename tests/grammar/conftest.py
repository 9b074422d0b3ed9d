"""What most grammar tests share: a compiler over SmolLM2's vocabulary (per module: each module's
grammars are cached apart) and the whole-text verdict of a compiled grammar."""

import pytest

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary


@pytest.fixture(scope="module")
def compiler():
    return GrammarCompiler(Vocabulary.smollm2())


def accepts(grammar, text) -> bool:
    """Whether `grammar` takes all of `text` and may end there."""
    m = GrammarMatcher(grammar)
    return m.accept_string(text) and m.can_terminate()

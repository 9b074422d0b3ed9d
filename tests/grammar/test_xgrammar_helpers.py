"""What xgrammar's Python users reach for (Vocabulary.from_huggingface: test_vocabulary.py): a
CPU bitmask applied to logits in place (numpy, DLPack), pydantic model classes wherever a schema goes."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import BaseModel

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
from trellis.grammar.bitmask import apply_token_bitmask_inplace
from tests.grammar.conftest import accepts


class Wand(BaseModel):
    wood: str
    length: float


class Person(BaseModel):
    name: str
    age: int
    wand: Wand


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_bitmask_applied_in_place_as_the_matcher_allows(compiler, dtype):
    grammar = compiler.compile_regex("[0-9]+")
    matcher = GrammarMatcher(grammar)
    mask = matcher.new_bitmask()
    matcher.fill_next_token_bitmask(mask)
    allowed = set(matcher.allowed_tokens())
    logits = np.random.default_rng(0).standard_normal((2, compiler.vocab.vocab_size)).astype(dtype)
    before = logits.copy()
    apply_token_bitmask_inplace(logits, mask, indices=[1])
    assert (logits[0] == before[0]).all()
    finite = set(np.flatnonzero(np.isfinite(logits[1])))
    assert finite == allowed and (logits[1][sorted(allowed)] == before[1][sorted(allowed)]).all()


def test_bitmask_through_dlpack_and_per_row_masks(compiler):
    class Foreign:  # an array library numpy knows only through DLPack
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    words = (compiler.vocab.vocab_size + 31) // 32
    masks = np.zeros((2, words), np.int32)
    masks[0, 0], masks[1, 1] = 0b11, -1
    logits = np.zeros((2, compiler.vocab.vocab_size), np.float32)
    apply_token_bitmask_inplace(Foreign(logits), masks)
    assert list(np.flatnonzero(np.isfinite(logits[0]))) == [0, 1]
    assert list(np.flatnonzero(np.isfinite(logits[1]))) == list(range(32, 64))
    with pytest.raises(TypeError):
        apply_token_bitmask_inplace([0.0] * 10, masks[0])
    with pytest.raises(ValueError):
        apply_token_bitmask_inplace(np.zeros(64, np.float32), masks[0, :1], vocab_size=40)


def test_pydantic_models_wherever_a_schema_goes(compiler):
    good = '{"name": "Hermione", "age": 19, "wand": {"wood": "vine", "length": 10.75}}'
    assert accepts(compiler.compile_json_schema(Person), good)
    assert not accepts(compiler.compile_json_schema(Person), '{"name": "Hermione"}')
    grammar, _ = compiler.compile_response_format({"type": "json_schema", "json_schema": {
        "name": "person", "schema": Person, "strict": True}})
    assert accepts(grammar, good)
    same, _ = compiler.compile_response_format({"type": "json_schema", "json_schema": {
        "name": "person", "schema": Person.model_json_schema(), "strict": True}})
    assert same is grammar  # one request, one key
    tag = compiler.compile_structural_tag({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<p>"],
        "tags": [{"begin": "<p>", "content": {"type": "json_schema", "json_schema": Wand}, "end": "</p>"}]}})
    assert accepts(tag, 'x <p>{"wood": "oak", "length": 1}</p>')

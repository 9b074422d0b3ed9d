"""The sampler on hand-made logits: greedy, seeded draws, top-p, penalties, bias, masked tokens."""

import math
from array import array
from collections import Counter

import pytest

from trellis.engine.request import GenerationConfig
from trellis.engine.sampler import Sampler
from trellis.runtime.abi import MASKED_LOGIT


def logits(*values):
    return array("f", values)


def draws(config, values, n=4000, seed=0):
    sampler = Sampler(config, seed)
    return Counter(sampler.sample(logits(*values)).token for _ in range(n))


def test_greedy_picks_the_best_unmasked_token():
    s = Sampler(GenerationConfig(temperature=0))
    assert s.sample(logits(1.0, 5.0, 2.0)).token == 1
    assert s.sample(logits(1.0, MASKED_LOGIT, 2.0)).token == 2


def test_temperature_draws_follow_the_softmax():
    counts = draws(GenerationConfig(temperature=1.0), (0.0, math.log(3.0)))
    assert counts[1] / 4000 == pytest.approx(0.75, abs=0.03)
    hot = draws(GenerationConfig(temperature=2.0), (0.0, math.log(3.0)))  # 1 : sqrt(3)
    assert hot[1] / 4000 == pytest.approx(math.sqrt(3) / (1 + math.sqrt(3)), abs=0.03)


def test_masked_tokens_are_never_drawn_even_with_bias():
    config = GenerationConfig(temperature=2.0, logit_bias={0: 100.0})
    assert set(draws(config, (MASKED_LOGIT, 0.0, 0.0), n=500)) == {1, 2}


def test_top_p_keeps_the_smallest_head_holding_p():
    counts = draws(GenerationConfig(temperature=1.0, top_p=0.6), (math.log(5), math.log(3), math.log(2)))
    assert set(counts) == {0, 1}  # 0.5 < 0.6 <= 0.8
    assert counts[0] / 4000 == pytest.approx(5 / 8, abs=0.03)


def test_same_seed_same_draws():
    a = draws(GenerationConfig(temperature=1.0), (0.0, 0.1, 0.2, 0.3), n=50, seed=4)
    b = draws(GenerationConfig(temperature=1.0), (0.0, 0.1, 0.2, 0.3), n=50, seed=4)
    assert a == b


def test_penalties_count_generated_tokens():
    s = Sampler(GenerationConfig(temperature=0, frequency_penalty=1.0, presence_penalty=0.5))
    for _ in range(2):
        s.accept(0)
    assert s.sample(logits(3.0, 0.6)).token == 1  # 3 - 2*1 - 0.5 = 0.5 < 0.6
    r = Sampler(GenerationConfig(temperature=0, repetition_penalty=2.0))
    r.accept(0)
    r.accept(1)
    assert r.sample(logits(3.0, -1.0, 1.6)).token == 2  # 3/2 = 1.5 < 1.6; -1*2 = -2


def test_logprobs_are_normalized_and_ranked():
    s = Sampler(GenerationConfig(temperature=0, logprobs=True, top_logprobs=3))
    got = s.sample(logits(math.log(1), math.log(2), math.log(5), MASKED_LOGIT))
    assert got.token == 2 and got.logprob == pytest.approx(math.log(5 / 8), abs=1e-6)
    assert [t for t, _ in got.top] == [2, 1, 0]
    assert sum(math.exp(lp) for _, lp in got.top) == pytest.approx(1.0, abs=1e-6)

"""Token sampling in pure Python (the browser runs it under Pyodide, without numpy).

The grammar's mask is applied on the GPU (disallowed logits come back as MASKED_LOGIT), so the
sampler only has to keep those out. Penalties and logit bias touch a few entries; temperature and
top-p work on the candidates within CUTOFF nats of the best logit: the tokens left out carry less
than vocab_size * e**-CUTOFF of the probability (about 1e-13 for 49,152 tokens), far below float32
resolution of the kept ones.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from dataclasses import dataclass

from trellis.runtime.abi import MASKED_LOGIT

CUTOFF = 40.0
_ALLOWED_ABOVE = MASKED_LOGIT / 2  # masked logits stay far below this even after +100 of bias


@dataclass
class Sampled:
    token: int
    logprob: float | None = None
    top: list[tuple[int, float]] | None = None  # (token, logprob), most likely first


class Sampler:
    """Samples one generation's tokens: greedy at temperature 0, else seeded temperature + top-p."""

    def __init__(self, config, seed: int | None = None):
        self.config = config
        self.rng = random.Random(seed if seed is not None else config.seed)
        self.counts: Counter[int] = Counter()  # tokens generated so far, for the penalties

    def sample(self, logits, banned: tuple[int, ...] = ()) -> Sampled:
        """One token from `logits` (an array of float32, modified in place)."""
        c = self.config
        self._adjust(logits, banned)
        best = max(logits)
        if best <= _ALLOWED_ABOVE:
            raise RuntimeError("every token is masked out: the grammar allows nothing here")
        temperature = c.temperature if c.temperature > 0 else 1.0
        candidates = None
        if c.temperature == 0:
            token = logits.index(best)
        else:
            candidates = self._candidates(logits, best, temperature)
            token = self._draw(candidates)
        if not c.logprobs:
            return Sampled(token)
        candidates = candidates or self._candidates(logits, best, temperature)
        log_total = math.log(sum(w for _, w in candidates))

        def logprob(t: int) -> float:
            return (logits[t] - best) / temperature - log_total

        top = heapq.nlargest(c.top_logprobs, range(len(logits)), key=logits.__getitem__) if c.top_logprobs else []
        return Sampled(token, logprob(token), [(t, logprob(t)) for t in top if logits[t] > _ALLOWED_ABOVE])

    def accept(self, token: int) -> None:
        self.counts[token] += 1

    def _adjust(self, logits, banned) -> None:
        c = self.config
        for token, bias in c.logit_bias.items():
            if logits[token] > _ALLOWED_ABOVE:  # bias never revives a token the grammar masked
                logits[token] += bias
        for token, n in self.counts.items():
            x = logits[token]
            if x <= _ALLOWED_ABOVE:
                continue
            if c.repetition_penalty != 1.0:  # CTRL / Hugging Face: shrink towards "less likely"
                x = x / c.repetition_penalty if x > 0 else x * c.repetition_penalty
            logits[token] = x - c.frequency_penalty * n - c.presence_penalty
        for token in banned:
            logits[token] = MASKED_LOGIT

    @staticmethod
    def _candidates(logits, best: float, temperature: float) -> list[tuple[int, float]]:
        """(token, unnormalized probability) of every token within CUTOFF nats of the best."""
        floor = best - CUTOFF * temperature
        scale = 1.0 / temperature
        return [(i, math.exp((x - best) * scale)) for i, x in enumerate(logits) if x > floor]

    def _draw(self, candidates: list[tuple[int, float]]) -> int:
        top_p = self.config.top_p
        if top_p < 1.0:
            candidates = sorted(candidates, key=lambda tw: -tw[1])
            total = sum(w for _, w in candidates)
            kept, mass = [], 0.0
            for tw in candidates:
                kept.append(tw)
                mass += tw[1]
                if mass >= top_p * total:
                    break
            candidates = kept
        total = sum(w for _, w in candidates)
        r = self.rng.random() * total
        for token, w in candidates:
            r -= w
            if r < 0:
                return token
        return candidates[-1][0]

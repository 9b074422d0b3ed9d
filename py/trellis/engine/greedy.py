"""Greedy decoding with the choice made on the GPU, several steps in flight.

Reading logits back costs a fixed latency per step (in Chromium about 2 ms after a dispatch, more
than a small model's whole step on a software adapter). When the host would only take the argmax
(temperature 0, no grammar, no penalties, bias or logprobs), the GPU picks the token itself and
feeds it to the next step, and the host reads back token ids while later steps run. A step queued
past the end of the generation (an end-of-text token, a stop string, an interrupt) is wasted GPU
work that delays the next request: the pipeline starts one step deep and grows only while steps
are short, to about PIPELINE_S of them (a 100 ms step never runs ahead); the KV cache is rewound
past the steps dropped.
"""

from __future__ import annotations

import time
from collections import deque

PIPELINE_S = 0.016  # GPU work queued ahead of the token being read, at most
MAX_DEPTH = 16


def greedy_on_gpu(config, constraint, executor) -> bool:
    """Whether a request's sampling is the plain argmax, which the GPU can do itself."""
    return (constraint is None and config.temperature == 0 and not config.logprobs and not config.logit_bias
            and config.repetition_penalty == 1.0 and config.frequency_penalty == 0 and config.presence_penalty == 0
            and executor.greedy_on_gpu)


class GreedyPipeline:
    """The steps of one greedy generation: `feed` the first token, then `next()` gives each
    following one; `close()` gives up the steps still in flight."""

    def __init__(self, executor, steps: int, allowed=None):
        """`steps`: the most decode steps the generation may run; `allowed`: a bitmask of the tokens
        the argmax may pick (all but the stop tokens when `ignore_eos` bans them), or None for all."""
        self.executor, self.limit = executor, steps
        self.masked = allowed is not None
        if self.masked:
            executor.load_bitmask(allowed)
        self.pending = deque()
        self.queued = 0  # steps submitted
        self.depth = 1  # steps in flight, adapted to the step time once it is measured
        self.wait_s = 0.0
        self._last = None

    def feed(self, first_token: int) -> None:
        """Start with `first_token` (sampled from the prompt's logits) as the first step's input."""
        self._submit(first_token)
        self._top_up()

    async def next(self) -> int:
        """The next token: the pick of the oldest step in flight (waits for its read-back)."""
        w0 = time.perf_counter()
        token = await self.executor.collect_token(self.pending.popleft())
        now = time.perf_counter()
        self.wait_s += now - w0
        if self._last is not None:  # one token per step: the interval is the step time
            self.depth = max(1, min(MAX_DEPTH, round(PIPELINE_S / max(now - self._last, 1e-6))))
        self._last = now
        return token

    def advance(self) -> None:
        """The token `next` gave is accepted: queue more steps behind it (up to the limit)."""
        self._top_up()

    def close(self) -> None:
        """Drop the steps still in flight (the caller rewinds the KV cache to the tokens it took)."""
        while self.pending:
            self.executor.discard(self.pending.popleft())

    def _submit(self, token: int | None) -> None:
        self.pending.append(self.executor.submit_greedy(token, self.masked))
        self.queued += 1

    def _top_up(self) -> None:
        while len(self.pending) < self.depth and self.queued < self.limit:
            self._submit(None)

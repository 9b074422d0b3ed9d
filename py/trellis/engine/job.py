"""What the engine runs and what it reports: a Job in, Delta events and one Done out.

    job = engine.chat_job(request)          # or engine.completion_job: validated, rendered, tokenized
    async for event in engine.run(job):     # Delta(index, text, logprobs) ..., then Done(outcomes, stats)

Faces (faces.py: OpenAI / web-llm chat and text completions; the HTTP server) shape requests
into jobs and events into responses; none reaches into the engine further.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trellis.grammar.constraints import Constraint


class Cancellation:
    """A job's own stop request. Whoever holds the job (a face, the HTTP server when its client
    goes away) may set it from any thread; the engine checks it before each token, so a stop
    asked before the first token is never lost."""

    __slots__ = ("requested",)

    def __init__(self):
        self.requested = False

    def cancel(self) -> None:
        self.requested = True


@dataclass(frozen=True, eq=False)
class Job:
    """One request, ready to run: the validated request (request.py), its prompt's tokens and the
    constraint on its output (None: plain text). `epoch`: the engine's interrupt count when the job
    was made (interrupt_generate stops every job made before it); `cancellation`: its own stop."""
    request: object  # ChatRequest | CompletionRequest
    prompt: list[int]
    constraint: Constraint | None
    epoch: int = 0
    cancellation: Cancellation = field(default_factory=Cancellation)

    @property
    def config(self):
        return self.request.config

    def cancel(self) -> None:
        """Stop this job at its next token (it ends with finish_reason "abort"), or before it starts."""
        self.cancellation.cancel()


@dataclass
class Outcome:
    """What one choice produced, for the final response and the stats."""
    text: str = ""
    finish_reason: str = "length"
    tokens: list[int] = field(default_factory=list)
    logprobs: list | None = None
    prompt_tokens: int = 0
    prefill_tokens: int = 0  # the part of the prompt not already in the KV cache
    prefill_s: float = 0.0
    decode_s: float = 0.0  # from the first logits to the end
    decode_steps: int = 0  # tokens run through the model after the prompt
    ttft_s: float = 0.0
    grammar_init_s: float = 0.0
    grammar_s: float = 0.0  # mask fills and token accepts after the first token
    wait_s: float = 0.0  # waiting for decode steps' logits (the GPU's work and the read-back)
    grammar_hit: bool | None = None


@dataclass(frozen=True)
class Delta:
    """A piece of choice `index`'s text, with the log-probabilities of its tokens when asked."""
    index: int
    text: str
    logprobs: list | None


@dataclass(frozen=True)
class Done:
    """The job's end: every choice's outcome and the request's statistics (runtime_stats)."""
    outcomes: list[Outcome]
    stats: dict

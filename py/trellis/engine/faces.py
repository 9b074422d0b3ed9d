"""The OpenAI / web-llm faces of the engine: shape a request into a job, its events into chunks
or a response.

`ChatFace` and `TextFace` serve `engine.chat.completions` and `engine.completions` through the
engine's public verbs only (chat_job / completion_job, run, parse_tool_calls). `engine.run` is a
coroutine that suspends only on asynchronous backends; on synchronous ones `create` drives it
without an event loop, and `AsyncFace` awaits it.
"""

from __future__ import annotations

from trellis.errors import RuntimeBackendError

from . import responses as R
from .job import Delta, Job, Outcome


class Face:
    """Shared by chat and text completions: runs the choices, then shapes chunks or a response."""

    def __init__(self, engine):
        self.engine = engine

    def create(self, **request):
        job, events = self.start(request)
        return _iterate(events) if job.request.stream else _drive(self.collect(job, events))

    def start(self, request: dict):
        """(job, async iterator of chunks when streaming, else of the engine's events)."""
        job = self._job(request)
        events = self.engine.run(job)
        return job, self._chunks(job.request, events) if job.request.stream else events

    async def collect(self, job: Job, events):
        async for event in events:
            if not isinstance(event, Delta):
                return self._response(job.request, event.outcomes, event.stats)

    def _usage(self, outcomes, stats) -> dict:
        return R.usage(outcomes[0].prompt_tokens, sum(len(o.tokens) for o in outcomes), stats)

    def _logprobs(self, entries):
        return R.logprobs_content(entries, self.engine.tokenizer.token_bytes)

    def _chunk_maker(self, id_prefix: str, object_name: str):
        """chunk(choices, usage=...) for one streamed response: one id and timestamp for all."""
        ident, created, model = R.new_id(id_prefix), R.now(), self.engine.model_id

        def chunk(choices, **usage):
            return R.Record(id=ident, object=object_name, created=created, model=model, choices=choices, **usage)

        return chunk


class ChatFace(Face):
    def _job(self, request) -> Job:
        return self.engine.chat_job(request)

    def _message(self, req, out: Outcome) -> tuple[dict, str]:
        if req.tools and req.tool_choice != "none":
            content, calls = self.engine.parse_tool_calls(out.text, req.tools)
            if calls:
                finish = "tool_calls" if out.finish_reason == "stop" else out.finish_reason
                return {"role": "assistant", "content": content, "tool_calls": calls}, finish
        return {"role": "assistant", "content": out.text}, out.finish_reason

    def _response(self, req, outcomes, stats):
        choices = []
        for i, out in enumerate(outcomes):
            message, finish = self._message(req, out)
            choices.append({"index": i, "message": message, "finish_reason": finish,
                            "logprobs": self._logprobs(out.logprobs)})
        return R.Record(id=R.new_id("chatcmpl"), object="chat.completion", created=R.now(),
                        model=self.engine.model_id, choices=choices, usage=self._usage(outcomes, stats))

    async def _chunks(self, req, events):
        chunk = self._chunk_maker("chatcmpl", "chat.completion.chunk")
        buffered = bool(req.tools and req.tool_choice != "none")  # tool calls come whole, at the end

        started = set()
        async for event in events:
            if isinstance(event, Delta):
                index, text, logprobs = event.index, event.text, event.logprobs
                if not buffered:
                    delta = {"content": text} if index in started else {"role": "assistant", "content": text}
                    started.add(index)
                    yield chunk([{"index": index, "delta": delta, "finish_reason": None,
                                  "logprobs": self._logprobs(logprobs)}])
                continue
            outcomes, stats = event.outcomes, event.stats
            for i, out in enumerate(outcomes):
                message, finish = self._message(req, out)
                delta = {}
                if buffered:
                    delta = {"role": "assistant", "content": message["content"]}
                    if "tool_calls" in message:
                        delta["tool_calls"] = [dict(c, index=k) for k, c in enumerate(message["tool_calls"])]
                yield chunk([{"index": i, "delta": delta, "finish_reason": finish, "logprobs": None}])
            if req.include_usage:
                yield chunk([], usage=self._usage(outcomes, stats))


class TextFace(Face):
    def _job(self, request) -> Job:
        return self.engine.completion_job(request)

    def _response(self, req, outcomes, stats):
        choices = [{"index": i, "text": (req.prompt if req.echo else "") + out.text,
                    "finish_reason": out.finish_reason, "logprobs": self._logprobs(out.logprobs)}
                   for i, out in enumerate(outcomes)]
        return R.Record(id=R.new_id("cmpl"), object="text_completion", created=R.now(),
                        model=self.engine.model_id, choices=choices, usage=self._usage(outcomes, stats))

    async def _chunks(self, req, events):
        chunk = self._chunk_maker("cmpl", "text_completion")

        echoed = set()
        async for event in events:
            if isinstance(event, Delta):
                index, text, logprobs = event.index, event.text, event.logprobs
                if req.echo and index not in echoed:
                    echoed.add(index)
                    text = req.prompt + text
                yield chunk([{"index": index, "text": text, "finish_reason": None,
                              "logprobs": self._logprobs(logprobs)}])
                continue
            outcomes, stats = event.outcomes, event.stats
            for i, out in enumerate(outcomes):
                yield chunk([{"index": i, "text": "", "finish_reason": out.finish_reason, "logprobs": None}])
            if req.include_usage:
                yield chunk([], usage=self._usage(outcomes, stats))


def _drive(awaitable):
    """Run an awaitable that never suspends (synchronous backends) to its result."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value
    awaitable.close()
    raise RuntimeBackendError("this backend waits asynchronously: use AsyncEngine")


def _iterate(agen):
    """A plain iterator over an async generator that never suspends."""
    while True:
        try:
            yield _drive(agen.__anext__())
        except StopAsyncIteration:
            return


class AsyncFace:
    def __init__(self, face: Face):
        self._face = face

    async def create(self, **request):
        job, events = self._face.start(request)
        return events if job.request.stream else await self._face.collect(job, events)

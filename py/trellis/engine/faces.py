"""The OpenAI / web-llm faces of the engine: shape a request into a job, its events into chunks
or a response.

`ChatFace` and `TextFace` serve `engine.chat.completions` and `engine.completions` through the
engine's public verbs only (chat_job / completion_job, run, parse_tool_calls). `engine.run` is a
coroutine that suspends only on asynchronous backends; on synchronous ones `create` drives it
without an event loop, and `AsyncFace` awaits it; the HTTP server (trellis/serve/worker.py) drives it on its
engine thread.

`response_format` may also be a pydantic model class (anything with `model_json_schema` and
`model_validate_json`): it is sent as a strict json_schema format named after the class, and a
chat answer that ends with "stop" gets `message.parsed`, the validated instance (as the openai
SDK's `parse` gives). Pydantic is the caller's; Trellis does not import it.
"""

from __future__ import annotations

from trellis.errors import RuntimeBackendError
from trellis.grammar.json_values import is_model_class

from . import responses as R
from .job import Delta, Job, Outcome


class Face:
    """Shared by chat and text completions: runs the choices, then shapes chunks or a response."""

    def __init__(self, engine):
        self.engine = engine

    def create(self, **request):
        """The response, or with stream=True an iterator of chunks. A second request while this
        thread's stream is still open raises EngineBusyError (requests never interleave)."""
        self.engine.check_turn()
        job, events = self.start(request)
        return iterate(events) if job.request.stream else drive(self.collect(job, events))

    def start(self, request: dict):
        """(job, async iterator of chunks when streaming, else of the engine's events)."""
        request, model_class = _pydantic_format(request)
        job = self._job(request)
        events = self.engine.run(job)
        if job.request.stream:
            return job, _closing(self._chunks(job.request, events), events)
        return job, _Collectable(events, model_class)

    async def collect(self, job: Job, events):
        """The response once `events` (from start) end."""
        try:
            async for event in events:
                if not isinstance(event, Delta):
                    response = self._response(job.request, event.outcomes, event.stats)
                    model_class = getattr(events, "model_class", None)
                    if model_class is not None:
                        _fill_parsed(response, model_class)
                    return response
        finally:
            await events.aclose()

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


class _Collectable:
    """The engine's events for a whole response, with the pydantic class to parse it into."""

    def __init__(self, events, model_class):
        self.events, self.model_class = events, model_class

    def __aiter__(self):
        return self.events.__aiter__()

    async def aclose(self):
        await self.events.aclose()


async def _closing(chunks, events):
    """`chunks`, then `events` closed however the chunks end (read to the end, closed or failed):
    a dropped async generator is finalized by whatever event-loop hooks are set, maybe never (an
    idle loop's, as Playwright's sync API leaves them), and the engine's turn must come back now."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        await chunks.aclose()
        await events.aclose()


def _pydantic_format(request: dict) -> tuple[dict, type | None]:
    """The request with a pydantic class as response_format replaced by its strict json_schema."""
    rf = request.get("response_format")
    if not (is_model_class(rf) and hasattr(rf, "model_validate_json")):
        return request, None
    schema = {"name": rf.__name__, "schema": rf, "strict": True}  # the grammar side reads the class's schema
    return {**request, "response_format": {"type": "json_schema", "json_schema": schema}}, rf


def _fill_parsed(response, model_class) -> None:
    for choice in response.get("choices", ()):
        message = choice.get("message")
        if message is not None:
            ok = choice["finish_reason"] == "stop" and message.get("content") is not None
            message["parsed"] = model_class.model_validate_json(message["content"]) if ok else None


def drive(awaitable):
    """Run an awaitable that never suspends (synchronous backends) to its result."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value
    awaitable.close()
    raise RuntimeBackendError("this backend waits asynchronously: use AsyncEngine")


def iterate(agen):
    """A plain iterator over an async generator that never suspends; closing it (or dropping it)
    closes the generator, which gives the engine's turn back."""
    try:
        while True:
            try:
                yield drive(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        drive(agen.aclose())


class AsyncFace:
    def __init__(self, face: Face):
        self._face = face

    async def create(self, **request):
        self._face.engine.check_turn()
        job, events = self._face.start(request)
        return events if job.request.stream else await self._face.collect(job, events)

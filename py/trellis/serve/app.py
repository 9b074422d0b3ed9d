"""HTTP <-> the engine's faces, as OpenAI's API shapes it (and llama.cpp's and vLLM's servers do).

    POST /v1/chat/completions   JSON, or text/event-stream with stream=true (stream_options.include_usage)
    POST /v1/completions        the same for raw prompts
    GET  /v1/models[/{id}]      the one model served
    GET  /health                200 when the engine is loaded (with the queue's state), 503 while loading

Errors are OpenAI's error objects, {"error": {"message", "type", "param", "code"}}: 400 with `param`
naming the field (the engine's InvalidRequestError.field), 404 for another model, 401 without the
API key, 413 for a body over the size limit, 429 when the queue is full, 503 while loading; no
traceback reaches a client. A request is validated, rendered and tokenized on a thread of the
event loop's pool (engine.chat_job through the face's `start`), then queued for the engine thread;
an error at the start of a stream is still an HTTP error, one after its first chunk an SSE
`data: {"error": ...}` event. A client that leaves stops its job at the next token (or takes it
out of the queue).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trellis.errors import InvalidRequestError, SequenceLengthError, TrellisError

from .worker import EngineWorker, QueueFullError, Ticket

MAX_BODY = 4 << 20  # bytes; a request with a 4 MiB prompt is already far past any context window


class ApiError(Exception):
    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.type, "param": self.param,
                                       "code": self.code}}, status_code=self.status)

    def event(self) -> str:
        return _sse({"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}})


def api_error(e: BaseException, request: dict | None = None) -> ApiError:
    """The OpenAI error object for an exception raised on the request path."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, InvalidRequestError):
        if e.field == "model" and isinstance((request or {}).get("model"), str):
            return ApiError(404, e.message, param="model", code="model_not_found")
        return ApiError(400, e.message, param=e.field)
    if isinstance(e, SequenceLengthError):
        field = "prompt" if request is not None and "prompt" in request else "messages"
        return ApiError(400, str(e), param=field, code="context_length_exceeded")
    if isinstance(e, QueueFullError):
        return ApiError(429, str(e), type="rate_limit_error", code="queue_full")
    if isinstance(e, TrellisError) and isinstance(e, ValueError):
        return ApiError(400, str(e))
    return ApiError(500, f"internal error ({type(e).__name__}); see the server's log", type="server_error")


def _sse(data) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


class Server:
    """The routes over one EngineWorker."""

    def __init__(self, worker: EngineWorker, *, api_key: str | None = None, max_body: int = MAX_BODY):
        self.worker, self.max_body = worker, max_body
        self._key = f"Bearer {api_key}".encode() if api_key else None
        self.started = int(time.time())

    def app(self) -> Starlette:
        routes = [Route("/v1/chat/completions", self.chat, methods=["POST"]),
                  Route("/v1/completions", self.completions, methods=["POST"]),
                  Route("/v1/models", self.models, methods=["GET"]),
                  Route("/v1/models/{model:path}", self.model, methods=["GET"]),
                  Route("/health", self.health, methods=["GET"])]
        return Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _server_error})

    # ---- routes --------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        return await self._complete(request, lambda engine: engine.chat.completions)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, lambda engine: engine.completions)

    async def models(self, request: Request) -> Response:
        try:
            self._gate(request)
        except ApiError as e:
            return e.response()
        return JSONResponse({"object": "list", "data": [self._model_record()]})

    async def model(self, request: Request) -> Response:
        try:
            self._gate(request)
            if request.path_params["model"] != self.worker.engine.model_id:
                raise ApiError(404, f"this server serves {self.worker.engine.model_id!r}", param="model",
                               code="model_not_found")
        except ApiError as e:
            return e.response()
        return JSONResponse(self._model_record())

    async def health(self, request: Request) -> Response:
        if not self.worker.ready:
            return _loading().response()
        return JSONResponse({"status": "ok", "model": self.worker.engine.model_id, **self.worker.status()})

    # ---- the request path ------------------------------------------------------------------

    def _model_record(self) -> dict:
        return {"id": self.worker.engine.model_id, "object": "model", "created": self.started, "owned_by": "trellis"}

    def _gate(self, request: Request) -> None:
        """The API key (constant-time comparison), then the engine's readiness."""
        if self._key is not None:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self._key):
                raise ApiError(401, "a valid API key is required (Authorization: Bearer KEY)",
                               code="invalid_api_key")
        if not self.worker.ready:
            raise _loading()

    async def _body(self, request: Request) -> dict:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise _too_large(self.max_body)
        data = bytearray()
        async for part in request.stream():
            data += part
            if len(data) > self.max_body:
                raise _too_large(self.max_body)
        try:
            body = json.loads(data, parse_constant=_no_constants)
        except (ValueError, RecursionError) as e:
            raise ApiError(400, f"the body is not valid JSON: {e}", code="invalid_json") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        # OpenAI's bookkeeping fields (user, metadata, ...) the engine's validation accepts and
        # ignores; parallel_tool_calls without tools it refuses, but clients send it with every
        # request, and there it cannot change the answer.
        if body.get("parallel_tool_calls") is not None and not body.get("tools"):
            body.pop("parallel_tool_calls")
        return body

    async def _complete(self, request: Request, face_of) -> Response:
        body = None
        try:
            self._gate(request)
            body = await self._body(request)
            face = face_of(self.worker.engine)
            job, source = await anyio.to_thread.run_sync(face.start, body)
        except Exception as e:
            return api_error(e, body).response()
        ticket = Ticket(job, source, face.collect, asyncio.get_running_loop())
        try:
            self.worker.submit(ticket)
        except QueueFullError as e:
            ticket.skip()
            return api_error(e).response()
        kind, value = await self._next(ticket, request)
        if kind == "error":
            return api_error(value, body).response()
        if kind == "result":
            return JSONResponse(value)
        if kind == "end":  # cancelled before it ran: its client is gone
            return Response(status_code=499)
        return StreamingResponse(self._stream(ticket, (kind, value), body), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def _next(self, ticket: Ticket, request: Request):
        """The ticket's next event; a client that leaves meanwhile cancels the job."""
        get = asyncio.ensure_future(ticket.events.get())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait({get, gone}, return_when=asyncio.FIRST_COMPLETED)
            if get not in done:
                self.worker.cancel(ticket)
            return await get
        finally:
            gone.cancel()

    async def _stream(self, ticket: Ticket, first, body):
        """SSE events from the ticket's chunks. Starlette cancels this generator when the client
        disconnects; the job then stops at its next token."""
        kind, value = first
        try:
            while True:
                if kind == "chunk":
                    yield _sse(value)
                elif kind == "error":
                    yield api_error(value, body).event()
                elif kind == "end":
                    yield "data: [DONE]\n\n"
                    return
                kind, value = await ticket.events.get()
        finally:
            self.worker.cancel(ticket)  # nothing when it has ended


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _loading() -> ApiError:
    return ApiError(503, "the model is loading; retry shortly", type="service_unavailable", code="model_loading")


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit} bytes", code="request_too_large")


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return ApiError(exc.status_code, exc.detail or "error", code=None).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    return api_error(exc).response()

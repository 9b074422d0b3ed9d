"""`trellis serve`: the OpenAI-compatible HTTP server on one built model.

It binds 127.0.0.1 by default; another address needs --api-key (clients send
`Authorization: Bearer KEY`). The engine loads on its own thread while the server already answers
(/health says 503 until it is ready). Connections are bounded: a request's head (and body) must
arrive within --request-timeout seconds of connecting, an idle keep-alive connection closes after
5 s, and past --max-connections uvicorn answers 503.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
import threading

LOOPBACK = ("localhost",)


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _protocol(request_timeout: float):
    """uvicorn's h11 protocol with a deadline for the first request's head and body (uvicorn itself
    times out only idle keep-alive connections: a silent or slow client would hold its socket)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        def connection_made(self, transport):
            super().connection_made(transport)
            self._deadline = self.loop.call_later(request_timeout, self._request_late)

        def _request_late(self):
            if (self.cycle is None or self.conn.their_state is h11.SEND_BODY) and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc):
            self._deadline.cancel()
            super().connection_lost(exc)

    return Protocol


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="trellis serve", description="serve a model over an OpenAI-compatible "
                                     "HTTP API (POST /v1/chat/completions, /v1/completions; GET /v1/models, /health)")
    parser.add_argument("--model", help="built model folder (default: the embedded SmolLM2)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --api-key)")
    parser.add_argument("--port", type=int, default=8080, help="port (0: any free one; the URL is printed)")
    parser.add_argument("--api-key", help="require `Authorization: Bearer KEY` on /v1 routes")
    parser.add_argument("--context", type=int, default=2048, help="KV-cache size in tokens")
    parser.add_argument("--max-queue", type=int, default=64, help="requests waiting for the engine, at most (then 429)")
    parser.add_argument("--max-body", type=int, default=4 << 20, help="request body limit in bytes (then 413)")
    parser.add_argument("--max-connections", type=int, default=4096, help="open connections, at most (then 503)")
    parser.add_argument("--request-timeout", type=float, default=30.0,
                        help="seconds a new connection has to send its request")
    args = parser.parse_args(argv)
    if not _is_loopback(args.host) and not args.api_key:
        print(f"trellis serve: refusing to bind {args.host} without --api-key: anyone who can reach it could use "
              "the model. Bind 127.0.0.1, or set --api-key KEY.", file=sys.stderr)
        return 2
    if args.max_queue < 0:
        parser.error("--max-queue must be >= 0")

    import uvicorn

    from .app import Server
    from .worker import EngineWorker

    def load():
        from trellis.engine import Engine

        return Engine(args.model, context=args.context)

    worker = EngineWorker(load, max_queue=args.max_queue)
    server = Server(worker, api_key=args.api_key, max_body=args.max_body)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        print(f"trellis serve: cannot bind {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    sock.listen(2048)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(server.app(), http=_protocol(args.request_timeout), lifespan="off", log_level="warning",
                            timeout_keep_alive=5, limit_concurrency=args.max_connections, access_log=False)
    web = uvicorn.Server(config)

    def watch_loading():
        worker.loaded.wait()
        if worker.load_error is not None:
            print(f"trellis serve: cannot load the model: {type(worker.load_error).__name__}: {worker.load_error}",
                  file=sys.stderr, flush=True)
            web.should_exit = True
        else:
            print(f"trellis serve: ready, serving {worker.engine.model_id!r}", flush=True)

    url_host = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"trellis serve: listening on http://{url_host}:{port}/v1 (loading the model)", flush=True)
    worker.start()
    threading.Thread(target=watch_loading, daemon=True).start()
    web.run(sockets=[sock])
    worker.stop()
    return 1 if worker.load_error is not None else 0

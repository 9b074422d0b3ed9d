"""`trellis serve` under load and faults, on loopback only, on the tiny random model (or --model DIR).

    python3 benchmarks/serve_bench.py [--model DIR] [--clients 32] [--requests 4]
    python3 build.py bench serve                  (same thing, through the project's entry point)

One server process (--max-queue 40, --request-timeout 5). First every prompt is answered alone,
one at a time: greedy (temperature 0, ignore_eos, 24 tokens), so each prompt has one right answer.
Then:

  load     CLIENTS threads, each with its own `openai` client, send REQUESTS requests each
           (prompts in rotation, half streamed), all at once. Every answer must equal its answer
           alone: none lost (an error), duplicated (a response id seen twice) or corrupted (other
           text). Latency per request (send to last byte) p50 / p99, requests/s and tokens/s.
  queue    80 requests at once on the queue of 40: the ones over the bound get 429 at once
           (counted), every accepted one is right.
  faults   each followed by GET /health (and a right answer where it matters):
           clients leaving mid-stream (20 streams read to their first chunk, then closed; the
           server's `cancelled` counter must count them), malformed bodies (truncated JSON, bad
           UTF-8, NaN, 100k-deep nesting, not an object: all 400), a 10 MB body (413, declared
           and chunked), a slow sender (one byte per 0.5 s: closed at the request deadline), a
           reader that never reads a long stream (others are served meanwhile), and 2,000 idle
           connections (the server answers meanwhile and closes them at the deadline).

Writes benchmarks/results/serve.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "py"), str(REPO)]
from benchmarks.report import cpu_line, percentile as pct  # noqa: E402
from tests.serve.process import ServerProcess, open_stream, read_until, request  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "serve.md"
MAX_TOKENS = 24
PROMPTS = [f"Question {i}: tell me something about the number {i * 7}." for i in range(16)]


def tiny_model_dir() -> Path:
    from trellis.kernels.build_model import main as build
    from tests.model.tiny_gguf import write_tiny_llama

    tmp = Path(tempfile.mkdtemp(prefix="trellis-serve-bench-"))
    write_tiny_llama(tmp / "tiny.gguf")
    build(["--gguf", str(tmp / "tiny.gguf"), "--out", str(tmp / "out")])
    return tmp / "out"


class Bench:
    def __init__(self, server: ServerProcess):
        import openai

        self.openai, self.server = openai, server
        self.client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=600)
        self.model = self.client.models.list().data[0].id
        self.lines: list[str] = []

    def ask(self, client, prompt: str, stream: bool) -> tuple[str, str, float]:
        """(response id, text, seconds) of one greedy request."""
        t0 = time.perf_counter()
        kw = dict(model=self.model, messages=[{"role": "user", "content": prompt}], temperature=0,
                  max_tokens=MAX_TOKENS, extra_body={"ignore_eos": True})
        if stream:
            ident, text = None, []
            for chunk in client.chat.completions.create(stream=True, **kw):
                ident = chunk.id
                text += [c.delta.content or "" for c in chunk.choices]
            return ident, "".join(text), time.perf_counter() - t0
        r = client.chat.completions.create(**kw)
        return r.id, r.choices[0].message.content, time.perf_counter() - t0

    def healthy(self, what: str) -> bool:
        status, health = self.server.health()
        ok = status == 200 and health.get("status") == "ok"
        self.lines.append(f"  - after {what}: /health {status}" + ("" if ok else " (NOT OK)"))
        return ok

    def idle(self, seconds: float = 60) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, health = self.server.health()
            if status == 200 and not health["running"] and not health["waiting"]:
                return health
            time.sleep(0.05)
        return self.server.health()[1]


def run(bench: Bench, clients: int, per_client: int) -> list[str]:
    out = []
    alone, single = {}, []
    for p in PROMPTS:
        _, alone[p], s = bench.ask(bench.client, p, False)
        single.append(s)
    out.append(f"Answers alone: {len(PROMPTS)} prompts, one at a time: median {1000 * statistics.median(single):.0f} "
               f"ms per request of {MAX_TOKENS} tokens.")

    # ---- load ----
    results, errors = [], []

    def client_work(c: int):
        client = bench.openai.OpenAI(base_url=bench.server.url + "/v1", api_key="none", max_retries=0, timeout=600)
        for r in range(per_client):
            prompt = PROMPTS[(c * per_client + r) % len(PROMPTS)]
            try:
                ident, text, s = bench.ask(client, prompt, stream=(c + r) % 2 == 0)
                results.append((prompt, ident, text, s))
            except Exception as e:  # counted as lost
                errors.append(f"{type(e).__name__}: {e}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_work, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    latencies = sorted(s for *_, s in results)
    corrupted = sum(text != alone[p] for p, _, text, _ in results)
    duplicated = len(results) - len({ident for _, ident, _, _ in results})
    total = clients * per_client
    out += ["", "## Load", "",
            f"{clients} concurrent clients x {per_client} greedy requests ({total} in all, half streamed), "
            f"{MAX_TOKENS} tokens each:", "",
            "| requests | answered | lost | duplicated | corrupted | latency p50 | p99 | max | requests/s | tokens/s |",
            "|---|---|---|---|---|---|---|---|---|---|",
            f"| {total} | {len(results)} | {total - len(results)} | {duplicated} | {corrupted} | "
            f"{pct(latencies, 0.5):.2f} s | {pct(latencies, 0.99):.2f} s | {latencies[-1]:.2f} s | "
            f"{len(results) / wall:.1f} | {len(results) * MAX_TOKENS / wall:.0f} |", ""]
    if errors:
        out.append(f"Errors: {sorted(set(errors))[:5]}")
    bench.lines = []
    bench.healthy("the load")

    # ---- queue full ----
    burst, codes, wrong = 80, [], 0

    def one(i):
        client = bench.openai.OpenAI(base_url=bench.server.url + "/v1", api_key="none", max_retries=0, timeout=600)
        try:
            _, text, _ = bench.ask(client, PROMPTS[i % len(PROMPTS)], False)
            return 200, text != alone[PROMPTS[i % len(PROMPTS)]]
        except bench.openai.RateLimitError:
            return 429, False
        except bench.openai.APIStatusError as e:
            return e.status_code, False

    with ThreadPoolExecutor(burst) as pool:
        for code, bad in pool.map(one, range(burst)):
            codes.append(code)
            wrong += bad
    out += ["## Queue bound", "",
            f"{burst} requests at once on --max-queue 40: {codes.count(200)} answered ({wrong} wrong), "
            f"{codes.count(429)} refused with 429 (queue_full), other statuses: "
            f"{sorted(c for c in codes if c not in (200, 429)) or 'none'}.", ""]
    bench.healthy("the burst")

    # ---- faults ----
    faults = []
    before = bench.idle()
    def long_stream(i):
        return open_stream(bench.server, {"messages": [{"role": "user", "content": PROMPTS[i % 16]}],
                                          "max_tokens": 1500, "ignore_eos": True, "stream": True})

    socks = [long_stream(0)]
    read_until(socks[0], b"data: ")  # running
    socks += [long_stream(i) for i in range(1, 20)]  # queued behind it
    deadline = time.monotonic() + 60
    while bench.server.health()[1]["waiting"] < 19 and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.perf_counter()
    for s in socks:
        s.close()
    after = bench.idle()
    drained = time.perf_counter() - t0
    right = bench.ask(bench.client, PROMPTS[3], False)[1] == alone[PROMPTS[3]]
    faults.append(f"- 20 streams of up to 1,500 tokens, closed by their clients (one after its first chunk, 19 "
                  f"while queued): cancelled counter +{after['cancelled'] - before['cancelled']}, served "
                  f"+{after['served'] - before['served']}; idle again {drained:.2f} s after the closes; the next "
                  f"answer {'equals' if right else 'DIFFERS FROM'} its answer alone.")
    bench.healthy("clients leaving mid-stream")

    bodies = [b'{"messages": [', b"\xff\xfe{}", b'{"messages": NaN}', b"[" * 100_000 + b"]" * 100_000, b"[1, 2]",
              b"", b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}']
    statuses = [request(bench.server, "POST", "/v1/chat/completions", b)[0] for b in bodies * 20]
    faults.append(f"- {len(statuses)} malformed bodies ({len(bodies)} kinds x 20): statuses {sorted(set(statuses))}.")
    bench.healthy("malformed bodies")

    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (10 << 20) + b'"}]}'
    t0 = time.perf_counter()
    sock = socket.create_connection((bench.server.host, bench.server.port), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(big))
    try:
        sock.sendall(big[:1 << 20])
    except OSError:
        pass
    declared = read_until(sock, b"\r\n").split(b" ")[1].decode()
    declared_s = time.perf_counter() - t0
    sock.close()
    sock = socket.create_connection((bench.server.host, bench.server.port), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    try:
        for _ in range(12):
            sock.sendall(b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n")
    except OSError:
        pass
    chunked = read_until(sock, b"\r\n").split(b" ")[1].decode()
    sock.close()
    faults.append(f"- 10 MB body: {declared} with Content-Length, refused before the body is read ({1000 * declared_s:.0f} ms), "
                  f"{chunked} chunked (cut at the 4 MiB limit).")
    bench.healthy("10 MB bodies")

    sock = socket.create_connection((bench.server.host, bench.server.port), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
    t0 = time.perf_counter()
    closed_after = None
    try:
        for _ in range(100):
            sock.sendall(b" ")
            time.sleep(0.5)
    except OSError:
        closed_after = time.perf_counter() - t0
    if closed_after is None:
        sock.settimeout(10)
        closed_after = time.perf_counter() - t0 if read_until(sock, b"\r\n\r\n") is not None else None
    sock.close()
    faults.append(f"- a slow sender (one body byte per 0.5 s): its connection ended after {closed_after:.1f} s "
                  f"(request deadline 5 s).")
    bench.healthy("a slow sender")

    reader = open_stream(bench.server, {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1500,
                                        "ignore_eos": True, "stream": True})
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    t0 = time.perf_counter()
    served = bench.ask(bench.client, PROMPTS[5], False)
    faults.append(f"- a client that never reads a 1,500-token stream: another request waited behind it and was "
                  f"answered in {served[2]:.1f} s ({'right' if served[1] == alone[PROMPTS[5]] else 'WRONG'}); the "
                  f"engine is not held by the slow reader (its output is buffered).")
    reader.close()
    bench.healthy("a reader that never reads")

    idle = []
    for _ in range(2000):
        idle.append(socket.create_connection((bench.server.host, bench.server.port), timeout=30))
    t0 = time.perf_counter()
    status = bench.server.health()[0]
    health_ms = 1000 * (time.perf_counter() - t0)
    right = bench.ask(bench.client, PROMPTS[7], False)[1] == alone[PROMPTS[7]]
    time.sleep(6)
    closed = 0
    for s in idle:
        s.settimeout(5)
        try:
            closed += s.recv(1) == b""
        except OSError:
            pass
        s.close()
    faults.append(f"- 2,000 idle connections: /health {status} in {health_ms:.0f} ms while they were open, an answer "
                  f"{'right' if right else 'WRONG'}; {closed} of 2,000 closed by the server at the 5 s deadline.")
    bench.healthy("2,000 idle connections")
    out += ["## Faults", "", *faults, "", "Health checks:", "", *bench.lines, ""]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="built model folder (default: the tiny random model, built now)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="requests per client")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    folder = args.model or tiny_model_dir()
    server = ServerProcess("--model", str(folder), "--max-queue", "40", "--request-timeout", "5")
    try:
        started = time.perf_counter()
        body = run(Bench(server), args.clients, args.requests)
        took = time.perf_counter() - started
    finally:
        server.close()
        if args.model is None:
            shutil.rmtree(folder.parent, ignore_errors=True)
    text = "\n".join(["# trellis serve: load and faults", "",
                      f"`python3 build.py bench serve` on {'the tiny random model' if args.model is None else folder.name}"
                      f" over loopback ({took:.0f} s).", "",
                      cpu_line(), "- lavapipe (software Vulkan); the machine was shared with other jobs while this ran "
                      "(2 cores, loaded), so the times are upper bounds.", "", *body])
    args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

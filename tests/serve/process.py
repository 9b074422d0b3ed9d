"""A `trellis serve` process on a built model, and raw HTTP helpers for what SDKs never send."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """`trellis serve ARGS` in a subprocess, on a free loopback port; ready once /health says 200."""

    def __init__(self, *args: str, timeout: float = 600):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "py"), str(ROOT)])}
        self.log = []
        self.proc = subprocess.Popen([sys.executable, "-m", "trellis.cli", "serve", "--port", "0", *args], cwd=ROOT,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = self.proc.stdout.readline()
        match = re.search(r"http://([\d.]+):(\d+)/v1", first)
        if not match:
            self.close()
            raise RuntimeError(f"trellis serve did not start: {first}{self.proc.stdout.read()}")
        self.host, self.port = match.group(1), int(match.group(2))
        self.url = f"http://{self.host}:{self.port}"
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        self.first_health = self.health()  # while the engine loads
        while self.health()[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("trellis serve never became ready:\n" + "".join(self.log))
            time.sleep(0.5)

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def health(self) -> tuple[int, dict]:
        return request(self, "GET", "/health", timeout=30)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def request(server, method: str, path: str, body=None, headers=None, timeout: float = 120) -> tuple[int, dict]:
    """(status, JSON body) of one request, or (0, {}) when the connection failed; `body` bytes are
    sent as they are."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
    except OSError:
        return 0, {}


def open_stream(server, body: dict, headers=None) -> socket.socket:
    """A raw connection that sent `body` to /v1/chat/completions and is left open (read or not)."""
    data = json.dumps(body).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", f"Host: {server.host}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    sock = socket.create_connection((server.host, server.port), timeout=60)
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    return sock


def read_until(sock: socket.socket, marker: bytes, limit: int = 1 << 20) -> bytes:
    data = b""
    while marker not in data and len(data) < limit:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    return data

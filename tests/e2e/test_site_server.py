"""The static site server under hostile clients: bad paths get a 400 (no traceback), idle
connections time out, and threads stay bounded; it answers a request after each."""

import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from web.site import BoundedServer, make_server


@pytest.fixture
def server(tmp_path, capfd):
    (tmp_path / "index.html").write_text("<p>ok</p>")
    srv = make_server(tmp_path, 0, timeout=1)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def get(server, path: str) -> int:
    url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_bad_paths_are_refused_without_a_traceback(server, capfd):
    assert get(server, "/%00") == 400
    assert get(server, "/a%00b/index.html") == 400
    assert get(server, "/../../etc/passwd") == 404
    assert get(server, "/index.html") == 200
    assert "Traceback" not in capfd.readouterr().err


def test_idle_connections_time_out_and_threads_stay_bounded(server):
    before = threading.active_count()
    idle = [socket.create_connection(server.server_address) for _ in range(BoundedServer.max_threads + 20)]
    try:
        time.sleep(0.5)
        assert threading.active_count() <= before + BoundedServer.max_threads
        assert get(server, "/index.html") == 200  # after the idle ones time out (1 s here)
    finally:
        for s in idle:
            s.close()
    deadline = time.time() + 10
    while threading.active_count() > before + 2 and time.time() < deadline:
        time.sleep(0.1)
    assert threading.active_count() <= before + 2

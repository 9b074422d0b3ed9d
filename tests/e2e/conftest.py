"""The built site with the tiny model, served on 127.0.0.1, and one Chromium (WebGPU on SwiftShader)
shared by the end-to-end tests. Nothing may leave the machine: every request to another host is
aborted and recorded, and Chromium resolves no host name at all."""

import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from web.site import DEFAULT_GRAMMAR_WASM, DEFAULT_PYODIDE, build_site, make_server

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--enable-unsafe-webgpu", "--headless", "--no-sandbox", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]  # no name resolves but ours
MODEL_ID = "tiny-llama"
# A blank page of the site: the tests drive the public API (trellis.js) from it.
TEST_PAGE = "<!doctype html><meta charset='utf-8'><link rel='icon' href='data:,'><title>e2e</title><body>e2e</body>\n"


class Server:
    def __init__(self, folder: Path):
        self.paths: list[str] = []
        self._server = make_server(folder, 0, self.paths.append)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def shard_fetches(self) -> int:
        return sum(1 for p in self.paths if p.startswith(f"/models/{MODEL_ID}/weights-"))

    def close(self):
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="session")
def site_server(tiny_model, tmp_path_factory):
    missing = [p for p in (DEFAULT_PYODIDE / "pyodide.mjs", DEFAULT_GRAMMAR_WASM) if not p.exists()]
    if missing:
        pytest.fail(f"missing {', '.join(map(str, missing))} (python3 build.py test builds them)")
    site = build_site(tmp_path_factory.mktemp("site") / "site", [(MODEL_ID, tiny_model[1])])
    (site / "e2e.html").write_text(TEST_PAGE)
    server = Server(site)
    yield server
    server.close()


def loopback_only(context, blocked: list) -> None:
    """Let the browser context reach the local server only; every other URL is aborted and noted."""
    def route(r):
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)


@pytest.fixture(scope="session")
def browser_context():
    from playwright import sync_api  # pinned in pyproject's test extras

    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail("no Chromium (apt-get install chromium; python3 build.py test installs it)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        context = browser.new_context()  # a fresh profile: empty Cache API, empty HTTP cache
        context.requested, context.blocked = [], []
        context.on("request", lambda r: context.requested.append(r.url))

        loopback_only(context, context.blocked)
        context.set_default_timeout(180_000)
        yield context
        browser.close()


@pytest.fixture(scope="session")
def page(browser_context, site_server):
    """The test page with `window.engine` from CreateEngine() (the site's default model), and
    `window.ask(request, kind)` -> {value} | {chunks} | {error} for the tests."""
    page = browser_context.new_page()
    page.errors, page.console = [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.console.append(f"{m.type}: {m.text}"))
    page.goto(f"{site_server.url}/e2e.html")
    page.load = start_engine(page)
    return page


START = """async () => {
  const api = await import('/trellis.js');
  window.api = api;
  const progress = [];
  const t0 = performance.now();
  window.engine = await api.CreateEngine(undefined, { initProgressCallback: (r) => progress.push(r) });
  const readyMs = performance.now() - t0;
  window.ask = async (request, kind = 'chat') => {
    try {
      const face = kind === 'chat' ? engine.chat.completions : engine.completions;
      const r = await face.create(request);
      if (!request || !request.stream) return { value: r };
      const chunks = [];
      for await (const c of r) chunks.push(c);
      return { chunks };
    } catch (e) {
      const { name, message, field, keyword, pointer, line, column } = e;
      return { error: { name, message, field, keyword, pointer, line, column,
        trellis: e instanceof api.TrellisError, cls: e.constructor.name } };
    }
  };
  return { info: engine.info, progress, readyMs };
}"""


def start_engine(page) -> dict:
    return page.evaluate(START)

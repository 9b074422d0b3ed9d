"""The browser site: build it (page, JS API, worker, Pyodide, grammar wasm, trellis package, models)
into one folder, and serve that folder on 127.0.0.1.

    site/
      index.html demo.css demo.js trellis.js trellis.d.ts webllm.js webllm.d.ts worker.js grammar.js
      trellis_grammar.wasm subgroup_probe.wgsl
      trellis.zip            py/trellis plus web/worker.py (as trellis_worker), and the pure-Python
                             packages the engine imports (jinja2, markupsafe), unpacked by the worker
      pyodide/               the npm pyodide package's runtime files (never a CDN)
      models.json            {"default": id, "models": [ids]}, also as models/models.json (where
                             trellis.js looks: beside the model folders, wherever modelBase puts them)
      models/<id>/           each built model folder (manifest.json, *.wgsl, tokenizer.json, shards)
      examples.json          the demo's examples (trellis.engine.examples.demo_examples())

Used by build.py (`serve`) and the end-to-end tests; imports from trellis only its examples (data).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WEB = Path(__file__).resolve().parent
ROOT = WEB.parent
DEFAULT_PYODIDE = ROOT / "build" / "node" / "node_modules" / "pyodide"
DEFAULT_GRAMMAR_WASM = ROOT / "build" / "grammar" / "wasm" / "trellis_grammar.wasm"
SUBGROUP_PROBE = ROOT / "py" / "trellis" / "runtime" / "subgroup_probe.wgsl"  # the desktop backend runs it too
PAGE_FILES = ("index.html", "demo.css", "demo.js", "trellis.js", "trellis.d.ts", "webllm.js", "webllm.d.ts", "worker.js",
              "grammar.js")
# What loadPyodide fetches from its indexURL (no Pyodide packages: the few the engine needs beside the
# stdlib are pure Python and come in trellis.zip, see PYTHON_PACKAGES).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
# Pure-Python packages the engine imports under Pyodide, whose npm package has no wheels: their
# Python files and licence, taken from the build's environment (pinned in pyproject.toml), go into
# trellis.zip beside trellis. MarkupSafe's optional C speedups stay out (it falls back to _native.py).
PYTHON_PACKAGES = ("jinja2", "markupsafe")
MIME = {".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json",
        ".wgsl": "text/plain; charset=utf-8", ".html": "text/html; charset=utf-8", ".ts": "text/plain; charset=utf-8",
        ".zip": "application/zip", ".bin": "application/octet-stream", ".css": "text/css"}


class SiteError(Exception):
    """A file the site needs is missing (names it and the command that makes it)."""


def _need(path: Path, hint: str) -> Path:
    if not path.exists():
        raise SiteError(f"{path} is missing ({hint})")
    return path


def _place(src: Path, dst: Path) -> None:
    """Hard-link when possible (weight shards are large), else copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def package_files(name: str) -> list[tuple[str, bytes]]:
    """(archive path, bytes) of an installed pure-Python package: its .py files and its licence."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise SiteError(f"the Python package {name} is missing (pinned in pyproject.toml; build.py installs it)")
    out = []
    for f in dist.files or ():
        path = f.as_posix()
        if path.startswith(f"{name}/") and path.endswith(".py"):
            out.append((path, Path(dist.locate_file(f)).read_bytes()))
        elif ".dist-info/" in path and Path(path).name.upper().startswith("LICENSE"):
            out.append((f"{name}/{Path(path).name}", Path(dist.locate_file(f)).read_bytes()))
    if not any(p == f"{name}/__init__.py" for p, _ in out):
        raise SiteError(f"the installed {name} has no {name}/__init__.py to pack")
    return sorted(out)


def package_archive(out: Path) -> Path:
    """py/trellis's Python files, the worker's Python half and PYTHON_PACKAGES, zipped (fixed dates:
    reproducible)."""
    package = ROOT / "py" / "trellis"
    # The model compiler (trellis/kernels: TVM, gguf, numpy) runs at build time only, never in the browser.
    files = sorted(p for p in package.rglob("*.py")
                   if "__pycache__" not in p.parts and p.relative_to(package).parts[0] != "kernels")
    entries = [(path.relative_to(ROOT / "py").as_posix(), path.read_bytes()) for path in files]
    entries.append(("trellis_worker.py", (WEB / "worker.py").read_bytes()))
    for name in PYTHON_PACKAGES:
        entries += package_files(name)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return out


def _model_entries(models) -> list[tuple[str, Path]]:
    """(id, folder) for each model: a Path (its folder name is the id) or an (id, Path) pair."""
    entries = []
    for m in models:
        model_id, folder = (m if isinstance(m, tuple) else (Path(m).name, m))
        folder = Path(folder)
        _need(folder / "manifest.json", f"not a built model folder; run `python3 build.py model --out {folder}`")
        entries.append((model_id, folder))
    ids = [i for i, _ in entries]
    if len(set(ids)) != len(ids):
        raise SiteError(f"two models share an id: {ids}")
    return entries


def build_site(out: Path, models, *, default: str | None = None, pyodide_dir: Path = DEFAULT_PYODIDE,
               grammar_wasm: Path = DEFAULT_GRAMMAR_WASM) -> Path:
    """Builds the site into `out` (replaced). `models`: built model folders (Path or (id, Path));
    the first is the default unless `default` names another."""
    out = Path(out)
    entries = _model_entries(models)
    if not entries:
        raise SiteError("the site needs at least one built model")
    ids = [i for i, _ in entries]
    if default is not None and default not in ids:
        raise SiteError(f"default model {default!r} is not among {ids}")
    _need(grammar_wasm, "run `python3 build.py grammar`")
    for name in PYODIDE_FILES:
        _need(Path(pyodide_dir) / name, "the npm pyodide package; build.py installs it into build/node")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in PAGE_FILES:
        shutil.copy2(_need(WEB / name, "part of the checkout"), out / name)
    shutil.copy2(grammar_wasm, out / "trellis_grammar.wasm")
    shutil.copy2(SUBGROUP_PROBE, out / SUBGROUP_PROBE.name)
    for name in PYODIDE_FILES:
        _place(Path(pyodide_dir) / name, out / "pyodide" / name)
    package_archive(out / "trellis.zip")
    for model_id, folder in entries:
        for path in sorted(folder.iterdir()):
            if path.is_file():
                _place(path, out / "models" / model_id / path.name)
    from trellis.engine.examples import demo_examples

    (out / "examples.json").write_text(json.dumps(demo_examples(), indent=1) + "\n")
    listing = json.dumps({"default": default or ids[0], "models": ids}, indent=1) + "\n"
    (out / "models.json").write_text(listing)
    (out / "models" / "models.json").write_text(listing)
    return out


class Handler(SimpleHTTPRequestHandler):
    """Static files with the MIME types browsers insist on (module scripts, wasm streaming) and no
    HTTP caching: the worker keeps weight shards in the Cache API itself. A connection that has not
    sent its request within `timeout` seconds is closed; a response waits up to `send_timeout` for
    a reader (a browser busy compiling may not read a big file for a while)."""

    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, **MIME}
    on_request = None  # optional callable(path) for each GET (the tests count shard fetches)
    timeout = 10
    send_timeout = 300

    def send_head(self):
        try:
            return super().send_head()
        except ValueError:  # a path the file system cannot hold (a NUL byte, "/%00")
            self.send_error(400, "Bad request path")
            return None

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self):
        self.connection.settimeout(self.send_timeout)
        if self.on_request is not None:
            self.on_request(self.path)
        super().do_GET()

    def log_message(self, format, *args):  # quiet: one line per file would drown the build's output
        pass


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_threads` at once: past that, accepting waits (the
    handler's timeout frees threads held by idle connections). A failed request is one line on
    stderr, never a traceback."""

    daemon_threads = True
    max_threads = 64
    request_queue_size = 128  # connections the kernel holds while all threads are busy

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.max_threads)

    def process_request(self, request, client_address):
        self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        print(f"site: {client_address[0]}: {type(error).__name__}: {error}", file=sys.stderr)


def make_server(folder: Path, port: int = 8000, on_request=None, timeout: float = Handler.timeout) -> BoundedServer:
    """A server for `folder` on 127.0.0.1 (port 0: a free one); call serve_forever() on it."""
    handler = type("SiteHandler", (Handler,), {"on_request": staticmethod(on_request) if on_request else None,
                                               "timeout": timeout})
    return BoundedServer(("127.0.0.1", port), partial(handler, directory=str(folder)))


def serve(folder: Path, port: int = 8000) -> None:
    """Serves `folder` on http://127.0.0.1:<port>/ until interrupted."""
    with make_server(folder, port) as server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass

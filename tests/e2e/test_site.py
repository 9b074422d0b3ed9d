"""web/site.py without a browser: what the site holds and how it is served."""

import json
import urllib.request
import zipfile

import pytest

from trellis.engine.examples import PERSON_SCHEMA, WEATHER_TOOLS
from web.site import SiteError, build_site

from .conftest import MODEL_ID


def get(server, path):
    with urllib.request.urlopen(server.url + path) as r:
        return r.headers, r.read()


def test_site_files_and_mime_types(site_server):
    for path, mime in [("/", "text/html"), ("/trellis.js", "text/javascript"), ("/worker.js", "text/javascript"),
                       ("/pyodide/pyodide.mjs", "text/javascript"), ("/pyodide/pyodide.asm.wasm", "application/wasm"),
                       ("/trellis_grammar.wasm", "application/wasm"), ("/models.json", "application/json"),
                       (f"/models/{MODEL_ID}/manifest.json", "application/json"),
                       (f"/models/{MODEL_ID}/weights-000.bin", "application/octet-stream")]:
        headers, _ = get(site_server, path)
        assert headers["Content-Type"].startswith(mime), (path, headers["Content-Type"])
        assert headers["Cache-Control"] == "no-store"
    assert json.loads(get(site_server, "/models.json")[1]) == {"default": MODEL_ID, "models": [MODEL_ID]}
    # trellis.js and webllm.js read the list beside the model folders (wherever modelBase puts them).
    assert get(site_server, "/models/models.json")[1] == get(site_server, "/models.json")[1]
    assert get(site_server, "/webllm.js")[0]["Content-Type"].startswith("text/javascript")
    examples = json.loads(get(site_server, "/examples.json")[1])  # the demo's, from trellis.engine.examples
    assert examples["schemas"][0]["schema"] == PERSON_SCHEMA and examples["tools"]["tools"] == WEATHER_TOOLS
    manifest = json.loads(get(site_server, f"/models/{MODEL_ID}/manifest.json")[1])
    for kernel in manifest["kernels"].values():
        get(site_server, f"/models/{MODEL_ID}/{kernel['wgsl']}")


def test_package_archive_holds_trellis_and_the_worker_module(site_server, tmp_path):
    (tmp_path / "t.zip").write_bytes(get(site_server, "/trellis.zip")[1])
    names = set(zipfile.ZipFile(tmp_path / "t.zip").namelist())
    assert {"trellis_worker.py", "trellis/engine/engine.py", "trellis/runtime/webgpu_backend.py"} <= names
    # jinja2 and markupsafe for chat templates, pure Python with their licences (Pyodide has no wheels here)
    assert {"jinja2/__init__.py", "jinja2/sandbox.py", "jinja2/LICENSE.txt", "markupsafe/__init__.py",
            "markupsafe/_native.py", "markupsafe/LICENSE.txt"} <= names
    assert all(n.endswith((".py", ".txt")) for n in names)
    assert not any("__pycache__" in n for n in names)
    # the model compiler (TVM, gguf, numpy) is build-time only: it never reaches the browser
    assert not any(n.startswith("trellis/kernels/") for n in names)


def test_build_site_names_what_is_missing(tmp_path, tiny_model):
    with pytest.raises(SiteError, match="not a built model folder"):
        build_site(tmp_path / "a", [tmp_path])
    with pytest.raises(SiteError, match="share an id"):
        build_site(tmp_path / "b", [("x", tiny_model[1]), ("x", tiny_model[1])])
    with pytest.raises(SiteError, match="default model"):
        build_site(tmp_path / "c", [tiny_model[1]], default="nope")

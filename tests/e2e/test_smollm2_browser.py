"""The embedded SmolLM2 in Chromium (WebGPU on SwiftShader: about 2 tokens/s), through the demo
page and the engine it exposes (slow). Saves a screenshot of the page as a test artifact
(build/test-artifacts/e2e-smollm2-demo.png)."""

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
DONE = ".msg.assistant.done, .msg.error"


@pytest.fixture(scope="module")
def demo(browser_context, tmp_path_factory):
    from trellis.kernels import build_model
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


def test_hermione_as_web_llm_sends_it(demo):
    """web-llm's example request as its users send it (greedy, 160 tokens, no Trellis extension):
    strict by default, the object closes by itself, parses and validates in the browser too."""
    r = ask(demo, {**HERMIONE_REQUEST, "max_tokens": 160, "temperature": 0})
    text = r["choices"][0]["message"]["content"]
    assert r["choices"][0]["finish_reason"] == "stop", text
    person = json.loads(text)
    jsonschema.validate(person, PERSON_SCHEMA)
    assert set(person) == set(PERSON_SCHEMA["properties"]), person


def turn(page):
    n = page.locator(DONE).count()
    page.click("#send")
    page.wait_for_function(f"document.querySelectorAll('{DONE}').length > {n}", timeout=600_000)
    return page.locator(DONE).nth(n)


def test_demo_page_chat_hermione_and_screenshot(demo, browser_context):
    """Through the page: the France prompt as chat, then web-llm's Hermione request from the JSON
    panel (as HERMIONE_REQUEST: its prompt, its schema, 128 tokens), whose answer validates. The
    options panel starts at the model's sampling defaults (build_model.EMBEDDED_SAMPLING)."""
    from trellis.kernels.build_model import EMBEDDED_SAMPLING

    assert float(demo.input_value("#temperature")) == EMBEDDED_SAMPLING["temperature"]
    assert float(demo.input_value("#top-p")) == EMBEDDED_SAMPLING["top_p"]
    assert float(demo.input_value("#repetition-penalty")) == EMBEDDED_SAMPLING["repetition_penalty"]
    demo.fill("#seed", "1")
    demo.fill("#max-tokens", "16")
    demo.fill("#prompt", FRANCE)
    answer = turn(demo)
    assert "Paris" in answer.locator(".text").text_content(), answer.text_content()
    assert "decode" in demo.text_content("#stats-text")

    demo.click("#tabs button[data-format=json]")
    demo.select_option("#schema-example", "0")
    assert json.loads(demo.input_value("#schema")) == PERSON_SCHEMA
    assert demo.input_value("#prompt") == HERMIONE_REQUEST["messages"][0]["content"]
    demo.fill("#max-tokens", str(HERMIONE_REQUEST["max_tokens"]))
    answer = turn(demo)
    person = json.loads(answer.locator(".text").text_content())
    jsonschema.validate(person, PERSON_SCHEMA)
    assert answer.get_attribute("data-valid") == "true"
    assert "Hermione" in person["name"], person
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    demo.screenshot(path=str(ARTIFACTS / "e2e-smollm2-demo.png"), full_page=True)
    assert not demo.errors and not browser_context.blocked

"""Gemma 3 270M (gemma3 architecture, SentencePiece vocabulary of 262,144 tokens, Q5_0 / Q4_K /
Q6_K / Q8_0 weights, no chat template) built from its GGUF and run in Chromium on WebGPU
(SwiftShader: well under a token per second here), through the public JS API (slow)."""

import json

import jsonschema
import pytest

from trellis import paths
from web.site import build_site

from .conftest import Server

pytestmark = pytest.mark.slow
OUT = paths.models_dir() / "gemma-3-270m"  # where the engine test builds it too
COLOR = {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"]}


@pytest.fixture(scope="module")
def gemma(browser_context, tmp_path_factory):
    from trellis.kernels import build_model
    from tests.model.gemma3 import gemma3_gguf_path

    build_model.main(["--gguf", gemma3_gguf_path(), "--out", str(OUT)])  # builds, or finds the build up to date
    site = build_site(tmp_path_factory.mktemp("gemma3-site") / "site", [OUT])
    server = Server(site)
    page = browser_context.new_page()
    page.goto(server.url + "/trellis.js")
    page.evaluate("""async () => {
      const { CreateEngine } = await import('/trellis.js');
      window.gemma = await CreateEngine('/models/gemma-3-270m/');
    }""")
    yield page
    page.close()
    server.close()


def complete(page, request):
    return page.evaluate("(r) => window.gemma.completions.create(r)", request)


def test_greedy_text_equals_the_numpy_reference(gemma):
    """tests/model/test_reference.py: the numpy reference continues this prompt with these 6 tokens."""
    r = complete(gemma, {"prompt": "The three primary colors are", "max_tokens": 6, "temperature": 0})
    assert r["choices"][0]["text"] == " red, blue, and yellow", r
    print(f"\nGemma 3 270M in Chromium: {r['usage']['extra']}")


def test_json_schema_answer_on_its_vocabulary(gemma, browser_context):
    r = complete(gemma, {"prompt": "The sky on a clear day, as JSON: ", "max_tokens": 16, "temperature": 0,
                         "response_format": {"type": "json_object", "schema": COLOR}, "complete_on_length": True})
    value = json.loads(r["choices"][0]["text"])
    jsonschema.validate(value, COLOR)
    chat = gemma.evaluate("""async () => {
      try { await window.gemma.chat.completions.create({messages: [{role: 'user', content: 'hi'}]}); return null; }
      catch (e) { return [e.name, e.field]; }
    }""")
    assert chat == ["InvalidRequestError", "messages"]  # a base model: no chat template
    assert not browser_context.blocked

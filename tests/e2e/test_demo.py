"""The demo page (web/index.html + demo.js) driven like a user, on the tiny model: chat, a JSON
Schema request through the response-format panel with its validated badge, tools, a typed error
shown in the page, Stop and Reset. The page talks to the engine only through trellis.js."""

import json
from pathlib import Path

import jsonschema
import pytest

from trellis.engine.examples import PERSON_SCHEMA, WEATHER_TOOLS

from .conftest import MODEL_ID

DONE = ".msg.assistant.done, .msg.error"
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


@pytest.fixture(scope="module")
def demo(browser_context, site_server):
    page = browser_context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(site_server.url + "/")
    page.wait_for_selector("#prompt:not([disabled])")
    yield page
    page.close()


def turn(page, prompt=None):
    """Sends the composer's text (or `prompt`) and waits for the answer or an error card."""
    n = page.locator(DONE).count()
    if prompt is not None:
        page.fill("#prompt", prompt)
    page.click("#send")
    page.wait_for_function(f"document.querySelectorAll('{DONE}').length > {n}")
    return page.locator(DONE).nth(n)


def test_page_loads_and_chats(demo):
    assert demo.text_content("#status").startswith(f"ready: {MODEL_ID} on ")
    assert "Ready in" in demo.text_content("#load-title")
    assert demo.locator(".stages li.done").count() == 4
    demo.fill("#max-tokens", "12")
    demo.fill("#seed", "1")
    answer = turn(demo, "Hello there")
    assert "assistant" in answer.get_attribute("class")
    assert demo.text_content(".msg.user") == "Hello there"
    assert "decode" in demo.text_content("#stats-text")
    assert demo.text_content("#s-decode") not in ("", "–")
    # A second turn keeps the conversation.
    turn(demo, "And then?")
    assert demo.locator(".msg.user").count() == 2
    assert demo.text_content("#turns").startswith("2 turns")
    assert not demo.errors


def test_json_schema_through_the_panel_shows_the_validated_badge(demo):
    demo.click("#tabs button[data-format=json]")
    demo.select_option("#schema-example", "0")  # web-llm's Hermione schema
    assert json.loads(demo.input_value("#schema")) == PERSON_SCHEMA
    assert demo.input_value("#prompt").startswith("Hermione Granger")  # the example's prompt
    demo.fill("#max-tokens", "200")  # the byte-level tiny model needs 139 tokens to close the object
    answer = turn(demo)
    content = answer.locator(".text").text_content()
    jsonschema.validate(json.loads(content), PERSON_SCHEMA)  # an independent oracle agrees with the badge
    assert answer.get_attribute("data-valid") == "true"
    assert "schema validated" in answer.locator(".badge.good").text_content()
    assert "accepted every byte" in answer.locator(".check-note").text_content()
    assert demo.text_content("#s-ginit-label") in ("grammar init (compiled)", "grammar init (cache hit)")
    # The same schema again: the stats show the grammar cache hit.
    turn(demo, "Once more, please.")
    assert demo.text_content("#s-ginit-label") == "grammar init (cache hit)"
    assert int(demo.text_content("#s-cache").split()[0]) >= 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    demo.screenshot(path=str(ARTIFACTS / "e2e-tiny-demo.png"), full_page=True)


def test_tools_show_tool_calls_with_valid_arguments(demo):
    demo.click("#reset")  # the tiny model's byte-level tokens fill its context fast
    demo.wait_for_function("!document.querySelector('.msg')")
    demo.click("#tabs button[data-format=tools]")
    assert json.loads(demo.input_value("#tools")) == WEATHER_TOOLS
    assert demo.input_value("#tool-choice") == "required"
    answer = turn(demo)
    calls = answer.locator(".tool-call")
    assert calls.count() >= 1, answer.text_content()
    for i in range(calls.count()):
        assert calls.nth(i).get_attribute("data-valid") == "true"
        assert calls.nth(i).locator(".fn").text_content() in ("get_current_weather()", "get_time()")


def test_typed_error_shown_and_the_engine_keeps_working(demo):
    demo.click("#tabs button[data-format=json]")
    demo.fill("#schema", '{"type": "integer", "minimum": "x"}')
    error = turn(demo, "A number, please.")
    assert error.get_attribute("data-name") == "UnsupportedSchemaError"
    assert error.locator(".err-name").text_content() == "UnsupportedSchemaError"
    assert "keyword minimum" in error.locator(".err-head").text_content()
    assert "minimum" in error.locator(".err-message").text_content()
    demo.click("#tabs button[data-format=regex]")
    demo.fill("#regex", "[a-c]{2,5}-[0-9]{3}")
    answer = turn(demo, "A code, please.")
    assert answer.get_attribute("data-valid") == "true" and "matches the regex" in answer.text_content()


def test_stop_and_reset(demo):
    demo.click("#tabs button[data-format=text]")
    demo.fill("#max-tokens", "1500")
    demo.fill("#temperature", "0")  # greedy, the tiny random model does not end by itself
    n = demo.locator(DONE).count()
    demo.fill("#prompt", "Go on and on.")
    demo.click("#send")
    demo.wait_for_function("document.querySelector('.msg.assistant.streaming .text')?.textContent.length > 3")
    demo.click("#stop")
    demo.wait_for_function(f"document.querySelectorAll('{DONE}').length > {n}")
    answer = demo.locator(DONE).nth(n)
    assert "stopped" in answer.locator(".badge.warn").text_content()
    assert answer.locator(".meta").text_content().startswith("abort")
    demo.click("#reset")
    demo.wait_for_function("!document.querySelector('.msg')")
    assert demo.text_content("#turns") == ""
    assert not demo.errors


def test_nothing_left_the_machine(browser_context):
    assert not browser_context.blocked

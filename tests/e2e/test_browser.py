"""The browser product end to end: trellis.js -> Web Worker -> Pyodide running py/trellis -> WebGPU
(SwiftShader) and the grammar wasm, on the tiny random-weight model. Random weights make the
model's choices arbitrary: whatever it samples, the constraints and the protocol must hold.

One engine is loaded per session (Pyodide's cold start dominates); the reload test comes last but
one, and the last checks that no request left the machine.
"""

import json
import re

import jsonschema
import pytest

from tests.e2e.conftest import MODEL_ID, start_engine
from trellis.engine.examples import WEATHER_TOOLS

USER = [{"role": "user", "content": "Tell me about the weather."}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "house": {"enum": ["Gryffindor", "Slytherin"]}},
          "required": ["name", "age", "house"], "additionalProperties": False}


def ask(page, kind="chat", **request):
    if kind == "chat":
        request = {"messages": USER, **request}
    answer = page.evaluate("([r, k]) => window.ask(r, k)", [request, kind])
    return answer


def value(page, **request):
    answer = ask(page, **request)
    assert "value" in answer, answer
    return answer["value"]


def test_page_loads_and_reports_progress(page):
    load = page.load
    info, progress = load["info"], load["progress"]
    assert info["model"] == MODEL_ID and info["vocab_size"] == 269  # the site's /models/<id>/ name
    assert info["adapter"]["architecture"] == "swiftshader"  # Chromium's WebGPU on the CPU
    # Its subgroups have 4 lanes, so the worker and the engine run the kernels that share x loads.
    assert info["adapter"]["subgroup_size"] == 4 and info["variant"] == "swiftshader-subgroups-4"
    # The worker compiled the decode and mask plans' kernels of the variant Python chose, so the engine
    # compiled none of them itself (only the argmax plan's, which the worker leaves for later).
    assert all(k.startswith("argmax") for k in info["kernels_compiled_in_python"]), info["kernels_compiled_in_python"]
    fractions = [r["progress"] for r in progress]
    assert fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] == 1
    weights = [r for r in progress if r.get("stage") == "weights"]
    assert weights and weights[-1]["loadedBytes"] == weights[-1]["totalBytes"] == info["weight_bytes"]
    assert progress[-1]["stage"] == "ready" and progress[-1]["timeElapsed"] > 0
    assert {r["stage"] for r in progress} >= {"start", "weights", "kernels", "python", "engine", "ready"}
    # A fresh profile: every shard came from the network and was then cached.
    assert info["weights"]["fetchedBytes"] == info["weights"]["totalBytes"] and info["weights"]["cachedBytes"] == 0
    # Ready once the decode plan's kernels are compiled; the prefill plan's follow.
    page.wait_for_function("engine.info.timings.allKernelsMs !== null")
    timings = page.evaluate("engine.info.timings")
    assert 0 < timings["kernelsMs"] <= timings["totalMs"] <= timings["allKernelsMs"]
    assert timings["pythonRestored"] is False  # a fresh profile starts Python cold (and keeps a snapshot)
    assert not page.errors


def test_webllm_module_on_the_site(page):
    """/webllm.js on the site's own layout (no bundler, no settings): the site's models as
    prebuiltAppConfig, and the loaded model's shards in the cache."""
    found = page.evaluate("""async () => {
      const webllm = await import('/webllm.js');
      return { list: webllm.prebuiltAppConfig.model_list, cached: await webllm.hasModelInCache('tiny-llama'),
        same: webllm.CreateEngine === api.CreateEngine };
    }""")
    assert found == {"list": [{"model_id": MODEL_ID, "model": f"{page.url.rsplit('/', 1)[0]}/models/{MODEL_ID}/"}],
                     "cached": True, "same": True}


def test_json_schema_output_parses_and_validates(page):
    r = value(page, max_tokens=48, seed=3, response_format={"type": "json_object", "schema": SCHEMA},
              complete_on_length=True)
    assert r["object"] == "chat.completion" and r["model"] == MODEL_ID
    (choice,) = r["choices"]
    assert choice["finish_reason"] in ("stop", "length")
    jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMA)
    assert r["usage"]["completion_tokens"] <= 48 and r["usage"]["extra"]["decode_tokens_per_s"] > 0


def test_stream_concatenates_to_the_same_text_as_without_streaming(page):
    request = dict(max_tokens=40, seed=11, temperature=1.0, response_format={"type": "json_object"},
                   complete_on_length=True)
    full = value(page, **request)["choices"][0]
    chunks = ask(page, stream=True, stream_options={"include_usage": True}, **request)["chunks"]
    assert len(chunks) > 3 and all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == full["message"]["content"]
    json.loads(text)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == full["finish_reason"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_text_completion_streams_too(page):
    full = value(page, kind="completion", prompt="Once upon a time", max_tokens=12, seed=5)
    assert full["object"] == "text_completion"
    chunks = ask(page, kind="completion", prompt="Once upon a time", max_tokens=12, seed=5, stream=True)["chunks"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == full["choices"][0]["text"]


def test_text_completion_with_a_schema(page):
    """completions.create takes response_format and complete_on_length as chat does (base models)."""
    r = value(page, kind="completion", prompt="Person: ", max_tokens=40, seed=4, complete_on_length=True,
              response_format={"type": "json_object", "schema": SCHEMA})
    (choice,) = r["choices"]
    jsonschema.validate(json.loads(choice["text"]), SCHEMA)
    assert r["usage"]["extra"]["grammar_cache_hit"] is not None


@pytest.mark.parametrize("request_, name, where", [
    ({"temperature": 5}, "InvalidRequestError", {"field": "temperature"}),
    ({"stream": True, "max_tokens": 0}, "InvalidRequestError", {"field": "max_tokens"}),
    ({"response_format": {"type": "json_object", "schema": {"type": "integer", "minimum": "x"}}},
     "UnsupportedSchemaError", {"keyword": "minimum"}),
    # Grammar errors name the request field; the message keeps the grammar's line and column.
    ({"response_format": {"type": "grammar", "grammar": 'root ::= "a" |\nbad ::= ]'}}, "InvalidRequestError",
     {"field": "response_format.grammar", "message": "line 2, column 9"}),
])
def test_bad_request_rejects_with_a_typed_error_and_the_engine_keeps_working(page, request_, name, where):
    error = ask(page, **{"max_tokens": 4, **request_})["error"]
    assert error["name"] == error["cls"] == name and error["trellis"], error
    for key, expected in where.items():
        assert expected in error[key] if key == "message" else error[key] == expected, error
    assert error["message"]
    r = value(page, max_tokens=4, seed=1)
    assert r["usage"]["completion_tokens"] >= 1


def test_invalid_request_error_names_the_field_in_its_message(page):
    error = ask(page, max_tokens=4, response_format={"type": "json_object", "grammar": "root ::= \"a\""})["error"]
    assert error["name"] == "InvalidRequestError" and error["field"].startswith("response_format")
    assert error["message"].startswith(error["field"] + ": ")


def test_regex_and_ebnf_outputs_obey_their_constraints(page):
    for seed in (1, 2):
        r = value(page, max_tokens=16, seed=seed, response_format={"type": "regex", "regex": "[a-c]{2,5}-[0-9]{3}"})
        assert re.fullmatch(r"[a-c]{2,5}-[0-9]{3}", r["choices"][0]["message"]["content"]), r["choices"][0]
        r = value(page, max_tokens=24, seed=seed, response_format={
            "type": "grammar", "grammar": 'root ::= "(" item ("," item)* ")"\nitem ::= "yes" | "no"'},
            complete_on_length=True)
        assert re.fullmatch(r"\((yes|no)(,(yes|no))*\)", r["choices"][0]["message"]["content"]), r["choices"][0]


def test_second_request_with_the_same_schema_hits_the_grammar_cache(page):
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "tag": {"type": "string", "maxLength": 3}},
              "required": ["id", "tag"], "additionalProperties": False}
    first = value(page, max_tokens=32, seed=1, complete_on_length=True, response_format={
        "type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}})
    # The same request in another dialect (web-llm's, strict by default) and key order is the same grammar.
    second = value(page, max_tokens=32, seed=2, complete_on_length=True,
                   response_format={"type": "json_object", "schema": dict(reversed(schema.items()))})
    assert first["usage"]["extra"]["grammar_cache_hit"] is False
    assert second["usage"]["extra"]["grammar_cache_hit"] is True
    stats = page.evaluate("async () => [await engine.runtimeStatsText(), await engine.runtimeStats()]")
    assert "cache hits" in stats[0] and stats[1]["grammar_cache"]["hits"] >= 1


def test_interrupt_generate_stops_with_finish_reason_abort(page):
    result = page.evaluate("""async () => {
      const stream = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Go on.' }],
        stream: true, max_tokens: 1500, ignore_eos: true, seed: 4 });
      const chunks = [];
      for await (const c of stream) {
        chunks.push(c);
        if (chunks.length === 3) engine.interruptGenerate();
      }
      return chunks;
    }""")
    finish = [c["choices"][0]["finish_reason"] for c in result if c["choices"]]
    assert finish[-1] == "abort" and len(result) < 100, (len(result), finish[-1])
    assert value(page, max_tokens=3, seed=1)["choices"][0]["finish_reason"] in ("stop", "length")


def test_reset_chat_and_unknown_fields(page):
    assert page.evaluate("async () => (await engine.resetChat()) ?? 'done'") == "done"
    error = ask(page, max_tokens=4, temprature=0.5)["error"]
    assert error["name"] == "InvalidRequestError" and error["field"] == "temprature"


def test_request_model_field_uses_the_site_id(page):
    assert value(page, model=MODEL_ID, max_tokens=2, seed=1)["model"] == MODEL_ID
    error = ask(page, model="tiny-llama-test", max_tokens=2)["error"]  # the GGUF's own name is not the id
    assert error["name"] == "InvalidRequestError" and error["field"] == "model"


def test_required_tool_calls_have_arguments_that_validate(page):
    r = value(page, messages=[{"role": "user", "content": "Weather in Pittsburgh and the time in Tokyo?"}],
              tools=WEATHER_TOOLS, tool_choice="required", max_tokens=96, seed=5, complete_on_length=True)
    (choice,) = r["choices"]
    calls = choice["message"].get("tool_calls")
    assert calls, choice  # "required": the grammar cannot end without one
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in WEATHER_TOOLS}
    for call in calls:
        assert call["type"] == "function" and call["id"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[call["function"]["name"]])
    # Streaming gives the same calls, whole, in the last content chunk.
    chunks = ask(page, messages=[{"role": "user", "content": "Weather in Pittsburgh and the time in Tokyo?"}],
                 tools=WEATHER_TOOLS, tool_choice="required", max_tokens=96, seed=5, complete_on_length=True,
                 stream=True)["chunks"]
    streamed = [c for ch in chunks for choice in ch["choices"] for c in choice["delta"].get("tool_calls") or []]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in streamed] == \
        [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


TAG_OBJECT = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99},
                                               "ok": {"type": "boolean"}},
              "required": ["n", "ok"], "additionalProperties": False}
STRUCTURAL_TAG = {"type": "structural_tag", "format": {
    "type": "triggered_tags", "triggers": ["<"], "at_least_one": True,
    "tags": [{"begin": "<num>", "content": {"type": "regex", "pattern": "[0-9]{1,4}"}, "end": "</num>"},
             {"begin": "<obj>", "content": {"type": "json_schema", "json_schema": TAG_OBJECT}, "end": "</obj>"}]}}


def tagged_regions(text: str) -> list[tuple[str, str]]:
    """(tag, content) for each region; asserts that free text holds no "<" outside the tags."""
    regions, i = [], 0
    while (start := text.find("<", i)) >= 0:
        m = re.compile(r"<(num|obj)>(.*?)</\1>", re.S).match(text, start)
        assert m, f"a '<' outside a well-formed tag at {start}: {text!r}"
        regions.append((m.group(1), m.group(2)))
        i = m.end()
    return regions


def test_structural_tag_regions_obey_their_content(page):
    for seed in (1, 2, 3):
        r = value(page, max_tokens=40, seed=seed, temperature=1.0, response_format=STRUCTURAL_TAG,
                  complete_on_length=True)
        text = r["choices"][0]["message"]["content"]
        regions = tagged_regions(text)
        assert regions, text  # at_least_one
        for tag, content in regions:
            if tag == "num":
                assert re.fullmatch(r"[0-9]{1,4}", content), (tag, content)
            else:
                jsonschema.validate(json.loads(content), TAG_OBJECT)


def test_validate_checks_text_with_the_engines_grammar(page):
    rf = {"type": "json_object", "schema": SCHEMA}
    check = lambda text, f=rf: page.evaluate("([t, f]) => engine.validate(t, f)", [text, f])  # noqa: E731
    good = check('{"name": "Ann", "age": 30, "house": "Slytherin"}')
    assert good["valid"] is True and good["kind"] == "json_schema" and good["grammar"] in ("cached", "compiled")
    assert check('{"name": "Ann", "age": 300, "house": "Slytherin"}')["valid"] is False  # maximum 120
    # Generation is strict (web-llm's default: no key the schema does not name); validation takes
    # the schema's whole language, where an unnamed key is valid.
    open_schema = {"type": "json_object", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    assert check('{"a": 1, "pet": "owl"}', open_schema)["valid"] is True
    cut = check('{"name": "Ann", "age": 30')
    assert cut["accepted"] is True and cut["complete"] is False and cut["valid"] is False
    assert check("abc-123", {"type": "regex", "regex": "[a-c]{2,5}-[0-9]{3}"})["valid"] is True
    assert check("abcd-12", {"type": "regex", "regex": "[a-c]{2,5}-[0-9]{3}"})["valid"] is False
    assert check("anything", {"type": "text"}) == {"kind": None, "valid": None}
    error = page.evaluate("""async () => { try { await engine.validate('1', {type: 'regex'}); }
                             catch (e) { return [e.name, e.field]; } }""")
    assert error == ["InvalidRequestError", "response_format.regex"]
    # A check counts no cache hit: only requests do.
    before = page.evaluate("async () => (await engine.runtimeStats()).grammar_cache")
    check('{"name": "Bo", "age": 1, "house": "Gryffindor"}')
    assert page.evaluate("async () => (await engine.runtimeStats()).grammar_cache") == before


SNAPSHOTS = "caches.open('trellis-python-v1').then((c) => c.keys()).then((keys) => keys.map((k) => k.url))"


def test_reload_reads_weights_from_the_cache(page, site_server):
    before = site_server.shard_fetches()
    assert before >= 1
    page.wait_for_function(f"{SNAPSHOTS}.then((urls) => urls.length === 1)")  # kept after the first load
    page.reload()
    load = start_engine(page)
    assert site_server.shard_fetches() == before  # no shard fetched a second time
    weights = load["info"]["weights"]
    assert weights["cachedBytes"] == weights["totalBytes"] and weights["fetchedBytes"] == 0
    assert load["info"]["timings"]["pythonRestored"] is True  # Python from the kept memory snapshot
    r = value(page, max_tokens=48, seed=3, response_format={"type": "json_object", "schema": SCHEMA},
              complete_on_length=True)
    jsonschema.validate(json.loads(r["choices"][0]["message"]["content"]), SCHEMA)
    print(f"\nready after reload in {load['readyMs'] / 1000:.1f} s (cold: {page.load['readyMs'] / 1000:.1f} s); "
          f"timings {load['info']['timings']}")


def test_a_damaged_python_snapshot_is_replaced_by_a_cold_start(page):
    (url,) = page.evaluate(SNAPSHOTS)
    page.evaluate("async (url) => (await caches.open('trellis-python-v1')).put(url, new Response('not a snapshot'))",
                  url)
    page.reload()
    load = start_engine(page)
    assert load["info"]["timings"]["pythonRestored"] is False
    assert value(page, max_tokens=4, ignore_eos=True)["choices"][0]["finish_reason"] == "length"
    page.wait_for_function(f"{SNAPSHOTS}.then((urls) => urls.length === 1)")
    size = page.evaluate("async (url) => (await (await caches.open('trellis-python-v1')).match(url)).blob()"
                         ".then((b) => b.size)", url)
    assert size > 1 << 20  # a snapshot again, in place of the damaged one


def test_nothing_left_the_machine(browser_context):
    # The worker's own fetches are seen (so routed) too, not only the page's.
    assert any(u.endswith("/trellis.zip") for u in browser_context.requested), browser_context.requested
    assert not browser_context.blocked
    assert all(u.startswith("http://127.0.0.1:") for u in browser_context.requested), browser_context.requested

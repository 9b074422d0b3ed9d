"""`trellis serve` on the tiny random-weight model, driven by the official `openai` SDK and by raw
HTTP: one server process for the module (API key on, a queue of 2, short request deadline).

Oracles: jsonschema for constrained output, pydantic for `parse`, and for "not corrupted" the
same greedy request answered alone (its answer must not depend on what ran before or beside it).
"""

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pydantic
import pytest

from tests.serve.process import ServerProcess, open_stream, read_until, request

KEY = "test-key-7f3a"
AUTH = {"Authorization": f"Bearer {KEY}"}
USER = [{"role": "user", "content": "Tell me about the weather."}]
GREEDY = {"temperature": 0, "max_tokens": 12, "extra_body": {"ignore_eos": True}}
LONG = {"messages": USER, "max_tokens": 1500, "ignore_eos": True}  # seconds of decoding on lavapipe


@pytest.fixture(scope="module")
def server(tiny_model):
    proc = ServerProcess("--model", str(tiny_model[1]), "--api-key", KEY, "--max-queue", "2",
                         "--request-timeout", "3")
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def answer(client, model, messages=USER, **extra):
    return client.chat.completions.create(model=model, messages=messages, **{**GREEDY, **extra})


def test_503_while_loading(server):
    status, body = server.first_health
    assert status == 503 and body["error"]["code"] == "model_loading"


def test_models_and_health(server, client, model):
    assert [m.id for m in client.models.list().data] == [model]
    assert client.models.retrieve(model).id == model
    status, health = server.health()
    assert status == 200 and health["status"] == "ok" and health["model"] == model and health["max_queue"] == 2


def test_plain_and_streamed_answers_agree(client, model):
    plain = answer(client, model)
    choice = plain.choices[0]
    assert choice.finish_reason == "length" and plain.usage.completion_tokens == 12 and plain.model == model
    chunks = list(answer(client, model, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    raw = client.completions.create(model=model, prompt="The sky is", max_tokens=5, temperature=0)
    assert raw.object == "text_completion" and raw.usage.completion_tokens <= 5


def test_json_schema_strict(client, model):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "rain": {"type": "boolean"},
                                               "level": {"type": "integer", "minimum": 0, "maximum": 5}},
              "required": ["city", "rain", "level"], "additionalProperties": False}
    r = client.chat.completions.create(
        model=model, messages=USER, max_tokens=80, seed=3, extra_body={"complete_on_length": True},
        response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_tools_come_back_as_tool_calls(client, model):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
                       "required": ["city"], "additionalProperties": False}}}]
    r = client.chat.completions.create(model=model, messages=USER, tools=tools, tool_choice="required",
                                       max_tokens=120, seed=1, parallel_tool_calls=False,
                                       extra_body={"complete_on_length": True})
    choice = r.choices[0]
    assert choice.finish_reason in ("tool_calls", "length")  # length: closed by complete_on_length
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Oslo")


def test_parse_with_a_pydantic_model(client, model):
    class Forecast(pydantic.BaseModel):
        sunny: bool
        level: int = pydantic.Field(ge=0, le=9)
        kind: str = pydantic.Field(pattern="^(rain|snow)$")

    r = client.chat.completions.parse(model=model, messages=USER, response_format=Forecast, max_tokens=200, seed=5,
                                      user="someone", metadata={"a": "b"}, store=False, service_tier="auto",
                                      parallel_tool_calls=True)  # accepted and ignored
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Forecast) and 0 <= parsed.level <= 9


def test_errors_are_openai_error_objects(server, client, model):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=USER, temperature=5)
    assert e.value.status_code == 400 and e.value.param == "temperature"
    assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": 3}])
    assert e.value.param == "messages[0].content"
    with pytest.raises(openai.BadRequestError) as e:  # a field that would change the answer is refused by name
        client.chat.completions.create(model=model, messages=USER, extra_body={"mirostat": 2})
    assert e.value.param == "mirostat"
    with pytest.raises(openai.BadRequestError) as e:  # raised when the job starts, before any byte is sent
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "word " * 3000}],
                                       stream=True)
    assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=USER)
    assert e.value.param == "model" and e.value.code == "model_not_found"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
    assert request(server, "GET", "/v1/models")[0] == 401
    assert request(server, "GET", "/health")[0] == 200  # health needs no key
    status, body = request(server, "POST", "/v1/chat/completions", b'{"messages": [', AUTH)
    assert status == 400 and body["error"]["code"] == "invalid_json"
    status, body = request(server, "POST", "/v1/chat/completions", b"[1, 2]", AUTH)
    assert status == 400 and set(body["error"]) == {"message", "type", "param", "code"}


def test_a_ten_megabyte_body_is_refused(server):
    body = b'{"messages": [{"role": "user", "content": "' + b"a" * (10 << 20) + b'"}]}'
    status, error = request(server, "POST", "/v1/chat/completions", body, AUTH)
    assert status in (413, 0)  # the server may close before the client has sent it all
    # Chunked, with no declared length: cut at the limit too.
    sock = socket.create_connection((server.host, server.port), timeout=30)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    sock.sendall(head)
    try:
        for _ in range(12):
            sock.sendall(b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n")
    except OSError:
        pass
    assert b" 413 " in read_until(sock, b"\r\n\r\n").split(b"\r\n")[0] + b" "
    sock.close()
    assert server.health()[0] == 200


def test_concurrent_requests_equal_their_answers_alone(client, model):
    prompts = [[{"role": "user", "content": f"Question {i}: what is {i} plus {i}?"}] for i in range(6)]
    alone = [answer(client, model, p).choices[0].message.content for p in prompts]
    with ThreadPoolExecutor(2) as pool:  # one runs, one waits (and a finished client's next): the queue holds 2
        together = list(pool.map(lambda p: answer(client, model, p, stream=True), prompts[::-1]))
    texts = ["".join(c.choices[0].delta.content or "" for c in s if c.choices) for s in together]
    assert texts[::-1] == alone


def _wait_idle(server, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, health = server.health()
        if status == 200 and health["running"] == 0 and health["waiting"] == 0:
            return health
        time.sleep(0.1)
    raise AssertionError(f"the server is still busy: {server.health()}")


def test_queue_full_then_disconnects_free_the_slots(server, client, model):
    expected = answer(client, model).choices[0].message.content
    running = open_stream(server, {**LONG, "stream": True}, AUTH)
    assert b"data: " in read_until(running, b"data: ")
    waiting = [open_stream(server, LONG, AUTH) for _ in range(2)]
    deadline = time.monotonic() + 30
    while server.health()[1]["waiting"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with pytest.raises(openai.RateLimitError) as e:
        answer(client, model)
    assert e.value.status_code == 429 and e.value.code == "queue_full"
    before = server.health()[1]
    # Clients that leave while queued, then mid-stream: in this order, as a queued client whose
    # leaving the server has not seen yet may be started once the running one stops (it is then
    # stopped at its first token, and counts as served).
    for sock in waiting:
        sock.close()
    deadline = time.monotonic() + 30
    while server.health()[1]["waiting"] > 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    running.close()
    health = _wait_idle(server, 30)
    assert health["cancelled"] == before["cancelled"] + 3
    assert health["served"] == before["served"] + 1  # the running one stopped; the queued two never ran
    assert answer(client, model).choices[0].message.content == expected


def test_silent_connections_are_closed(server):
    idle = [socket.create_connection((server.host, server.port)) for _ in range(20)]
    assert server.health()[0] == 200
    time.sleep(4)  # --request-timeout 3
    for sock in idle:
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed by the server
        sock.close()


def test_a_public_address_needs_an_api_key():
    import subprocess
    import sys

    from tests.serve.process import ROOT

    run = subprocess.run([sys.executable, "-m", "trellis.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT / "py")}, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "refusing to bind 0.0.0.0 without --api-key" in run.stderr

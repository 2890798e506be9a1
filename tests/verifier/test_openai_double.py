"""The test double's own behaviour: a real server on loopback that plays its script in order."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .openai_double import (
    DOUBLE_MODEL,
    CloseConnection,
    Hang,
    ReplyContent,
    ReplyNonJson,
    ReplyRefusal,
    ReplyStatus,
    ReplyWrongShape,
    ScriptedChatDouble,
    Step,
)

BODY = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5, trust_env=False) as client:
        yield client


def post(
    http: httpx.Client, double: ScriptedChatDouble, body: Any = BODY, **kw: Any
) -> httpx.Response:
    return http.post(f"{double.base_url}/chat/completions", json=body, **kw)


def test_it_listens_on_loopback_with_a_v1_base_url() -> None:
    with ScriptedChatDouble() as double:
        assert double.base_url.startswith("http://127.0.0.1:")
        assert double.base_url.endswith("/v1")
        port = int(double.base_url.split(":")[2].split("/")[0])
        assert port > 0


def test_the_base_url_needs_a_running_double() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = ScriptedChatDouble().base_url


def test_steps_are_played_in_order_then_the_script_is_exhausted(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyContent("first"), ReplyContent("second", "length")]) as double:
        one = post(http, double).json()
        two = post(http, double).json()
        three = post(http, double)
        assert double.remaining == 0
    assert one["choices"][0]["message"]["content"] == "first"
    assert one["choices"][0]["finish_reason"] == "stop"
    assert one["model"] == DOUBLE_MODEL
    assert two["choices"][0]["message"]["content"] == "second"
    assert two["choices"][0]["finish_reason"] == "length"
    assert three.status_code == 500
    assert "script exhausted" in three.text


def test_an_empty_script_answers_500(http: httpx.Client) -> None:
    with ScriptedChatDouble() as double:
        assert post(http, double).status_code == 500


def test_steps_can_be_added_later(http: httpx.Client) -> None:
    with ScriptedChatDouble() as double:
        double.add(ReplyContent("late"))
        assert post(http, double).json()["choices"][0]["message"]["content"] == "late"


def test_every_request_is_recorded_with_headers_and_parsed_body(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyContent("a")]) as double:
        post(http, double, headers={"X-Probe": "yes"})
        post(http, double, body={"n": 2})
        http.get(f"{double.base_url}/models")
        recorded = double.requests
    assert [(r.method, r.path) for r in recorded] == [
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ]
    assert recorded[0].headers["x-probe"] == "yes"
    assert recorded[0].body == BODY
    assert json.loads(recorded[0].raw_body) == BODY
    assert recorded[1].body == {"n": 2}


def test_models_lists_the_double(http: httpx.Client) -> None:
    with ScriptedChatDouble() as double:
        listing = http.get(f"{double.base_url}/models").json()
    assert listing["data"][0]["id"] == DOUBLE_MODEL


def test_unknown_paths_are_404_and_consume_no_step(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyContent("kept")]) as double:
        assert http.post(f"{double.base_url}/completions", json=BODY).status_code == 404
        assert http.get(f"{double.base_url}/nothing").status_code == 404
        assert double.remaining == 1


def test_a_non_json_request_is_400(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyContent("kept")]) as double:
        response = http.post(f"{double.base_url}/chat/completions", content=b"{not json")
        assert response.status_code == 400
        assert double.remaining == 1


def test_the_bearer_key_is_checked_when_configured(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyContent("ok")], api_key="k-123") as double:
        assert post(http, double).status_code == 401
        assert post(http, double, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.get(f"{double.base_url}/models").status_code == 401
        assert double.remaining == 1  # a rejected call consumes no step
        ok = post(http, double, headers={"Authorization": "Bearer k-123"})
    assert ok.status_code == 200


def test_a_refusal_step(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyRefusal("I can't help with that.")]) as double:
        message = post(http, double).json()["choices"][0]["message"]
    assert message["content"] is None
    assert message["refusal"] == "I can't help with that."


def test_an_error_status_step(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyStatus(503, "overloaded")]) as double:
        response = post(http, double)
    assert response.status_code == 503
    assert response.text == "overloaded"


def test_a_non_json_step(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyNonJson("plain words")]) as double:
        response = post(http, double)
    assert response.status_code == 200
    assert response.text == "plain words"


def test_a_wrong_shape_step(http: httpx.Client) -> None:
    with ScriptedChatDouble([ReplyWrongShape({"answer": 42})]) as double:
        assert post(http, double).json() == {"answer": 42}


def test_a_close_step_sends_no_response(http: httpx.Client) -> None:
    with ScriptedChatDouble([CloseConnection()]) as double:
        with pytest.raises(httpx.RemoteProtocolError):
            post(http, double)
        assert len(double.requests) == 1


def test_a_hang_step_outlasts_a_client_timeout() -> None:
    with (
        ScriptedChatDouble([Hang(30)]) as double,
        httpx.Client(timeout=0.2, trust_env=False) as http,
    ):
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            post(http, double)
        assert time.monotonic() - started < 5


def test_a_hang_does_not_block_shutdown() -> None:
    with httpx.Client(timeout=0.2, trust_env=False) as http:
        double = ScriptedChatDouble([Hang(60)])
        with double:
            with pytest.raises(httpx.ReadTimeout):
                post(http, double)
            started = time.monotonic()
        assert time.monotonic() - started < 5


def test_a_responder_answers_from_the_request_body(http: httpx.Client) -> None:
    seen: list[Any] = []

    def responder(body: Any) -> Step:
        seen.append(body)
        text = body["messages"][-1]["content"]
        return ReplyContent(text.upper())

    with ScriptedChatDouble(responder=responder) as double:
        reply = post(http, double).json()
    assert reply["choices"][0]["message"]["content"] == "HELLO"
    assert seen == [BODY]


def test_concurrent_requests_each_get_one_step(http: httpx.Client) -> None:
    import concurrent.futures

    steps = [ReplyContent(str(i)) for i in range(8)]
    with ScriptedChatDouble(steps) as double:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda _: post(http, double).json(), range(8)))
        assert double.remaining == 0
    contents = sorted(r["choices"][0]["message"]["content"] for r in replies)
    assert contents == sorted(str(i) for i in range(8))

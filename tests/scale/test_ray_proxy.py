"""The middleware around Ray Serve's HTTP proxy (:mod:`routegate.server.ray_proxy`), driven directly as ASGI: what
the proxy does when a replica dies (ends the request with no response, or stops a started stream) becomes a clean
503 or a final error event; everything else passes through unchanged."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from routegate.server._guard import BodyGuard
from routegate.server.ray_proxy import PROXY_CALLBACK, ReplicaUnavailable, proxy_middlewares

Message = dict[str, Any]


async def _call(app: Any, path: str = "/chat") -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await ReplicaUnavailable(app)({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send)
    return sent


def _start(status: int = 200, content_type: bytes = b"application/json") -> Message:
    return {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]}


async def _replica_died(scope: Any, receive: Any, send: Any) -> None:
    """What Ray Serve's proxy does when the replica dies before answering: it ends without a response."""


async def test_no_response_from_the_proxy_is_a_503_with_the_servers_error_body() -> None:
    start, body = await _call(_replica_died)
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"retry-after"] == b"1"
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body["body"])
    assert json.loads(body["body"]) == {
        "error": {
            "type": "service_unavailable",
            "code": "replica_unavailable",
            "message": "the replica answering this request stopped; Ray is replacing it: try again",
        }
    }
    assert body["more_body"] is False


async def test_a_proxy_that_raises_before_answering_is_a_503_too(caplog: pytest.LogCaptureFixture) -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("the proxy broke")

    with caplog.at_level(logging.WARNING, logger="routegate.server.ray_proxy"):
        start, _ = await _call(failing)
    assert start["status"] == 503
    assert "RuntimeError" in caplog.text


@pytest.mark.parametrize(
    ("path", "last"),
    [
        ("/chat", b'event: error\ndata: {"code":"replica_unavailable","message":"the replica answering'),
        ("/v1/chat/completions", b'data: {"error":{"type":"service_unavailable","code":"replica_unavailable"'),
    ],
)
async def test_a_stream_cut_off_by_a_dying_replica_ends_with_an_error_event(path: str, last: bytes) -> None:
    async def cut_off(scope: Any, receive: Any, send: Any) -> None:
        await send(_start(content_type=b"text/event-stream; charset=utf-8"))
        await send({"type": "http.response.body", "body": b"event: route\ndata: {}\n\n", "more_body": True})

    sent = await _call(cut_off, path)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert sent[0]["status"] == 200
    assert sent[-1]["body"].startswith(last)
    assert sent[-1]["body"].endswith(b"\n\n")
    assert sent[-1]["more_body"] is False


async def test_what_a_replica_answers_passes_through_unchanged() -> None:
    answer = [_start(500), {"type": "http.response.body", "body": b'{"error": {}}', "more_body": False}]

    async def answered(scope: Any, receive: Any, send: Any) -> None:
        for message in answer:  # the app's own error (its JSON body) is the app's to give
            await send(message)

    assert await _call(answered) == answer


async def test_a_body_cut_off_that_is_not_a_stream_is_left_cut_off() -> None:
    """A half-sent JSON body cannot be mended: nothing is appended (the connection closes mid-body)."""

    async def cut_off(scope: Any, receive: Any, send: Any) -> None:
        await send(_start())
        await send({"type": "http.response.body", "body": b'{"answer": "Ti', "more_body": True})

    sent = await _call(cut_off)
    assert len(sent) == 2


async def test_a_failure_after_the_response_finished_is_not_hidden() -> None:
    async def late(scope: Any, receive: Any, send: Any) -> None:
        await send(_start())
        await send({"type": "http.response.body", "body": b"{}", "more_body": False})
        raise RuntimeError("after the answer")

    with pytest.raises(RuntimeError, match="after the answer"):
        await _call(late)


async def test_other_scopes_pass_through() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Any) -> None:
        raise AssertionError("nothing is sent for a lifespan scope")

    await ReplicaUnavailable(app)({"type": "lifespan"}, receive, send)
    assert seen == ["lifespan"]


@pytest.fixture
def proxy_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook changes uvicorn's "auto" protocol for the process it runs in (the proxy's): here, for this test."""
    import uvicorn.config

    monkeypatch.setitem(uvicorn.config.HTTP_PROTOCOLS, "auto", uvicorn.config.HTTP_PROTOCOLS["auto"])


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")  # Ray Serve's own models
@pytest.mark.usefixtures("proxy_process")
def test_ray_serve_accepts_the_proxy_callback() -> None:
    """Ray Serve's own loader takes the import path and the middlewares it returns."""
    pytest.importorskip("ray", reason="needs the routegate[ray] extra")
    from ray.serve._private.http_util import validate_http_proxy_callback_return
    from ray.serve._private.utils import call_function_from_import_path

    middlewares = validate_http_proxy_callback_return(call_function_from_import_path(PROXY_CALLBACK))
    assert [m.cls for m in middlewares] == [ReplicaUnavailable, BodyGuard]
    assert [m.cls for m in proxy_middlewares()] == [ReplicaUnavailable, BodyGuard]


@pytest.mark.usefixtures("proxy_process")
def test_after_the_hook_a_default_uvicorn_config_bounds_its_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Ray Serve's proxy builds (``uvicorn.Config`` without ``http``) serves with routegate's bounds, from
    the ``ROUTEGATE_SERVER_*`` settings of the process's environment."""
    import uvicorn

    from routegate.server.serving import ConnectionBounds, GuardedHttpToolsProtocol
    from routegate.settings import Settings

    monkeypatch.setenv("ROUTEGATE_SERVER_MAX_HEADERS", "12")
    monkeypatch.setenv("ROUTEGATE_SERVER_HEADER_TIMEOUT_SECONDS", "3")
    proxy_middlewares()
    config = uvicorn.Config(app=_replica_died, log_config=None)
    config.load()
    protocol = config.http_protocol_class
    assert issubclass(protocol, GuardedHttpToolsProtocol)
    assert protocol.default_bounds == ConnectionBounds.from_settings(Settings())
    assert protocol.default_bounds.head.headers == 12 and protocol.default_bounds.header_timeout == 3

"""One text check for every endpoint: NUL and lone surrogates get the same 422 body wherever they are sent, and no
response body carries an exception's or a driver's text (faults injected into the fake desk)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from routegate.apps.support.contracts import TurnError
from routegate.server import create_app
from routegate.server._text import CheckedBody, check_tree, text_problem
from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.settings import Settings

pytestmark = pytest.mark.e2e

NUL_PROBLEM = "contains a NUL character at position 1; send text without NUL characters"
SURROGATE_PROBLEM = "contains a lone surrogate (U+D800) at position 1; send valid Unicode text"

# A valid body for every endpoint that takes one. A new endpoint with a body fails
# test_every_route_is_covered until it is listed here, and is then checked like the others.
EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/chat"): {"message": "status of ticket 1", "session_id": "s1"},
    ("POST", "/v1/chat/completions"): {
        "model": "routegate-support",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "status of ticket 1"}]},
        ],
        "user": "s1",
        "stream": False,
        "metadata": {"tag": "x"},  # an extra field: accepted and ignored, checked all the same
    },
}


def _operations(server: ServerThread) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(METHOD, path, operation)`` for every endpoint, from the app's OpenAPI schema (the public route list)."""
    for path, item in server.app.openapi()["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def _params(operation: dict[str, Any], where: str) -> list[str]:
    return [p["name"] for p in operation.get("parameters", []) if p["in"] == where]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every string in a JSON value (keys excluded)."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))


def _with(body: dict[str, Any], path: tuple[Any, ...], text: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = text
    return out


def _raw(body: Any) -> bytes:
    """JSON with non-ASCII escaped, so a lone surrogate travels as the 6 characters ``\\ud800``."""
    return json.dumps(body, ensure_ascii=True).encode()


def _text_error(response: httpx.Response, where: str, problem: str) -> None:
    assert response.status_code == 422, response.text
    assert response.json() == {
        "error": {"type": "invalid_request_error", "code": "invalid_request", "message": f"{where}: {problem}"}
    }


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[ServerThread, FakeSupportDesk]]:
    desk = FakeSupportDesk()
    with ServerThread(create_app(desk=desk, settings=Settings())) as server:
        yield server, desk


@pytest.fixture
def srv(shared: tuple[ServerThread, FakeSupportDesk]) -> Iterator[ServerThread]:
    server, desk = shared
    desk.histories.clear()
    closed = desk.closed_streams
    yield server
    assert desk.closed_streams == closed, "a refused request reached the desk"
    assert desk.histories == {}


# Headers cannot carry NUL or a surrogate at all (see test_a_header_cannot_smuggle_nul); each is listed here.
HEADERS = {"x-session-id"}


def test_every_route_is_covered(srv: ServerThread) -> None:
    """Walk the app's routes: every body is a CheckedBody and has an example above (so the tests below send NUL
    and surrogates into each of its strings); path and query parameters are probed below; headers are listed."""
    checked = {m.__name__ for m in _subclasses(CheckedBody)}
    with_body: set[tuple[str, str]] = set()
    for method, path, operation in _operations(srv):
        if "requestBody" in operation:
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.rsplit("/", 1)[-1] in checked, f"{method} {path}: the body model is not a CheckedBody"
            with_body.add((method, path))
        assert set(_params(operation, "header")) <= HEADERS, f"{method} {path}: a new header parameter"
        assert not _params(operation, "cookie"), f"{method} {path}: a cookie parameter"
    assert with_body == set(EXAMPLES)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.mark.parametrize(("endpoint", "leaf"), [(e, p) for e, body in EXAMPLES.items() for p in _leaves(body)])
@pytest.mark.parametrize(("text", "problem"), [("a\x00b", NUL_PROBLEM), ("a\ud800b", SURROGATE_PROBLEM)])
def test_nul_and_surrogates_in_any_body_field_get_the_same_422(
    srv: ServerThread, endpoint: tuple[str, str], leaf: tuple[Any, ...], text: str, problem: str
) -> None:
    method, path = endpoint
    body = _with(EXAMPLES[endpoint], leaf, text)
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        response = c.request(method, path, content=_raw(body), headers={"Content-Type": "application/json"})
    _text_error(response, ".".join(str(p) for p in leaf), problem)


@pytest.mark.parametrize("endpoint", list(EXAMPLES))
def test_nul_in_a_key_is_refused_too(srv: ServerThread, endpoint: tuple[str, str]) -> None:
    body = {**EXAMPLES[endpoint], "x\x00": 1}
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        response = c.request(*endpoint, content=_raw(body), headers={"Content-Type": "application/json"})
    _text_error(response, "a key of body", NUL_PROBLEM)


def test_path_and_query_parameters_get_the_same_422(srv: ServerThread) -> None:
    probed = 0
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        for method, path, operation in _operations(srv):
            names = _params(operation, "path")
            for name in names:
                url = path
                for other in names:
                    url = url.replace("{" + other + "}", "a%00b" if other == name else "x")
                _text_error(c.request(method, url), name, NUL_PROBLEM)
                probed += 1
            for name in _params(operation, "query"):
                _text_error(c.request(method, path, params={name: "a\x00b"}), name, NUL_PROBLEM)
                probed += 1
    assert probed >= 2  # GET and DELETE /sessions/{session_id}


def test_the_message_is_the_same_on_chat_and_openai(srv: ServerThread) -> None:
    with httpx.Client(base_url=srv.url, timeout=10) as c:
        chat = c.post("/chat", content=_raw({"message": "a\x00b"}), headers={"Content-Type": "application/json"})
        openai = c.post(
            "/v1/chat/completions",
            content=_raw({"model": "m", "messages": [{"role": "user", "content": "a\x00b"}]}),
            headers={"Content-Type": "application/json"},
        )
        too_long_chat = c.post("/chat", json={"message": "x" * 4001})
        too_long_openai = c.post(
            "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x" * 4001}]}
        )
    _text_error(chat, "message", NUL_PROBLEM)
    _text_error(openai, "messages.0.content", NUL_PROBLEM)
    assert too_long_chat.status_code == too_long_openai.status_code == 422
    assert too_long_chat.json() == too_long_openai.json()


def test_a_header_cannot_smuggle_nul(srv: ServerThread) -> None:
    """HTTP itself refuses NUL in a header (the parser answers 400 and closes); never a 500."""
    import socket

    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Session-Id: a\x00b\r\nContent-Length: 2\r\n\r\n{}"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")


_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0xDFFF, exclude_categories=()), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(endpoint=st.sampled_from(list(EXAMPLES)), data=st.data())
def test_any_text_in_any_field_is_200_or_a_clear_422(
    shared: tuple[ServerThread, FakeSupportDesk], endpoint: tuple[str, str], data: st.DataObject
) -> None:
    server, _ = shared
    leaf = data.draw(st.sampled_from(list(_leaves(EXAMPLES[endpoint]))))
    text = data.draw(_text)
    body = _with(EXAMPLES[endpoint], leaf, text)
    with httpx.Client(base_url=server.url, timeout=10) as c:
        response = c.request(*endpoint, content=_raw(body), headers={"Content-Type": "application/json"})
    assert response.status_code in (200, 422), response.text
    seen = json.loads(_raw(text))  # as the server decodes it: an escaped high and low surrogate are one character
    bad = "\x00" in seen or any(0xD800 <= ord(ch) <= 0xDFFF for ch in seen)
    if bad:
        assert response.status_code == 422
        assert "contains a" in response.json()["error"]["message"]


def test_an_escaped_surrogate_pair_is_one_valid_character(shared: tuple[ServerThread, FakeSupportDesk]) -> None:
    """``"\\ud800\\udc00"`` in JSON is U+10000, valid text: answered, not refused as two lone surrogates."""
    server, desk = shared
    body = {"message": "status of ticket 1 \ud800\udc00", "session_id": "pair"}
    with httpx.Client(base_url=server.url, timeout=10) as c:
        response = c.post(
            "/chat", content=_raw(body), headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
    assert response.status_code == 200, response.text
    assert desk.histories.pop("pair")[0].content == "status of ticket 1 \U00010000"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=8,
)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@given(value=_json_values)
def test_check_tree_refuses_exactly_the_bodies_with_nul_or_a_surrogate(value: Any) -> None:
    bad = any(text_problem(s) is not None for s in _strings(value))
    assert bad == any("\x00" in s or any(0xD800 <= ord(c) <= 0xDFFF for c in s) for s in _strings(value))
    if bad:
        with pytest.raises(PydanticCustomError) as refused:
            check_tree(value)
        assert refused.value.type == "invalid_text"
    else:
        check_tree(value)


# --- no exception or driver text in any body ---------------------------------------------------------------


class DataError(Exception):
    """Named like psycopg's, with a driver-like message."""


DRIVER_TEXT = "PostgreSQL text fields cannot contain NUL (0x00) bytes"
SECRETS = ("DataError", DRIVER_TEXT, "UndefinedTable", "Traceback", "relation")

_REQUESTS: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = [
    ("POST", "/chat", {"message": "ticket 1", "session_id": "s1"}, {}),
    ("POST", "/chat", {"message": "ticket 1", "session_id": "s1"}, {"Accept": "application/json"}),
    ("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {}),
    (
        "POST",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        {},
    ),
    ("GET", "/sessions/s1", None, {}),
    ("DELETE", "/sessions/s1", None, {}),
]


def _assert_clean(response: httpx.Response) -> None:
    for secret in SECRETS:
        assert secret not in response.text, f"{response.request.method} {response.request.url}: {response.text}"


@pytest.mark.parametrize("after_tokens", [0, 2])
def test_a_raising_desk_leaks_no_exception_text(
    shared: tuple[ServerThread, FakeSupportDesk], after_tokens: int
) -> None:
    server, desk = shared
    desk.fault, desk.fault_after_tokens = DataError(DRIVER_TEXT), after_tokens
    try:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            for method, path, body, headers in _REQUESTS:
                response = c.request(method, path, json=body, headers=headers)
                assert response.status_code in (200, 500), response.text  # 200: a stream that ends in `error`
                _assert_clean(response)
                if response.status_code == 200 and "event-stream" in response.headers["content-type"]:
                    assert "internal_error" in response.text
    finally:
        desk.fault, desk.fault_after_tokens = None, 0


@pytest.mark.parametrize(
    "event",
    [
        TurnError(message=f"the turn failed: DataError: {DRIVER_TEXT}", code="internal_error"),
        TurnError(message="the database is unavailable: UndefinedTable", code="database_unavailable"),
        TurnError(message="relation x does not exist", code="some_new_code"),
    ],
)
def test_a_desk_error_event_reaches_the_client_in_the_servers_words(
    shared: tuple[ServerThread, FakeSupportDesk], event: TurnError
) -> None:
    server, desk = shared
    desk.fault_event = event
    try:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            for method, path, body, headers in _REQUESTS[:4]:
                response = c.request(method, path, json=body, headers=headers)
                _assert_clean(response)
                assert event.code in response.text
    finally:
        desk.fault_event = None
        server.app.state.services.database.mark(up=True)

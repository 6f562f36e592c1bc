"""The model client's circuit breaker and fail-fast path: an unreachable endpoint costs one connection attempt,
after which calls fail at once — with the same stop reason — without touching the network until the window
has passed. Connections are counted where they happen (a transport below the SDK, a loopback listener)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.llm import LLMAuthError, LLMBadRequestError, LLMConnectError, LLMError, OpenAIChatModel
from routegate.llm._breaker import CircuitBreaker
from routegate.llm.errors import LLMTimeoutError, LLMUpstreamError
from routegate.testing import ErrorReply, Reply, ScriptedOpenAIServer
from routegate.testing.network import CountingTransport, closed_port

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def stalling_listener() -> Iterator[socket.socket]:
    """A loopback listener that never accepts: connections complete in the backlog and no answer ever comes."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.setblocking(False)
        yield listener


def drain(listener: socket.socket) -> int:
    """Accept (and close) every connection waiting in the backlog; how many there were."""
    count = 0
    for _ in range(1000):  # bounded
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1
    return count


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def stop_of(chat: OpenAIChatModel) -> LLMError:
    with pytest.raises(LLMError) as stopped:
        await chat.complete(HI)
    return stopped.value


async def test_an_unreachable_endpoint_is_tried_once_then_not_at_all() -> None:
    transport = CountingTransport()
    base = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAIChatModel(model="m", api_key="k", base_url=base, max_retries=2, transport=transport) as chat:
        assert chat.health == "ok"
        first = await stop_of(chat)
        assert isinstance(first, LLMConnectError) and first.stop_reason == "llm_error:connect"
        assert transport.attempts == 1  # no retries on a refused connection
        assert chat.health == "down"
        second = await stop_of(chat)
        assert isinstance(second, LLMConnectError) and "not tried" in second.message
        with pytest.raises(LLMConnectError):
            async for _ in chat.stream(HI):
                pass  # pragma: no cover - it fails before the first chunk
        assert transport.attempts == 1  # the breaker-open calls made no connection attempt


async def test_a_stalling_endpoint_times_out_once_then_is_not_connected_to(stalling_listener: socket.socket) -> None:
    port = stalling_listener.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    async with OpenAIChatModel(model="m", api_key="k", base_url=base, timeout=0.3, max_retries=0) as chat:
        assert isinstance(await stop_of(chat), LLMTimeoutError)
        assert drain(stalling_listener) == 1
        again = await stop_of(chat)
        assert isinstance(again, LLMTimeoutError) and again.stop_reason == "llm_timeout"
        assert drain(stalling_listener) == 0  # no connection while the breaker is open


async def test_after_the_window_one_trial_call_goes_through_and_closes_it(server: ScriptedOpenAIServer) -> None:
    clock = Clock()
    async with OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url, max_retries=0) as chat:
        chat.breaker = CircuitBreaker(open_seconds=30, clock=clock)
        server.script(ErrorReply(503))
        assert isinstance(await stop_of(chat), LLMUpstreamError)
        assert chat.health == "down"
        clock.now += 29.9
        assert isinstance(await stop_of(chat), LLMUpstreamError)
        assert len(server.chat_requests) == 1
        clock.now += 0.2
        assert chat.health == "degraded"  # the window has passed: the next call is the trial
        server.script(Reply("back"))
        assert await chat.complete(HI) == "back"
        assert chat.health == "ok" and len(server.chat_requests) == 2


async def test_a_failed_trial_opens_it_for_another_window(server: ScriptedOpenAIServer) -> None:
    clock = Clock()
    async with OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url, max_retries=0) as chat:
        chat.breaker = CircuitBreaker(open_seconds=10, clock=clock)
        server.script(ErrorReply(401), ErrorReply(401))
        assert isinstance(await stop_of(chat), LLMAuthError)
        clock.now += 10
        assert isinstance(await stop_of(chat), LLMAuthError)  # the trial
        clock.now += 9
        assert isinstance(await stop_of(chat), LLMAuthError)
        assert len(server.chat_requests) == 2 and chat.health == "down"


async def test_transient_errors_are_still_retried_within_the_call(server: ScriptedOpenAIServer) -> None:
    async with OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url, max_retries=2) as chat:
        server.script(ErrorReply(503), ErrorReply(429), Reply("ok"))
        assert await chat.complete(HI) == "ok"
        assert len(server.chat_requests) == 3 and chat.health == "ok"


async def test_a_refused_request_does_not_open_it(server: ScriptedOpenAIServer) -> None:
    async with OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url, max_retries=0) as chat:
        server.script(ErrorReply(400), Reply("fine"))
        assert isinstance(await stop_of(chat), LLMBadRequestError)
        assert chat.health == "ok"
        assert await chat.complete(HI) == "fine"


async def test_the_probe_says_whether_the_endpoint_answers(server: ScriptedOpenAIServer) -> None:
    async with OpenAIChatModel(model="m", api_key=server.api_key, base_url=server.base_url) as chat:
        assert await chat.probe() is None and chat.health == "ok"
    transport = CountingTransport()
    base = f"http://127.0.0.1:{closed_port()}/v1"
    async with OpenAIChatModel(model="m", api_key="k", base_url=base, transport=transport) as chat:
        stop = await chat.probe()
        assert isinstance(stop, LLMConnectError) and chat.health == "down"
        assert transport.attempts == 1
        await stop_of(chat)
        assert transport.attempts == 1  # the probe opened the breaker: the first turn is fast too


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), True])
def test_a_bad_window_is_refused_with_the_setting_named(seconds: float) -> None:
    with pytest.raises(Exception, match="ROUTEGATE_LLM_BREAKER_SECONDS"):
        OpenAIChatModel(model="m", api_key="k", breaker_seconds=seconds)


def test_a_trial_that_never_reports_back_is_forgotten_after_a_window() -> None:
    clock = Clock()
    breaker = CircuitBreaker(open_seconds=5, clock=clock)
    breaker.failed(LLMConnectError("refused"))
    assert breaker.state == "open" and breaker.health == "down"
    clock.now += 5
    assert breaker.before_call() is None  # the trial goes ahead ... and is cancelled: it never reports
    refused = breaker.before_call()
    assert isinstance(refused, LLMConnectError) and "after the current trial call" in refused.message
    clock.now += 5
    assert breaker.state == "half_open" and breaker.before_call() is None  # a new trial, not stuck open
    breaker.succeeded()
    assert breaker.state == "closed" and breaker.health == "ok"


_KINDS = (LLMConnectError, LLMTimeoutError, LLMAuthError)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("fail"), st.integers(0, len(_KINDS) - 1)),
            st.tuples(st.just("refused"), st.just(0)),
            st.tuples(st.just("ok"), st.just(0)),
            st.tuples(st.just("wait"), st.integers(0, 20)),
        ),
        max_size=40,
    )
)
def test_while_open_every_call_is_refused_with_the_last_failures_reason(ops: list[tuple[str, int]]) -> None:
    clock = Clock()
    breaker = CircuitBreaker(open_seconds=10, clock=clock)
    last: LLMError | None = None
    failed_at = 0.0
    for op, arg in ops:
        if op == "wait":
            clock.now += arg
            continue
        stop = breaker.before_call()
        if last is not None and clock.now - failed_at < 10:
            assert stop is not None and stop.stop_reason == last.stop_reason  # inside the window: never tried
        if stop is not None:
            assert last is not None
            continue
        if op == "fail":
            last, failed_at = _KINDS[arg]("away"), clock.now
            breaker.failed(last)
        elif op == "refused":
            breaker.failed(LLMBadRequestError("bad request"))  # a working endpoint: closes
            last = None
        else:
            breaker.succeeded()
            last = None
        assert (breaker.state == "closed") == (last is None)

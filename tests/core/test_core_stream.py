"""The one event stream every runtime's ``iter`` returns (``routegate.core._stream.stream_events``): events in the
order emitted, up to the last; a run's failure reaches the reader; closing early stops the run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.core._stream import stream_events

Emit = Callable[[str], None]


def _is_last(event: str) -> bool:
    return event == "final"


async def _read(run: Callable[[Emit], Awaitable[object]], into: list[str] | None = None) -> list[str]:
    got = [] if into is None else into
    async for event in stream_events(run, _is_last):
        got.append(event)
    return got


@given(st.lists(st.lists(st.sampled_from(["route", "tool", "token"]), max_size=5), max_size=6))
def test_events_arrive_in_order_whether_emitted_at_once_or_across_waits(bursts: list[list[str]]) -> None:
    async def run(emit: Emit) -> None:
        for burst in bursts:
            for event in burst:
                emit(event)
            await asyncio.sleep(0)  # the reader waits for the next burst
        emit("final")
        emit("after the last")  # never read: the stream ends at its last event

    got = asyncio.run(_read(run))
    assert got == [event for burst in bursts for event in burst] + ["final"]


async def test_a_run_that_returns_without_its_last_event_ends_the_stream() -> None:
    async def run(emit: Emit) -> None:
        emit("token")
        await asyncio.sleep(0)

    assert await _read(run) == ["token"]


async def test_a_runs_failure_reaches_the_reader_after_what_it_emitted() -> None:
    got: list[str] = []

    async def run(emit: Emit) -> None:
        emit("route")
        await asyncio.sleep(0)
        raise LookupError("the tool broke")

    with pytest.raises(LookupError, match="the tool broke"):
        await _read(run, got)
    assert got == ["route"]


async def test_closing_the_stream_early_cancels_a_run_that_is_waiting() -> None:
    waiting, cancelled = asyncio.Event(), asyncio.Event()

    async def run(emit: Emit) -> None:
        emit("route")
        try:
            waiting.set()
            await asyncio.Event().wait()  # a tool that never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stream = cast(AsyncGenerator[str, None], stream_events(run, _is_last))
    assert await anext(stream) == "route"
    await waiting.wait()
    await stream.aclose()
    assert cancelled.is_set()

"""A scripted in-memory support desk that keeps the real desk's contract: :class:`FakeSupportDesk`.

It stands in for :class:`~routegate.apps.support.desk.SupportAgent` wherever a test or a benchmark needs the
desk's behaviour without PostgreSQL and the encoder: the HTTP server's tests, the UI's tests, a load test of the
server alone. The same contract test (``tests/support/test_support_desk_contract.py``) runs against both desks, so
what a test learns from the fake holds for the real one:

* a turn streams ``route`` → ``tool`` (not on the LLM route) → ``token``\\* → ``final`` (a
  :class:`~routegate.core.FinalEvent` carrying the turn's ``TurnResult``), or one ``error``;
* a refused message or session id is one ``error`` event whose code names the problem (``ask`` raises
  :class:`~routegate.core.messages.InvalidMessageError` / :class:`InvalidSessionIdError`);
* a turn that ends with an ``error`` event makes ``ask`` raise :class:`TurnFailedError` with that code;
* with the database down, a turn is one ``database_unavailable`` error, ``history``/``reset`` raise
  :class:`DatabaseUnavailableError` and ``healthy()`` is false;
* ``history`` holds the last ``memory`` messages of completed turns, oldest first; ``reset`` forgets them;
* a turn may take the conversation its caller keeps (``iter(..., history=...)``); the fake records it in
  ``supplied`` under the session, and answers as it would without it.

Routing is by keyword, answers are canned (``[ROUTE] answer to: <message>``) and streamed word by word. Fault
injection, for the server's robustness tests, goes beyond the contract on purpose: ``fault`` is an exception the
desk raises (turns, after ``fault_after_tokens`` tokens; history; reset), ``fault_event`` a ``TurnError`` a turn
ends with, ``raise_when_down`` makes a turn raise instead of reporting the database as down, and
``stall_after_tokens`` makes a turn wait forever after its n-th token (for disconnect tests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from routegate._lazy import renamed_method
from routegate.apps.support.contracts import (
    AnswerToken,
    Message,
    RouteChosen,
    SupportEvent,
    SupportRoute,
    ToolUsed,
    TurnError,
    TurnResult,
)
from routegate.apps.support.doors import DeskDoors
from routegate.apps.support.embedded import DatabaseUnavailableError
from routegate.apps.support.errors import InvalidSessionIdError, TurnFailedError
from routegate.apps.support.inputs import check_session_id
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.core.events import FinalEvent
from routegate.core.messages import DEFAULT_MAX_MESSAGE_CHARS

_KEYWORDS: tuple[tuple[SupportRoute, tuple[str, ...]], ...] = (
    ("POSTGRES", ("customer", "ticket", "account", "status")),
    ("VECTOR", ("how do i", "policy", "refund", "password", "explain")),
    ("EXTERNAL", ("weather", "temperature", "bitcoin", "price")),
)
_TOOLS: dict[SupportRoute, str] = {"POSTGRES": "postgres", "VECTOR": "vector", "EXTERNAL": "external"}
_DOWN = "the database is unavailable (the fake desk's database is down)"

__all__ = ["DatabaseUnavailableError", "FakeSupportDesk", "InvalidSessionIdError", "TurnFailedError"]


@dataclass
class FakeSupportDesk(DeskDoors):
    """A :class:`~routegate.apps.support.contracts.SupportDesk` with keyword routing, canned answers streamed
    word by word and in-memory histories (the last ``memory`` messages); see the module's text for the contract
    it keeps and the faults it can inject. ``active_streams`` counts turns whose stream is open,
    ``closed_streams`` those that closed; ``tenants`` lists the tenant of each turn on accepted input and of each
    ``history`` / ``reset`` call, in order."""

    database_up: bool = True
    raise_when_down: bool = False
    stall_after_tokens: int | None = None
    fault: Exception | None = None
    fault_after_tokens: int = 0
    fault_event: TurnError | None = None
    memory: int = 10
    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    active_streams: int = 0
    closed_streams: int = 0
    histories: dict[str, list[Message]] = field(default_factory=dict)
    supplied: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    tenants: list[str] = field(default_factory=list)

    def route_for(self, message: str) -> SupportRoute:
        text = message.lower()
        for route, words in _KEYWORDS:
            if any(w in text for w in words):
                return route
        return "LLM"

    def _turn_events(
        self, message: str, session_id: str, tenant: str, history: Sequence[Message] | None
    ) -> AsyncIterator[SupportEvent]:
        """A turn on accepted input; a supplied ``history`` is recorded in :attr:`supplied`."""
        self.tenants.append(tenant)
        if history is not None:
            self.supplied[session_id] = tuple(history)
        return self._turn(message, session_id)

    astream = renamed_method(DeskDoors.iter, "FakeSupportDesk", "astream")

    async def _turn(self, message: str, session_id: str) -> AsyncIterator[SupportEvent]:
        started = time.perf_counter()
        self.active_streams += 1
        try:
            if not self.database_up:
                if self.raise_when_down:
                    raise ConnectionError("connection refused (fake database is down)")
                yield TurnError(message=_DOWN, code="database_unavailable")
                return
            if self.fault is not None and self.fault_after_tokens == 0:
                raise self.fault
            route = self.route_for(message)
            yield RouteChosen(route=route, layer="rules", scores={route: 1.0}, why="keyword match")
            fallback = None
            tool = _TOOLS.get(route)
            if tool is not None:
                empty = "nothing" in message.lower()
                yield ToolUsed(
                    tool=tool,
                    call={"query": message},
                    summary="0 rows" if empty else "1 row",
                    ok=not empty,
                    evidence=[] if empty else [{"id": 1, "text": f"evidence for {route}"}],
                )
                if empty:
                    fallback = f"empty: {tool} returned no data"
            answer = f"[{route}] answer to: {message}"
            for i, word in enumerate(answer.split(" ")):
                yield AnswerToken(text=word if i == 0 else " " + word)
                if self.fault is not None and i + 1 >= self.fault_after_tokens:
                    raise self.fault
                if self.fault_event is not None and i + 1 >= self.fault_after_tokens:
                    yield self.fault_event
                    return
                if self.stall_after_tokens is not None and i + 1 >= self.stall_after_tokens:
                    await asyncio.Event().wait()
            now = time.time()
            history = self.histories.setdefault(session_id, [])
            history += [Message("user", message, now), Message("assistant", answer, now)]
            del history[: max(0, len(history) - self.memory)]
            result = TurnResult(
                session_id=session_id,
                route=route,
                answer=answer,
                stop_reason="success",
                fallback=fallback,
                notes=({"phase": "route", "route": route},),
                latency_ms=(time.perf_counter() - started) * 1000.0,
            )
            yield FinalEvent(result)
        finally:
            self.active_streams -= 1
            self.closed_streams += 1

    async def history(self, session_id: str, *, tenant: str = ANONYMOUS) -> list[Message]:
        self.tenants.append(tenant)
        self._check_up()
        return list(self.histories.get(check_session_id(session_id), []))

    async def reset(self, session_id: str, *, tenant: str = ANONYMOUS) -> None:
        self.tenants.append(tenant)
        self._check_up()
        self.histories.pop(check_session_id(session_id), None)

    async def healthy(self) -> bool:
        return self.database_up

    def _check_up(self) -> None:
        if self.fault is not None:
            raise self.fault
        if not self.database_up:
            raise DatabaseUnavailableError(_DOWN)

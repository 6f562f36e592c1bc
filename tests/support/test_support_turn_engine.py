"""The desk's turn is one run of its Plan, seen from outside: the engine's deadline stops a turn in whichever node
hangs with that node's phase; every step hands forward a typed payload (no turn state travels in them); the turn's
input is read-only; and each event of a turn is sent once."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routegate.apps.support.contracts import (
    ROUTES,
    AnswerToken,
    Message,
    RouteChosen,
    SupportEvent,
    ToolUsed,
)
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.payloads import TurnState
from routegate.apps.support.respond import RespondNode
from routegate.apps.support.router import RouteChoice, SupportRouter
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.apps.support.turn import TurnInput, read_turn
from routegate.core import Budget
from routegate.core.contracts import HistoryEntry
from routegate.embed import MiniLMEncoder
from routegate.llm.protocol import ChatMessage
from support.hung_nodes import forever, hang_vector
from support.turn_events import final_of

pytestmark = pytest.mark.integration

BUDGET = Budget(max_route_attempts=1, max_delegations=1, max_seconds=1.0)


class _StuckRouter(SupportRouter):
    """A router that never decides."""

    async def route_choice(
        self, text: str, history: Sequence[str] = (), refused: Sequence[HistoryEntry] = ()
    ) -> RouteChoice:
        await forever()
        raise AssertionError("unreachable")


class _SilentModel:
    """A chat model that never sends its first token."""

    async def complete(
        self, messages: Sequence[ChatMessage], *, json_mode: bool = False, temperature: float = 0.0
    ) -> str:
        await forever()
        raise AssertionError("unreachable")

    async def stream(self, messages: Sequence[ChatMessage], *, temperature: float = 0.0) -> AsyncIterator[str]:
        await forever()
        yield ""


@pytest.fixture
async def desk(db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer) -> SupportAgent:
    agent = SupportAgent(db=db, encoder=encoder, semantic=semantic, budget=BUDGET)
    await agent.start()
    return agent


def _rewired(desk: SupportAgent, node: str, semantic: ExampleEmbeddingLayer) -> None:
    """The desk's plan with ``node`` (``router``, ``VECTOR`` or ``LLM``) replaced by one that never finishes."""
    assert desk.router is not None and desk.gateway is not None
    if node == "VECTOR":
        hang_vector(desk)
        return
    router: SupportRouter = _StuckRouter(semantic=semantic) if node == "router" else desk.router
    respond = RespondNode(chat_model=_SilentModel()) if node == "LLM" else RespondNode()
    desk._plan = desk.build_plan(router, list(desk.gateway.workers.values()), routes=ROUTES, respond=respond)


async def _events(desk: SupportAgent, message: str, session_id: str) -> list[SupportEvent]:
    return [event async for event in desk.iter(message, session_id=session_id)]


@pytest.mark.parametrize(
    ("node", "phase", "route", "path"),
    [
        ("router", "route", "LLM", ["router"]),
        ("VECTOR", "delegate", "VECTOR", ["router", "VECTOR"]),
        ("LLM", "finalize", "VECTOR", ["router", "VECTOR", "LLM"]),
    ],
)
async def test_a_node_that_never_finishes_is_cut_off_by_the_plan_deadline_with_its_phase(
    desk: SupportAgent, semantic: ExampleEmbeddingLayer, node: str, phase: str, route: str, path: list[str]
) -> None:
    _rewired(desk, node, semantic)
    events = await _events(desk, "How do I reset my password?", f"stuck-{node}")
    final = final_of(events)
    assert (final.stop_reason, final.phase, final.route) == ("max_seconds", phase, route)
    assert final.fallback == "stopped:max_seconds" and not final.ok
    # the engine's one deadline handler said which step it cut off
    found = re.match(r"max_seconds=([0-9.]+) reached after ", final.message)
    assert found is not None and float(found.group(1)) == BUDGET.max_seconds
    assert f"step '{path[-1]}' was cut off" in final.message
    assert [e["target"] for e in final.notes if e.get("node") == "plan"] == path
    plan_stop = [e for e in final.notes if e.get("node") == "plan"][-1]
    assert (plan_stop["ok"], plan_stop["stop_reason"]) == (False, "max_seconds")
    assert final.notes[-1] == {"node": "respond", "mode": "composer", "stopped": "max_seconds", "why": final.message}
    routes = [e for e in events if isinstance(e, RouteChosen)]
    assert [e.route for e in routes] == [route]  # announced once, by the router or (cut off) by the desk
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == final.answer
    history = await desk.history(f"stuck-{node}")
    assert [m.content for m in history] == ["How do I reset my password?", final.answer]


async def test_waiting_for_the_session_counts_against_the_turns_budget(
    desk: SupportAgent, semantic: ExampleEmbeddingLayer
) -> None:
    """The session's previous turn runs on for a while: the waiting turn's plan gets what is left of the budget,
    so the turn as a whole keeps to ``max_seconds``."""
    _rewired(desk, "VECTOR", semantic)
    holding, release = asyncio.Event(), asyncio.Event()

    async def previous_turn() -> None:
        async with desk.memory.hold("busy", within=5.0):
            holding.set()
            await release.wait()

    holder = asyncio.create_task(previous_turn())
    await holding.wait()
    waiting = asyncio.create_task(_events(desk, "How do I reset my password?", "busy"))
    await asyncio.sleep(0.5)  # how long the previous turn goes on: the time measured, not a synchronisation
    release.set()
    events = await waiting
    await holder
    final = final_of(events)
    assert (final.stop_reason, final.phase) == ("max_seconds", "delegate")
    # one deadline for the turn, from its arrival: the run reports the turn's whole time (the wait included) ...
    found = re.match(r"max_seconds=([0-9.]+) reached after ([0-9.]+)s", final.message)
    assert found is not None and float(found.group(1)) == BUDGET.max_seconds
    assert float(found.group(2)) >= BUDGET.max_seconds
    # ... and the hung tool got only what the wait of at least 0.5 s left of it (about 0.5 s, not 1 s)
    cut = [e for e in final.notes if e.get("node") == "plan" and e.get("target") == "VECTOR"]
    assert len(cut) == 1 and cut[0]["elapsed_ms"] < 800


async def test_a_turns_result_is_made_from_its_own_state_and_how_its_run_ended(desk: SupportAgent) -> None:
    """The runtime's run starts from a state of its own (the turn's input is the run's deps, read-only): the steps
    record in it, and the turn's result is made from it; the same turn run again gets a new state and the same
    answer, and leaves the first state as it was."""
    turn = desk.new_turn("What is the status of ticket 1?", session_id="state")
    state = TurnState(turn)
    result = await desk.runtime.arun(state, deps=turn)
    assert result.ok and [e["target"] for e in result.notes if e.get("node") == "plan"] == ["router", "POSTGRES", "LLM"]
    assert [entry.target for entry in result.trace] == ["router", "POSTGRES", "LLM"]  # the plan's own trace
    assert state.choice is not None and state.choice.route == "POSTGRES" and state.route == "POSTGRES"
    assert state.intent is not None and state.intent.target == "POSTGRES"
    assert state.observation is not None and state.observation["result"]["row_count"] == 1
    assert state.answer == result.answer and result.answer.startswith("Ticket 1")
    assert state.announced and state.turn is turn
    seen = (state.answer, list(state.notes))
    again = TurnState(turn)
    second = await desk.runtime.arun(again, deps=turn)
    assert second.answer == result.answer and again is not state
    assert (state.answer, state.notes) == seen  # the second run did not touch the first one's state


@given(
    st.text(max_size=300),
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=80)), max_size=8),
)
def test_any_message_reads_into_a_turn_that_keeps_the_users_words(text: str, said: list[tuple[str, str]]) -> None:
    """The turn's input is built from untrusted text: whatever it holds, it reads into a turn (no stored turn
    context: nothing to carry, the message is routed as it is) that keeps the user's own words for memory."""
    history = tuple(Message("user" if role == "user" else "assistant", content) for role, content in said)
    turn = read_turn(text, session_id="s", history=history)
    assert (turn.said, turn.message, turn.history) == (text, text, history)
    assert turn.user_messages() == [content for role, content in said if role == "user"]
    assert turn.notes() == ()
    assert turn.context("LLM", None).turn == len(turn.user_messages()) + 1


def test_the_turn_input_is_read_only() -> None:
    turn = TurnInput("s", "hello")
    with pytest.raises(AttributeError):
        turn.message = "something else"  # type: ignore[misc]
    import routegate.apps.support.turn as module

    assert not hasattr(module, "Turn")


@pytest.mark.parametrize(
    ("message", "tools"),
    [
        ("What is the status of ticket 1?", 1),
        ("How do I reset my password?", 1),
        ("What is the price of Bitcoin?", 1),
        ("What can you do?", 0),
    ],
)
async def test_each_event_of_a_turn_is_sent_once_in_order(desk: SupportAgent, message: str, tools: int) -> None:
    events = await _events(desk, message, "once")
    kinds = [event.type for event in events]
    assert kinds[0] == "route" and kinds[-1] == "final"
    assert kinds.count("route") == 1 and kinds.count("tool") == tools and kinds.count("final") == 1
    assert kinds == ["route"] + ["tool"] * tools + ["token"] * kinds.count("token") + ["final"]
    final = final_of(events)
    assert final.ok
    assert "".join(e.text for e in events if isinstance(e, AnswerToken)) == final.answer
    tool_events = [e for e in events if isinstance(e, ToolUsed)]
    assert [e.tool.upper() for e in tool_events] == ([final.route] if tools else [])


async def test_a_refused_turn_sends_its_route_once_and_answers_safely(desk: SupportAgent) -> None:
    assert desk.router is not None and desk.gateway is not None
    desk._plan = desk.build_plan(
        desk.router,
        list(desk.gateway.workers.values()),
        routes=["POSTGRES", "VECTOR", "EXTERNAL"],
        respond=RespondNode(),
    )
    events = await _events(desk, "What can you do?", "refused")
    kinds = [event.type for event in events]
    assert kinds == ["route"] + ["token"] * (len(kinds) - 2) + ["final"]
    final = final_of(events)
    assert (final.stop_reason, final.phase, final.route) == ("invalid_route:route_not_allowed:LLM", "route", "LLM")
    assert [e["node"] for e in final.notes][:3] == ["router", "plan", "policy"]


class _BrokenRouter(SupportRouter):
    """A router that raises with a secret in its text."""

    async def route_choice(
        self, text: str, history: Sequence[str] = (), refused: Sequence[HistoryEntry] = ()
    ) -> RouteChoice:
        raise ValueError("postgresql://admin:s3cret@db/prod")


async def test_a_router_fault_stops_the_turn_through_the_engines_fault_path_by_class_only(
    desk: SupportAgent, semantic: ExampleEmbeddingLayer, caplog: pytest.LogCaptureFixture
) -> None:
    assert desk.router is not None and desk.gateway is not None
    workers = list(desk.gateway.workers.values())
    desk._plan = desk.build_plan(_BrokenRouter(semantic=semantic), workers, routes=ROUTES, respond=RespondNode())
    with caplog.at_level(logging.WARNING):
        events = await _events(desk, "How do I reset my password?", "broken-router")
    (logged,) = [r for r in caplog.records if "raised ValueError" in r.getMessage()]
    assert logged.name == "routegate.apps.support.graph" and logged.exc_info is not None  # the desk's own logger
    final = final_of(events)
    assert (final.stop_reason, final.phase, final.ok) == ("router_error:ValueError", "route", False)
    assert final.message == "the router raised ValueError (details in the log)"
    assert "s3cret" not in json.dumps(final.to_dict()) + "".join(str(e) for e in events)

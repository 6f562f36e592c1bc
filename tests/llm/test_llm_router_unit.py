"""LLMRouter and LLMFinalizer against the in-process ScriptedChatModel: payload, parsing, history window."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routegate.apps.triage import build_triage_agent
from routegate.core import Budget, FinalizeRequest, Router, RouteRequest
from routegate.core.contracts import RouteSpec
from routegate.errors import ConfigurationError
from routegate.llm import FINAL_SYSTEM_PROMPT, ROUTER_SYSTEM_PROMPT, LLMFinalizer
from routegate.routers.llm import LLMRouter, route_payload
from routegate.testing import ScriptedChatModel

CATALOG = (RouteSpec("billing_specialist", "Handle refunds", {"type": "object"}),)


def _route(target: str, ticket: str) -> str:
    return json.dumps({"kind": "route", "target": target, "args": {"ticket": ticket}})


def test_the_router_is_a_router() -> None:
    assert isinstance(LLMRouter(ScriptedChatModel()), Router)


def test_seed_prompts_are_kept() -> None:
    assert ROUTER_SYSTEM_PROMPT.startswith("You are a routing decision engine.")
    assert '{"kind":"route","target":"<route_name>","args":{"ticket":"..."}}' in ROUTER_SYSTEM_PROMPT
    assert ROUTER_SYSTEM_PROMPT.endswith("- Never output markdown or extra keys.")
    assert FINAL_SYSTEM_PROMPT.startswith("You are a support response assistant.")
    assert FINAL_SYSTEM_PROMPT.endswith("For billing refunds, include amount in USD when available.")


@pytest.mark.parametrize(
    ("text", "raw_is_text", "why"),
    [
        (
            '{"kind": "route", "target": "billing_specialist", "args": {}}',
            False,
            "the model chose 'billing_specialist'",
        ),
        ('  {"kind": "route"}\n', False, "the model answered a JSON object without a target"),
        ("[1, 2]", True, "the model answered JSON list, not an object"),
        ('"billing_specialist"', True, "the model answered JSON str, not an object"),
        ("```json\n{}\n```", True, "the model answered 14 characters that are not JSON"),
        ("", True, "the model answered 0 characters that are not JSON"),
    ],
)
async def test_the_answer_is_passed_on_unvalidated(text: str, raw_is_text: bool, why: str) -> None:
    chat = ScriptedChatModel([text])
    decision = await LLMRouter(chat).decide(RouteRequest(goal="g", catalog=CATALOG))
    assert decision.raw == (text if raw_is_text else json.loads(text))
    assert (decision.decided_by, decision.why) == ("llm", why)
    assert chat.calls[0].json_mode
    assert chat.calls[0].temperature == 0.0


async def test_non_object_json_gets_the_policy_reason_not_object() -> None:
    agent = build_triage_agent(router=LLMRouter(ScriptedChatModel(["[1, 2]"])))
    result = await agent.arun("refund")
    assert (result.stop_reason, result.raw_route) == ("invalid_route:not_object", "[1, 2]")


async def test_router_options() -> None:
    chat = ScriptedChatModel(["{}"])
    router = LLMRouter(chat, system_prompt="custom", json_mode=False, temperature=0.3, name="local-llm")
    decision = await router.decide(RouteRequest(goal="g", catalog=CATALOG))
    assert decision.decided_by == "local-llm"
    call = chat.calls[0]
    assert (call.content("system"), call.json_mode, call.temperature) == ("custom", False, 0.3)
    with pytest.raises(ConfigurationError, match="recent_history"):
        LLMRouter(chat, recent_history=-1)


async def test_only_the_last_three_history_entries_are_sent() -> None:
    # technical and sales both answer needs_reroute for this goal; distinct tickets avoid loop detection
    goal = "User Anna (user_id=42) asks for a refund of her subscription"
    targets = ["technical_specialist", "sales_specialist"] * 2 + ["billing_specialist"]
    chat = ScriptedChatModel([_route(t, f"{goal} #{i}") for i, t in enumerate(targets)] + ["Refund: 49 USD."])
    agent = build_triage_agent(
        router=LLMRouter(chat),
        finalizer=LLMFinalizer(chat),
        budget=Budget(max_route_attempts=5, max_delegations=5),
    )
    result = await agent.arun(goal)
    assert result.stop_reason == "success"
    assert result.output == "Refund: 49 USD."
    chat.assert_consumed()
    last_route = json.loads(chat.calls[4].content("user") or "")
    assert [h["attempt"] for h in last_route["recent_history"]] == [2, 3, 4]
    assert last_route["state_summary"]["attempts_completed"] == 4
    assert last_route["state_summary"]["routes_used_unique"] == ["technical_specialist", "sales_specialist"]
    assert last_route["budgets"] == {"max_route_attempts": 5, "remaining_attempts": 1}
    assert last_route["forbidden_targets"] == ["sales_specialist"]
    final = json.loads(chat.calls[5].content("user") or "")
    assert len(final["history"]) == 5  # the finalizer sees all the evidence
    assert not chat.calls[5].json_mode


def test_payload_window_can_be_changed() -> None:
    request = RouteRequest(goal="g", catalog=CATALOG)
    assert route_payload(request, recent=0)["recent_history"] == []


async def test_blank_final_answer_is_llm_empty_and_text_is_stripped() -> None:
    from routegate.core.contracts import HistoryEntry, RouteIntent
    from routegate.llm import LLMEmptyError

    entry = HistoryEntry(1, RouteIntent("billing_specialist", {"ticket": "t"}), {"status": "done", "result": {}})
    request = FinalizeRequest("goal", "billing_specialist", (entry,))
    chat = ScriptedChatModel([" \n\t", "  An answer.  "])
    finalizer = LLMFinalizer(chat, system_prompt="be brief")
    with pytest.raises(LLMEmptyError) as caught:
        await finalizer.finalize(request)
    assert caught.value.stop_reason == "llm_empty"
    assert "billing_specialist" in caught.value.message
    assert await finalizer.finalize(request) == "An answer."
    assert chat.calls[0].content("system") == "be brief"
    payload: dict[str, Any] = json.loads(chat.calls[0].content("user") or "")
    assert payload == {"goal": "goal", "selected_route": "billing_specialist", "history": [entry.to_dict()]}


async def test_streamed_final_answer_drops_leading_blanks_and_refuses_an_empty_one() -> None:
    from routegate.core.contracts import HistoryEntry, RouteIntent
    from routegate.llm import LLMEmptyError

    entry = HistoryEntry(1, RouteIntent("billing_specialist", {"ticket": "t"}), {"status": "done", "result": {}})
    request = FinalizeRequest("goal", "billing_specialist", (entry,))
    finalizer = LLMFinalizer(ScriptedChatModel(["  Refund  approved.", "   "]))
    assert [delta async for delta in finalizer.astream(request)] == ["Refund ", " ", "approved."]
    with pytest.raises(LLMEmptyError, match="streamed an empty final answer"):
        [delta async for delta in finalizer.astream(request)]

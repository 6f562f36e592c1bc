"""The LLM router and finalizer in the seed's triage agent, through the real openai client and a loopback server."""

from __future__ import annotations

import json

from routegate.apps.triage import DEMO_GOAL, build_triage_agent
from routegate.core import Budget, RunResult
from routegate.llm import FINAL_SYSTEM_PROMPT, ROUTER_SYSTEM_PROMPT, LLMFinalizer, OpenAIChatModel
from routegate.routers.llm import LLMRouter
from routegate.testing import ErrorReply, Hang, Reply, ScriptedOpenAIServer

BILLING_ROUTE = json.dumps({"kind": "route", "target": "billing_specialist", "args": {"ticket": DEMO_GOAL}})
ANSWER = "The billing specialist confirmed a refund of 49.00 USD: pro monthly plans are refundable within 14 days."


async def _run(model: OpenAIChatModel, goal: str = DEMO_GOAL, budget: Budget | None = None) -> RunResult:
    agent = build_triage_agent(router=LLMRouter(model), finalizer=LLMFinalizer(model), budget=budget)
    return await agent.arun(goal)


def _model_for(server: ScriptedOpenAIServer, *, timeout: float) -> OpenAIChatModel:
    return OpenAIChatModel(model="scripted-model", api_key=server.api_key, base_url=server.base_url, timeout=timeout)


async def test_valid_route_succeeds_with_the_llm_answer(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply(BILLING_ROUTE), Reply(f"  {ANSWER}\n"))
    result = await _run(model)
    assert result.status == "ok"
    assert result.stop_reason == "success"
    assert result.phase is None
    assert result.selected_route == "billing_specialist"
    assert result.output == ANSWER
    assert result.history[0].observation["result"]["refund_amount_usd"] == 49.0
    assert result.trace[0].decided_by == "llm"
    assert result.trace[0].why == "the model chose 'billing_specialist'"

    route_call, final_call = server.chat_requests
    assert route_call.json_mode
    assert route_call.model == "scripted-model"
    assert route_call.body["temperature"] == 0
    assert route_call.headers["authorization"] == f"Bearer {server.api_key}"
    assert route_call.system_prompt == ROUTER_SYSTEM_PROMPT
    payload = route_call.user_json()
    assert list(payload) == [
        "goal",
        "budgets",
        "forbidden_targets",
        "state_summary",
        "recent_history",
        "available_routes",
    ]
    assert payload["goal"] == DEMO_GOAL
    assert payload["budgets"] == {"max_route_attempts": 3, "remaining_attempts": 3}
    assert payload["forbidden_targets"] == []
    assert payload["recent_history"] == []
    assert payload["state_summary"]["attempts_completed"] == 0
    assert [r["name"] for r in payload["available_routes"]] == [
        "billing_specialist",
        "technical_specialist",
        "sales_specialist",
    ]
    assert "ticket" in payload["available_routes"][0]["args"]["properties"]

    assert not final_call.json_mode
    assert final_call.system_prompt == FINAL_SYSTEM_PROMPT
    final = final_call.user_json()
    assert final["goal"] == DEMO_GOAL
    assert final["selected_route"] == "billing_specialist"
    assert final["history"] == [entry.to_dict() for entry in result.history]


async def test_non_json_route_stops_with_the_text_kept(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    text = "Sure! I would route this to billing_specialist."
    server.script(Reply(text))
    result = await _run(model)
    assert result.stop_reason == "invalid_route:non_json"
    assert result.phase == "route"
    assert result.raw_route == text
    assert result.to_dict()["raw_route"] == text
    assert result.history == ()


async def test_extra_keys_stop_the_run(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    raw = {"kind": "route", "target": "billing_specialist", "args": {"ticket": "refund"}, "confidence": 0.9}
    server.script(Reply(json.dumps(raw)))
    result = await _run(model)
    assert result.stop_reason == "invalid_route:extra_keys"
    assert result.phase == "route"
    assert result.raw_route == raw


async def test_slow_model_stops_with_llm_timeout(server: ScriptedOpenAIServer) -> None:
    chat = _model_for(server, timeout=1.0)
    async with chat:
        # warm the client (first-call imports) so the short timeout only ever meets the hanging request
        server.script(Reply("warm"))
        assert await chat.complete([{"role": "user", "content": "ping"}]) == "warm"
        server.script(Hang())
        result = await _run(chat)
    assert result.stop_reason == "llm_timeout"
    assert result.phase == "route"
    assert "timeout=1s" in result.message
    assert len(server.chat_requests) == 2


async def test_unauthorised_key_stops_with_llm_error_auth(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(ErrorReply(401))
    result = await _run(model)
    assert result.stop_reason == "llm_error:auth"
    assert result.phase == "route"
    assert "HTTP 401" in result.message
    assert len(server.chat_requests) == 1  # a refused key is not retried


async def test_rate_limit_after_retries_stops_with_llm_error_rate_limited(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(ErrorReply(429), ErrorReply(429), ErrorReply(429))
    result = await _run(model)
    assert result.stop_reason == "llm_error:rate_limited"
    assert result.phase == "route"
    assert len(server.chat_requests) == 3  # the first try and max_retries=2 retries


async def test_rate_limit_then_success_is_retried(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(ErrorReply(429), Reply(BILLING_ROUTE), Reply(ANSWER))
    result = await _run(model)
    assert result.stop_reason == "success"
    assert len(server.chat_requests) == 3


async def test_server_error_after_retries_stops_with_llm_error_upstream(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(ErrorReply(500), ErrorReply(502), ErrorReply(503))
    result = await _run(model)
    assert result.stop_reason == "llm_error:upstream"
    assert result.phase == "route"
    assert "HTTP 503" in result.message


async def test_empty_final_answer_stops_with_llm_empty_in_finalize(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    server.script(Reply(BILLING_ROUTE), Reply("   \n"))
    result = await _run(model)
    assert result.stop_reason == "llm_empty"
    assert result.phase == "finalize"
    assert result.route is not None
    assert result.route.target == "billing_specialist"
    assert result.output is None


async def test_missing_final_content_stops_with_llm_empty(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply(BILLING_ROUTE), Reply(None))
    result = await _run(model)
    assert (result.stop_reason, result.phase) == ("llm_empty", "finalize")


async def test_finalizer_failure_keeps_the_finalize_phase(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply(BILLING_ROUTE), ErrorReply(403))
    result = await _run(model)
    assert (result.stop_reason, result.phase) == ("llm_error:auth", "finalize")


async def test_reroute_puts_the_failed_target_in_forbidden_targets(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    technical = {"kind": "route", "target": "technical_specialist", "args": {"ticket": DEMO_GOAL}}
    server.script(Reply(json.dumps(technical)), Reply(BILLING_ROUTE), Reply(ANSWER))
    result = await _run(model)
    assert result.stop_reason == "success"
    assert [entry.route.target for entry in result.history] == ["technical_specialist", "billing_specialist"]

    first, second, _final = server.chat_requests
    assert first.user_json()["forbidden_targets"] == []
    payload = second.user_json()
    assert payload["forbidden_targets"] == ["technical_specialist"]
    assert payload["budgets"] == {"max_route_attempts": 3, "remaining_attempts": 2}
    assert payload["state_summary"]["last_route_target"] == "technical_specialist"
    assert payload["state_summary"]["last_observation_status"] == "needs_reroute"
    assert payload["state_summary"]["routes_used_unique"] == ["technical_specialist"]
    assert [h["route"]["target"] for h in payload["recent_history"]] == ["technical_specialist"]


async def test_repeating_the_forbidden_target_is_refused_by_the_policy(
    server: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    technical = json.dumps({"kind": "route", "target": "technical_specialist", "args": {"ticket": DEMO_GOAL}})
    server.script(Reply(technical), Reply(technical))
    result = await _run(model)
    assert result.stop_reason == "invalid_route:repeat_target_after_reroute"
    assert result.phase == "route"
    assert server.chat_requests[1].user_json()["forbidden_targets"] == ["technical_specialist"]


async def test_unreachable_endpoint_stops_with_llm_error_connect() -> None:
    with ScriptedOpenAIServer() as gone:
        base_url = gone.base_url
    chat = OpenAIChatModel(model="m", api_key="k", base_url=base_url, timeout=30.0, max_retries=0)
    async with chat:
        result = await _run(chat)
    assert (result.stop_reason, result.phase) == ("llm_error:connect", "route")  # not a timeout
    assert "could not be reached" in result.message
    assert "OPENAI_BASE_URL" in result.message


async def test_run_deadline_cuts_off_a_hanging_model(server: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    server.script(Reply("warm"))
    assert await model.complete([{"role": "user", "content": "ping"}]) == "warm"
    server.script(Hang())
    result = await _run(model, budget=Budget(max_seconds=0.5))
    assert (result.stop_reason, result.phase) == ("max_seconds", "route")

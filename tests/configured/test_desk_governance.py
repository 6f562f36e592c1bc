"""A configured desk is governed as the built-in one: its tools' flow rules (``flows``) and what a refused decision
does (``on_refusal``) are honoured, asked through the public desk contract on the shop desk."""

from __future__ import annotations

from typing import Any

import pytest

from routegate.apps.support.desk import SupportAgent
from routegate.core import Budget, From
from routegate.errors import ConfigurationError

QUESTION = "What is the status of order 1042?"
UNMEETABLE = {"POSTGRES": {"query": From("config")}}  # no message can meet it: the query must come from configuration


async def _desk(shop: SupportAgent, **options: Any) -> SupportAgent:
    """Another desk on the shop desk's configuration and databases, with ``options``."""
    desk = SupportAgent(
        shop.config,
        shop.desk_dir,
        data=shop.data,
        db=shop.db,
        encoder=shop.encoder,
        ingest_on_start=False,
        **options,
    )
    await desk.start()
    return desk


def _notes(trace: tuple[Any, ...], node: str) -> list[dict[str, Any]]:
    return [dict(entry) for entry in trace if entry.get("node") == node]


async def test_a_configured_desk_refuses_a_tool_call_its_flow_rule_forbids(shop: SupportAgent) -> None:
    plain = await shop.ask(QUESTION, session_id="flows-plain")
    assert (plain.route, plain.stop_reason) == ("POSTGRES", "success")
    ruled = await (await _desk(shop, flows=UNMEETABLE)).ask(QUESTION, session_id="flows-ruled")
    assert (ruled.stop_reason, ruled.phase) == ("route_denied:provenance:query", "delegate")
    assert _notes(ruled.notes, "postgres") == []  # the tool never ran
    assert "1042" not in ruled.answer


async def test_a_configured_desk_labels_the_sources_a_rule_checks(shop: SupportAgent) -> None:
    result = await (await _desk(shop, flows={"POSTGRES": {"query": From("user")}})).ask(QUESTION, session_id="f-u")
    assert (result.route, result.stop_reason) == ("POSTGRES", "success")
    assert _notes(result.notes, "gateway")[0]["provenance"] == {"query": ["user"]}


async def test_a_configured_desk_hands_a_refusal_back_to_its_router(shop: SupportAgent) -> None:
    budget = Budget(max_route_attempts=2, max_delegations=1)
    desk = await _desk(shop, flows=UNMEETABLE, on_refusal="observe", budget=budget)
    result = await desk.ask(QUESTION, session_id="flows-observe")
    assert result.route != "POSTGRES" and result.stop_reason != "route_denied:provenance:query"
    assert [n["target"] for n in _notes(result.notes, "policy")] == ["POSTGRES"]


async def test_a_rule_for_a_tool_the_desk_lacks_is_refused_at_start(shop: SupportAgent) -> None:
    with pytest.raises(ConfigurationError, match="this desk's tools are"):
        await _desk(shop, flows={"EXTERNAL": {"query": From("user")}})  # the shop desk has no HTTP tool

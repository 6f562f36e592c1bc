"""The turn panel's plan: the path a turn's ``final`` event carries (its ``plan`` trace entries), and the client's
``GET /plan`` (``None`` when the desk has no plan, so the panel draws nothing)."""

from __future__ import annotations

from routegate.server.testing import ServerThread
from routegate.ui._plan import turn_path
from routegate.ui.client import ChatClient


def test_a_turns_path_is_its_plan_entries_in_order() -> None:
    final = {
        "stop_reason": "success",
        "trace": [
            {"node": "router", "route": "VECTOR"},
            {"node": "plan", "target": "router", "ok": True},
            {"node": "plan", "target": "VECTOR", "ok": True},
            {"node": "vector", "call": {}},
            {"node": "plan", "target": "LLM", "ok": True},
        ],
    }
    assert turn_path(final) == (["router", "VECTOR", "LLM"], "success")
    stopped = {"trace": [{"node": "plan", "target": "router", "ok": False, "stop_reason": "max_seconds"}]}
    assert turn_path(stopped) == (["router"], "max_seconds")
    assert turn_path(None) == ([], None)
    assert turn_path({"trace": "not a list"}) == ([], None)
    assert turn_path({"trace": [{"node": "plan", "target": 7}]}) == ([], None)


def test_a_desk_without_a_plan_gives_the_page_none(server: ServerThread) -> None:
    with ChatClient(server.url) as client:
        assert client.plan() is None
    with ChatClient("http://127.0.0.1:9") as unreachable:
        assert unreachable.plan() is None

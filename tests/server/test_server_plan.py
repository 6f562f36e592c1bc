"""``GET /plan``: the desk's plan as a diagram's data, which a client reads back and draws a turn's path on — the
path being the ``plan`` entries of the turn's ``final`` event, as the wire already carries them."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from routegate.diagram import Diagram
from routegate.plan import Plan, Step
from routegate.server import create_app
from routegate.server.testing import FakeSupportDesk, ServerThread, parse_sse
from routegate.settings import Settings

KEY = "k-plan-endpoint-0123456789abcdef01"


class PlannedDesk(FakeSupportDesk):
    """The scripted desk, with a plan to show."""

    plan = Plan(Step(lambda m: m, name="router"), Step(lambda m: m, name="LLM"), name="scripted")


def test_a_desk_without_a_plan_answers_404_no_plan(client: httpx.Client) -> None:
    response = client.get("/plan")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_plan"


@pytest.fixture
def planned() -> Iterator[ServerThread]:
    with ServerThread(create_app(desk=PlannedDesk(), settings=Settings(server_api_key=KEY))) as running:
        yield running


def test_the_plan_is_served_to_a_caller_with_a_key_as_data_that_reads_back(planned: ServerThread) -> None:
    with httpx.Client(base_url=planned.url, timeout=10) as client:
        assert client.get("/plan").status_code == 401
        body = client.get("/plan", headers={"Authorization": f"Bearer {KEY}"}).json()
    drawn = Diagram.from_dict(body)
    assert drawn.name == "scripted" and [n.label for n in drawn.nodes] == ["input", "router", "LLM", "end"]
    assert drawn == PlannedDesk.plan.diagram()


@pytest.mark.e2e
@pytest.mark.integration
def test_a_real_turns_final_event_draws_its_path_on_the_desks_plan(real_server: ServerThread) -> None:
    with httpx.Client(base_url=real_server.url, timeout=30) as client:
        plan = Diagram.from_dict(client.get("/plan").json())
        events = parse_sse(client.post("/chat", json={"message": "What is the status of ticket 1?"}).text)
    final = events[-1][1]
    steps = [entry["target"] for entry in final["trace"] if entry.get("node") == "plan"]
    assert steps == ["router", "POSTGRES", "LLM"]
    drawn = plan.with_path(steps, final["stop_reason"])
    taken = {(e.source, e.target) for e in drawn.edges if e.taken}
    ids = {n.label: n.id for n in drawn.nodes}
    assert taken == {
        ("start", ids["router"]),
        (ids["router"], ids["POSTGRES"]),
        (ids["POSTGRES"], ids["LLM"]),
        (ids["LLM"], "finish"),
    }
    assert next(e for e in drawn.edges if e.target == ids["VECTOR"]).label == "route = 'VECTOR'"

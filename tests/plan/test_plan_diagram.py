"""``Plan.diagram()``: the compiled graph as plain data, Mermaid and DOT text, and a run's path drawn on it."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.core import RouteDecision, RouteRequest, TicketArgs, worker
from routegate.plan import Plan, RoutingAgent, Step, from_parallel_all, from_start, from_step, when
from routegate.plan.diagram import Diagram, DiagramEdge, DiagramNode


class Hits(BaseModel):
    items: list[str]


class Triage(BaseModel):
    summary: str
    severity: Literal["urgent", "normal", "spam"] | None = None


def _search(query: str) -> dict[str, Any]:
    return {"items": [] if query == "nothing" else ["a"]}


def first_plan() -> Plan[Any, Any]:
    return Plan(
        Step(
            _search,
            name="search",
            output=Hits,
            routes={"apology": when.field("items").empty(), "write": when.field("items").not_empty()},
            after_branches="log_outcome",
        ),
        Step(lambda hits: "brief", name="write"),
        Step(lambda hits: "sorry", name="apology"),
        Step(lambda text: f"[logged] {text}", name="log_outcome"),
    )


FIRST_MERMAID = """flowchart TD
    start(["input"])
    s0["search"]
    s1["write"]
    s2["apology"]
    s3["log_outcome"]
    finish(["end"])
    start --> s0
    s0 -->|"when.field('items').empty()"| s2
    s0 -->|"when.field('items').not_empty() or no route matched"| s1
    s1 -->|"rejoin after search"| s3
    s1 --> s2
    s2 -->|"rejoin after search"| s3
    s3 --> finish
"""


def _edges(diagram: Diagram) -> dict[tuple[str, str], DiagramEdge]:
    names = {node.id: node.label for node in diagram.nodes}
    return {(names[e.source], names[e.target]): e for e in diagram.edges if e.kind == "flow"}


def test_the_first_plan_is_drawn_as_mermaid_with_its_conditions_in_words() -> None:
    assert first_plan().diagram().mermaid() == FIRST_MERMAID


def test_routes_by_values_rejoins_and_the_fallback_are_edges_with_their_words() -> None:
    plan = Plan(
        Step(lambda t: {"summary": t}, name="classify", output=Triage, routes_by="severity", after_branches="archive"),
        Step(lambda t: "paged", name="urgent"),
        Step(lambda t: "backlog", name="normal"),
        Step(lambda t: "closed", name="spam"),
        Step(lambda outcome: outcome, name="archive"),
    )
    edges = _edges(plan.diagram())
    assert edges["classify", "urgent"].label == "severity = 'urgent' or severity names no step"
    assert edges["classify", "spam"].label == "severity = 'spam'"
    assert edges["normal", "archive"].label == "rejoin after classify"
    assert edges["urgent", "normal"].label == ""  # declared order: the None route walks every branch
    assert edges["archive", "end"].label == ""
    assert not any(edge.loop for edge in edges.values())


class Routed(BaseModel):
    route: Literal["billing", "shipping"]


def test_a_route_field_that_always_names_a_step_draws_only_the_moves_a_run_can_make() -> None:
    plan = Plan(
        Step(lambda t: {"route": "billing"}, name="router", output=Routed, routes_by="route", after_branches="reply"),
        Step(lambda t: "billed", name="billing"),
        Step(lambda t: "shipped", name="shipping"),
        Step(lambda t: t, name="reply"),
    )
    assert set(_edges(plan.diagram())) == {
        ("input", "router"),
        ("router", "billing"),
        ("router", "shipping"),
        ("billing", "reply"),
        ("shipping", "reply"),
        ("reply", "end"),
    }  # no "route names no step", so no walk from billing on to shipping


def test_a_loop_is_marked_with_the_run_bound_and_inputs_are_dotted_edges() -> None:
    plan = Plan(
        Step(lambda q: q, name="write", context=from_start, writes="draft"),
        Step(lambda d: {"approved": True}, name="review", routes={"write": when.field("approved").is_(False)}),
        Step(lambda text: text, name="publish", context=from_step("write")),
        max_iterations=8,
    )
    diagram = plan.diagram()
    back = _edges(diagram)["review", "write"]
    assert back.loop and back.label == "when.field('approved').is_(False) · loop, max_iterations=8"
    inputs = [(e.source, e.target, e.label) for e in diagram.edges if e.kind == "input"]
    assert inputs == [("start", "s0", "from_start"), ("s0", "s2", "from_step('write')")]
    assert next(n for n in diagram.nodes if n.label == "write").note == "writes 'draft'"
    assert 's0 -.->|"from_start"| s0' not in diagram.mermaid() and 'start -.->|"from_start"| s0' in diagram.mermaid()


def test_a_parallel_band_is_a_group_entered_and_left_by_every_member() -> None:
    plan = Plan(
        Step(lambda q: f"web:{q}", name="web", parallel=True),
        Step(lambda q: f"docs:{q}", name="docs", parallel=True),
        Step(lambda both: " + ".join(both.values()), name="summary"),
        Step(lambda hits: sorted(hits), name="sources", context=from_parallel_all("web")),
    )
    diagram = plan.diagram()
    assert {n.label for n in diagram.nodes if n.band == "band0"} == {"web", "docs"}
    assert set(_edges(diagram)) == {
        ("input", "web"),
        ("input", "docs"),
        ("web", "summary"),
        ("docs", "summary"),
        ("summary", "sources"),
        ("sources", "end"),
    }
    text = diagram.mermaid()
    assert 'subgraph band0 ["parallel"]' in text and "cluster_band0" in diagram.dot()
    result = plan.run("q")
    drawn = plan.diagram(result.path, result.stop_reason)
    assert all(edge.taken == 1 for edge in drawn.edges if edge.kind == "flow")


def test_nested_plans_agents_and_llm_steps_say_what_they_run() -> None:
    @worker(args=TicketArgs, inline=True)
    def billing(ticket: str) -> dict[str, Any]:
        return {"status": "done", "result": {"ok": True}}

    class ToBilling:
        async def decide(self, request: RouteRequest) -> RouteDecision:
            return RouteDecision({"kind": "route", "target": "billing", "args": {"ticket": request.goal}})

    class Model:
        async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> str:
            return "{}"

    inner = Plan(Step(lambda x: x, name="a"), Step(lambda x: x, name="b"), name="inner")
    desk = RoutingAgent(workers=[billing], router=ToBilling(), name="desk")
    plan = Plan(Step(inner), Step(desk, phase="delegate"), Step(Model(), name="llm"))
    notes = {n.label: n.note for n in plan.diagram().nodes}
    assert notes["inner"] == "nested plan, 2 steps"
    assert notes["desk"] == "runtime RoutingAgent, phase delegate"
    assert notes["llm"] == "LLM"
    text = plan.diagram().mermaid()
    assert 's1[["desk<br/>runtime RoutingAgent, phase delegate"]]' in text


def test_a_path_marks_each_taken_edge_and_counts_a_loop() -> None:
    reviews: list[int] = []
    plan = Plan(
        Step(lambda q: q, name="write"),
        Step(
            lambda d: {"approved": reviews.append(1) or len(reviews) >= 2},
            name="review",
            routes={"write": when.field("approved").is_(False)},
        ),
        Step(lambda text: text, name="publish"),
        max_iterations=8,
    )
    result = plan.run("q")
    assert result.path == ("write", "review", "write", "review", "publish")
    drawn = plan.diagram(result.path, result.stop_reason)
    edges = _edges(drawn)
    assert (edges["write", "review"].taken, edges["review", "write"].taken) == (2, 1)
    assert (edges["input", "write"].taken, edges["review", "publish"].taken, edges["publish", "end"].taken) == (1, 1, 1)
    assert {n.label: n.visits for n in drawn.nodes} == {"input": 1, "write": 2, "review": 2, "publish": 1, "end": 1}
    text = drawn.mermaid()
    assert 's0 ==>|"×2"| s1' in text and "class start,s0,s1,s2,finish taken" in text
    assert re.search(r"linkStyle [0-9,]+ stroke:#d9480f", text)


def test_a_stopped_run_stops_at_its_last_step_and_never_reaches_the_end() -> None:
    def fails(hits: object) -> str:
        raise TimeoutError("down")

    plan = Plan(Step(_search, name="search"), Step(fails), Step(lambda x: x, name="after"))
    result = plan.run("q")
    assert not result.ok
    drawn = plan.diagram(result.path, result.stop_reason)
    stopped = [n.label for n in drawn.nodes if n.stopped]
    assert stopped == ["fails"]
    assert next(n for n in drawn.nodes if n.kind == "end").visits == 0
    assert "class s1 stopped" in drawn.mermaid()
    assert 'fillcolor="#ffc9c9"' in drawn.dot()


def test_a_path_naming_another_plans_step_is_refused() -> None:
    with pytest.raises(ValueError, match=r"the path names 'elsewhere', which is not a step of this plan"):
        first_plan().diagram(["search", "elsewhere"])


def test_the_data_is_json_and_reads_back_as_the_same_diagram() -> None:
    plan = first_plan()
    result = plan.run("nothing")
    drawn = plan.diagram(result.path, result.stop_reason)
    data = json.loads(json.dumps(drawn.to_dict()))
    assert data["path"] == ["search", "apology", "log_outcome"] and data["stop_reason"] == "success"
    assert Diagram.from_dict(data) == drawn
    assert Diagram.from_dict(data).mermaid() == drawn.mermaid()


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=12,
    )
)
def test_data_that_is_not_a_diagram_is_refused_with_a_value_error(data: object) -> None:
    if not isinstance(data, dict):
        data = {"nodes": data, "edges": []}
    read: Diagram | str
    try:
        read = Diagram.from_dict(data)
    except ValueError as exc:
        read = str(exc)
    if isinstance(read, str):
        assert read.startswith("not the data of a plan diagram")
    else:
        read.mermaid()
        read.dot()


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30).filter(lambda s: s.strip()))
def test_any_step_name_stays_inside_its_quoted_label(name: str) -> None:
    plan = Plan(Step(lambda x: x, name=name), Step(lambda x: x, name="next", routes={name: when.payload(bool)}))
    text = plan.diagram().mermaid()
    lines = text.split("\n")
    line = next(line for line in lines if line.startswith("    s0["))
    inner = line[len('    s0["') : -len('"]')]
    assert '"' not in inner and "<" not in inner and ">" not in inner and inner.isprintable()
    for edge_line in (line for line in lines if "|" in line):
        assert edge_line.count('"') == 2  # the label's own quotes only
    dot = plan.diagram().dot()
    node = next(line for line in dot.split("\n") if line.strip().startswith("s0 ["))
    assert re.fullmatch(r'\s*s0 \[label="(?:[^"\\]|\\.)*"\];', node)


def test_the_nodes_and_edges_are_frozen_values() -> None:
    node = DiagramNode("s0", "a")
    with pytest.raises(AttributeError):
        node.label = "b"  # type: ignore[misc]  # frozen: the test checks it refuses

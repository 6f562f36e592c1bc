"""One test per item of the seed's "Pitfalls" list, showing the behaviour the seed describes (or the stricter one
the issue asks for: routing on a parallel step is a compile error here, not silently dropped)."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from routegate.plan import (
    DetourTrapWarning,
    Envelope,
    MaxIterationsExceeded,
    Plan,
    PlanCompileError,
    PlanRuntimeError,
    Step,
    when,
)
from routegate.plan.when import Predicate


def step(name: str, **kwargs: Any) -> Step:
    return Step(lambda payload: f"{name}", name=name, **kwargs)


class Hits(BaseModel):
    items: list[str]


def test_pitfall_the_detour_trap_runs_the_branch_only_step_on_the_success_path() -> None:
    # routes={"X": predicate} without after_branches, X not last: the plan warns at construction ...
    with pytest.warns(DetourTrapWarning, match="detour trap"):
        plan = Plan(
            Step(
                lambda q: {"items": [] if q == "nothing" else ["hit"]},
                name="search",
                output=Hits,
                routes={"apology": when.field("items").empty()},
            ),
            step("apology"),
            step("write"),
        )
    # ... because when the predicate does not fire, linear progression still runs "apology" ...
    success = plan.run("routing")
    assert success.path == ("search", "apology", "write")
    # ... and when it fires, "write" runs after the apology: the final output comes from the wrong step
    assert plan.run("nothing").path == ("search", "apology", "write")
    assert plan.run("nothing").output == "write"
    # fix (1): cover every outcome and rejoin
    fixed = Plan(
        Step(
            lambda q: {"items": [] if q == "nothing" else ["hit"]},
            name="search",
            output=Hits,
            routes={"apology": when.field("items").empty(), "write": when.field("items").not_empty()},
            after_branches="done",
        ),
        step("write"),
        step("apology"),
        step("done"),
    )
    assert fixed.run("routing").path == ("search", "write", "done")
    assert fixed.run("nothing").path == ("search", "apology", "done")
    # and strict plans refuse the trap outright
    with pytest.raises(PlanCompileError, match="detour trap"):
        Plan(Step(lambda q: q, name="a", routes={"x": when.errored()}), step("x"), step("b"), strict=True)


def test_pitfall_routes_by_requires_a_model_with_a_literal_field_of_step_names() -> None:
    class Free(BaseModel):
        severity: str

    class Typo(BaseModel):
        severity: Literal["urgent", "nromal"]

    with pytest.raises(PlanCompileError, match="needs output= to be a model"):
        step("classify", routes_by="severity")
    with pytest.raises(PlanCompileError, match=r"Literal\['a', 'b', \.\.\.\]"):
        step("classify", output=Free, routes_by="severity")
    with pytest.raises(PlanCompileError, match="routes_by value 'nromal' is not a step; did you mean 'normal'"):
        Plan(
            step("classify", output=Typo, routes_by="severity", after_branches="end"),
            step("urgent"),
            step("normal"),
            step("end"),
        )


def test_pitfall_routing_cycles_compile_and_surface_as_max_iterations_exceeded() -> None:
    plan = Plan(step("a"), step("b", routes={"a": when.payload(lambda _: True)}), max_iterations=6)  # compiles
    result = plan.run(None)
    assert result.stop_reason == "max_iterations" and "max_iterations=6" in result.message
    with pytest.raises(MaxIterationsExceeded, match="max_iterations=6"):
        result.raise_for_stop()


def test_pitfall_predicate_evaluation_order_first_true_wins() -> None:
    def plan(order: list[str]) -> Plan:
        predicates = {"specific": when.field("score").less_than(0.1), "general": when.field("score").less_than(0.5)}
        return Plan(
            Step(
                lambda s: {"score": s},
                name="score",
                routes={name: predicates[name] for name in order},
                after_branches="end",
            ),
            step("specific"),
            step("general"),
            step("end"),
        )

    assert plan(["specific", "general"]).run(0.05).path == ("score", "specific", "end")
    assert plan(["general", "specific"]).run(0.05).path == ("score", "general", "end")  # both match: order decides


def test_pitfall_routes_by_and_routes_are_mutually_exclusive() -> None:
    class Kind(BaseModel):
        kind: Literal["a"]

    with pytest.raises(PlanCompileError, match="mutually exclusive"):
        step("x", output=Kind, routes_by="kind", routes={"a": when.errored()})


def test_pitfall_routes_by_none_or_unmatched_is_linear_not_an_error() -> None:
    class Triage(BaseModel):
        severity: Literal["urgent", "spam"] | None = None

    plan = Plan(
        Step(
            lambda s: Triage(severity=s), name="classify", output=Triage, routes_by="severity", after_branches="archive"
        ),
        step("urgent"),
        step("spam"),
        step("archive"),
    )
    result = plan.run(None)
    assert result.ok and result.path == ("classify", "urgent", "spam", "archive")


def test_pitfall_when_field_is_non_strict_by_default_and_strict_catches_typos() -> None:
    def plan(predicate: Predicate) -> Plan:
        return Plan(
            Step(
                lambda _: {"items": ["a hit"]},
                name="search",
                routes={"apology": predicate, "write": when.field("items").not_empty()},
                after_branches="end",
            ),
            step("write"),
            step("apology"),
            step("end"),
        )

    # the typo "itmes" reads as None, so the search with hits silently routes to the empty branch
    assert plan(when.field("itmes").empty()).run(None).path == ("search", "apology", "end")
    # strict=True makes the typo raise (as a PlanRuntimeError naming the step, the target and the cause)
    with pytest.raises(PlanRuntimeError, match=r"'search'.*'apology'.*AttributeError.*has no field 'itmes'"):
        plan(when.field("itmes", strict=True).empty()).run(None)
    assert plan(when.field("items", strict=True).empty()).run(None).path == ("search", "write", "end")


def test_pitfall_when_chains_return_predicates_not_bools() -> None:
    predicate = when.field("x").empty()
    assert isinstance(predicate, Predicate) and callable(predicate)
    assert predicate(Envelope({"x": []})) is True  # works, but is rarely what you mean to write
    with pytest.raises(PlanCompileError, match="evaluated already"):
        step("a", routes={"b": predicate(Envelope({"x": []}))})


def test_pitfall_routing_on_a_parallel_step_is_refused_here_not_silently_dropped() -> None:
    with pytest.raises(PlanCompileError, match="a parallel=True step cannot route"):
        step("branch", parallel=True, routes={"other": when.errored()})
    # set routing on the step after the band instead
    plan = Plan(
        step("left", parallel=True),
        step("right", parallel=True),
        Step(lambda joined: joined, name="decide", routes={"fix": when.field("left").equals("left")}),
        step("fix"),
    )
    assert plan.run(None).path == ("left", "right", "decide", "fix")


def test_pitfall_a_raising_predicate_is_wrapped_as_plan_runtime_error() -> None:
    def broken(env: Envelope) -> bool:
        raise KeyError("score")

    plan = Plan(step("classify", routes={"review": broken}), step("review"))
    with pytest.raises(PlanRuntimeError) as caught:
        plan.run(None)
    error = caught.value
    assert isinstance(error, RuntimeError) and not isinstance(error, PlanCompileError)
    assert "Step 'classify'" in str(error) and "'review'" in str(error) and "KeyError" in str(error)
    assert isinstance(error.__cause__, KeyError)


def test_pitfall_after_branches_must_come_after_the_routing_step_and_exist() -> None:
    with pytest.raises(PlanCompileError, match=r"'route' is at position 1, 'log' at 0"):
        Plan(step("log"), step("route", routes={"a": when.errored()}, after_branches="log"), step("a"))
    with pytest.raises(PlanCompileError, match="after_branches='lgo' is not a step; did you mean 'log'"):
        Plan(step("route", routes={"a": when.errored()}, after_branches="lgo"), step("a"), step("log"))

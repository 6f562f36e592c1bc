"""Property: a random plan with random predicates either fails to compile with PlanCompileError, or runs only
declared steps in exactly the order the routing rules allow (checked against a small reference interpreter
written from the seed's rules), and always terminates: normally, on a failed step, or on the max_iterations stop."""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from routegate.plan import (
    DetourTrapWarning,
    MaxIterationsExceeded,
    Plan,
    PlanCompileError,
    PlanRuntimeError,
    Step,
    from_prev,
    from_start,
    from_step,
    when,
)

GHOST = "ghost"  # a name no step has: routes to it must not compile
VISITS = 8  # decision tables cover this many visits per step (max_iterations stays below it)


@dataclass
class StepSpec:
    parallel: bool
    routing: str  # "none" | "routes" | "routes_by"
    routes: list[tuple[str, str]]  # (target, "table" | "errored")
    literal: list[str]
    after_branches: str | None
    context: str  # "prev" | "start" | a step name
    fails: list[bool]
    fires: list[list[bool]]  # per route, per visit
    choices: list[str | None]  # routes_by value per visit


@dataclass
class PlanSpec:
    steps: list[StepSpec]
    max_iterations: int
    strict: bool
    names: list[str] = field(default_factory=list)


@st.composite
def plan_specs(draw: st.DrawFn) -> PlanSpec:
    """Mostly plausible plans (so most compile), sometimes anything at all (so the compiler is exercised)."""
    count = draw(st.integers(1, 6))
    names = [f"s{i}" for i in range(count)]
    anything = st.sampled_from([*names, GHOST])
    steps = []
    for index in range(count):
        wild = draw(st.integers(0, 9)) == 0
        parallel = draw(st.integers(0, 5)) == 0
        routing = "none" if parallel and not wild else draw(st.sampled_from(["none", "routes", "routes", "routes_by"]))
        later = names[index + 1 :]
        after_branches = None
        if routing != "none" and (wild or (later and draw(st.booleans()))):
            after_branches = draw(anything if wild else st.sampled_from(later))
        if wild:
            pool: st.SearchStrategy[str] = anything
        elif after_branches is not None:
            pool = st.sampled_from(names[index + 1 : names.index(after_branches) + 1])
        else:
            pool = st.sampled_from(names)
        routes = draw(st.lists(st.tuples(pool, st.sampled_from(["table", "table", "errored"])), min_size=1, max_size=3))
        literal = draw(st.lists(pool, min_size=1, max_size=3, unique=True))
        contexts = ["prev", "prev", "prev", "start", *(names if wild else names[:index])]
        steps.append(
            StepSpec(
                parallel=parallel,
                routing=routing,
                routes=routes,
                literal=literal,
                after_branches=after_branches,
                context=draw(st.sampled_from(contexts)),
                fails=draw(st.lists(st.integers(0, 6).map(lambda v: v == 0), min_size=VISITS, max_size=VISITS)),
                fires=[draw(st.lists(st.booleans(), min_size=VISITS, max_size=VISITS)) for _ in routes],
                choices=draw(
                    st.lists(st.one_of(st.none(), st.sampled_from(literal)), min_size=VISITS, max_size=VISITS)
                ),
            )
        )
    return PlanSpec(steps, draw(st.integers(1, VISITS - 1)), draw(st.integers(0, 3)) == 0, names)


def build(spec: PlanSpec, visits: dict[int, int]) -> Plan:
    built = []
    for index, s in enumerate(spec.steps):
        kwargs: dict[str, Any] = {"parallel": s.parallel}
        kwargs["context"] = {"prev": from_prev, "start": from_start}.get(s.context) or from_step(s.context)
        if s.routing == "routes":
            table: dict[str, Any] = {}
            for route_index, (target, kind) in enumerate(s.routes):
                if kind == "errored":
                    table[target] = when.errored()
                else:
                    fires = s.fires[route_index]
                    table[target] = when.payload(lambda p, fires=fires: fires[p["visit"]])
            kwargs["routes"] = table
        elif s.routing == "routes_by":
            values: Any = Literal.__getitem__(tuple(s.literal))
            kwargs["output"] = TypedDict(f"Out{index}", {"route": Optional[values], "visit": int})  # noqa: UP045
            kwargs["routes_by"] = "route"
        if s.after_branches is not None:
            kwargs["after_branches"] = s.after_branches

        def target(_: Any, index: int = index, s: StepSpec = s) -> dict[str, Any]:
            visit = visits[index] = visits.get(index, -1) + 1
            if s.fails[visit]:
                raise ValueError(f"s{index} failed on visit {visit}")
            return {"route": s.choices[visit], "visit": visit}

        built.append(Step(target, name=spec.names[index], **kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DetourTrapWarning)
        return Plan(*built, max_iterations=spec.max_iterations, strict=spec.strict)


def reference(spec: PlanSpec) -> tuple[str, list[str]]:
    """The seed's rules, written out plainly: returns (ending, path)."""
    names, steps, n = spec.names, spec.steps, len(spec.steps)
    pos = {name: i for i, name in enumerate(names)}
    visits: dict[int, int] = {}
    ran: set[int] = set()
    path: list[str] = []
    branch_return: dict[int, int] = {}
    iterations, i = 0, 0

    def execute(k: int) -> bool | None:
        source = steps[k].context
        if source in pos and pos[source] not in ran:
            return None  # from_step source did not run
        visit = visits[k] = visits.get(k, -1) + 1
        path.append(names[k])
        return not steps[k].fails[visit]

    while True:
        if iterations == spec.max_iterations:
            return "max_iterations", path
        iterations += 1
        if steps[i].parallel:
            end = i
            while end < n and steps[end].parallel:
                end += 1
            outcomes = [execute(k) for k in range(i, end)]
            if None in outcomes:
                return "runtime_error", path
            if not all(outcomes):
                return "error", path
            ran.update(range(i, end))
            i = end
            if i >= n:
                return "ok", path
            continue
        outcome = execute(i)
        if outcome is None:
            return "runtime_error", path
        ran.add(i)
        s, visit = steps[i], visits[i]
        target = None
        if s.routing == "routes":
            seen: dict[str, tuple[str, int]] = {}
            for route_index, (name, kind) in enumerate(s.routes):
                seen[name] = (kind, route_index)  # like a dict literal: last value, first position
            for name, (kind, route_index) in seen.items():
                fired = (not outcome) if kind == "errored" else (outcome and s.fires[route_index][visit])
                if fired:
                    target = pos[name]
                    break
        elif s.routing == "routes_by" and outcome and s.choices[visit] is not None:
            target = pos[s.choices[visit]]
        pending = branch_return.pop(i, None)
        if target is not None:
            if s.after_branches is not None and target != pos[s.after_branches]:
                branch_return[target] = pos[s.after_branches]
            i = target
            continue
        if not outcome:
            return "error", path
        if pending is not None:
            i = pending
            continue
        i += 1
        if i >= n:
            return "ok", path


def observe(plan: Plan, visits: dict[int, int], mode: str) -> tuple[str, list[str], Exception | None]:
    visits.clear()
    try:
        result = plan.run(None) if mode == "sync" else asyncio.run(plan.arun(None))
    except PlanRuntimeError as error:
        return "runtime_error", [f"s{k}" for k in sorted(visits)], error  # no path on the exception: loose check
    if result.stop_reason == "max_iterations":
        assert result.phase == "step" and result.output is None
        with pytest.raises(MaxIterationsExceeded) as stop:
            result.raise_for_stop()
        assert list(stop.value.path) == list(result.path)
        return "max_iterations", list(result.path), stop.value
    return ("ok" if result.ok else "error"), list(result.path), None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_specs())
def test_random_plans_compile_or_run_exactly_as_the_rules_say(spec: PlanSpec) -> None:
    visits: dict[int, int] = {}
    try:
        plan = build(spec, visits)
    except PlanCompileError:
        event("compile error")
        return
    expected_ending, expected_path = reference(spec)
    event(f"ending: {expected_ending}")
    for mode in ("sync", "async"):
        ending, path, error = observe(plan, visits, mode)
        assert ending == expected_ending, (mode, ending, path, expected_path)
        if isinstance(error, MaxIterationsExceeded):
            assert error.limit == spec.max_iterations
        elif error is not None:
            assert "has not run" in str(error)
        assert set(path) <= set(spec.names)
        if ending != "runtime_error":
            assert path == expected_path, mode
        assert len(path) <= spec.max_iterations * len(spec.names)


def test_the_generator_produces_plans_that_compile() -> None:
    """Guards the property above against vacuity: a fair share of random plans must compile and run."""
    compiled = 0

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(plan_specs())
    def count(spec: PlanSpec) -> None:
        nonlocal compiled
        try:
            build(spec, {})
        except PlanCompileError:
            return
        compiled += 1

    count()
    assert compiled >= 30, compiled

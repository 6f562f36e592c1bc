"""Compile-time validation: every invalid graph fails with PlanCompileError when the plan is built, before any
step runs (the targets here raise if they are ever called)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from routegate.errors import ConfigurationError
from routegate.plan import (
    DetourTrapWarning,
    Plan,
    PlanCompileError,
    Step,
    from_start,
    from_step,
    when,
)


def never(_: Any) -> Any:
    raise AssertionError("a step ran although the plan should not have compiled")


def s(name: str, **kwargs: Any) -> Step:
    return Step(never, name=name, **kwargs)


class Kind(BaseModel):
    kind: Literal["a", "b"] | None = None


def compile_error(*steps: Step, **kwargs: Any) -> str:
    with pytest.raises(PlanCompileError) as caught:
        Plan(*steps, **kwargs)
    return str(caught.value)


def test_plan_compile_error_is_a_configuration_error() -> None:
    assert issubclass(PlanCompileError, ConfigurationError)


# -- route targets -----------------------------------------------------------------------------------------------
def test_unknown_route_target_with_a_did_you_mean_hint() -> None:
    message = compile_error(
        s("search", routes={"apolgy": when.field("items").empty()}, after_branches="log"), s("apology"), s("log")
    )
    assert "'apolgy' is not a step" in message
    assert "did you mean 'apology'?" in message


def test_unknown_route_target_without_a_close_match_lists_the_steps() -> None:
    message = compile_error(s("a", routes={"zzz": when.errored()}), s("b"))
    assert "known steps: ['a', 'b']" in message


def test_routes_and_routes_by_are_mutually_exclusive() -> None:
    with pytest.raises(PlanCompileError, match="mutually exclusive"):
        s("x", output=Kind, routes={"a": when.errored()}, routes_by="kind")


@pytest.mark.parametrize("bad", [True, "apology", 3, None])
def test_non_callable_predicates_are_refused(bad: object) -> None:
    with pytest.raises(PlanCompileError, match="not a callable") as caught:
        s("x", routes={"a": bad})  # type: ignore[dict-item]
    if bad is True:
        assert "evaluated already" in str(caught.value)


def test_routes_must_be_a_non_empty_mapping_of_step_names() -> None:
    with pytest.raises(PlanCompileError, match="must be a mapping"):
        s("x", routes=[("a", when.errored())])  # type: ignore[arg-type]
    with pytest.raises(PlanCompileError, match="is empty"):
        s("x", routes={})
    with pytest.raises(PlanCompileError, match="keys must be step names"):
        s("x", routes={1: when.errored()})  # type: ignore[dict-item]


# -- routes_by ---------------------------------------------------------------------------------------------------
def test_routes_by_without_output_model() -> None:
    with pytest.raises(PlanCompileError, match="needs output= to be a model"):
        s("x", routes_by="kind")
    with pytest.raises(PlanCompileError, match="needs output= to be a model"):
        s("x", output=str, routes_by="kind")


def test_routes_by_unknown_field() -> None:
    with pytest.raises(PlanCompileError, match=r"Kind has no field 'knd'; fields: \['kind'\]"):
        s("x", output=Kind, routes_by="knd")


class Loose(BaseModel):
    kind: str
    number: Literal[1, 2]
    mixed: Literal["a"] | int


@pytest.mark.parametrize("field", ["kind", "number", "mixed"])
def test_routes_by_field_that_is_not_a_literal_of_strings(field: str) -> None:
    with pytest.raises(PlanCompileError, match=r"Literal\['a', 'b', \.\.\.\]"):
        s("x", output=Loose, routes_by=field)


def test_routes_by_literal_values_must_be_step_names() -> None:
    message = compile_error(s("x", output=Kind, routes_by="kind", after_branches="c"), s("a"), s("bb"), s("c"))
    assert "routes_by value 'b' is not a step" in message


@dataclasses.dataclass
class KindDC:
    kind: Literal["a", "b"]


class KindTD(TypedDict):
    kind: Literal["a", "b"] | None


@pytest.mark.parametrize("model", [Kind, KindDC, KindTD])
def test_routes_by_accepts_pydantic_dataclass_and_typeddict_outputs(model: type) -> None:
    step = Step(never, name="x", output=model, routes_by="kind", after_branches="c")
    assert step.route_values == ("a", "b")
    Plan(step, s("a"), s("b"), s("c"))


def test_routes_by_with_an_unresolved_forward_reference_says_so() -> None:
    class Later(BaseModel):
        kind: Undefined  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(PlanCompileError, match="unresolved forward reference"):
        s("x", output=Later, routes_by="kind")


# -- after_branches ----------------------------------------------------------------------------------------------
def test_after_branches_unknown() -> None:
    message = compile_error(s("x", routes={"a": when.errored()}, after_branches="joni"), s("a"), s("join"))
    assert "after_branches='joni' is not a step" in message
    assert "did you mean 'join'?" in message


def test_after_branches_must_come_after_the_routing_step_naming_both_positions() -> None:
    message = compile_error(s("join"), s("x", routes={"a": when.errored()}, after_branches="join"), s("a"))
    assert "must come after the routing step" in message
    assert "'x' is at position 1, 'join' at 0" in message
    message = compile_error(s("x", routes={"a": when.errored()}, after_branches="x"), s("a"))
    assert "must come after the routing step" in message


def test_after_branches_without_routing() -> None:
    with pytest.raises(PlanCompileError, match="needs routes= or routes_by="):
        s("x", after_branches="y")


def test_branches_must_lie_between_the_routing_step_and_the_rejoin() -> None:
    message = compile_error(
        s("first"), s("x", routes={"first": when.errored()}, after_branches="join"), s("a"), s("join")
    )
    assert "every branch must be declared between 'x' and 'join'" in message
    message = compile_error(s("x", routes={"late": when.errored()}, after_branches="join"), s("join"), s("late"))
    assert "'late' is at position 2" in message


# -- names, targets, sentinels, options --------------------------------------------------------------------------
def test_duplicate_step_names() -> None:
    assert "duplicate step names: ['a']" in compile_error(s("a"), s("b"), s("a"))


def test_a_plan_needs_steps_and_only_steps() -> None:
    assert "at least one Step" in compile_error()
    assert "must be Step objects" in compile_error(never)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
def test_max_iterations_must_be_a_positive_integer(limit: object) -> None:
    assert "max_iterations must be an integer >= 1" in compile_error(s("a"), max_iterations=limit)


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(PlanCompileError, match="no usable name"):
        Step(lambda x: x)


def test_string_targets_resolve_through_targets_with_a_hint() -> None:
    assert "needs Plan(targets=" in compile_error(Step("search"))
    message = compile_error(Step("serach"), targets={"search": never})
    assert "did you mean 'search'?" in message


def test_uncallable_target() -> None:
    assert "cannot run 42" in compile_error(Step(42, name="x"))


def test_a_nested_plan_takes_its_name_or_needs_one() -> None:
    assert Plan(Step(Plan(s("a"), name="inner"))).step_names == ("inner",)
    with pytest.raises(PlanCompileError, match="no usable name"):
        Step(Plan(s("a")))


def test_from_step_unknown_later_or_sibling() -> None:
    assert "did you mean 'write'?" in compile_error(s("write"), s("publish", context=from_step("wirte")))
    assert "declared earlier" in compile_error(s("publish", context=from_step("write")), s("write"))
    assert "declared earlier" in compile_error(s("self", context=from_step("self")))
    message = compile_error(s("a", parallel=True), s("b", parallel=True, context=from_step("a")))
    assert "same parallel band" in message


def test_bad_step_options() -> None:
    with pytest.raises(PlanCompileError, match="context= takes from_prev"):
        s("x", context="from_start")  # type: ignore[arg-type]
    with pytest.raises(PlanCompileError, match="use context="):
        s("x", task=from_start)  # type: ignore[arg-type]
    with pytest.raises(PlanCompileError, match="writes= must be"):
        s("x", writes="")
    with pytest.raises(PlanCompileError, match="parallel= must be"):
        s("x", parallel="yes")  # type: ignore[arg-type]
    with pytest.raises(PlanCompileError, match="not a type pydantic can validate"):
        s("x", output=object())
    with pytest.raises(PlanCompileError, match="store= must have a write"):
        Plan(s("a"), store={})


# -- parallel bands ----------------------------------------------------------------------------------------------
def test_routing_on_a_parallel_step_is_a_compile_error_not_silently_dropped() -> None:
    with pytest.raises(PlanCompileError, match="a parallel=True step cannot route"):
        s("p", parallel=True, routes={"x": when.errored()})
    with pytest.raises(PlanCompileError, match="a parallel=True step cannot route"):
        s("p", parallel=True, output=Kind, routes_by="kind")


def test_routes_into_a_parallel_band_are_refused() -> None:
    message = compile_error(
        s("x", routes={"p": when.errored()}, after_branches="join"),
        s("p", parallel=True),
        s("q", parallel=True),
        s("join"),
    )
    assert "routing into a parallel band is not supported" in message
    message = compile_error(
        s("x", routes={"a": when.errored()}, after_branches="p"), s("a"), s("p", parallel=True), s("q", parallel=True)
    )
    assert "after_branches='p' is a parallel=True step" in message


# -- the detour trap ---------------------------------------------------------------------------------------------
def test_detour_trap_is_a_warning_by_default() -> None:
    with pytest.warns(DetourTrapWarning, match="forward route to \\['x'\\] without after_branches"):
        Plan(s("a", routes={"x": when.errored()}), s("x"), s("b"))


def test_detour_trap_is_an_error_in_strict_plans() -> None:
    message = compile_error(s("a", routes={"x": when.errored()}), s("x"), s("b"), strict=True)
    assert "detour trap" in message


def test_detour_trap_also_applies_to_routes_by() -> None:
    with pytest.warns(DetourTrapWarning):
        Plan(Step(never, name="x", output=Kind, routes_by="kind"), s("a"), s("b"), s("c"))


def test_no_detour_warning_for_loops_the_last_step_or_exclusive_branches() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Plan(s("a"), s("b", routes={"a": when.errored()}), s("c"))  # backward: a loop
        Plan(s("a", routes={"c": when.errored()}), s("b"), s("c"))  # skip optional middle step
        Plan(s("a", routes={"b": when.errored()}, after_branches="c"), s("b"), s("c"))
        Plan(s("a", routes={"a": when.errored()}), s("b"))  # self-loop


def test_more_bad_options_with_clear_messages() -> None:
    with pytest.raises(PlanCompileError, match="name= must be a non-empty string"):
        Step(never, name=" ")
    with pytest.raises(PlanCompileError, match="must not be an empty string"):
        Step(" ")
    with pytest.raises(PlanCompileError, match="sources= takes a list"):
        s("x", sources="the store")
    with pytest.raises(PlanCompileError, match="after_branches= must name a step"):
        s("x", routes={"a": when.errored()}, after_branches="")
    with pytest.raises(PlanCompileError, match="routes_by= must name a field"):
        s("x", output=Kind, routes_by="")
    with pytest.raises(PlanCompileError, match="Plan name= must be a non-empty string"):
        Plan(s("a"), name="")
    with pytest.raises(PlanCompileError, match="is a string, not something to run"):
        Plan(Step("a"), targets={"a": "b"})
    with pytest.raises(PlanCompileError, match="takes a step name"):
        from_step("")


def test_routes_by_accepts_annotated_literals() -> None:
    from typing import Annotated

    from pydantic import Field

    class Tagged(BaseModel):
        kind: Annotated[Literal["a", "b"], Field(description="which branch")]

    assert s("x", output=Tagged, routes_by="kind").route_values == ("a", "b")


def test_routes_by_on_a_dataclass_with_unresolvable_annotations() -> None:
    @dataclasses.dataclass
    class Broken:
        kind: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(PlanCompileError, match="cannot read the field types of Broken"):
        s("x", output=Broken, routes_by="kind")


def test_an_llm_step_needs_an_output_with_a_json_schema() -> None:
    class Chat:
        async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> str:
            return "{}"

    with pytest.raises(PlanCompileError, match="cannot build a JSON schema"):
        Plan(Step(Chat(), name="c", output=Callable[[int], int]))


def test_step_repr() -> None:
    assert repr(s("x", routes={"a": when.errored()}, after_branches="b")) == (
        "Step(name='x', routes=['a'], after_branches='b')"
    )
    assert repr(s("y", output=Kind, routes_by="kind")) == "Step(name='y', routes_by='kind')"
    assert repr(s("z", parallel=True)) == "Step(name='z', parallel=True)"
    assert repr(from_start) == "from_start" and repr(from_step("a")) == "from_step('a')"
    from routegate.plan import from_prev

    assert repr(from_prev) == "from_prev"
    assert repr(Plan(s("a"), name="p")) == "Plan('p', steps=['a'], max_iterations=100)"

"""``Step``: one node of a plan — what runs, what it receives, how its output is typed and where it routes."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, cast, get_args, get_origin

from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict  # knows typing's and typing_extensions' TypedDict

from routegate.core.stop_reasons import Phase
from routegate.plan.errors import PlanCompileError
from routegate.plan.sentinels import FromPrev, FromStart, FromStep, Sentinel, from_prev


class Step:
    """One step of a :class:`~routegate.plan.Plan`.

    ``target`` is what runs: a plain callable (sync or ``async``) called with the step's input payload, a
    :class:`~routegate.plan.RoutingAgent`, a nested :class:`~routegate.plan.Plan`, a
    :class:`~routegate.plan.StructuredChatModel` (an LLM step), any :class:`~routegate.plan.StepTarget`, or a
    string naming an entry of ``Plan(targets={...})``.

    * ``name`` — the step's identity for routes, ``after_branches``, ``from_step`` and the trace; defaults to a
      string target, a function's ``__name__`` or the target's ``name`` attribute.
    * ``task`` — the instruction: the system message of an LLM step, ``context={"task": ...}`` of a routing
      agent, ``ctx.task`` of a step target; plain callables ignore it.
    * ``output`` — the payload's type: the target's return value is validated into it (JSON text is parsed).
    * ``routes={"step": predicate, ...}`` — after the step, predicates run in declared order and the first truthy
      one jumps to its step; none → the next declared step. ``routes_by="field"`` — jump to the step named by
      the ``Literal[...]`` field ``field`` of ``output``; ``None`` or an unknown value → the next declared step.
    * ``after_branches="rejoin"`` — make the routing exclusive: the chosen branch runs, then the plan jumps to
      ``rejoin`` (the branches between are skipped).
    * ``context`` — which payload the step receives: ``from_prev`` (default), ``from_start``,
      ``from_step(name)``.
    * ``writes="key"`` — store the step's payload under ``key`` in the plan's :class:`~routegate.plan.Store`.
    * ``parallel=True`` — consecutive parallel steps form a band that runs concurrently; no routing on them.
    * ``sources`` — objects rendered into an LLM step's prompt (``.text()``) and handed to step targets.
    * ``phase`` — the phase a run's deadline stop reports while this step runs or is next: ``"step"`` (the
      default), or ``"route"`` / ``"delegate"`` / ``"finalize"`` for a plan that is a routing runtime.
    """

    __slots__ = (
        "adapter",
        "after_branches",
        "context",
        "name",
        "output",
        "parallel",
        "phase",
        "route_values",
        "routes",
        "routes_by",
        "sources",
        "target",
        "task",
        "writes",
    )

    def __init__(
        self,
        target: Any,
        *,
        name: str | None = None,
        task: str | None = None,
        output: Any = None,
        routes: Mapping[str, Callable[..., Any]] | None = None,
        routes_by: str | None = None,
        after_branches: str | None = None,
        context: Sentinel = from_prev,
        writes: str | None = None,
        parallel: bool = False,
        sources: Iterable[Any] = (),
        phase: Phase = "step",
    ) -> None:
        self.target = target
        self.name: str = _step_name(target, name)
        where = f"Step {self.name!r}"
        given_task: object = task  # checked at run time: callers may pass anything
        if given_task is not None and not isinstance(given_task, str):
            hint = (
                " (to choose the step's input use context=)"
                if isinstance(given_task, FromPrev | FromStart | FromStep)
                else ""
            )
            raise PlanCompileError(f"{where}: task= must be an instruction string, got {task!r}{hint}")
        self.task = task
        if not isinstance(context, FromPrev | FromStart | FromStep):
            raise PlanCompileError(
                f"{where}: context= takes from_prev, from_start, from_step(name), from_parallel(name) or "
                f"from_parallel_all(name), got {context!r}"
                + ("; to give the step an instruction use task=" if isinstance(context, str) else "")
            )
        self.context: Sentinel = context
        if writes is not None and (not isinstance(writes, str) or not writes):
            raise PlanCompileError(f"{where}: writes= must be a non-empty store key, got {writes!r}")
        self.writes = writes
        if not isinstance(parallel, bool):
            raise PlanCompileError(f"{where}: parallel= must be True or False, got {parallel!r}")
        self.parallel = parallel
        if isinstance(sources, str | bytes):
            raise PlanCompileError(f"{where}: sources= takes a list of objects, not a string")
        self.sources: tuple[Any, ...] = tuple(sources)
        if phase not in get_args(Phase):
            raise PlanCompileError(f"{where}: phase= must be one of {', '.join(get_args(Phase))}, got {phase!r}")
        self.phase: Phase = phase

        self.output = output
        self.adapter: TypeAdapter[Any] | None = None
        if output is not None:
            try:
                self.adapter = TypeAdapter(output)
            except Exception as exc:
                raise PlanCompileError(
                    f"{where}: output={output!r} is not a type pydantic can validate: {exc}"
                ) from exc

        if routes is not None and routes_by is not None:
            raise PlanCompileError(
                f"{where}: routes= and routes_by= are mutually exclusive: use predicate routing (routes={{...}}) "
                "or field routing (routes_by='field'), not both"
            )
        self.routes: tuple[tuple[str, Callable[..., Any]], ...] | None = (
            None if routes is None else _check_routes(where, routes)
        )
        self.routes_by = routes_by
        self.route_values: tuple[str, ...] = ()
        if routes_by is not None:
            self.route_values = _literal_route_values(where, output, routes_by)
        if after_branches is not None:
            if not isinstance(after_branches, str) or not after_branches:
                raise PlanCompileError(f"{where}: after_branches= must name a step, got {after_branches!r}")
            if routes is None and routes_by is None:
                raise PlanCompileError(
                    f"{where}: after_branches={after_branches!r} needs routes= or routes_by= on the same step: "
                    "it is the rejoin point of an exclusive branch"
                )
        self.after_branches = after_branches
        if parallel and (routes is not None or routes_by is not None or after_branches is not None):
            raise PlanCompileError(
                f"{where}: a parallel=True step cannot route (routes=, routes_by=, after_branches=): a parallel band "
                "always continues with the next declared step; put the routing on the step after the band"
            )

    @property
    def route_targets(self) -> tuple[str, ...]:
        """Every step name this step may route to, in declared order."""
        if self.routes is not None:
            return tuple(name for name, _ in self.routes)
        return self.route_values

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}"]
        if self.routes is not None:
            parts.append(f"routes={[name for name, _ in self.routes]}")
        if self.routes_by is not None:
            parts.append(f"routes_by={self.routes_by!r}")
        if self.after_branches is not None:
            parts.append(f"after_branches={self.after_branches!r}")
        if self.parallel:
            parts.append("parallel=True")
        return f"Step({', '.join(parts)})"


def _step_name(target: Any, name: str | None) -> str:
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise PlanCompileError(f"Step name= must be a non-empty string, got {name!r}")
        return name
    if isinstance(target, str):
        if not target.strip():
            raise PlanCompileError("Step target must not be an empty string")
        return target
    own = getattr(target, "name", None)
    if isinstance(own, str) and own:
        return own
    fn_name = getattr(target, "__name__", None)
    if isinstance(fn_name, str) and fn_name and fn_name != "<lambda>" and not isinstance(target, type):
        return fn_name
    raise PlanCompileError(f"Step target {target!r} has no usable name: pass Step(target, name='...')")


def _check_routes(where: str, routes: Mapping[str, Callable[..., Any]]) -> tuple[tuple[str, Callable[..., Any]], ...]:
    if not isinstance(routes, Mapping):
        raise PlanCompileError(
            f"{where}: routes= must be a mapping {{'step_name': predicate}}, got {type(routes).__name__}"
        )
    if not routes:
        raise PlanCompileError(f"{where}: routes= is empty; leave it out for a linear step")
    checked: list[tuple[str, Callable[..., Any]]] = []
    for target, predicate in cast(Mapping[object, object], routes).items():
        if not isinstance(target, str) or not target:
            raise PlanCompileError(f"{where}: routes= keys must be step names, got {target!r}")
        if not callable(predicate):
            hint = (
                " — it looks evaluated already: pass the predicate itself, e.g. when.field('x').empty(), "
                "not when.field('x').empty()(env)"
                if isinstance(predicate, bool)
                else ""
            )
            raise PlanCompileError(
                f"{where}: routes[{target!r}] is a {type(predicate).__name__}, not a callable (envelope) -> bool{hint}"
            )
        checked.append((target, predicate))
    return tuple(checked)


def _literal_route_values(where: str, output: Any, field: str) -> tuple[str, ...]:
    if not isinstance(field, str) or not field:
        raise PlanCompileError(f"{where}: routes_by= must name a field of the output model, got {field!r}")
    is_model = isinstance(output, type) and (
        issubclass(output, BaseModel) or dataclasses.is_dataclass(output) or is_typeddict(output)
    )
    if not is_model:
        raise PlanCompileError(
            f"{where}: routes_by={field!r} needs output= to be a model with a Literal[...] field {field!r} "
            f"(a pydantic model, a dataclass or a TypedDict), got output={output!r}"
        )
    hints = _field_annotations(output)
    if field not in hints:
        raise PlanCompileError(
            f"{where}: routes_by={field!r} but {output.__name__} has no field {field!r}; fields: {sorted(hints)}"
        )
    annotation = hints[field]
    if isinstance(annotation, str | typing.ForwardRef):
        raise PlanCompileError(
            f"{where}: routes_by={field!r} but the type of {output.__name__}.{field} is the unresolved forward "
            f"reference {annotation!r}; define it before the model (or call {output.__name__}.model_rebuild())"
        )
    values = _literal_strings(annotation)
    if values is None:
        raise PlanCompileError(
            f"{where}: routes_by={field!r} needs {output.__name__}.{field} to be typed Literal['a', 'b', ...] "
            f"(optionally | None) with step names as values, got {hints[field]!r}"
        )
    return values


def _field_annotations(model: type) -> dict[str, Any]:
    if issubclass(model, BaseModel):
        return {name: info.annotation for name, info in model.model_fields.items()}
    try:
        return typing.get_type_hints(model)
    except Exception as exc:  # unresolvable forward references
        raise PlanCompileError(f"cannot read the field types of {model.__name__}: {exc}") from exc


def _literal_strings(annotation: Any) -> tuple[str, ...] | None:
    """The string values of ``Literal[...]`` / ``Literal[...] | None``; None when the annotation is anything else."""
    origin = get_origin(annotation)
    if origin is Literal:
        values = get_args(annotation)
        if not values or not all(isinstance(v, str) for v in values):
            return None
        return tuple(values)
    if origin is typing.Union or origin is types.UnionType:
        found: list[str] = []
        for arm in get_args(annotation):
            if arm is type(None):
                continue
            inner = _literal_strings(arm)
            if inner is None:
                return None
            found.extend(inner)
        return tuple(dict.fromkeys(found)) or None
    if origin is typing.Annotated:
        return _literal_strings(get_args(annotation)[0])
    return None

"""Sentinels for ``Step(context=...)``: which payload a step receives as its input.

* ``from_prev`` (default) — the payload of the step that ran just before it (the plan input for the first step;
  the :class:`~routegate.plan.ErrorInfo` when that step failed and a route caught the failure; after a parallel
  band, a ``dict`` of each branch's payload by step name).
* ``from_start`` — the plan's input.
* ``from_step(name)`` — the latest payload of the named step, which must be declared earlier; running a step
  whose ``from_step`` source did not run in this run raises :class:`~routegate.plan.PlanRuntimeError`.
* ``from_parallel(name)`` — the same, for a member of a parallel band (checked when the plan is built).
* ``from_parallel_all(name)`` — the payloads of every member of the parallel band that starts at ``name``, as a
  ``dict`` by step name (what the step right after the band gets from ``from_prev``, available to any later step).
"""

from __future__ import annotations

from dataclasses import dataclass

from routegate.plan.errors import PlanCompileError


@dataclass(frozen=True, slots=True)
class FromPrev:
    def __repr__(self) -> str:
        return "from_prev"


@dataclass(frozen=True, slots=True)
class FromStart:
    def __repr__(self) -> str:
        return "from_start"


@dataclass(frozen=True, slots=True)
class FromStep:
    name: str

    def __repr__(self) -> str:
        return f"from_step({self.name!r})"


@dataclass(frozen=True, slots=True)
class FromParallel(FromStep):
    def __repr__(self) -> str:
        return f"from_parallel({self.name!r})"


@dataclass(frozen=True, slots=True)
class FromParallelAll(FromStep):
    def __repr__(self) -> str:
        return f"from_parallel_all({self.name!r})"


Sentinel = FromPrev | FromStart | FromStep

from_prev = FromPrev()
from_start = FromStart()


def from_step(name: str) -> FromStep:
    """The latest payload of the step called ``name`` (declared earlier in the plan)."""
    if not isinstance(name, str) or not name:
        raise PlanCompileError(f"from_step() takes a step name (a non-empty string), got {name!r}")
    return FromStep(name)


def from_parallel(name: str) -> FromParallel:
    """The latest payload of ``name``, a ``parallel=True`` step declared earlier."""
    if not isinstance(name, str) or not name:
        raise PlanCompileError(f"from_parallel() takes a step name (a non-empty string), got {name!r}")
    return FromParallel(name)


def from_parallel_all(name: str) -> FromParallelAll:
    """Every payload of the parallel band that starts at step ``name``, as a ``dict`` by step name."""
    if not isinstance(name, str) or not name:
        raise PlanCompileError(f"from_parallel_all() takes a step name (a non-empty string), got {name!r}")
    return FromParallelAll(name)

"""Typed contracts of a governed run: route intent, observation, budget, trace and history (the result is in
:mod:`routegate.core.result`).

Frozen dataclasses: these are internal values the runtime builds after validation. Untrusted data (router
output, worker arguments) enters through the policy boundary (:mod:`routegate.core.policy`), not here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from routegate.errors import ConfigurationError

ObservationStatus = Literal["done", "needs_reroute"]
OBSERVATION_STATUSES: tuple[ObservationStatus, ...] = ("needs_reroute", "done")
TracePhase = Literal["route", "delegate", "finalize", "step"]


class _Absent:
    """Marks a field that is not present (distinct from a present ``None``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT = _Absent()


_JSONABLE_DEPTH = 100
_MAX_INT_BITS = 13_000  # about 3,900 digits: under the 4,300 Python will convert to text


def jsonable(value: object) -> Any:
    """A JSON-safe copy of ``value`` (untrusted output may hold anything; unknown objects become ``repr``).

    Never raises for depth: containers nested deeper than 100 levels (or a cycle) are cut with a marker string,
    and an integer too long to print becomes a marker too.
    """
    return _jsonable(value, 0)


def _jsonable(value: object, depth: int) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= _MAX_INT_BITS else f"<integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth >= _JSONABLE_DEPTH:
        return f"<nested deeper than {_JSONABLE_DEPTH} levels>"
    depth += 1
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth) for v in value]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return _jsonable(to_dict(), depth)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return _jsonable(model_dump(mode="json"), depth)
    return repr(value)


@dataclass(frozen=True, slots=True)
class Budget:
    """Run budgets. ``max_seconds`` is a real deadline: a slow router, worker, finalizer or step is cut off.

    ``max_route_attempts`` and ``max_delegations`` bound a routing run; ``max_iterations`` bounds the steps one
    Plan run may execute (a parallel band counts once). Each one used up is the stop reason of the same name.
    """

    max_route_attempts: int = 3
    max_delegations: int = 3
    max_seconds: float = 60.0
    max_iterations: int = 100

    def __post_init__(self) -> None:
        for name in ("max_route_attempts", "max_delegations", "max_iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Budget.{name} must be an integer >= 1, got {value!r}")
        seconds = self.max_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ConfigurationError(f"Budget.max_seconds must be a number > 0, got {seconds!r}")
        if not math.isfinite(seconds):
            raise ConfigurationError(f"Budget.max_seconds must be finite, got {seconds!r}")


@dataclass(frozen=True, slots=True)
class ArgLimits:
    """Bounds on a route's arguments, checked at the policy boundary before anything hashes, copies or sends them.

    ``max_depth`` is the nesting of objects and arrays (``{"a": 1}`` is 1, ``{"a": {"b": [1]}}`` is 3);
    ``max_items`` counts every key and array element at any depth; ``max_bytes`` is the UTF-8 size of every key
    and string plus 8 per other value (JSON punctuation not counted). Over a bound the decision is refused with
    ``invalid_route:too_deep`` or ``invalid_route:too_large``. An integer of more than ``max_int_digits`` decimal
    digits is too large as well (Python will not even print one over 4,300 digits).
    """

    max_depth: int = 32
    max_items: int = 10_000
    max_bytes: int = 1_000_000
    max_int_digits: int = 1_000

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_items", "max_bytes", "max_int_digits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"ArgLimits.{name} must be an integer >= 1, got {value!r}")
        if self.max_int_digits > 4_000:
            raise ConfigurationError(f"ArgLimits.max_int_digits must be at most 4000, got {self.max_int_digits}")


@dataclass(slots=True)
class DelegationLedger:
    """One run's delegation state: delegations made and the ``target:args_hash`` signatures seen."""

    max_delegations: int
    delegations: int = 0
    seen: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class RouteIntent:
    """A route decision that passed the policy boundary: ``{"kind": "route", "target", "args"}``."""

    target: str
    args: Mapping[str, Any]
    kind: Literal["route"] = "route"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "args": jsonable(self.args)}


@dataclass(frozen=True, slots=True)
class RouteProposal:
    """A route a trusted router proposes, typed: the policy reads ``target`` and ``args`` without parsing a shape.

    Typed means no shape to parse, not no validation: :meth:`RoutePolicy.validate
    <routegate.core.RoutePolicy.validate>` still checks the target against its allowlist and the args against their
    bounds and the target's schema, with the same stop reasons as for the raw ``{"kind": "route", ...}`` form.
    Untrusted routers (an LLM's answer, a user's router) keep returning the raw form.
    """

    target: str
    args: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The raw form of this proposal (what a run shows as ``raw_route`` when the policy refuses it)."""
        return {"kind": "route", "target": self.target, "args": jsonable(self.args)}


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """What a router is told about one route it may choose: name, description and argument JSON schema."""

    name: str
    description: str
    args_schema: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "args": dict(self.args_schema)}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One delegation: the validated route and the observation the worker returned."""

    attempt: int
    route: RouteIntent
    observation: Mapping[str, Any]

    @property
    def status(self) -> object:
        return self.observation.get("status")

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "route": self.route.to_dict(),
            "observation": jsonable(self.observation),
        }


@dataclass(slots=True)
class TraceEntry:
    """One line of the trace. The core runtime writes one per route attempt, the Plan engine one per step.

    Only the fields that apply are set; :meth:`to_dict` leaves out the unset ones.
    """

    attempt: int
    target: str | None
    ok: bool
    phase: TracePhase
    elapsed_ms: float
    args_hash: str | None = None
    stop_reason: str | None = None
    observation_status: str | None = None
    domain: str | None = None
    decided_by: str | None = None
    scores: Mapping[str, float] | None = None
    why: str | None = None
    next: str | None = None
    provenance: Mapping[str, tuple[str, ...]] | None = None
    """Per argument, the sources its values could have come from (``{"recipient": ("tool:read_file#2",)}``);
    set when the target declares flow rules (:mod:`routegate.core.provenance`)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None:
                out[name] = jsonable(value) if name in ("scores", "provenance") else value
        return out

"""The policy boundary: a router's decision is untrusted input and is validated before anything runs.

Checks, in order (the first failure ends the run with ``invalid_route:<detail>``):
text that is not JSON (``non_json``, the raw text is kept), not an object (``not_object``), ``kind`` other
than ``"route"`` (``bad_kind``), keys other than ``kind``/``target``/``args`` (``extra_keys``), a missing or
blank target (``missing_target``), a target outside the policy allowlist (``route_not_allowed:<target>``),
``args`` that is not an object (``bad_args``), args over the :class:`~routegate.core.ArgLimits` bounds
(``too_deep``: nesting; ``too_large``: keys and elements, bytes, a huge integer; ``bad_args`` for what JSON cannot
carry when the policy is ``json_only``), args that do not fit the target's declared schema
(``missing_<field>`` for an absent, null or blank required field, ``bad_args`` otherwise), and the target
chosen again right after it answered ``needs_reroute`` (``repeat_target_after_reroute``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from routegate.core import stop_reasons as sr
from routegate.core._bounds import check_bounds
from routegate.core.contracts import ArgLimits, RouteIntent, RouteProposal

_ROUTE_KEYS = frozenset({"kind", "target", "args"})
_MAX_RAW_TEXT = 65_536


@dataclass(frozen=True, slots=True)
class RouteRejection:
    """A decision the policy refused: the stop reason and a message naming what was wrong."""

    stop_reason: str
    message: str


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _schema_rejection(exc: ValidationError, args: Mapping[str, Any], target: str) -> RouteRejection:
    for error in exc.errors(include_url=False):
        loc = error.get("loc", ())
        if len(loc) == 1 and isinstance(loc[0], str):
            name = loc[0]
            if error["type"] == "missing" or _is_blank(args.get(name)):
                return RouteRejection(
                    sr.missing_arg(name),
                    f"route to {target!r}: required argument {name!r} is missing or blank",
                )
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "args"
    return RouteRejection(
        sr.invalid_route(sr.BAD_ARGS), f"route to {target!r}: argument {where!r} is invalid: {first['msg']}"
    )


def _decoded(raw: object) -> dict[Any, Any] | RouteRejection:
    """A decision that is not already a ``dict``, as one: UTF-8 bytes and text are parsed as JSON."""
    action = raw
    if isinstance(action, bytes | bytearray):
        try:
            action = bytes(action).decode("utf-8")
        except UnicodeDecodeError:
            return RouteRejection(sr.invalid_route(sr.NON_JSON), "route decision is not UTF-8 text")
    if isinstance(action, str):
        if len(action) > _MAX_RAW_TEXT:
            return RouteRejection(
                sr.invalid_route(sr.NON_JSON),
                f"route decision text is {len(action)} characters, over the {_MAX_RAW_TEXT} limit",
            )
        try:
            action = json.loads(action)
        except (ValueError, RecursionError):
            return RouteRejection(sr.invalid_route(sr.NON_JSON), "route decision is not valid JSON")
    if not isinstance(action, dict):
        return RouteRejection(
            sr.invalid_route(sr.NOT_OBJECT), f"route decision must be a JSON object, got {type(action).__name__}"
        )
    return action


class RoutePolicy:
    """The policy allowlist plus the argument schema of each target it knows.

    A target may be allowed without a schema (its args are then only checked to be an object and within
    ``limits``); the gateway decides later whether it can actually be executed. ``json_only`` also refuses
    args that JSON cannot carry (non-string keys, NaN, other objects): set it when the args travel as JSON.
    """

    __slots__ = ("_allowed", "_json_only", "_limits", "_schemas")

    def __init__(
        self,
        allowed: Iterable[str],
        schemas: Mapping[str, type[BaseModel]] | None = None,
        *,
        limits: ArgLimits | None = None,
        json_only: bool = False,
    ) -> None:
        self._allowed = frozenset(allowed)
        self._schemas = dict(schemas or {})
        self._limits = limits or ArgLimits()
        self._json_only = json_only

    @property
    def allowed(self) -> frozenset[str]:
        return self._allowed

    @property
    def limits(self) -> ArgLimits:
        return self._limits

    def validate(
        self,
        raw: object,
        *,
        previous_target: str | None = None,
        previous_status: object = None,
    ) -> RouteIntent | RouteRejection:
        """Validate an untrusted route decision. Never raises for any ``raw`` value.

        A :class:`~routegate.core.contracts.RouteProposal` has no shape to parse; from its target on it is
        checked exactly as the raw form (same checks, same stop reasons).
        """
        if isinstance(raw, RouteProposal):
            target: object = raw.target
            args: object = raw.args
        else:
            action = _decoded(raw)
            if isinstance(action, RouteRejection):
                return action
            if action.get("kind") != "route":
                return RouteRejection(sr.invalid_route(sr.BAD_KIND), "route decision must have kind='route'")
            if not action.keys() <= _ROUTE_KEYS:
                extra = sorted(str(key)[:40] for key in action.keys() - _ROUTE_KEYS)
                return RouteRejection(sr.invalid_route(sr.EXTRA_KEYS), f"route decision has extra keys {extra}")
            target = action.get("target")
            args = action.get("args")
        if not isinstance(target, str) or not (target := target.strip()):
            return RouteRejection(sr.invalid_route(sr.MISSING_TARGET), "route decision has no target")
        if target not in self._allowed:
            return RouteRejection(
                sr.route_not_allowed(target),
                f"target {sr.safe_detail(target)!r} is not in the policy allowlist",
            )
        if type(args) is not dict:
            if args is None:
                args = {}
            elif isinstance(args, Mapping) and not isinstance(args, dict) and isinstance(raw, RouteProposal):
                try:  # typed: any mapping will do
                    args = dict(args)
                except Exception as exc:  # a mapping that fails when read: refused, not raised
                    return RouteRejection(
                        sr.invalid_route(sr.BAD_ARGS), f"args could not be read ({type(exc).__name__})"
                    )
            if not isinstance(args, dict):
                return RouteRejection(
                    sr.invalid_route(sr.BAD_ARGS), f"args must be an object, got {type(args).__name__}"
                )
        try:
            breach = check_bounds(args, self._limits, json_only=self._json_only)
        except Exception as exc:  # a mapping that fails when read (a router's own object): refused, not raised
            return RouteRejection(sr.invalid_route(sr.BAD_ARGS), f"args could not be read ({type(exc).__name__})")
        if breach is not None:
            return RouteRejection(sr.invalid_route(breach.detail), f"route to {target!r}: {breach.message}")
        schema = self._schemas.get(target)
        if schema is not None:
            try:
                model = schema.model_validate(args)
            except ValidationError as exc:
                return _schema_rejection(exc, args, target)
            # the validated values themselves: nested models stay models (model_dump() would make them dicts)
            args = {**model.__dict__, **(model.model_extra or {})}
        if previous_status == "needs_reroute" and target == previous_target:
            return RouteRejection(
                sr.invalid_route(sr.REPEAT_TARGET_AFTER_REROUTE),
                f"target {target!r} answered needs_reroute on the previous attempt and may not be chosen again",
            )
        return RouteIntent(target, args)

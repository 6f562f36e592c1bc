"""The dispatcher's side of the governed step: handler workers that never raise, and the check of what they return.

A handler's worker returns its own result type (``CodeRun``, ``ToolOutcome``, ``A2AOutcome``...) whose
``stop_reason`` attribute says how the part ended. :func:`guarded` wraps the worker so that it hands back a
:class:`Returned` envelope instead — holding that value, or a :class:`HandlerFailure` when the worker raised — and
:func:`check_returned` is the observation check the dispatcher gives :class:`~routegate.core.governed.GovernedStep`.

Why an envelope: the governed step turns a mapping, a dataclass or a pydantic model into a dict before its check,
and the part's contract is the *attribute* ``stop_reason`` of the returned object — a ``stop_reason`` *key* in a
dict a worker echoes back (arguments a model wrote, say) must not end the dispatch. The envelope is none of those
types, so the check sees the object itself (and no result is copied into a dict on the way).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from pydantic import BaseModel

from routegate.core import stop_reasons as sr
from routegate.core._faults import ErrorInfo
from routegate.core.provenance import FlowRules, From
from routegate.core.workers import Worker
from routegate.errors import RunStopError

logger = logging.getLogger("routegate.technique.dispatch")


class HandlerFailure:
    """What a guarded worker returns instead of raising: the caller sees the class, the log has the rest."""

    __slots__ = ("message", "stop_reason")

    def __init__(self, stop_reason: str, message: str) -> None:
        self.stop_reason = stop_reason
        self.message = message


class Returned:
    """What a guarded worker hands the gateway: the worker's value, or the :class:`HandlerFailure` it became."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


def value_stop_reason(value: object) -> str:
    """The part's stop reason: the value's ``stop_reason`` attribute when it is a non-empty string, else success."""
    reason = getattr(value, "stop_reason", sr.SUCCESS)
    return reason if isinstance(reason, str) and reason else sr.SUCCESS


def value_message(value: object) -> str:
    return str(getattr(value, "message", ""))


def check_returned(returned: object) -> tuple[str, str] | None:
    """The observation check of a dispatched part: ``None`` when it succeeded, else its stop reason and message."""
    value = returned.value if isinstance(returned, Returned) else returned
    reason = value_stop_reason(value)
    return None if reason == sr.SUCCESS else (reason, value_message(value))


def _failure(target: str, exc: Exception) -> Returned:
    """A handler's worker raised: its part ends with ``route_error:<t>``, through the one fault-to-stop conversion."""
    stop = ErrorInfo.of(exc, f"the handler for {target!r}", sr.route_error(target), "delegate", logger)
    return Returned(HandlerFailure(stop.stop_reason, stop.message))


def returned_value(returned: object) -> object:
    """What a guarded worker returned, unwrapped: the value recorded as the part's output in the run's sources."""
    return returned.value if isinstance(returned, Returned) else returned


def guarded(found: Worker, *, schema: type[BaseModel] | None = None, flows: Mapping[str, From] | None = None) -> Worker:
    """The same worker, but it returns a :class:`Returned` and an exception it raises (other than a stop signal)
    becomes a :class:`HandlerFailure`. A :class:`~routegate.core.RunContext` parameter of the worker still gets
    the dispatch's context (``functools.wraps`` keeps its signature). Its flow rules are the worker's own, the
    ``Annotated`` rules of ``schema`` (the schema the dispatcher checks the target's arguments against) and
    ``flows``, later ones winning."""
    fn, target = found.fn, found.name
    wrapper: Any
    if found.is_async:

        @functools.wraps(fn)
        async def wrapper(**args: Any) -> Returned:
            try:
                return Returned(await fn(**args))
            except RunStopError:
                raise
            except Exception as exc:
                return _failure(target, exc)

    else:

        @functools.wraps(fn)
        def wrapper(**args: Any) -> object:
            try:
                value = fn(**args)
            except RunStopError:
                raise
            except Exception as exc:
                return _failure(target, exc)
            # hasattr on the type: inspect.isawaitable's ABC check costs more than the rest of the guard
            return _awaited(target, value) if hasattr(type(value), "__await__") else Returned(value)

    rules: dict[str, From] = dict(found.flow_rules.rules) if found.flow_rules is not None else {}
    model = schema or found.args_model
    if schema is not None:
        declared = FlowRules.of(target, schema)
        rules.update(declared.rules if declared is not None else {})
    rules.update(flows or {})
    return Worker(target, wrapper, found.description, model, inline=found.inline, flows=rules or None)


async def _awaited(target: str, value: Awaitable[object]) -> Returned:
    """What a sync-looking worker returned to be awaited (a callable object with an async ``__call__``)."""
    try:
        return Returned(await value)
    except RunStopError:
        raise
    except Exception as exc:
        return _failure(target, exc)

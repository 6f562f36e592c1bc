"""The one step call: run a step's target on its input, whatever its kind, and wrap how it ended in an
:class:`~routegate.plan.Envelope`.

Both the interpreter (a step) and a parallel band (each member) call :func:`call_step`; a kind of target or a field
of a step that changes how it is called is added here and nowhere else. How the target is called was worked out
when the plan was built (:class:`~routegate.plan._compiled.Compiled`): its kind, its ``RunContext`` parameter, its
validator. A step's exception becomes its stop through the one fault-to-stop conversion
(:func:`~routegate.plan.envelope.step_stop`, logged on ``routegate.plan.envelope``); only a
:class:`~routegate.plan.PlanRuntimeError` (a bug of the plan's author) escapes.
"""

from __future__ import annotations

import time
import types
from typing import TYPE_CHECKING, Any

from routegate.errors import RunStopError
from routegate.plan._compiled import ASYNC, CTX_ASYNC, CTX_SYNC, PROTO_ASYNC, PROTO_SYNC, SYNC, Compiled
from routegate.plan.durable import _SCOPE
from routegate.plan.envelope import Envelope, ErrorInfo, StepFailedError, step_stop
from routegate.plan.errors import PlanRuntimeError
from routegate.plan.targets import StepContext

if TYPE_CHECKING:
    from routegate.plan._run import RunState

_CoroutineType = types.CoroutineType


async def call_step(step: Compiled, given: Any, run: RunState | None, store: Any) -> Envelope:
    """Run ``step`` on ``given`` in ``run`` (``None``: a lean run, whose steps ask for no context) and return its
    envelope: the validated output, or the stop its exception (or, in a runtime's plan, its returned
    :class:`~routegate.errors.RunStopError`) ends it with. ``store`` is the store the run writes to (a nested
    plan's run writes there too, unless it has its own)."""
    meta: dict[str, Any] | None = None
    t0 = time.perf_counter()
    try:
        kind = step.kind
        if kind is SYNC:
            out = step.fn(given)
        elif kind is CTX_ASYNC:
            out = await _with_context(step, given, run)
        elif kind is ASYNC:
            out = await step.fn(given)
        elif kind is CTX_SYNC:
            out = _with_context(step, given, run)
        elif kind is PROTO_ASYNC:
            out = await _run_step(step, given, run)
        elif kind is PROTO_SYNC:
            out = _run_step(step, given, run)
        else:  # PLAN: a nested plan's run is a part of this one
            nested = await step.target._run_nested(given, store, run)
            meta = {"plan": nested}
            if nested.error is not None:  # the nested run stopped: so does this step, with its stop
                raise StepFailedError(nested.error, meta)
            out = nested.output
        if step.direct and type(out) is _CoroutineType:
            raise _returned_coroutine(step, out)
        if step.returns_stops and isinstance(out, RunStopError):
            # a runtime's step ended the run by returning its stop: it ends exactly as if the step had raised it
            return Envelope(
                None, step_stop(out, step.name, step.phase), meta, step.name, (time.perf_counter() - t0) * 1000.0
            )
        validate = step.validate
        if validate is not None and type(out) is not step.out_cls:
            out = validate(out)
        return Envelope(out, None, meta, step.name, (time.perf_counter() - t0) * 1000.0)
    except PlanRuntimeError:
        raise
    except StepFailedError as failed:  # a nested run's stop (its result in the metadata), or a misused target
        return Envelope(None, failed.info, failed.metadata, step.name, (time.perf_counter() - t0) * 1000.0)
    except Exception as exc:
        return Envelope(
            None, step_stop(exc, step.name, step.phase), meta, step.name, (time.perf_counter() - t0) * 1000.0
        )


def _with_context(step: Compiled, given: Any, run: RunState | None) -> Any:
    """Call a plain target that declares a RunContext parameter (the run has a context: the plan wants one)."""
    assert run is not None
    if step.ctx_positional:
        return step.fn(given, run.ctx)
    return step.fn(given, **{step.ctx_param or "": run.ctx})


def _run_step(step: Compiled, given: Any, run: RunState | None) -> Any:
    """Call a step target's ``run_step`` with its StepContext (and the RunContext, if it declares one)."""
    assert run is not None  # a plan with a step target always has a context
    scope = _SCOPE.get()
    key = None if scope is None else scope.key
    ctx = StepContext(step.name, step.task, run.input, run.store, step.sources, run.ctx, key)
    param = step.ctx_param
    if param is None:
        return step.fn(given, ctx)
    if step.ctx_positional:
        return step.fn(given, run.ctx)
    return step.fn(given, ctx, **{param: run.ctx})


def _returned_coroutine(step: Compiled, coro: types.CoroutineType[Any, Any, Any]) -> StepFailedError:
    """A synchronous target returned a coroutine: ``step_error:TypeError``, with the engine's own message."""
    coro.close()
    message = f"the target of step {step.name!r} returned a coroutine: declare it 'async def' so the plan awaits it"
    return StepFailedError(ErrorInfo("TypeError", message, "step_error:TypeError", TypeError(message)))


__all__ = ["call_step"]

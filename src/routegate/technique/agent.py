"""The technique router on the routing agent: classify and dispatch what an LLM step or a worker produced.

Three composable pieces, no change to :mod:`routegate.core` needed:

* :class:`TechniqueFinalizer` wraps a :class:`~routegate.core.Finalizer` (an LLM finalizer, the grounded
  composer...). Prose passes through untouched. Anything else is dispatched; when every part succeeds the
  answer is the text followed by a rendering of the results, otherwise the run ends with the dispatch's stop
  reason (``RunStopError``, phase ``finalize``), so a refused or failed action is never reported as success.
* :func:`technique_worker` wraps a :class:`~routegate.core.Worker` the same way, on its observation's
  ``result`` text (phase ``delegate``).
* :func:`dispatch_answer` classifies and dispatches the answer of a finished :class:`~routegate.core.AgentResult`.

When the dispatcher's targets declare flow rules, the routing agent keeps its run's sources (the goal, the
``context`` mapping, every observation) and the dispatch reads and extends them: a call the model wrote with a
value it read in a tool's output is refused as it would be in a route (``route_denied:provenance:<arg>``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from routegate.core import stop_reasons as sr
from routegate.core.context import RunContext, context_parameter
from routegate.core.protocols import FinalAnswer, Finalizer, FinalizeRequest
from routegate.core.result import AgentResult
from routegate.core.workers import Worker
from routegate.errors import ConfigurationError, RunStopError
from routegate.sandbox.supervisor import CodeRun
from routegate.technique.a2a import A2AOutcome
from routegate.technique.classify import TechniqueRouter
from routegate.technique.dispatch import DispatchOutcome, DispatchResult, TechniqueDispatcher

OnDispatch = Callable[[DispatchResult], None]
Render = Callable[[str, DispatchResult], str]
_MAX_RENDERED = 4_000


def _render_value(outcome: DispatchOutcome) -> str:
    value = outcome.value
    if isinstance(value, CodeRun):
        body = value.stdout or "(no output)"
        return f"exit code {value.exit_code}\n{body[:_MAX_RENDERED]}".rstrip()
    if isinstance(value, A2AOutcome):
        return f"{value.status}: {str(value.result)[:_MAX_RENDERED]}" if value.result is not None else value.status
    text = getattr(value, "text", None)
    if isinstance(text, str):  # a ToolOutcome (kept duck-typed: importing it would import the mcp SDK)
        return text[:_MAX_RENDERED] or "(empty result)"
    return str(value)[:_MAX_RENDERED]


def render_dispatch(text: str, result: DispatchResult) -> str:
    """The default answer after a successful dispatch: the text, then one section per part that ran."""
    sections = [text.rstrip()]
    for outcome in result.output:
        sections.append(f"[{outcome.target}] {_render_value(outcome)}")
    return "\n\n".join(sections)


class TechniqueFinalizer:
    """A :class:`~routegate.core.Finalizer` that classifies the inner finalizer's answer and dispatches it.

    ``on_dispatch`` receives every :class:`DispatchResult` (for a trace, a UI, metrics); ``render`` builds the
    answer after a successful dispatch (default :func:`render_dispatch`).
    """

    def __init__(
        self,
        inner: Finalizer,
        *,
        dispatcher: TechniqueDispatcher,
        router: TechniqueRouter | None = None,
        on_dispatch: OnDispatch | None = None,
        render: Render = render_dispatch,
    ) -> None:
        if not isinstance(inner, Finalizer):
            raise ConfigurationError(f"inner must have an async finalize(request), got {type(inner).__name__}")
        self.inner = inner
        self.dispatcher = dispatcher
        self.router = router or TechniqueRouter()
        self.on_dispatch = on_dispatch
        self.render = render
        self._inner_ctx = context_parameter(inner.finalize)

    @property
    def tracks_provenance(self) -> bool:
        """Does the dispatcher check flow rules? The routing agent then keeps its run's sources for it."""
        return self.dispatcher.tracks_provenance

    async def finalize(
        self,
        request: FinalizeRequest,
        ctx: RunContext[Any] = None,  # type: ignore[assignment]  # None when called outside a run
    ) -> str | FinalAnswer:
        """The inner finalizer's answer, dispatched unless it is prose. The routing agent passes its
        :class:`~routegate.core.RunContext` as ``ctx``; it goes on to the inner finalizer (if it declares a
        ``RunContext`` parameter) and to the dispatch (its ``deps`` and ``run_id``)."""
        if self._inner_ctx is None or ctx is None:
            answer: object = await self.inner.finalize(request)
        else:
            answer = await self.inner.finalize(request, **{self._inner_ctx: ctx})
        extra: Mapping[str, Any] = {}
        if isinstance(answer, FinalAnswer):
            extra = answer.extra
            answer = answer.text
        if not isinstance(answer, str):
            return answer  # type: ignore[return-value]  # not text: the agent reports it (llm_empty)
        classified = self.router.classify(answer)
        if classified.is_prose:
            return FinalAnswer(answer, extra) if extra else answer
        result = await self.dispatcher.adispatch(classified, context=ctx)
        if self.on_dispatch is not None:
            self.on_dispatch(result)
        if not result.ok:
            raise RunStopError(result.stop_reason, result.message or result.stop_reason, phase="finalize")
        return FinalAnswer(self.render(answer, result), {**extra, "technique": result.to_dict()})


def technique_worker(
    inner: Worker,
    *,
    dispatcher: TechniqueDispatcher,
    router: TechniqueRouter | None = None,
    on_dispatch: OnDispatch | None = None,
) -> Worker:
    """A worker that runs ``inner`` and dispatches its observation's ``result`` text when it is not prose.

    The observation keeps its status and domain; a dispatched ``result`` becomes
    ``{"output": <text>, "technique": <DispatchResult.to_dict()>}``. A refused or failed dispatch ends the run
    with its stop reason (phase ``delegate``). The run's :class:`~routegate.core.RunContext` goes on to
    ``inner`` (if it declares a ``RunContext`` parameter) and to the dispatch (its ``deps`` and ``run_id``).
    """
    classify = (router or TechniqueRouter()).classify

    # the context parameter has a name no route argument will have: **args takes every argument of ``inner``;
    # it is None when the caller passes no context (Worker.invoke(args) outside a run)
    async def run(_routegate_run_context: RunContext[Any], **args: Any) -> object:
        ctx = _routegate_run_context
        mismatch = inner.args_mismatch(args)
        if mismatch is not None:
            raise RunStopError(sr.route_bad_args(inner.name), f"worker {inner.name!r}: {mismatch}")
        value = inner.invoke(args, ctx)
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, Mapping) or not isinstance(value.get("result"), str):
            return value
        classified = classify(value["result"])
        if classified.is_prose:
            return value
        result = await dispatcher.adispatch(classified, context=ctx)
        if on_dispatch is not None:
            on_dispatch(result)
        if not result.ok:
            raise RunStopError(result.stop_reason, result.message or result.stop_reason, phase="delegate")
        return {**value, "result": {"output": value["result"], "technique": result.to_dict()}}

    # the dispatch reads the run's sources when its targets declare flow rules: the routing agent keeps them then
    setattr(run, "tracks_provenance", dispatcher.tracks_provenance)  # noqa: B010  # an attribute of a function
    return Worker(name=inner.name, fn=run, description=inner.description, args_model=inner.schema, flows=inner.flows)


async def dispatch_answer(
    result: AgentResult,
    *,
    dispatcher: TechniqueDispatcher,
    router: TechniqueRouter | None = None,
    config: Mapping[str, Any] | None = None,
) -> DispatchResult | None:
    """Classify and dispatch a finished run's answer; ``None`` when the run did not end with one.

    When the dispatcher's targets declare flow rules, the run's sources are rebuilt from the result: its goal
    (``user``), ``config`` (the run's ``context`` mapping, ``config``) and every observation in its history
    (``tool:<worker>#<n>``; a refusal handed back is not a tool's output)."""
    if not result.ok or not result.output:
        return None
    classified = (router or TechniqueRouter()).classify(result.output)
    if not dispatcher.tracks_provenance:
        return await dispatcher.adispatch(classified)
    ctx: RunContext[None] = RunContext(None, run_id=result.run_id)
    ledger = dispatcher.step.admit(ctx, result.goal, config)
    assert ledger is not None  # the dispatcher tracks provenance
    for entry in result.history:
        if entry.status != "refused":
            ledger.record_tool(entry.route.target, entry.observation, entry.route.args)
    return await dispatcher.adispatch(classified, context=ctx)


__all__ = ["TechniqueFinalizer", "dispatch_answer", "render_dispatch", "technique_worker"]

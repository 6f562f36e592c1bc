"""The Plan engine's exceptions and its one warning.

* :class:`PlanCompileError` — the plan graph is wrong (unknown route target, bad ``routes_by`` field, ...). Raised
  while the :class:`~routegate.plan.Plan` is built, before any step runs.
* :class:`PlanRuntimeError` — a plan misbehaved while running in a way that is a programming bug: a routing
  predicate raised, or ``from_step(name)`` named a step that did not run.
* :class:`MaxIterationsExceeded` — a run used up its step bound (``Budget.max_iterations``): a routing cycle that
  never ends. A run does not raise it: it *stops* with ``stop_reason == "max_iterations"``, and
  ``result.raise_for_stop()`` raises this exception for code that prefers one.

A step whose *target* fails is not an exception either: it produces an error envelope, which a route can catch
with ``when.errored()``; a run that ends on such a step returns a result with ``ok == False``.
"""

from __future__ import annotations

from collections.abc import Sequence

from routegate.errors import ConfigurationError, RunStopError, RuntimeFaultError

_SHOWN_PATH = 24
INTERRUPTED = "interrupted"


class PlanCompileError(ConfigurationError):
    """The plan graph is invalid; raised at construction, before anything runs."""


class PlanRuntimeError(RuntimeFaultError):
    """A plan bug found while running (a predicate raised, a ``from_step`` source did not run).

    A :class:`RuntimeError` subclass (through :class:`~routegate.errors.RuntimeFaultError`), distinct from
    :class:`PlanCompileError` so run-time bugs do not pass for build-time graph errors.
    """


def path_text(path: Sequence[str], shown: int = _SHOWN_PATH) -> str:
    """The executed steps (their names, in order) for a message: the last ``shown`` of them, with a count of the
    ones left out."""
    names = list(path[-shown:])
    elided = len(path) - len(names)
    text = " → ".join(names) or "(none)"
    return f"… ({elided} earlier) → {text}" if elided else text


class MaxIterationsExceeded(PlanRuntimeError):
    """A run executed ``limit`` steps and still had somewhere to go: a routing cycle without an exit.

    ``path`` holds every step executed before the limit was hit and ``next_step`` the one that would have run.
    The run's result carries it (``result.error.exception``) and ``result.raise_for_stop()`` raises it; its
    message is the result's ``message``.
    """

    def __init__(self, limit: int, path: Sequence[str], next_step: str) -> None:
        self.limit = limit
        self.path = tuple(path)
        self.next_step = next_step
        super().__init__(
            f"Plan exceeded max_iterations={limit} before running {next_step!r}; path: {path_text(self.path)}. "
            "Suspect a routing cycle (a route back to an earlier step whose predicate never stops firing) "
            "or raise max_iterations."
        )


class DetourTrapWarning(UserWarning):
    """A forward route without ``after_branches=`` whose target is not the last step (the detour trap).

    When such a route does not fire, linear progression still runs the routed-to step, so the "branch-only" step
    runs on every path. ``Plan(strict=True)`` turns this warning into a :class:`PlanCompileError`.
    """


class CheckpointConflictError(PlanRuntimeError):
    """A durable run was started on a ``checkpoint_key`` that a live run (in this or another process) holds, and
    the plan says ``on_concurrent="fail"`` (the default). Wait for that run, pick another key, or build the plan
    with ``on_concurrent="fork"`` to run on a fork of the key instead."""


class CheckpointMismatchError(ConfigurationError):
    """The checkpoint of a key must not be resumed by this plan: it was written by a plan whose steps differ, it
    cannot be read or is of an unknown format, it does not fit the plan's graph (edited or damaged: its path,
    position or answers are not ones this plan could have written), or — with ``Store(signing_key=...)`` — it is
    unsigned or its signature does not match. Raised before any step runs; the message names the run's key and
    what does not fit. Resume with the plan that wrote it, or start over (``resume=False`` or another key)."""


class Interrupt(RunStopError):
    """Raised by a step to pause a run and ask a person something (see :func:`routegate.plan.interrupt`).

    The run ends with stop reason ``"interrupted"`` (phase ``"step"``); ``question`` is what was asked (any JSON
    value) and ``result.question`` returns it. A durable run resumed with ``answer=`` runs the step again, and
    :func:`~routegate.plan.interrupt` then returns the answer instead of raising.
    """

    def __init__(self, question: object = None, *, key: str | None = None) -> None:
        text = question if isinstance(question, str) else repr(question)
        super().__init__(INTERRUPTED, f"interrupted: {text}", phase="step")
        self.question = question
        self.key = key

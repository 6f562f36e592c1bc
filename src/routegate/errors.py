"""The exception tree: one root, two branches of errors, and one control signal.

* :class:`ConfigurationError` — misuse found while building something (a bad plan graph, an unknown route,
  a worker without a schema, a misused ``when`` predicate, bad settings). Raised early, before anything runs.
  :class:`MissingExtraError` is one: an optional part used without its extra installed.
* :class:`RuntimeFaultError` — a fault while running (a worker, an upstream service, storage).
* :class:`RunStopError` — not an error: the one signal a component (a router, a worker, a finalizer, a Plan step)
  may raise to end the run with a specific stop reason. The runtime turns it into data (the result's stop reason
  and phase) and never re-raises it, so it sits outside the fault branch: ``except RuntimeFaultError`` does not
  swallow it.

Expected endings of a run (bad model output, budgets, loops, timeouts) are *not* exceptions: they are stop
reasons on the returned result.
"""

from __future__ import annotations


class RoutegateError(Exception):
    """Root of every exception raised by routegate."""


class ConfigurationError(RoutegateError, ValueError):
    """Something was built or configured wrongly; raised before anything runs."""


class RuntimeFaultError(RoutegateError, RuntimeError):
    """A fault while running: a worker, an upstream service or storage failed."""


class RunStopError(RoutegateError):
    """Ends the current run with ``stop_reason``; the runtime reports it as data, never re-raises it.

    ``phase`` may be left ``None``: the runtime fills in the phase it was in.
    """

    def __init__(self, stop_reason: str, message: str = "", *, phase: str | None = None) -> None:
        super().__init__(message or stop_reason)
        self.stop_reason = stop_reason
        self.message = message or stop_reason
        self.phase = phase


class MissingExtraError(ConfigurationError, ModuleNotFoundError):
    """Something needs an optional part of routegate that is not installed: the message names the extra and the
    pip command of the running interpreter that installs it (``python -m pip install 'routegate[embed]'``).

    A :class:`ModuleNotFoundError` too, so code that falls back when an optional module is missing keeps working.
    """

    def __init__(self, message: str, *, extra: str, module: str | None) -> None:
        super().__init__(message)
        self.msg = message
        self.name = module
        self.extra = extra

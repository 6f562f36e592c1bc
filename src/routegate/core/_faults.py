"""The one fault boundary: an exception a part raised is reported by its class only.

An exception's text is the easiest place for a path, a connection string or a secret to leak, and the caller (an
HTTP client, a model reading the trace, another agent on the bus) does not need it to act. So every runtime that
turns a part's exception into a stop, an error or a reply calls :func:`fault_message`: the exception, with its
traceback, goes to the log at WARNING, and the caller gets ``"<what> raised <ExceptionClass> (details in the
log)"``. The stop reason stays the caller's to choose (``router_error:<Exc>``, ``route_error:<target>``, ...).
"""

from __future__ import annotations

import logging


def fault_message(exc: BaseException, what: str, logger: logging.Logger, *, where: str = "") -> str:
    """Log ``exc`` with its traceback at WARNING on ``logger`` and return the class-only report of it.

    ``what`` names the part with its article (``"the router"``, ``"worker 'refund'"``); ``where`` adds to the log
    line only (``" on task 7f3a"``), for what the operator needs and the caller does not."""
    name = type(exc).__name__
    logger.warning("%s raised %s%s", what, name, where, exc_info=exc)
    return fault_report(name, what)


def fault_report(name: str, what: str) -> str:
    """The class-only report of a fault :func:`fault_message` already logged, for a caller that names the part
    its own way (the technique dispatcher reports a fault its plan's step logged as the dispatch's)."""
    return f"{what} raised {name} (details in the log)"


__all__ = ["fault_message", "fault_report"]

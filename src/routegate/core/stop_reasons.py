"""Stop reasons: the exact strings of the routing-agent seed, plus the ``family:detail`` extensions.

A stop reason is data on a :class:`~routegate.core.RunResult`, never an exception. Reasons that
carry a detail (``route_denied:<target>``) are built with the functions below so that untrusted text (a target
name a model invented) is bounded and printable before it lands in a log line or a metric label.
"""

from __future__ import annotations

from typing import Final, Literal

Phase = Literal["route", "delegate", "finalize", "step"]
"""Where a run was when it stopped: routing, delegating, finalizing, or (a Plan) running a step."""

_PHASES: Final[dict[str, Phase]] = {"route": "route", "delegate": "delegate", "finalize": "finalize", "step": "step"}


def phase_of(value: str | None) -> Phase | None:
    """``value`` when it names a phase (a :class:`~routegate.errors.RunStopError` may carry any text), else ``None``."""
    return _PHASES.get(value) if isinstance(value, str) else None


SUCCESS: Final = "success"
MAX_ROUTE_ATTEMPTS: Final = "max_route_attempts"
MAX_DELEGATIONS: Final = "max_delegations"
MAX_SECONDS: Final = "max_seconds"
MAX_ITERATIONS: Final = "max_iterations"
LLM_TIMEOUT: Final = "llm_timeout"
LLM_EMPTY: Final = "llm_empty"
ROUTE_BAD_OBSERVATION: Final = "route_bad_observation"
LOOP_DETECTED: Final = "loop_detected"

# invalid_route:* details, in the order the policy boundary checks them
NOT_OBJECT: Final = "not_object"
NON_JSON: Final = "non_json"
BAD_KIND: Final = "bad_kind"
EXTRA_KEYS: Final = "extra_keys"
MISSING_TARGET: Final = "missing_target"
ROUTE_NOT_ALLOWED: Final = "route_not_allowed"
BAD_ARGS: Final = "bad_args"
REPEAT_TARGET_AFTER_REROUTE: Final = "repeat_target_after_reroute"
TOO_DEEP: Final = "too_deep"
TOO_LARGE: Final = "too_large"

# LLM families beyond the seed (seed: llm_timeout, llm_empty)
LLM_AUTH: Final = "llm_error:auth"
LLM_RATE_LIMITED: Final = "llm_error:rate_limited"
LLM_UPSTREAM: Final = "llm_error:upstream"
LLM_BAD_REQUEST: Final = "llm_error:bad_request"

_MAX_DETAIL = 64


def safe_detail(text: str) -> str:
    """Bound untrusted text for use inside a stop reason: printable, no ``:`` surprises, at most 64 chars."""
    cleaned = "".join(ch if ch.isprintable() and not ch.isspace() else "_" for ch in text)
    if len(cleaned) > _MAX_DETAIL:
        cleaned = cleaned[: _MAX_DETAIL - 1] + "…"
    return cleaned


def invalid_route(detail: str) -> str:
    return f"invalid_route:{detail}"


def route_not_allowed(target: str) -> str:
    return f"invalid_route:{ROUTE_NOT_ALLOWED}:{safe_detail(target)}"


def missing_arg(field: str) -> str:
    """``invalid_route:missing_<field>`` — ``invalid_route:missing_ticket`` for the specialists' ``ticket``, likewise for any required arg."""
    return f"invalid_route:missing_{safe_detail(field)}"


def route_denied(target: str) -> str:
    return f"route_denied:{safe_detail(target)}"


def route_denied_provenance(arg: str) -> str:
    """``route_denied:provenance:<arg>`` — an argument holds a value no source its flow rule allows holds."""
    return f"route_denied:provenance:{safe_detail(arg)}"


def route_denied_provenance_leak(arg: str) -> str:
    """``route_denied:provenance_leak:<arg>`` — an argument would carry data a ``NotFrom`` rule keeps out of it (a
    source's value, copied whole or embedded in a larger text)."""
    return f"route_denied:provenance_leak:{safe_detail(arg)}"


def route_denied_provenance_unchecked(why: str) -> str:
    """``route_denied:provenance_unchecked:<why>`` — an argument with a flow rule holds a value the matcher cannot
    check (``too_long``, ``too_large``, ``too_deep``, ``no_text``): refused, never passed unchecked."""
    return f"route_denied:provenance_unchecked:{safe_detail(why)}"


def output_denied(reason: str) -> str:
    """``output_denied:<reason>`` — the output check refused the final answer before it left."""
    return f"output_denied:{safe_detail(reason)}"


def route_missing(target: str) -> str:
    return f"route_missing:{safe_detail(target)}"


def route_bad_args(target: str) -> str:
    return f"route_bad_args:{safe_detail(target)}"


def route_error(target: str) -> str:
    return f"route_error:{safe_detail(target)}"


def router_error(exc: BaseException) -> str:
    """A router raised something that is not a stop signal (a bug in the router)."""
    return f"router_error:{type(exc).__name__}"


def finalize_error(exc: BaseException) -> str:
    """A finalizer raised something that is not a stop signal (a bug in the finalizer)."""
    return f"finalize_error:{type(exc).__name__}"

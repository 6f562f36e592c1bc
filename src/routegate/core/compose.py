"""The offline grounded composer: a clear final answer built only from the worker's observation.

It invents nothing: every fact in the answer is a field of the observation's ``result`` (or its ``error``),
so it is the safe default when no LLM is configured, and the reference an LLM finalizer is judged against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routegate.core.protocols import FinalizeRequest


def _humanize(key: str) -> str:
    words = key.replace("_", " ").strip()
    for unit in (" usd", " eur", " gbp"):
        if words.endswith(unit):
            words = words[: -len(unit)] + f" ({unit.strip().upper()})"
    return words


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return f"{value:.2f}"
    if isinstance(value, Mapping):
        return ", ".join(f"{_humanize(str(k))}: {_render(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "; ".join(_render(v) for v in value) or "none"
    return str(value)


def compose_answer(selected_route: str, observation: Mapping[str, Any]) -> str:
    """Turn one observation into a short answer: who handled it, the decision, and the reason given."""
    who = selected_route.replace("_", " ")
    error = observation.get("error")
    if error:
        return f"The {who} could not complete the request: {_render(error)}."
    result = observation.get("result")
    if not isinstance(result, Mapping):
        detail = _render(result) if result is not None else "no details were returned"
        return f"The {who} handled your request: {detail}."
    reason = result.get("reason")
    facts = [f"{_humanize(str(k))}: {_render(v)}" for k, v in result.items() if k != "reason"]
    answer = f"The {who} handled your request."
    if facts:
        answer += " " + "; ".join(facts) + "."
    if reason:
        answer += f" Reason: {_render(reason).rstrip('.')}."
    return answer


class GroundedComposer:
    """Finalizer that needs no model: see :func:`compose_answer`."""

    async def finalize(self, request: FinalizeRequest) -> str:
        return compose_answer(request.selected_route, request.observation)

"""Stop reasons of the technique handlers, in the core's ``family:detail`` form.

Refusals at the policy boundary and the gateway keep the core's own strings (``invalid_route:*``,
``route_denied:<t>``, ``max_delegations``...); these are the handlers' endings. Details built from untrusted
text go through :func:`routegate.core.stop_reasons.safe_detail`. The sandbox's own endings (``sandbox_*``) are
the supervisor's, defined in :mod:`routegate.sandbox.stop_reasons` and re-exported here unchanged.
"""

from __future__ import annotations

from routegate.core.stop_reasons import safe_detail
from routegate.sandbox import stop_reasons as _sandbox
from routegate.sandbox.stop_reasons import *  # noqa: F403  (the sandbox_* names, re-exported unchanged)


def tool_error(target: str) -> str:
    """The MCP server ran the tool and reported an error (``isError``) or refused the call."""
    return f"tool_error:{safe_detail(target)}"


def tool_schema_invalid(target: str) -> str:
    """The tool's declared ``inputSchema`` is not valid JSON Schema (or fails when applied): it is not called."""
    return f"tool_schema_invalid:{safe_detail(target)}"


def tool_timeout(target: str) -> str:
    """The MCP server did not answer the call within its timeout."""
    return f"tool_timeout:{safe_detail(target)}"


def tool_unavailable(server: str) -> str:
    """The MCP server could not be started or reached."""
    return f"tool_unavailable:{safe_detail(server)}"


def a2a_unavailable(agent: str) -> str:
    """Nobody on the bus serves the target agent."""
    return f"a2a_unavailable:{safe_detail(agent)}"


def a2a_timeout(agent: str) -> str:
    """The target agent did not reply within the reply timeout."""
    return f"a2a_timeout:{safe_detail(agent)}"


def a2a_failed(agent: str) -> str:
    """The target agent answered that the task failed."""
    return f"a2a_failed:{safe_detail(agent)}"


__all__ = [
    *_sandbox.__all__,
    "a2a_failed",
    "a2a_timeout",
    "a2a_unavailable",
    "tool_error",
    "tool_schema_invalid",
    "tool_timeout",
    "tool_unavailable",
]

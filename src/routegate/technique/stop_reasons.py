"""Stop reasons of the technique handlers, in the core's ``family:detail`` form.

Refusals at the policy boundary and the gateway keep the core's own strings (``invalid_route:*``,
``route_denied:<t>``, ``max_delegations``...); these are the handlers' endings. Details built from untrusted
text go through :func:`routegate.core.stop_reasons.safe_detail`.
"""

from __future__ import annotations

from typing import Final

from routegate.core.stop_reasons import safe_detail

SANDBOX_TIMEOUT_WALL: Final = "sandbox_timeout:wall"
SANDBOX_TIMEOUT_CPU: Final = "sandbox_timeout:cpu"
SANDBOX_MEMORY: Final = "sandbox_memory:limit"
SANDBOX_FILESIZE: Final = "sandbox_filesize:limit"
SANDBOX_NETWORK: Final = "sandbox_network:blocked"
SANDBOX_FILESYSTEM: Final = "sandbox_filesystem:write_outside"
SANDBOX_PROCESSES: Final = "sandbox_processes:limit"
SANDBOX_EXEC: Final = "sandbox_processes:exec_blocked"
SANDBOX_SIGNAL: Final = "sandbox_processes:signal_blocked"
SANDBOX_NATIVE: Final = "sandbox_native:blocked"
SANDBOX_INTROSPECTION: Final = "sandbox_introspection:blocked"
SANDBOX_UNAVAILABLE: Final = "sandbox_error:unavailable"
SANDBOX_SETUP_FAILED: Final = "sandbox_error:setup_failed"

VIOLATIONS: Final = {
    "network": SANDBOX_NETWORK,
    "filesystem": SANDBOX_FILESYSTEM,
    "processes": SANDBOX_PROCESSES,
    "exec": SANDBOX_EXEC,
    "signal": SANDBOX_SIGNAL,
    "native": SANDBOX_NATIVE,
    "introspection": SANDBOX_INTROSPECTION,
    "memory": SANDBOX_MEMORY,
    "filesize": SANDBOX_FILESIZE,
}
"""Kinds of refusal mapped to their stop reasons. Kept importable; nothing maps text the code printed through it
any more: the sandbox's verdicts come from its own observation (see ``routegate.technique.sandbox``)."""


def sandbox_exit(code: int) -> str:
    """The sandboxed program exited with a non-zero status (an uncaught exception exits with 1)."""
    return f"sandbox_exit:{code}"


def sandbox_signal(name: str) -> str:
    """The sandboxed program was killed by a signal that no limit explains (``SIGSEGV``...)."""
    return f"sandbox_signal:{safe_detail(name)}"


def sandbox_error(detail: str) -> str:
    """The sandbox could not run the code at all (no interpreter, unsupported language...)."""
    return f"sandbox_error:{safe_detail(detail)}"


def tool_error(target: str) -> str:
    """The MCP server ran the tool and reported an error (``isError``) or refused the call."""
    return f"tool_error:{safe_detail(target)}"


def tool_schema_invalid(target: str) -> str:
    """The tool's declared ``inputSchema`` is not valid JSON Schema (or fails when applied): it is not called."""
    return f"tool_schema_invalid:{safe_detail(target)}"


def tool_timeout(target: str) -> str:
    return f"tool_timeout:{safe_detail(target)}"


def tool_unavailable(server: str) -> str:
    """The MCP server could not be started or reached."""
    return f"tool_unavailable:{safe_detail(server)}"


def a2a_unavailable(agent: str) -> str:
    """Nobody on the bus serves the target agent."""
    return f"a2a_unavailable:{safe_detail(agent)}"


def a2a_timeout(agent: str) -> str:
    return f"a2a_timeout:{safe_detail(agent)}"


def a2a_failed(agent: str) -> str:
    """The target agent answered that the task failed."""
    return f"a2a_failed:{safe_detail(agent)}"

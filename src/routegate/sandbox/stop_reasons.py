"""Stop reasons of a sandboxed run, in the core's ``family:detail`` form (``sandbox_*``).

The supervisor's verdicts; :mod:`routegate.technique.stop_reasons` re-exports every name here unchanged. Details
built from untrusted text go through :func:`routegate.core.stop_reasons.safe_detail`.
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
any more: the sandbox's verdicts come from its own observation (see :mod:`routegate.sandbox.supervisor`)."""


def sandbox_exit(code: int) -> str:
    """The sandboxed program exited with a non-zero status (an uncaught exception exits with 1)."""
    return f"sandbox_exit:{code}"


def sandbox_signal(name: str) -> str:
    """The sandboxed program was killed by a signal that no limit explains (``SIGSEGV``...)."""
    return f"sandbox_signal:{safe_detail(name)}"


def sandbox_error(detail: str) -> str:
    """The sandbox could not run the code at all (no interpreter, unsupported language...)."""
    return f"sandbox_error:{safe_detail(detail)}"


__all__ = [
    "SANDBOX_EXEC",
    "SANDBOX_FILESIZE",
    "SANDBOX_FILESYSTEM",
    "SANDBOX_INTROSPECTION",
    "SANDBOX_MEMORY",
    "SANDBOX_NATIVE",
    "SANDBOX_NETWORK",
    "SANDBOX_PROCESSES",
    "SANDBOX_SETUP_FAILED",
    "SANDBOX_SIGNAL",
    "SANDBOX_TIMEOUT_CPU",
    "SANDBOX_TIMEOUT_WALL",
    "SANDBOX_UNAVAILABLE",
    "VIOLATIONS",
    "sandbox_error",
    "sandbox_exit",
    "sandbox_signal",
]

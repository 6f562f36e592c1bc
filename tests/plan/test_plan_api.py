"""The public surface of routegate.plan is pinned."""

from __future__ import annotations

from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.plan import MaxIterationsExceeded, PlanCompileError, PlanRuntimeError


def test_error_families() -> None:
    assert issubclass(PlanCompileError, ConfigurationError)
    assert issubclass(PlanRuntimeError, RuntimeFaultError) and issubclass(PlanRuntimeError, RuntimeError)
    assert issubclass(MaxIterationsExceeded, PlanRuntimeError)

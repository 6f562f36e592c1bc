"""The public surface is pinned: a change to it is a deliberate change to this test."""

from __future__ import annotations

import importlib.metadata

import routegate
import routegate.core


def test_top_level_exports_are_pinned() -> None:
    assert sorted(routegate.__all__) == sorted(
        [
            "Budget",
            "ConfigurationError",
            "FinalAnswer",
            "FinalizeRequest",
            "Finalizer",
            "RouteDecision",
            "RouteRequest",
            "Router",
            "RoutegateError",
            "RoutingAgent",
            "RunResult",
            "RunStopError",
            "RuntimeFaultError",
            "TicketArgs",
            "Worker",
            "WorkerArgs",
            "__version__",
            "worker",
        ]
    )
    for name in routegate.__all__:
        assert hasattr(routegate, name), name


def test_core_exports_resolve() -> None:
    for name in routegate.core.__all__:
        assert getattr(routegate.core, name) is not None, name


def test_version_comes_from_package_metadata() -> None:
    assert routegate.__version__ == importlib.metadata.version("routegate")

"""What a desk's configuration says about its routes, as the desk's router, its tools and its fitted layer read it:
the engine route each configured kind serves, the routes a desk has, their examples; which desk the settings name,
and the built-in desk's configuration (``builtin/desk.toml``), read once.

Each configured route has a kind, and a kind is one of the engine's four routes (``sql`` → POSTGRES, ``kb`` →
VECTOR, ``tool`` → EXTERNAL, ``llm`` → LLM).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Final

from routegate.apps.configured.config import DeskConfig, builtin_desk_dir, load_config
from routegate.apps.support.contracts import ROUTES, SupportRoute

if TYPE_CHECKING:
    from routegate.settings import Settings

KIND_ROUTE: Final[dict[str, SupportRoute]] = {"sql": "POSTGRES", "kb": "VECTOR", "tool": "EXTERNAL", "llm": "LLM"}
ABSENT_EXAMPLE: Final = "(this desk has no route of this kind)"
"""The one example of an engine route the desk does not have: never scored (the route is not in the catalog)."""


def desk_directory(settings: Settings) -> Path:
    """The desk ``settings`` name (``--desk`` / ``ROUTEGATE_DESK``), else the built-in desk's configuration."""
    return settings.desk if settings.desk is not None else builtin_desk_dir()


@lru_cache(maxsize=1)
def builtin_config() -> DeskConfig:
    """The built-in desk's configuration (:func:`~routegate.apps.configured.config.builtin_desk_dir`), read and
    checked once per process: the default of every part of the desk built from a configuration."""
    return load_config(builtin_desk_dir())


def present_routes(config: DeskConfig) -> tuple[SupportRoute, ...]:
    """The engine routes the desk has (a kind it has a configured route of), in the spec's priority order."""
    kinds = {KIND_ROUTE[r.kind] for r in config.routes}
    return tuple(r for r in ROUTES if r in kinds)


def route_examples(config: DeskConfig) -> dict[SupportRoute, tuple[str, ...]]:
    """Each engine route's examples: those of the configured routes of its kind (:data:`ABSENT_EXAMPLE` alone for a
    route the desk does not have)."""
    out: dict[SupportRoute, list[str]] = {r: [] for r in ROUTES}
    for route in config.routes:
        out[KIND_ROUTE[route.kind]] += route.examples
    return {r: tuple(dict.fromkeys(texts)) or (ABSENT_EXAMPLE,) for r, texts in out.items()}


def family_of(config: DeskConfig, table: str) -> str | None:
    """The configured route serving ``table`` (its family), for the trace."""
    return next((r.name for r in config.routes if table in r.tables), None)

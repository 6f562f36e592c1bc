"""``open_configured_desk`` and ``prime_configured_desk``, kept one release: the one factory of a desk, built-in or
configured, is :func:`routegate.apps.support.factory.open_support_desk` (``desk_dir=``), and
:func:`~routegate.apps.support.factory.prime_support_desk`."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from routegate.apps.configured.routes import desk_directory as desk_directory  # its home now
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk, prime_support_desk
from routegate.settings import Settings


@asynccontextmanager
async def open_configured_desk(settings: Settings, desk_dir: Path, **options: Any) -> AsyncIterator[SupportAgent]:
    """Deprecated: ``open_support_desk(settings, desk_dir, ...)``, the same desk (warns)."""
    warnings.warn(
        "open_configured_desk is deprecated: use routegate.apps.support.open_support_desk(settings, desk_dir, ...), "
        "the one factory of a desk. The name goes in the next release.",
        DeprecationWarning,
        stacklevel=3,
    )
    async with open_support_desk(settings, desk_dir, **options) as desk:
        yield desk


def prime_configured_desk(settings: Settings, url: str) -> None:
    """Deprecated: :func:`~routegate.apps.support.factory.prime_support_desk` (warns)."""
    warnings.warn(
        "prime_configured_desk is deprecated: use routegate.apps.support.factory.prime_support_desk. "
        "The name goes in the next release.",
        DeprecationWarning,
        stacklevel=2,
    )
    prime_support_desk(settings, url)

"""The names a configured desk had before it was the one desk work for one more release, each with a
DeprecationWarning naming what to use instead: ``ConfiguredDesk`` (now ``SupportAgent(config, desk_dir, ...)``),
``open_configured_desk`` (now ``open_support_desk``) and ``prime_configured_desk`` (now ``prime_support_desk``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from unittest import mock

import pytest

from routegate.apps.configured import ConfiguredDesk, load_config, open_configured_desk
from routegate.apps.configured.config import builtin_desk_dir
from routegate.apps.configured.factory import prime_configured_desk
from routegate.apps.support import SupportAgent
from routegate.apps.support.db import SupportDatabase
from routegate.embed import HashingEncoder
from routegate.settings import Settings


def test_a_configured_desk_is_the_one_desk_and_says_so() -> None:
    database = SupportDatabase("postgresql://nobody@127.0.0.1:9/none", schema="desk_state")  # never opened
    with pytest.warns(DeprecationWarning, match=r"ConfiguredDesk is deprecated: .*SupportAgent\(config, desk_dir"):
        desk = ConfiguredDesk(
            load_config(builtin_desk_dir()),
            builtin_desk_dir(),
            data=database,
            state=database,
            encoder=HashingEncoder(dim=8),
        )
    assert isinstance(desk, SupportAgent)
    assert desk.db is database and desk.data is database and desk.desk_dir == builtin_desk_dir()


def test_open_configured_desk_is_open_support_desk(tmp_path: Path) -> None:
    opened: list[Path] = []

    class Opened:
        async def __aenter__(self) -> str:
            return "the desk"

        async def __aexit__(self, *exc: object) -> None:
            return None

    def fake(settings: Settings, desk_dir: Path, **options: object) -> Opened:
        opened.append(desk_dir)
        return Opened()

    async def use() -> str:
        async with open_configured_desk(Settings(data_dir=tmp_path), tmp_path / "shop") as desk:
            return str(desk)

    deprecated = pytest.warns(DeprecationWarning, match="open_configured_desk is deprecated: use .*open_support_desk")
    with mock.patch("routegate.apps.configured.factory.open_support_desk", fake), deprecated:
        assert asyncio.run(use()) == "the desk"
    assert opened == [tmp_path / "shop"]


def test_prime_configured_desk_is_prime_support_desk(tmp_path: Path) -> None:
    deprecated = pytest.warns(DeprecationWarning, match="prime_configured_desk is deprecated: use .*prime_support_desk")
    with mock.patch("routegate.apps.configured.factory.prime_support_desk") as prime, deprecated:
        prime_configured_desk(Settings(data_dir=tmp_path), "postgresql://x")
    prime.assert_called_once()

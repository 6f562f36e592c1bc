"""Fixtures of the configured-desk tests: one embedded PostgreSQL per session, and the shop desk built only through
``routegate desk init`` (the command line) from ``examples/shop``."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from unittest import mock

import pytest

from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.embedded import EmbeddedPostgres
from routegate.apps.support.factory import open_support_desk
from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "shop"


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data")
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def encoder() -> MiniLMEncoder:
    enc = MiniLMEncoder()
    enc.warm_up()
    return enc


def desk_init(pg_url: str, data_dir: Path, *args: str) -> int:
    """``routegate desk init ...`` in this process, loading the SQL into the session's PostgreSQL."""
    env = {"DATABASE_URL": pg_url, "ROUTEGATE_DATA_DIR": str(data_dir)}
    with mock.patch.dict(os.environ, env):
        return main(["desk", "init", *args])


@pytest.fixture(scope="session")
def shop_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Path:
    """The shop desk as `desk init` writes it (the SQL file and the docs copied next to it first)."""
    base = tmp_path_factory.mktemp("shop")
    shutil.copy(SHOP / "shop.sql", base / "shop.sql")
    shutil.copytree(SHOP / "docs", base / "docs")
    assert (
        desk_init(pg_url, base, str(base / "shop"), "--from-sql", str(base / "shop.sql"), "--kb", str(base / "docs"))
        == 0
    )
    return base / "shop"


VICTIM_SECRET = "my card is 4111-SECRET-7777"


@pytest.fixture(scope="session")
def victim(pg_url: str, encoder: MiniLMEncoder, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The built-in desk, started on the session's PostgreSQL, with a session (``victim-session``) that told it
    :data:`VICTIM_SECRET`: what a desk built from someone else's files must not reach."""
    import asyncio

    from routegate.apps.configured.config import builtin_desk_dir

    settings = Settings(database_url=pg_url, data_dir=tmp_path_factory.mktemp("builtin"))

    async def tell() -> None:
        async with open_support_desk(settings, builtin_desk_dir(), encoder=encoder) as desk:
            await desk.ask(f"Hello, {VICTIM_SECRET}", session_id="victim-session")

    asyncio.run(tell())
    return VICTIM_SECRET


@pytest.fixture
async def shop(shop_dir: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path) -> AsyncIterator[SupportAgent]:
    settings = Settings(database_url=pg_url, data_dir=tmp_path)
    async with open_support_desk(settings, shop_dir, encoder=encoder) as desk:
        yield desk

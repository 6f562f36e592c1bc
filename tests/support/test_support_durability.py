"""Chat memory is written with durable commits unless asynchronous commit is asked for."""

from __future__ import annotations

import uuid

import pytest

from routegate.apps.support import factory
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.memory import MessageStore
from routegate.errors import ConfigurationError
from routegate.settings import Settings


async def _commit_mode(db: SupportDatabase) -> object:
    async with db.connection() as conn:
        row = await (await conn.execute("SELECT current_setting('synchronous_commit') AS s")).fetchone()
    assert row is not None
    return row["s"]


@pytest.mark.integration
async def test_the_desks_connections_commit_durably_by_default(db: SupportDatabase) -> None:
    assert db.asynchronous_commit is False
    await MessageStore(db).append("s", "user", "hello")
    assert await _commit_mode(db) == "on"


@pytest.mark.integration
async def test_asynchronous_commit_is_an_opt_in(pg_url: str, db: SupportDatabase) -> None:
    async with SupportDatabase(pg_url, schema=db.schema, asynchronous_commit=True) as fast:
        assert await _commit_mode(fast) == "off"
        store = MessageStore(fast)
        await store.append("s", "user", "hello")
        assert [m.content for m in await store.recent("s")] == ["hello"]


def test_the_setting_defaults_to_durable_and_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTEGATE_DB_ASYNCHRONOUS_COMMIT", raising=False)
    assert Settings().db_asynchronous_commit is False
    monkeypatch.setenv("ROUTEGATE_DB_ASYNCHRONOUS_COMMIT", "true")
    assert Settings().db_asynchronous_commit is True


def test_a_readable_table_name_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="readable table names must match"):
        SupportDatabase("postgresql://x", schema=f"t_{uuid.uuid4().hex[:8]}", readable_tables=frozenset({"a;b"}))


class _Stop(Exception):
    pass


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_the_desk_factory_passes_the_setting_to_the_pool(
    monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    seen: dict[str, object] = {}

    def record(url: str, **kwargs: object) -> SupportDatabase:
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(factory, "SupportDatabase", record)
    settings = Settings(database_url="postgresql://127.0.0.1:1/x", db_asynchronous_commit=asynchronous)
    with pytest.raises(_Stop):
        async with factory.open_support_desk(settings):
            pass
    assert seen["asynchronous_commit"] is asynchronous

"""The tenant travels with the turn, explicitly: concurrent turns of two tenants, started interleaved on one desk,
each take their database connections in their own tenant's place of the pool's fair queue (none as another
tenant, none as the anonymous one); and no module of the desk carries state sideways in a ContextVar."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

import routegate.apps
from routegate.apps.support.contracts import SupportEvent
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.core import FinalEvent
from routegate.embed import MiniLMEncoder

APPS = Path(routegate.apps.__file__).resolve().parent


def test_no_module_of_the_apps_uses_a_context_variable() -> None:
    found: list[str] = []
    for path in sorted(APPS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            named = (isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names)) or (
                isinstance(node, ast.ImportFrom) and node.module == "contextvars"
            )
            used = isinstance(node, ast.Name | ast.Attribute) and "ContextVar" in ast.unparse(node)
            if named or used:
                found.append(f"{path.relative_to(APPS)}:{getattr(node, 'lineno', '?')}")
    assert found == []


async def _events(stream: AsyncIterator[SupportEvent]) -> list[SupportEvent]:
    return [event async for event in stream]


@pytest.mark.integration
async def test_a_tenant_cannot_leak_across_concurrent_turns(
    pg_url: str,
    encoder: MiniLMEncoder,
    semantic: ExampleEmbeddingLayer,
    seeded_database: Callable[..., AbstractAsyncContextManager[SupportDatabase]],
) -> None:
    async with seeded_database(pg_url, encoder.dim, max_size=1) as db:
        desk = SupportAgent(db=db, encoder=encoder, semantic=semantic)
        await desk.start()
        turns = [("key:a", "a-1"), ("key:b", "b-1"), ("key:a", "a-2"), ("key:b", "b-2"), ("key:a", "a-3")]
        async with db.connection("holder"):  # the pool's one connection: every turn queues for it, in its tenant's line
            streams = [desk.iter("What is the status of ticket 1?", session_id=s, tenant=t) for t, s in turns]
            tasks = [asyncio.create_task(_events(stream)) for stream in streams]
            async with asyncio.timeout(60):
                while db.waiting() < len(turns):  # noqa: ASYNC110 - the fair queue has no event to wait on
                    await asyncio.sleep(0.01)  # until every turn waits for a connection
            assert (db.waiting("key:a"), db.waiting("key:b"), db.waiting(ANONYMOUS)) == (3, 2, 0)
        finished = await asyncio.gather(*tasks)
    for events in finished:
        last = events[-1]
        assert isinstance(last, FinalEvent) and last.result.stop_reason == "success", events
        assert "Login not working" in last.result.answer

"""The history read that comes with a session lock's take (``<schema>.support_history``) runs with its own search
path: on a database where other roles may create in ``public`` (every database before PostgreSQL 15), another role's
overload of a function or operator it calls never runs as the desk's login, with the session's messages.

The attacker here is a second, unprivileged login that was granted CREATE on ``public`` (what a pre-15 database
grants every role): it creates a better-matching overload of ``jsonb_build_array`` that records its arguments into
a table of its own, then waits for the desk's next lock take. The effect is read from the catalog: the table.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.memory import MessageStore

pytestmark = pytest.mark.integration

_OVERLOADS = (
    # the exact types the history read passes: a better match than pg_catalog's VARIADIC "any"
    "CREATE FUNCTION public.jsonb_build_array(text, text, float8, jsonb) RETURNS jsonb LANGUAGE sql AS $$"
    " INSERT INTO public.{loot} VALUES ('jsonb_build_array', $1 || ': ' || $2);"
    " SELECT pg_catalog.jsonb_build_array($1, $2, $3, $4) $$",
    # and the comparison of the session's id, an operator found on the search path too
    "CREATE FUNCTION public.{loot}_eq(text, text) RETURNS boolean LANGUAGE sql AS $$"
    " INSERT INTO public.{loot} VALUES ('=', $2); SELECT pg_catalog.texteq($1, $2) $$",
    "CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.{loot}_eq)",
)


@pytest.fixture
async def intruder(pg_url: str) -> AsyncIterator[str]:
    """A login that may create in ``public`` and has planted overloads there; yields its loot table's name."""
    role, loot = f"intruder_{uuid.uuid4().hex[:8]}", f"loot_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        await admin.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(role)))
    as_intruder = make_conninfo(**{**conninfo_to_dict(pg_url), "user": role})
    try:
        async with await psycopg.AsyncConnection.connect(as_intruder, autocommit=True) as conn:
            await conn.execute(sql.SQL("CREATE TABLE public.{} (what text, seen text)").format(sql.Identifier(loot)))
            await conn.execute(sql.SQL("GRANT INSERT ON public.{} TO PUBLIC").format(sql.Identifier(loot)))
            for statement in _OVERLOADS:
                await conn.execute(statement.replace("{loot}", loot))
        yield loot
    finally:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
            await admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
            await admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_another_roles_overloads_in_public_never_run_in_the_history_read(
    db: SupportDatabase, pg_url: str, intruder: str
) -> None:
    session = f"secret-{uuid.uuid4().hex[:8]}"
    store = MessageStore(db, limit=4)
    async with store.hold(session, within=10.0):
        await store.extend(session, [("user", "my card is 4111 1111 1111 1111"), ("assistant", "noted")])
    # another process of the desk (its own locks' connection): its next take reads the history
    async with SupportDatabase(db.url, schema=db.schema, min_size=1, max_size=1) as other:
        reader = MessageStore(other, limit=4)
        async with reader.hold(session, within=10.0):
            history = await reader.recent(session)
    assert [(m.role, m.content) for m in history] == [
        ("user", "my card is 4111 1111 1111 1111"),
        ("assistant", "noted"),
    ]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        cur = await admin.execute(sql.SQL("SELECT what, seen FROM public.{}").format(sql.Identifier(intruder)))
        assert await cur.fetchall() == [], "another role's overload ran as the desk's login with the session's data"

"""The SQL tool is bounded in bytes and in time at the server, measured from outside.

An allowed query can be huge: a recursive CTE that doubles a string, cross-joined with ``customers``, returns
about 50 MB here (hundreds of MB with a few more doublings) well within its timeout. Through the public path
(``PostgresTool.run``, the desk) the result must come back cut and saying so, the desk's memory must not grow with
it (read from ``/proc/<pid>/status`` of a desk process, from outside), and the prompt a chat model receives must
stay bounded. A statement the server does not stop in time is cancelled by the client's deadline.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql
from pydantic import ValidationError

from routegate.apps.support import postgres_tool as postgres_tool_module
from routegate.apps.support.contracts import ToolUsed
from routegate.apps.support.db import READER_ROLE, SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.errors import ToolError
from routegate.apps.support.factory import open_support_desk
from routegate.apps.support.postgres_tool import CALL_MARGIN_SECONDS, DEADLINE_GRACE_SECONDS, PostgresTool
from routegate.apps.support.respond import MAX_EVIDENCE_CHARS, evidence_json
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.apps.support.sqlguard import CheckedQuery
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings
from routegate.testing import ScriptedChatModel
from support.turn_events import final_of

# 2^23 characters in its longest row, about 50 MB of text in all (72 rows): allowed by the guard
DOUBLING = (
    "WITH RECURSIVE t(s, n) AS (SELECT 'x', 0 UNION ALL SELECT s || s, n + 1 FROM t WHERE n < 23) "
    "SELECT t.s FROM t, customers"
)
# generous: the point is the bytes, not the time, on a machine shared with other work
LONG_TIMEOUT_MS = 60_000
RSS_GROWTH_BOUND_MIB = 40
MARGIN_SECONDS = 2.0  # a behaviour check (cancelled, not left running), not a performance threshold


# -- bytes ------------------------------------------------------------------------------------------------
@pytest.mark.integration
async def test_a_huge_allowed_result_is_cut_at_the_server_and_says_so(db: SupportDatabase) -> None:
    tool = PostgresTool(db, statement_timeout_ms=LONG_TIMEOUT_MS, max_bytes=16 * 1024, max_field_chars=500)
    result = await tool.run(DOUBLING)
    out = result.to_dict()
    assert result.truncated and out["truncated"] is True
    assert "16384-byte cap" in out["truncation"] and "500 characters" in out["truncation"]
    assert 0 < result.row_count < 72
    assert all(len(row["s"]) <= 500 for row in result.rows)
    # the byte cap counts each row's values as JSON text (what PostgreSQL sends), the column names apart
    assert sum(len(json.dumps(list(row.values()), separators=(",", ":"))) for row in result.rows) <= 16 * 1024
    assert [len(row["s"]) for row in result.rows[:6]] == [1, 1, 1, 2, 2, 2]  # the query's own order is kept


@pytest.mark.integration
async def test_the_row_cap_is_applied_by_the_server_and_named(db: SupportDatabase) -> None:
    result = await PostgresTool(db, row_cap=2).run("SELECT id, name FROM customers ORDER BY id")
    assert [row["id"] for row in result.rows] == [1, 2]
    assert result.to_dict()["truncation"] == "only the first 2 rows (row cap)"


@pytest.mark.integration
async def test_values_keep_their_json_types_and_names(db: SupportDatabase) -> None:
    result = await PostgresTool(db).run(
        "SELECT id, name, id > 1 AS big, NULL AS z, round(id / 3.0, 2) AS third, 2.50 AS price "
        "FROM customers ORDER BY id LIMIT 1"
    )
    assert result.to_dict() == {
        "rows": [{"id": 1, "name": "John Doe", "big": False, "z": None, "third": 0.33, "price": 2.5}],
        "row_count": 1,
        "truncated": False,
    }


@pytest.mark.integration
@pytest.mark.parametrize("char", ["x", "é", "€", "😀"])
async def test_a_value_is_cut_by_characters_not_bytes(db: SupportDatabase, char: str) -> None:
    tool = PostgresTool(db, max_field_chars=16)
    fits = await tool.run(f"SELECT '{char * 16}' AS s FROM customers WHERE id = 1")
    assert fits.rows == ({"s": char * 16},) and not fits.truncated
    cut = await tool.run(f"SELECT '{char * 17}' AS s, 7 AS n FROM customers WHERE id = 1")
    assert cut.rows == ({"s": char * 16, "n": 7},)
    assert cut.truncation == "values longer than 16 characters were cut to that length"


_CHILD = """
import asyncio, json, sys
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.postgres_tool import PostgresTool

async def main(url: str, schema: str, role: str, query: str) -> None:
    async with SupportDatabase(url, schema=schema, min_size=1, max_size=1) as db:
        db.reader_role = role or None
        tool = PostgresTool(db, statement_timeout_ms=int(sys.argv[5]))
        await tool.run("SELECT id FROM customers")  # warm: imports, the column catalog, the pooled connection
        print("ready", flush=True)
        sys.stdin.readline()
        result = await tool.run(query)
        text = json.dumps(result.to_dict())
        print(json.dumps({"rows": result.row_count, "truncated": result.truncated, "chars": len(text)}), flush=True)
        sys.stdin.readline()

asyncio.run(main(*sys.argv[1:5]))
"""


def _peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), read from outside it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
async def test_the_desk_process_memory_does_not_grow_with_the_result(db: SupportDatabase, pg_url: str) -> None:
    assert db.reader_role == READER_ROLE
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        pg_url,
        db.schema,
        READER_ROLE,
        DOUBLING,
        str(LONG_TIMEOUT_MS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        async with asyncio.timeout(240):
            assert (await child.stdout.readline()).strip() == b"ready"
            before = _peak_rss_mib(child.pid)
            child.stdin.write(b"go\n")
            await child.stdin.drain()
            summary = json.loads(await child.stdout.readline())
            after = _peak_rss_mib(child.pid)
            child.stdin.write(b"exit\n")
            await child.stdin.drain()
            assert await child.wait() == 0
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert summary["truncated"] is True
    assert summary["chars"] < 128 * 1024  # what the desk holds: about the 64 KiB byte cap, not ~50 MB
    assert after - before < RSS_GROWTH_BOUND_MIB, f"peak RSS grew {after - before:.1f} MiB (from {before:.1f})"


@pytest.mark.integration
@pytest.mark.parametrize("sql_max_bytes", [64 * 1024, 8 * 1024 * 1024])
async def test_a_steered_text_to_sql_model_cannot_flood_the_answer_prompt(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, sql_max_bytes: int
) -> None:
    """The model is steered to the doubling query; the prompt the answering model receives stays bounded, whether
    the tool's byte cap or (when that cap is set high) the answer's evidence bound is the one that cuts."""
    model = ScriptedChatModel([json.dumps({"query": DOUBLING, "params": {}}), "Here is what I found."])
    desk = SupportAgent(
        db=db,
        encoder=encoder,
        semantic=semantic,
        chat_model=model,
        statement_timeout_ms=LONG_TIMEOUT_MS,
        sql_max_bytes=sql_max_bytes,
    )
    await desk.start()
    events = [e async for e in desk.iter("Show tickets for customer John", session_id=f"flood-{sql_max_bytes}")]
    final = final_of(events)
    assert final.route == "POSTGRES" and final.fallback is None
    model.assert_consumed()
    received = model.calls[1].messages
    prompt_chars = sum(len(m["content"]) for m in received)
    evidence_text = received[-1]["content"].split("Evidence (JSON):\n", 1)[1]
    assert len(evidence_text) <= MAX_EVIDENCE_CHARS
    assert prompt_chars <= MAX_EVIDENCE_CHARS + 10_000, prompt_chars
    evidence = json.loads(evidence_text)
    assert evidence["result"]["truncated"] is True and evidence["result"]["truncation"]
    # the trace and the tool event say the result was cut
    assert any(note.get("node") == "postgres" and note.get("truncated") for note in final.notes)
    tool = next(e for e in events if isinstance(e, ToolUsed))
    assert tool.summary.endswith("(truncated)")


@pytest.mark.integration
async def test_the_offline_answer_says_the_result_was_cut(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, row_cap=1)
    await desk.start()
    result = await desk.ask("Show all tickets", session_id="cut-answer")
    assert result.route == "POSTGRES"
    assert "This is not the whole result: only the first 1 rows (row cap)." in result.answer


_ROWS = st.lists(st.dictionaries(st.sampled_from(["id", "name", "issue"]), st.integers() | st.text()), max_size=60)


@settings(max_examples=200, deadline=None)
@given(_ROWS, st.integers(min_value=1000, max_value=5000))
def test_the_answer_prompts_evidence_is_bounded(rows: list[dict[str, object]], limit: int) -> None:
    evidence = {"route": "POSTGRES", "call": {"query": "SELECT 1"}, "result": {"rows": rows, "row_count": len(rows)}}
    text = evidence_json(evidence, limit)
    assert len(text) <= limit
    whole = json.dumps(evidence, ensure_ascii=False)
    if len(whole) <= limit:
        assert text == whole
    else:  # rows left out, and the result says so
        cut = json.loads(text)["result"]
        assert cut["truncated"] is True and "evidence bound" in cut["truncation"]
        assert cut["rows"] == rows[: len(cut["rows"])]


# -- time -------------------------------------------------------------------------------------------------
@pytest.mark.integration
async def test_a_heavy_allowed_query_ends_at_its_timeout(db: SupportDatabase) -> None:
    tool = PostgresTool(db, statement_timeout_ms=300)
    joins = ", ".join(f"customers c{i}" for i in range(18))  # 3^18 rows to count
    started = time.monotonic()
    with pytest.raises(ToolError) as failed:
        await tool.run(f"SELECT count(*) FROM {joins}")
    elapsed = time.monotonic() - started
    assert failed.value.code == "statement_timeout"
    assert elapsed < 0.3 + DEADLINE_GRACE_SECONDS + MARGIN_SECONDS, elapsed


class _NoServerTimeout(PostgresTool):
    """The tool with PostgreSQL's own ``statement_timeout`` left out: only the client's deadline can end a statement."""

    def _settings(self) -> sql.Composed:
        return sql.Composed([sql.SQL("SELECT 'no statement_timeout'")])


async def _running(admin_url: str, marker: str) -> int:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
            (f"%{marker}%",),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.integration
async def test_the_client_deadline_cancels_a_statement_the_server_does_not_stop(
    db: SupportDatabase, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = "pg_sleep(30.5)"  # a test-only statement, past the guard: the deadline is what is tested

    def passthrough(query: object, params: object = None, **_: object) -> CheckedQuery:
        return CheckedQuery(sql=str(query), params=None, tables=frozenset())

    monkeypatch.setattr(postgres_tool_module, "check_sql", passthrough)
    tool = _NoServerTimeout(db, statement_timeout_ms=500)
    started = time.monotonic()
    with pytest.raises(ToolError) as failed:
        await tool.run(f"SELECT {marker}")
    elapsed = time.monotonic() - started
    assert failed.value.code == "statement_timeout"
    assert tool.deadline_seconds <= elapsed < tool.deadline_seconds + MARGIN_SECONDS, elapsed
    assert await _running(pg_url, marker) == 0  # cancelled on the server, not left running
    assert (await tool.run("SELECT 1 AS one")).rows == ({"one": 1},)  # and the pool's connection is usable


# a statement PostgreSQL cannot end at once, allowed by the guard: a recursive CTE doubles a string to 8 MB, then
# one expression applies length() to it 150 times; the server checks for a cancel (or its own timeout) between
# steps of work, never inside one expression's function calls, so it ends seconds after statement_timeout
UNINTERRUPTIBLE = (
    "WITH RECURSIVE t(s, n) AS (SELECT 'x', 0 UNION ALL SELECT s || s, n + 1 FROM t WHERE n < 23) "
    "SELECT " + "+".join(["length(s)"] * 150) + " AS total FROM t WHERE n = 23"
)


async def _tool_statements(admin_url: str) -> int:
    """The SQL tool's bounded statements PostgreSQL is running now (they start with its ``rg_rows`` CTE)."""
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
            ('%"rg_rows"%',),
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_the_call_ends_at_its_deadline_while_the_server_ends_a_step_it_cannot_interrupt(
    db: SupportDatabase, pg_url: str
) -> None:
    tool = PostgresTool(db, statement_timeout_ms=1000)
    started = time.monotonic()
    with pytest.raises(ToolError) as failed:
        await tool.run(UNINTERRUPTIBLE)
    elapsed = time.monotonic() - started
    assert failed.value.code == "statement_timeout"
    # the call did not wait for the server: the statement was still running when it ended
    assert await _tool_statements(pg_url) == 1
    assert elapsed < 1.0 + CALL_MARGIN_SECONDS + MARGIN_SECONDS, elapsed
    # the cancel is pending on the server: the statement ends at its next check, and its connection comes back
    await tool.drained()
    assert await _tool_statements(pg_url) == 0
    assert (await tool.run("SELECT 1 AS one")).rows == ({"one": 1},)


# -- settings ---------------------------------------------------------------------------------------------
def test_the_bounds_are_settings_with_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROWS", "BYTES", "FIELD_CHARS"):
        monkeypatch.delenv(f"ROUTEGATE_SQL_MAX_{name}", raising=False)
    monkeypatch.delenv("ROUTEGATE_SQL_STATEMENT_TIMEOUT_MS", raising=False)
    defaults = Settings()
    assert (defaults.sql_max_rows, defaults.sql_max_bytes, defaults.sql_max_field_chars) == (100, 65536, 2000)
    assert defaults.sql_statement_timeout_ms == 2000
    monkeypatch.setenv("ROUTEGATE_SQL_MAX_BYTES", "4096")
    monkeypatch.setenv("ROUTEGATE_SQL_MAX_FIELD_CHARS", "100")
    configured = Settings()
    assert (configured.sql_max_bytes, configured.sql_max_field_chars) == (4096, 100)
    monkeypatch.setenv("ROUTEGATE_SQL_MAX_BYTES", "10")
    with pytest.raises(ValidationError, match="sql_max_bytes"):
        Settings()


@pytest.mark.integration
@pytest.mark.usefixtures("fitted")  # the router's layer, fitted once into data_dir
async def test_the_desk_built_from_settings_uses_the_sql_bounds(
    pg_url: str, data_dir: Path, encoder: MiniLMEncoder
) -> None:
    configured = Settings(
        database_url=pg_url, data_dir=data_dir, sql_max_rows=2, sql_max_field_chars=16, sql_statement_timeout_ms=1500
    )
    schema = f"t_{uuid.uuid4().hex[:12]}"
    async with open_support_desk(configured, encoder=encoder, schema=schema) as desk:
        try:
            result = await desk.postgres.run("SELECT id, 'abcdefghijklmnopqrstuvwxyz' AS s FROM customers ORDER BY id")
            assert result.rows == ({"id": 1, "s": "abcdefghijklmnop"}, {"id": 2, "s": "abcdefghijklmnop"})
            assert result.truncation == (
                "only the first 2 rows (row cap); values longer than 16 characters were cut to that length"
            )
            assert desk.postgres.deadline_seconds == 1.5 + DEADLINE_GRACE_SECONDS
        finally:
            async with desk.db.connection() as conn:
                await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

"""The shop desk end to end, offline: built only through ``routegate desk init`` from ``examples/shop`` (a SQL
file and a returns / shipping docs folder), asked through the public desk contract."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.sqlguard import SqlRefusedError

ROUTES = Path(__file__).resolve().parents[1] / "data" / "shop_routes.jsonl"


def _session() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_routing_accuracy_on_the_labelled_shop_questions(shop: SupportAgent) -> None:
    rows = [json.loads(line) for line in ROUTES.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 100
    examples = {e.lower() for r in shop.config.routes for e in r.examples}
    assert not [r["text"] for r in rows if r["text"].lower() in examples]  # none is a generated example
    wrong = [(r["text"], r["route"], (await shop.route(r["text"])).route) for r in rows]
    wrong = [w for w in wrong if w[1] != w[2]]
    accuracy = 1 - len(wrong) / len(rows)
    assert accuracy >= 0.93, (accuracy, wrong)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the status of order 1042?", "Order 1042: status is open."),
        ("Which country is Maria Garcia from?", "Maria Garcia (customer 1): country is Spain."),
        ("Who placed order 1044?", "Amara Okafor (customer 4)"),
        ("How many orders are open?", "There are 3 orders"),
        ("How many orders does Liam Murphy have?", "There are 2 orders"),
        ("How many orders does Yuki Tanaka have?", "There is 1 order (orders of customer “Yuki Tanaka”)."),
        ("How much is the Trail Backpack?", "Trail Backpack (product 101): price is 89."),
        ("What is the email address of customer 4?", "email is amara@example.com"),
        ("Which products are in the outdoor category?", "I found 3 products"),
        ("How many customers are from Spain?", "There is 1 customer (customers with country Spain)."),
        ("List the customers in Dublin", "Liam Murphy (customer 2): city is Dublin."),
    ],
)
async def test_answers_name_the_right_rows(shop: SupportAgent, question: str, expected: str) -> None:
    result = await shop.ask(question, session_id=_session())
    assert result.route == "POSTGRES" and result.stop_reason == "success"
    assert expected in result.answer


async def test_children_along_a_foreign_key_are_the_customers_orders(shop: SupportAgent) -> None:
    result = await shop.ask("Show orders for customer Maria", session_id=_session())
    assert "Order 1040" in result.answer and "Order 1042" in result.answer
    assert "Order 1041" not in result.answer  # Liam's
    tool = next(t for t in result.notes if t.get("node") == "postgres")
    assert tool["call"]["template"] == "children" and tool["call"]["route"] == "orders"


async def test_a_follow_up_takes_the_person_from_the_conversation(shop: SupportAgent) -> None:
    session = _session()
    await shop.ask("Which country is Maria Garcia from?", session_id=session)
    result = await shop.ask("And which city is she from?", session_id=session)
    assert result.route == "POSTGRES"
    assert "Madrid" in result.answer


async def test_an_unknown_id_is_said_not_found(shop: SupportAgent) -> None:
    result = await shop.ask("What is the status of order 9999?", session_id=_session())
    assert result.fallback == "empty" and "couldn't find order 9999" in result.answer


async def test_a_count_for_an_unknown_name_is_not_a_zero(shop: SupportAgent) -> None:
    result = await shop.ask("How many orders does Zed Nobody have?", session_id=_session())
    assert result.fallback == "empty" and "There" not in result.answer


@pytest.mark.parametrize(
    ("question", "source", "quote"),
    [
        ("How long does shipping take?", "docs/shipping.md", "3 to 5 business days"),
        ("Can I return socks?", "docs/returns.md", "only be returned if the pack is still sealed"),
        ("How do I make a warranty claim?", "docs/warranty.html", "Send a photo of the defect"),
        ("Can I pay with PayPal?", "docs/payments.txt", "PayPal"),
    ],
)
async def test_the_knowledge_base_quotes_the_best_chunk_and_names_its_file(
    shop: SupportAgent, question: str, source: str, quote: str
) -> None:
    result = await shop.ask(question, session_id=_session())
    assert result.route == "VECTOR" and result.stop_reason == "success"
    assert result.answer.startswith(f"From {source}")
    assert quote in result.answer


async def test_the_chat_route_says_what_this_desk_can_do(shop: SupportAgent) -> None:
    result = await shop.ask("What can you do?", session_id=_session())
    assert result.route == "LLM"
    assert "shop desk" in result.answer and "orders" in result.answer
    assert "ticket" not in result.answer  # not the built-in desk's wording


@pytest.mark.parametrize(
    "query",
    [
        "SELECT password_hash FROM customers",  # a column left out of the allowlist by desk init
        "SELECT c.password_hash FROM customers c WHERE c.id = 1",
        "SELECT * FROM support_messages",  # the desk's own state
        "SELECT * FROM kb_chunks",
        "SELECT * FROM pg_catalog.pg_authid",
        "SELECT * FROM desk_shop_state.support_messages",
        "DELETE FROM orders",
    ],
)
async def test_the_guard_refuses_what_the_allowlist_excludes(shop: SupportAgent, query: str) -> None:
    with pytest.raises(SqlRefusedError):
        await shop.sql.run(query)


async def test_the_reader_role_cannot_read_the_excluded_column_either(shop: SupportAgent) -> None:
    """Below the guard: the desk's reader role has SELECT on the readable columns only."""
    import psycopg

    role = shop.data.reader_role
    assert role is not None
    async with shop.data.connection() as conn, conn.transaction(force_rollback=True):
        await conn.execute(f'SET LOCAL ROLE "{role}"')
        await conn.execute('SELECT "email" FROM desk_shop."customers"')
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute('SELECT "password_hash" FROM desk_shop."customers"')


async def test_a_star_select_sees_only_the_readable_columns(shop: SupportAgent) -> None:
    result = await shop.sql.run("SELECT * FROM customers WHERE id = 1")
    assert result.rows and "password_hash" not in result.rows[0] and result.rows[0]["name"] == "Maria Garcia"


async def test_the_http_server_runs_the_configured_desk(shop: SupportAgent, pg_url: str, tmp_path: Path) -> None:
    """``serve --desk`` builds the same app on the configured desk: /v1 and /healthz answer from the shop."""
    import httpx

    from routegate.server import create_app
    from routegate.settings import Settings

    app = create_app(desk=shop, settings=Settings(database_url=pg_url, data_dir=tmp_path))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://desk") as client:
        health = await client.get("/healthz")
        assert health.status_code == 200 and health.json()["database"] == "ok"
        body = {"model": "routegate", "messages": [{"role": "user", "content": "What is the status of order 1041?"}]}
        reply = await client.post("/v1/chat/completions", json=body)
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"] == "Order 1041: status is shipped."

"""Answers a person would write: a row is said by its name and the names it links to, never by the ids that only
link rows (unless the question asked for one), and the example questions ``desk init`` writes are grammatical —
on the shop example, on the demo desk as ``desk init`` makes it from its data, and on a gym desk like the one the
issue was found with."""

from __future__ import annotations

import re
import shutil
import tomllib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from routegate.apps.configured.config import DeskConfig, builtin_desk_dir
from routegate.apps.configured.words import column_question, fact, filter_questions
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .conftest import desk_init

_ID = re.compile(r"\b(?:id|[a-z]+ id)\b")


def _session() -> str:
    return uuid.uuid4().hex[:10]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (
            "show order 1042",
            "Order 1042, customer Maria Garcia: status is open, ordered on 2026-11-20, total is 79.89.",
        ),
        ("show order item 4", "Order item 4, product Camping Stove: quantity is 1."),
        (
            "list the order items of order 1042",
            "I found 2 order items:\n- Order item 4: product Camping Stove, quantity 1\n"
            "- Order item 5: product Headlamp, quantity 1",
        ),
    ],
)
async def test_shop_rows_name_what_matters_not_their_ids(shop: SupportAgent, question: str, answer: str) -> None:
    result = await shop.ask(question, session_id=_session())
    assert result.route == "POSTGRES" and result.answer == answer
    assert not _ID.search(result.answer)


async def test_an_id_the_question_asks_for_is_said(shop: SupportAgent) -> None:
    result = await shop.ask("What is the customer id of order 1042?", session_id=_session())
    assert result.answer == "Order 1042: customer id is 1."


def test_shop_example_questions_are_grammatical(shop_dir: Path) -> None:
    routes = {r["name"]: r["examples"] for r in tomllib.loads((shop_dir / "desk.toml").read_text())["routes"]}
    assert "how many products have category accessories" in routes["products"]
    assert "list products with category outdoor" in routes["products"]
    assert "how many orders are cancelled" in routes["orders"]  # a state reads as one
    assert not [e for e in routes["products"] if re.search(r"how many products are (?!there)", e)]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Path:
    """The demo desk's data and documents, as ``desk init`` configures them (no hand-written templates)."""
    base = tmp_path_factory.mktemp("demo")
    shutil.copy(builtin_desk_dir() / "support.sql", base / "support.sql")
    shutil.copytree(builtin_desk_dir() / "docs", base / "docs")
    assert (
        desk_init(pg_url, base, str(base / "demo"), "--from-sql", str(base / "support.sql"), "--kb", str(base / "docs"))
        == 0
    )
    return base / "demo"


@pytest.fixture
async def demo(demo_dir: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path) -> AsyncIterator[SupportAgent]:
    async with open_support_desk(Settings(database_url=pg_url, data_dir=tmp_path), demo_dir, encoder=encoder) as d:
        yield d


async def test_demo_rows_name_the_customer_not_the_customer_id(demo: SupportAgent) -> None:
    result = await demo.ask("show ticket 1", session_id=_session())
    assert result.answer == "Ticket 1, customer John Doe: issue is Login not working, status is open."
    listed = await demo.ask("list open tickets", session_id=_session())
    assert listed.answer == (
        "I found 2 tickets:\n- Ticket 1: customer John Doe, issue Login not working, status open\n"
        "- Ticket 3: customer Jane Smith, issue Billing question, status open"
    )


def test_demo_example_questions_are_grammatical(demo_dir: Path) -> None:
    routes = {r["name"]: r["examples"] for r in tomllib.loads((demo_dir / "desk.toml").read_text())["routes"]}
    assert "how many tickets are closed" in routes["tickets"] or "how many tickets are open" in routes["tickets"]
    assert "what is the city of customer 1" in routes["customers"]


GYM: dict[str, Any] = {
    "desk": {"name": "gym"},
    "database": {"source": "url", "schema": "public"},
    "tables": [
        {
            "name": "coaches",
            "label": "coach",
            "plural": "coaches",
            "primary_key": "id",
            "name_column": "name",
            "columns": ["id", "name"],
        },
        {
            "name": "classes",
            "label": "class",
            "plural": "classes",
            "primary_key": "id",
            "name_column": "title",
            "columns": ["id", "title", "coach_id", "weekday", "starts_at"],
            "foreign_keys": [{"column": "coach_id", "references": "coaches", "ref_column": "id"}],
        },
        {
            "name": "members",
            "label": "member",
            "plural": "members",
            "primary_key": "id",
            "name_column": "name",
            "columns": ["id", "name", "city"],
        },
        {
            "name": "bookings",
            "label": "booking",
            "plural": "bookings",
            "primary_key": "id",
            "columns": ["id", "member_id", "class_id", "booked_on"],
            "foreign_keys": [
                {"column": "member_id", "references": "members", "ref_column": "id"},
                {"column": "class_id", "references": "classes", "ref_column": "id"},
            ],
        },
    ],
    "routes": [{"name": "chat", "kind": "llm"}],
}


def _said(table: str, row: dict[str, Any], focus: tuple[str, ...] = ()) -> str:
    answers = DeskAnswers(DeskConfig.model_validate(GYM))
    return answers.rows({"template": "by_id", "table": table, "focus": focus}, [row])


def test_the_gym_desk_says_its_rows_as_the_issue_asked() -> None:
    spin = {"id": 2, "title": "Spin Blast", "coach_id": 7, "weekday": "Tuesday", "starts_at": "18:00", "coach": "Marco"}
    assert _said("classes", spin) == "Spin Blast (class 2), coach Marco: weekday is Tuesday, starts at 18:00."
    booking = {
        "id": 1,
        "member_id": 1,
        "class_id": 1,
        "booked_on": "2026-11-30",
        "member": "Alice Martin",
        "class": "Spin Blast",
    }
    assert _said("bookings", booking) == "Booking 1, member Alice Martin, class Spin Blast: booked on 2026-11-30."
    assert _said("bookings", booking, ("member_id",)) == "Booking 1: member id is 1."
    assert _said("bookings", {**booking, "member": None}) == "Booking 1, class Spin Blast: booked on 2026-11-30."


def test_generated_questions_read_as_questions() -> None:
    assert filter_questions("city", "Istanbul", "members", "Ankara") == (
        "how many members are in Istanbul",
        "list members in Ankara",
    )
    assert filter_questions("status", "open", "orders", "closed") == ("how many orders are open", "list closed orders")
    assert filter_questions("level", "beginner", "classes", "advanced") == (
        "how many classes have level beginner",
        "list classes with level advanced",
    )
    assert column_question("ordered_on", "order 1040") == "when was order 1040 ordered"
    assert column_question("weekday", "class 2") == "what is the weekday of class 2"
    assert fact("starts_at", "18:00") == "starts at 18:00" and fact("weekday", "Tuesday") == "weekday is Tuesday"

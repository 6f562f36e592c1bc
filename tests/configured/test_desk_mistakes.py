"""A mistake in a desk's name or its desk.toml says the name that was meant: a desk directory beside a mistyped one
(``--desk gmy`` when ``gym/`` exists), a field, a table, a column, a template's field; and every message about the
file starts with its path (``gym/desk.toml: ...``), the checks against the database's tables included."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli._env import RUN_CLI, offline_env
from routegate.apps.configured.config import DeskConfigError, load_config
from routegate.apps.support.factory import open_support_desk
from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

from .test_desk_config import GOOD, _desk


def _refused(desk: Path) -> str:
    with pytest.raises(DeskConfigError) as caught:
        load_config(desk)
    return str(caught.value)


# -- the desk directory ----------------------------------------------------------------------------------------------
def test_a_mistyped_desk_directory_suggests_the_desk_beside_it(tmp_path: Path) -> None:
    (tmp_path / "gym").mkdir()
    _desk(tmp_path / "gym", GOOD)
    message = _refused(tmp_path / "gmy")
    assert message == (
        f"{tmp_path / 'gmy' / 'desk.toml'} does not exist: did you mean {tmp_path / 'gym'}? (a desk directory beside it)"
    )
    assert "desk init" not in message


def test_a_directory_without_a_desk_is_never_suggested(tmp_path: Path) -> None:
    (tmp_path / "gym").mkdir()  # a directory of that name, but no desk.toml in it
    message = _refused(tmp_path / "gmy")
    assert "did you mean" not in message
    assert message.endswith(f"create the desk with `routegate desk init {tmp_path / 'gmy'} --from-sql SCHEMA.sql`")


def test_a_name_far_from_every_desk_or_an_existing_directory_gets_the_desk_init_hint(tmp_path: Path) -> None:
    (tmp_path / "gym").mkdir()
    _desk(tmp_path / "gym", GOOD)
    assert "did you mean" not in _refused(tmp_path / "warehouse")
    (tmp_path / "gmy").mkdir()  # it exists: the user means this one, which has no desk yet
    assert "did you mean" not in _refused(tmp_path / "gmy")


def test_ask_with_a_mistyped_desk_says_which_desk_was_meant(tmp_path: Path) -> None:
    """Through the command, as the issue met it: relative to the working directory, before anything starts."""
    (tmp_path / "gym").mkdir()
    _desk(tmp_path / "gym", GOOD)
    for argv in (["ask", "--desk", "gmy", "who is member 1?"], ["route", "--desk", "gmy", "who is member 1?"]):
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI, *argv],
            env=offline_env(tmp_path / "data"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr == "error: gmy/desk.toml does not exist: did you mean gym? (a desk directory beside it)\n"
        assert not (tmp_path / "data").exists()  # nothing was started


# -- fields, tables, columns in desk.toml ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            'columns = ["id", "name", "city"]',
            'colums = ["id", "name", "city"]',
            "tables[0] (name = 'customers').colums: unknown field (did you mean 'columns'?): remove it or check its "
            "spelling (docs/desk.md lists every field)",
        ),
        ("[database]", "[databse]", "databse: unknown field (did you mean 'database'?)"),
        (
            'schema = "desk_shop"',
            'schema = "desk_shop"\nshema = "x"',
            "database.shema: unknown field (did you mean 'schema'?)",
        ),
        (
            'name = "chat"\nkind = "llm"',
            'name = "chat"\nkind = "llm"\nexemples = ["hi"]',
            "routes[3] (name = 'chat').exemples: unknown field (did you mean 'examples'?)",
        ),
        (
            'tables = ["orders"]',
            'tables = ["ordres"]',
            "routes[1] (name = 'orders').tables: 'ordres' is not in [[tables]] (readable tables: ['customers', "
            "'orders']) (did you mean 'orders'?); add the table or remove it from the route",
        ),
        (
            'name_column = "name"',
            'name_column = "nmae"',
            "name_column 'nmae' is not one of the readable columns ['city', 'id', 'name'] (did you mean 'name'?)",
        ),
        (
            'filters = { status = ["open", "shipped"] }',
            'filters = { stauts = ["open", "shipped"] }',
            "filter column 'stauts' is not one of the readable columns ['customer_id', 'id', 'status'] (did you "
            "mean 'status'?)",
        ),
        (
            'references = "customers"',
            'references = "custmers"',
            "tables[1] (name = 'orders').foreign_keys: customer_id references 'custmers', which is not a readable "
            "table (did you mean 'customers'?)",
        ),
        (
            'filters = { status = ["open", "shipped"] }',
            'filters = { status = ["open", "shipped"] }\nrow = ["Order {id} of {custmer} is {status}."]',
            "{custmer} is not a field of its rows (id, customer_id, status, customer) (did you mean 'customer'?); use "
            "one of them",
        ),
        (
            '[[routes]]\nname = "chat"',
            '[answers]\nnot_found = "No {looked_fr} here."\n[[routes]]\nname = "chat"',
            "not_found: unknown field {looked_fr} (did you mean 'looked_for'?); it has {looked_for}",
        ),
    ],
)
def test_a_typo_in_desk_toml_says_the_name_meant(tmp_path: Path, old: str, new: str, said: str) -> None:
    assert old in GOOD
    message = _refused(_desk(tmp_path, GOOD.replace(old, new, 1)))
    assert message.startswith(f"{tmp_path / 'desk.toml'}: ")
    assert said in message


def test_a_name_far_from_every_known_one_gets_no_suggestion(tmp_path: Path) -> None:
    message = _refused(_desk(tmp_path, GOOD.replace('kind = "llm"', 'kind = "llm"\nwibble = 1', 1)))
    assert message.endswith("wibble: unknown field: remove it or check its spelling (docs/desk.md lists every field)")


# -- against the database's tables -----------------------------------------------------------------------------------
@pytest.fixture
def shop_copy(shop_dir: Path, tmp_path: Path) -> Path:
    """The shop desk (desk init wrote it) with its SQL file and docs, copied to be edited."""
    shutil.copytree(shop_dir.parent, tmp_path / "base")
    return tmp_path / "base" / shop_dir.name


def _replace(desk: Path, old: str, new: str) -> None:
    toml = desk / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert old in text
    toml.write_text(text.replace(old, new, 1), encoding="utf-8")


async def _open(desk: Path, pg_url: str, encoder: MiniLMEncoder, data_dir: Path) -> str:
    with pytest.raises(DeskConfigError) as caught:
        async with open_support_desk(Settings(database_url=pg_url, data_dir=data_dir), desk, encoder=encoder):
            pass
    return str(caught.value)


async def test_a_column_the_table_does_not_have_is_named_with_the_one_meant(
    shop_copy: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path
) -> None:
    _replace(shop_copy, '"city"', '"ctiy"')
    message = await _open(shop_copy, pg_url, encoder, tmp_path)
    assert message.startswith(f"{shop_copy / 'desk.toml'}: tables[0] (name = 'customers').columns: ")
    assert "unknown column 'ctiy' (did you mean 'city'?) (the table's columns: " in message
    assert message.endswith("; fix or remove it")


async def test_a_table_the_schema_does_not_have_is_named_with_the_one_meant(
    shop_copy: Path, pg_url: str, encoder: MiniLMEncoder, tmp_path: Path
) -> None:
    text = (shop_copy / "desk.toml").read_text(encoding="utf-8")
    (shop_copy / "desk.toml").write_text(text.replace('"products"', '"prodcts"'), encoding="utf-8")
    message = await _open(shop_copy, pg_url, encoder, tmp_path)
    assert message.startswith(f"{shop_copy / 'desk.toml'}: tables[")
    assert "(name = 'prodcts'): no such table in schema" in message and "(did you mean 'products'?)" in message

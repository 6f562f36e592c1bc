"""The desk's SQL file is read once, from start to end: a function body of thousands of ``;`` lines costs one pass
(the reader before re-lexed the statement from its start at each such line: 13 KB took 28.8 s, 52 KB 197 s), and
the statements are the ones the reader before found, on files it read right (a property test against it), and the
ones psql finds where it did not (a ``;`` in parentheses)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.apps.configured.config import load_config
from routegate.apps.configured.script import parse_script

from .conftest import desk_init
from .old_splitter import old_statements


def _long_body(lines: int) -> str:
    # each line ends in ';', where the reader before lexed the whole statement again
    body = "\n".join(
        f"    total := total + {i}; -- step {i};" if i % 2 else f"    total := total - {i};" for i in range(lines)
    )
    return (
        "CREATE TABLE things (id integer PRIMARY KEY, name text);\n"
        "CREATE FUNCTION busy() RETURNS integer LANGUAGE plpgsql AS $body$\nDECLARE total integer := 0;\nBEGIN\n"
        f"{body}\n    RETURN total;\nEND;\n$body$;\n"
        "INSERT INTO things VALUES (1, 'after the body');\n"
    )


@pytest.mark.timeout(120)
def test_a_function_body_of_many_statement_lines_loads_in_one_pass(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """8,000 lines (230 KB) ending in ';' inside one dollar-quoted body: `desk init` loads it (the reader before
    would have taken hours)."""
    sql = tmp_path / "busy.sql"
    sql.write_text(_long_body(8000), encoding="utf-8")
    assert len(sql.read_bytes()) > 200_000
    assert desk_init(pg_url, tmp_path, str(tmp_path / "busy"), "--from-sql", str(sql)) == 0
    assert "things (1 rows; primary key id)" in capsys.readouterr().out
    assert [t.name for t in load_config(tmp_path / "busy").tables] == ["things"]


@pytest.mark.timeout(60)
def test_the_statements_of_a_long_body_are_three() -> None:
    script = parse_script(_long_body(2000), source="busy.sql")
    assert [s.line for s in script.statements] == [1, 2, 2008]
    assert script.statements[1].sql.startswith("CREATE FUNCTION busy()") and script.statements[1].sql.endswith("$body$")


def test_a_semicolon_in_parentheses_does_not_end_the_statement_as_for_psql() -> None:
    text = "CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); INSERT INTO b VALUES (2));\nSELECT 1;\n"
    assert [(s.sql, s.line) for s in parse_script(text, source="r.sql").statements] == [
        ("CREATE RULE r AS ON INSERT TO t DO ALSO (INSERT INTO a VALUES (1); INSERT INTO b VALUES (2))", 1),
        ("SELECT 1", 2),
    ]


_WORD = st.sampled_from(["id", "name", "note", "total", "x1", "Order", "begin_at", "end_on", "case_no"])
_TEXT = st.text(alphabet=st.sampled_from(list("ab ;'-$\n\\/*()\"")), max_size=12)
_BODY_TEXT = st.text(alphabet=st.sampled_from(list("ab ;'-\n\\/*()\"")), max_size=12)  # no $: it would end a body


@st.composite
def _string(draw: st.DrawFn, text: st.SearchStrategy[str] = _TEXT) -> str:
    value = draw(text)
    if draw(st.booleans()):
        return "E'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"


@st.composite
def _statement(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["insert", "create", "function", "atomic", "comment", "quoted", "copy", "many"]))
    if kind == "insert":
        values = ", ".join(draw(st.lists(_string(), min_size=1, max_size=3)))
        return f"INSERT INTO t VALUES ({values});\n"
    if kind == "create":
        columns = ",\n    ".join(f"{w} text" for w in draw(st.lists(_WORD, min_size=1, max_size=3, unique=True)))
        return f"CREATE TABLE t (\n    {columns}\n);\n"
    if kind == "function":
        tag = draw(st.sampled_from(["$$", "$body$", "$_$"]))
        lines = "\n".join(f"    x := {draw(_string(_BODY_TEXT))}; -- ;" for _ in range(draw(st.integers(0, 4))))
        inner = " $q$ ; $q$ " if tag != "$$" else ""
        return f"CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS {tag}\nBEGIN\n{lines}{inner}\nEND;\n{tag};\n"
    if kind == "atomic":
        return (
            "CREATE OR REPLACE FUNCTION g(a int) RETURNS int LANGUAGE sql\nBEGIN ATOMIC\n"
            "    SELECT CASE WHEN a > 0 THEN 1 ELSE 0 END;\n    SELECT a;\nEND;\n"
        )
    if kind == "comment":
        return f"/* a ; comment /* nested ; */ {draw(_WORD)} */ SELECT 1; -- trailing ; words\n-- a line ; comment\n"
    if kind == "quoted":
        return f'SELECT 1 AS "{draw(_WORD)};"";" FROM t;\n'
    if kind == "copy":
        rows = "".join(f"{i}\t{draw(_TEXT).replace(chr(10), ' ').replace(chr(92), '')};'\n" for i in range(3))
        return f"COPY t (id, name) FROM stdin;\n{rows}\\.\n"
    return "SELECT 1; SELECT 2;\n"


@settings(max_examples=300, deadline=None)
@given(st.lists(_statement(), min_size=1, max_size=6), st.lists(st.sampled_from(["", "\n", "\n\n"]), min_size=6))
def test_the_statements_are_the_ones_the_reader_before_found(statements: list[str], gaps: list[str]) -> None:
    text = "".join(gap + statement for gap, statement in zip(gaps, statements, strict=False))
    new = [(s.sql, s.line, s.copy_rows) for s in parse_script(text, source="p.sql").statements]
    assert new == old_statements(text)

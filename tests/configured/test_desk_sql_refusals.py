"""What a desk's SQL file may not hold is refused before anything runs, through ``routegate desk init --from-sql F``
(and ``routegate desk check``): the message names the file, the statement's line, what the statement would do and
what to do instead, and nothing is left behind (no desk directory, no scratch schema or role)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from routegate.apps.configured.script import parse_script
from routegate.cli import main

from .conftest import desk_init
from .hostile import TABLE_SQL, hostile_desk, outside

REFUSED = {
    "COPY TO PROGRAM": ("COPY (SELECT 1) TO PROGRAM 'id';", "COPY to or from a file or a program"),
    "COPY FROM PROGRAM": ("COPY things FROM PROGRAM 'cat /etc/hostname';", "COPY to or from a file or a program"),
    "COPY FROM a server file": ("COPY things FROM '/etc/hostname';", "COPY to or from a file or a program"),
    "COPY TO a server file": ("COPY things TO '/tmp/out';", "COPY to or from a file or a program"),
    "COPY FROM stdin WHERE": ("COPY things (id, name) FROM stdin WHERE id > 0;\n1\tx\n\\.", "runs an expression"),
    "plpython3u": ("CREATE FUNCTION f() RETURNS int LANGUAGE plpython3u AS $$ return 1 $$;", "language plpython3u"),
    "plperlu": ("CREATE OR REPLACE FUNCTION f() RETURNS int AS $$ 1 $$ LANGUAGE 'plperlu';", "language plperlu"),
    "C": ("CREATE FUNCTION f() RETURNS int AS '/tmp/evil.so', 'f' LANGUAGE C;", "language C runs unchecked code"),
    "CREATE LANGUAGE": ("CREATE TRUSTED LANGUAGE plperlu;", "installs a language"),
    "CREATE EVENT TRIGGER": ("CREATE EVENT TRIGGER e ON ddl_command_start EXECUTE FUNCTION f();", "event trigger"),
    "CREATE ROLE": ("CREATE ROLE evil SUPERUSER LOGIN;", "CREATE ROLE changes the database server's roles"),
    "CREATE USER": ("CREATE USER evil;", "CREATE USER changes"),
    "ALTER ROLE postgres SET": ("ALTER ROLE postgres SET work_mem = '64MB';", "ALTER ROLE changes"),
    "DROP ROLE": ("DROP ROLE IF EXISTS someone;", "DROP ROLE changes"),
    "CREATE DATABASE": ("CREATE DATABASE other;", "CREATE DATABASE changes"),
    "CREATE TABLESPACE": ("CREATE TABLESPACE t LOCATION '/tmp';", "CREATE TABLESPACE changes"),
    "ALTER SYSTEM": ("ALTER SYSTEM SET work_mem = '64MB';", "ALTER SYSTEM changes the database server's configuration"),
    "COMMENT ON DATABASE": ("COMMENT ON DATABASE postgres IS 'x';", "the database server's configuration"),
    "lo_import": ("SELECT lo_import('/etc/hostname');", "lo_import(...) makes or reads large objects"),
    "a dump's large object": ("SELECT pg_catalog.lo_create('16400');", "pg_dump --no-blobs"),
    "pg_read_file": ("INSERT INTO things VALUES (2, pg_read_file('/etc/hostname'));", "the database server's files"),
    "pg_read_binary_file": ("SELECT pg_read_binary_file('/etc/hostname');", "the database server's files"),
    "pg_ls_dir": ("SELECT pg_catalog.pg_ls_dir('/');", "pg_ls_dir(...) reads or writes the database server's files"),
    "pg_terminate_backend": ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity;", "its other sessions"),
    "pg_cancel_backend": ("SELECT pg_cancel_backend(1);", "its other sessions"),
    "dblink": ("SELECT * FROM dblink('host=db', 'SELECT 1') AS t(i int);", "connects to another database"),
    "CREATE EXTENSION dblink": ("CREATE EXTENSION IF NOT EXISTS dblink;", "the extension dblink"),
    "CREATE EXTENSION postgres_fdw": ("CREATE EXTENSION postgres_fdw;", "the extension postgres_fdw"),
    "a foreign server": ("CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw;", "other servers or databases"),
    "SET ROLE": ("SET ROLE postgres;", "SET ROLE changes who runs the statements"),
    "SET LOCAL ROLE": ("SET LOCAL ROLE postgres;", "changes who runs the statements"),
    "SET SESSION AUTHORIZATION": ("SET SESSION AUTHORIZATION postgres;", "SET SESSION AUTHORIZATION changes who"),
    "set_config in FROM": ("SELECT * FROM set_config('app.x', 'y', false);", "set_config(...) changes a setting"),
    "set_config among others": ("SELECT set_config('app.x', 'y', false), 1;", "set_config(...) changes a setting"),
    "set_config in a body": (
        "DO $$ BEGIN PERFORM set_config('search_path', 'public', false); END $$;",
        "a body calls set_config(...)",
    ),
    "COPY in a function body": (
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$ BEGIN COPY things TO '/tmp/out'; END $$;",
        "a body copies to or from a file or a program",
    ),
    "a role in a DO body": ("DO $$ BEGIN EXECUTE 'CREATE ROLE evil SUPERUSER'; END $$;", "a body changes"),
    "LOAD": ("LOAD 'auto_explain';", "LOAD loads a library"),
    "EXPLAIN of a file read": ("EXPLAIN SELECT pg_read_file('/etc/hostname');", "pg_read_file(...)"),
}


@pytest.fixture(scope="module")
def scratch_left(pg_url: str) -> object:
    def left() -> list[tuple[str]]:
        with psycopg.connect(pg_url) as conn:
            return conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname ~ '^routegate_(init|load|rows)_' UNION ALL "
                "SELECT rolname FROM pg_roles WHERE rolname LIKE 'routegate_init_%'"
            ).fetchall()

    return left


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_desk_init_refuses_the_statement_with_its_line_and_leaves_nothing(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    statement, said = REFUSED[case]
    sql = tmp_path / "vendor.sql"
    sql.write_text(TABLE_SQL + statement + "\n", encoding="utf-8")
    before = outside(pg_url)

    assert desk_init(pg_url, tmp_path, str(tmp_path / "desk"), "--from-sql", str(sql)) == 2

    err = capsys.readouterr().err
    assert f"{sql} line 3: " in err and said in err and "a desk's SQL file may not" in err
    assert not (tmp_path / "desk").exists()
    assert outside(pg_url) == before


def test_desk_check_refuses_a_desk_directorys_file_before_any_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = hostile_desk(tmp_path, "\n\nCOPY (SELECT 1) TO PROGRAM 'touch /tmp/x';\n")
    assert main(["desk", "check", str(directory)]) == 2
    err = capsys.readouterr().err
    assert "database.sql_file data.sql line 5: COPY to or from a file or a program" in err


def test_what_pg_dump_writes_is_not_refused() -> None:
    dump = (
        "SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n"
        "SET check_function_bodies = false;\nCREATE TABLE public.t (id integer);\nALTER TABLE public.t OWNER TO shop;\n"
        "COPY public.t (id) FROM stdin;\n1\n\\.\nGRANT SELECT ON TABLE public.t TO analyst;\n"
        "ALTER LARGE OBJECT 16400 OWNER TO shop;\nREVOKE ALL ON SCHEMA public FROM PUBLIC;\n"
    )
    script = parse_script(dump, source="dump.sql", known_settings=["statement_timeout", "check_function_bodies"])
    assert [s.sql for s in script.statements] == [
        "SET LOCAL statement_timeout = 0",
        "SET LOCAL check_function_bodies = false",
        "CREATE TABLE t (id integer)",
        "COPY t (id) FROM stdin",
    ]
    assert script.skipped == {"owner and privileges": 4, "settings": 1}


HONEST = (
    "CREATE TABLE server (id integer, language text, event text, publication text);",
    "CREATE TABLE language (id integer);\nCREATE INDEX ON event (id);",
    "CREATE TABLE extension (id integer);\nCREATE TABLE user_mapping (role text, owner text);",
    "CREATE TRIGGER stamp BEFORE INSERT ON event FOR EACH ROW EXECUTE FUNCTION stamp();",
    "INSERT INTO notes VALUES ('COPY things TO PROGRAM; SET ROLE x; pg_read_file(1); lo_import(2)');",
    "CREATE FUNCTION copy_of(copy text) RETURNS text LANGUAGE sql AS $$ SELECT copy $$;",
    "SELECT setval('orders_id_seq', 1050, true);",
    "CREATE FUNCTION f() RETURNS int LANGUAGE plperl AS $$ return 1; $$;",
    "RESET ROLE;",
)


@pytest.mark.parametrize("statement", HONEST)
def test_names_and_text_that_only_look_like_a_refused_statement_are_not_refused(statement: str) -> None:
    parse_script(statement + "\n", source="honest.sql")

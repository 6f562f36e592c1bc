"""The role a desk's SQL file runs as, and how the file runs as it.

**The owner role** (``routegate_desk_<name>_owner``; ``desk init`` makes a scratch one and rolls it back): NOLOGIN,
no SUPERUSER, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, a member of no role (so none of
``pg_read_server_files``, ``pg_write_server_files``, ``pg_execute_server_program``), holding no grant outside the
desk's schema, which it owns and where everything the file makes is created.

**Running as it.** ``SET ROLE`` alone is no boundary: a statement run after it may ``RESET ROLE`` (a ``DO`` block can
build that statement at run time, past any refusal), and PostgreSQL then runs the rest as the login. So the file's
statements run through a ``SECURITY DEFINER`` function owned by the owner role: inside one, PostgreSQL refuses any
change of role or session authorization, in whatever the file calls or fires. The function sits in a helper schema
the owner role may not even name (it cannot alter it), and at its end fires the deferred triggers and closes the
cursors the statements left (both would otherwise run at COMMIT, as the login). ``COPY ... FROM stdin`` rows go into
a text-only staging table the login owns and are inserted by a second such function, so that parsing them into
the table's types — domains, triggers, defaults — runs as the owner too.

**Sealed after the load**, in the same transaction: nothing owned by the role (or granted to it) outside the desk's
schema, no role defaults (``ALTER ROLE ... SET``), the schema still the role's; every function the file made runs
as the owner (``SECURITY DEFINER``, its ``search_path`` pinned to the desk's schema), every view with its owner's
rights (``security_invoker`` off), and no grant of the file's on the schema or its tables stays. So a view, a
function or a trigger of the file, whoever later reads through it, reaches nothing outside the desk's schema.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    import psycopg
    from psycopg import sql

from routegate.apps.configured.config import DeskConfigError
from routegate.apps.configured.script import CopyInto, quoted

SAFE_PATH: Final = "pg_catalog, pg_temp"
"""The ``search_path`` of the login's own statements during a load: nothing of the file's is found first."""

_ROLE_SQL: Final = (
    "SELECT r.oid, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin, r.rolreplication, r.rolbypassrls, "
    "ARRAY(SELECT g.rolname::text FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid "
    "WHERE m.member = r.oid ORDER BY 1) AS member_of FROM pg_catalog.pg_roles r WHERE r.rolname = %s"
)
_ATTRIBUTES: Final = ("SUPERUSER", "CREATEROLE", "CREATEDB", "LOGIN", "REPLICATION", "BYPASSRLS")
_OUTSIDE_SQL: Final = (
    "SELECT o.type || ' ' || o.identity FROM pg_catalog.pg_shdepend d "
    "CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classid, d.objid, d.objsubid) o "
    "WHERE d.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND d.refobjid = %(role)s "
    'AND d.deptype = ANY(%(kinds)s::"char"[]) '
    "AND d.dbid IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())) "
    "AND o.schema IS DISTINCT FROM %(schema)s "
    "AND NOT (o.type = 'schema' AND (o.identity = pg_catalog.quote_ident(%(schema)s) OR o.identity = ANY(%(helpers)s))) "
    "AND (o.schema IS NULL OR (o.schema <> ALL(%(helpers)s) AND o.schema <> 'pg_toast' "
    "AND o.schema !~ '^pg_(toast_)?temp_')) ORDER BY 1"
)
_SETTINGS_SQL: Final = "SELECT count(*) FROM pg_catalog.pg_db_role_setting WHERE setrole = %s"
_FUNCTIONS_SQL: Final = (
    "SELECT p.oid::pg_catalog.regprocedure::text FROM pg_catalog.pg_proc p "
    "WHERE p.pronamespace = %s::pg_catalog.regnamespace AND p.prokind IN ('f', 'p') ORDER BY 1"
)
_INVOKER_VIEWS_SQL: Final = (
    "SELECT c.oid::pg_catalog.regclass::text FROM pg_catalog.pg_class c "
    "WHERE c.relnamespace = %s::pg_catalog.regnamespace AND c.relkind = 'v' "
    "AND EXISTS (SELECT 1 FROM pg_catalog.unnest(c.reloptions) o WHERE o LIKE 'security\\_invoker=%%') ORDER BY 1"
)
_GRANTEE: Final = "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END"
_GRANTS_SQL: Final = (
    f"SELECT DISTINCT 'TABLE ' || c.oid::pg_catalog.regclass::text, {_GRANTEE} FROM pg_catalog.pg_class c "
    "CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a WHERE c.relnamespace = %(nsp)s::pg_catalog.regnamespace "
    f"AND a.grantee <> %(role)s UNION SELECT 'SCHEMA ' || %(nsp)s, {_GRANTEE} FROM pg_catalog.pg_namespace n "
    "CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a WHERE n.nspname = %(schema)s AND a.grantee <> %(role)s "
    "ORDER BY 1, 2"
)
_SCHEMA_OWNER_SQL: Final = (
    "SELECT r.oid, n.nspowner = r.oid FROM pg_catalog.pg_roles r "
    "LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = %s WHERE r.rolname = %s"
)


@dataclass(frozen=True, slots=True)
class DeskSchema:
    """Where a SQL file is loaded: the schema ``name``, the ``owner`` role it runs as, and the ``marker`` written on
    the schema once loaded (the record of whose it is: :mod:`.database`); ``None`` for a scratch schema."""

    name: str
    owner: str
    marker: str | None = None

    @property
    def search_path(self) -> str:
        """The file's ``search_path``: the desk's schema, then ``public`` (where extensions' types live)."""
        return f"{quoted(self.name)}, public"


def scratch_schema() -> DeskSchema:
    """A schema and owner of ``desk init``'s, whose transaction is rolled back: nothing of them stays."""
    name = f"routegate_init_{uuid.uuid4().hex[:12]}"
    return DeskSchema(name, f"{name}_owner")


def _problems(conn: psycopg.Connection[Any], role: str, schema: str) -> tuple[int, list[str]] | None:
    """The role's oid and what it may do beyond its schema; ``None`` when there is no such role."""
    row = conn.execute(_ROLE_SQL, (role,)).fetchone()
    if row is None:
        return None
    oid, *flags, member_of = row
    problems = [name for name, on in zip(_ATTRIBUTES, flags, strict=True) if on]
    problems += [f"member of {name}" for name in member_of]
    params = {"role": oid, "kinds": ["a"], "schema": schema, "helpers": []}
    problems += [f"rights on {found[0]}" for found in conn.execute(_OUTSIDE_SQL, params).fetchall()]
    return int(oid), problems


def check_owner(conn: psycopg.Connection[Any], target: DeskSchema) -> bool:
    """Whether the owner role exists; refused with what to do when it may do anything beyond its schema (someone
    made it so: the desk creates it with nothing)."""
    found = _problems(conn, target.owner, target.name)
    if found is not None and found[1]:
        raise DeskConfigError(
            f"the role {target.owner}, which runs the desk's SQL file and owns its schema {target.name}, has "
            f"{', '.join(found[1])}; it must reach nothing outside its schema: remove those rights (ALTER ROLE "
            f"{target.owner} NOSUPERUSER ..., REVOKE ...) or drop the role and schema and let the desk make them"
        )
    return found is not None


def create_owner(conn: psycopg.Connection[Any], target: DeskSchema) -> None:
    """The owner role (made when missing, checked when found) and the login's membership in it."""
    role = sql.Identifier(target.owner)
    if not check_owner(conn, target):
        try:
            with conn.transaction():
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS"
                    ).format(role)
                )
        except psycopg.errors.InsufficientPrivilege:
            raise DeskConfigError(
                f"the database login may not create the role {target.owner} that the desk's SQL file runs as (with "
                "no rights outside the desk's schema); give the login CREATEROLE, or create the role yourself "
                f"(CREATE ROLE {target.owner} NOLOGIN; GRANT {target.owner} TO <login>), or read the tables from an "
                'existing database (source = "url")'
            ) from None
    member = conn.execute("SELECT pg_catalog.pg_has_role(current_user, %s, 'MEMBER')", (target.owner,)).fetchone()
    if not (member and member[0]):
        conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(role))


def create_schema(conn: psycopg.Connection[Any], target: DeskSchema) -> None:
    conn.execute(
        sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(target.name), sql.Identifier(target.owner))
    )


_RUN: Final = """CREATE FUNCTION {helpers}.run(statements text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
AS $routegate$
BEGIN
    PERFORM pg_catalog.set_config('search_path', {path}, true);
    EXECUTE statements;
    SET CONSTRAINTS ALL IMMEDIATE;
    EXECUTE 'CLOSE ALL';
    PERFORM pg_catalog.set_config('search_path', {safe}, true);
END
$routegate$"""
_COPY: Final = """CREATE FUNCTION {helpers}.copy(target text, names text[], stage text) RETURNS void LANGUAGE plpgsql
SECURITY DEFINER AS $routegate$
DECLARE
    relation pg_catalog.regclass;
    columns text;
    values_ text;
    missing text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', {path}, true);
    relation := pg_catalog.to_regclass(target);
    IF relation IS NULL THEN
        RAISE EXCEPTION 'relation % does not exist', target USING ERRCODE = 'undefined_table';
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.quote_ident(u.name), ', ' ORDER BY u.n),
           pg_catalog.string_agg(pg_catalog.format('%I::%s', u.name, pg_catalog.format_type(a.atttypid, NULL)), ', '
               ORDER BY u.n),
           pg_catalog.string_agg(CASE WHEN a.attname IS NULL THEN u.name END, ', ')
      INTO columns, values_, missing
      FROM pg_catalog.unnest(names) WITH ORDINALITY AS u(name, n)
      LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = relation AND a.attname = u.name AND a.attnum > 0
          AND NOT a.attisdropped;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'column % of relation % does not exist', missing, target USING ERRCODE = 'undefined_column';
    END IF;
    -- COPY writes identity columns as given, GENERATED ALWAYS ones too (a dump's ids): so does the insert
    EXECUTE pg_catalog.format('INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM %s', relation, columns,
        values_, stage);
    SET CONSTRAINTS ALL IMMEDIATE;
    EXECUTE 'CLOSE ALL';
    PERFORM pg_catalog.set_config('search_path', {safe}, true);
END
$routegate$"""
_COLUMNS_SQL: Final = (
    "SELECT a.attname::text FROM pg_catalog.pg_attribute a WHERE a.attrelid = pg_catalog.to_regclass(%s) "
    "AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum"
)


class Runner:
    """Runs a SQL file's statements as ``target.owner``, in the caller's transaction (see the module's text). Made
    after the schema; :meth:`seal` when the file has run."""

    def __init__(self, conn: psycopg.Connection[Any], target: DeskSchema) -> None:
        self.conn = conn
        self.target = target
        tag = uuid.uuid4().hex[:12]
        self.helpers = f"routegate_load_{tag}"  # the two functions: the owner role has no USAGE here
        self.rows = f"routegate_rows_{tag}"  # the staging tables: USAGE, and SELECT on each table, for the owner
        self._copies = 0
        owner = sql.Identifier(target.owner)
        helpers = sql.Identifier(self.helpers)
        rows = sql.Identifier(self.rows)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(helpers))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(rows))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(rows, owner))
        literals = {"helpers": helpers, "path": sql.Literal(target.search_path), "safe": sql.Literal(SAFE_PATH)}
        # a new owner needs CREATE on the functions' schema (unless the login is a superuser): for the hand-over only,
        # since with it the role could replace its functions with ones that run as their caller
        conn.execute(sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(helpers, owner))
        for body, signature in ((_RUN, "run(text)"), (_COPY, "copy(text, text[], text)")):
            conn.execute(sql.SQL(body).format(**literals))
            function = sql.SQL("{}.{}").format(helpers, sql.SQL(signature))
            conn.execute(sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(function))
            conn.execute(sql.SQL("ALTER FUNCTION {} OWNER TO {}").format(function, owner))
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(helpers, owner))
        conn.execute(sql.SQL("SET LOCAL search_path = {}").format(sql.SQL(SAFE_PATH)))

    def run(self, statements: str) -> None:
        """Plain statements (one text, ``;``-separated), as the owner."""
        self.conn.execute(sql.SQL("SELECT {}.run(%s)").format(sql.Identifier(self.helpers)), (statements,))

    def copy(self, into: CopyInto, rows: str) -> None:
        """``COPY ... FROM stdin``'s rows: into a staging table of text columns (as the login: no code of the
        file's runs), then into ``into.table`` as the owner."""
        columns = list(into.columns) if into.columns is not None else self._columns(into)
        self._copies += 1
        stage = sql.Identifier(self.rows, f"copy_{self._copies}")
        names = sql.SQL(", ").join(sql.SQL("{} pg_catalog.text").format(sql.Identifier(c)) for c in columns)
        self.conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(stage, names))
        self.conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(stage, sql.Identifier(self.target.owner)))
        with self.conn.cursor().copy(sql.SQL("COPY {} FROM STDIN {}").format(stage, sql.SQL(into.options))) as copy:
            copy.write(rows)
        self.conn.execute(
            sql.SQL("SELECT {}.copy(%s, %s, %s)").format(sql.Identifier(self.helpers)),
            (into.table, columns, stage.as_string(self.conn)),
        )
        self.conn.execute(sql.SQL("DROP TABLE {}").format(stage))

    def _columns(self, into: CopyInto) -> list[str]:
        """The columns a ``COPY table FROM stdin`` without a column list fills: every one but generated ones."""
        schema = into.schema if into.schema is not None else self.target.name
        rows = self.conn.execute(_COLUMNS_SQL, (f"{quoted(schema)}.{quoted(into.name)}",)).fetchall()
        if not rows:
            raise DeskConfigError(f"relation {into.table} does not exist (or has no columns to copy into)")
        return [str(row[0]) for row in rows]

    def seal(self) -> None:
        """After the load: check that nothing reaches outside the schema, make the file's functions and views run as
        the owner, drop the grants the file made, mark the schema, drop the helpers."""
        conn, target = self.conn, self.target
        role = conn.execute(_SCHEMA_OWNER_SQL, (target.name, target.owner)).fetchone()
        if role is None or not role[1]:
            raise DeskConfigError(
                f"the SQL file dropped or gave away the desk's schema {target.name}; a desk's SQL file only fills it"
            )
        params = {"role": role[0], "kinds": ["o", "a"], "schema": target.name, "helpers": [self.helpers, self.rows]}
        outside = [str(row[0]) for row in conn.execute(_OUTSIDE_SQL, params).fetchall()]
        if outside:
            raise DeskConfigError(
                f"the SQL file made or reached objects outside the desk's schema ({', '.join(outside[:5])}); a desk's "
                "SQL file may only create in its own schema: remove those statements"
            )
        settings = conn.execute(_SETTINGS_SQL, (role[0],)).fetchone()
        if settings and settings[0]:
            raise DeskConfigError(
                "the SQL file set defaults for the role it runs as (ALTER ROLE ... SET); remove those statements"
            )
        _run_all(conn, self._sealing_statements(int(role[0])))
        if target.marker is not None:
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(target.name), target.marker))
        conn.execute(
            sql.SQL("DROP SCHEMA {}, {} CASCADE").format(sql.Identifier(self.helpers), sql.Identifier(self.rows))
        )

    def _sealing_statements(self, role: int) -> list[sql.Composable]:
        conn, schema = self.conn, self.target.name
        path = sql.SQL(self.target.search_path)
        out: list[sql.Composable] = [
            sql.SQL("ALTER ROUTINE {} SECURITY DEFINER SET search_path = {}").format(sql.SQL(name), path)
            for (name,) in conn.execute(_FUNCTIONS_SQL, (quoted(schema),)).fetchall()
        ]
        out += [
            sql.SQL("ALTER VIEW {} RESET (security_invoker)").format(sql.SQL(name))
            for (name,) in conn.execute(_INVOKER_VIEWS_SQL, (quoted(schema),)).fetchall()
        ]
        params = {"schema": schema, "nsp": quoted(schema), "role": role}
        out += [
            sql.SQL("REVOKE ALL ON {} FROM {}").format(sql.SQL(on), sql.SQL(grantee))
            for on, grantee in conn.execute(_GRANTS_SQL, params).fetchall()
        ]
        return out


def _run_all(conn: psycopg.Connection[Any], statements: Sequence[sql.Composable]) -> None:
    if statements:
        conn.execute(sql.SQL(";\n").join(statements))

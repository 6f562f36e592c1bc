"""The SQL guard: one read-only SELECT that reads only the allowed tables gets through.

The text is parsed by a real SQL parser (sqlglot, PostgreSQL dialect) and checked against allowlists
(:mod:`._sqlallow`): statement kinds, expression kinds, clauses, functions, cast types, tables. Every table
reference is resolved with PostgreSQL's scoping rules, by sqlglot's scope machinery: a name is a CTE only where
PostgreSQL would see that CTE (the outer query and nested subqueries of its ``WITH``, later siblings, and its own
body only under ``WITH RECURSIVE``); everywhere else it is a real relation and must be an allowed table, in the
desk's schema or unqualified. A reference the scope machinery cannot place is refused (fail closed).

Every column reference is resolved the same way, against the real columns of the tables it reads (and the output
names of CTEs and derived tables): PostgreSQL reads ``c.f`` that names no column of ``c`` as the function call
``f(c)`` (``c.row_to_json``, ``c.pg_typeof``, ``c.text``), and a bare table alias as its whole row, so a reference
that resolves to no real column is refused — the function allowlist stays closed.

What is executed is the guard's own rendering of the checked tree, with every identifier quoted — not the text
it was given — so a comment, a quoting trick, case folding or a keyword that PostgreSQL reads as a function
(``user``, ``current_role``) cannot give the text a second meaning. Placeholders are ``:name`` (or
``%(name)s``); ``params`` must supply exactly those names, with scalar values.

The guard is the first of several layers: the Postgres tool also runs the statement in a read-only transaction,
under ``statement_timeout`` and a client deadline, with ``search_path`` pinned to the desk's schema, with bounds on
its result that PostgreSQL applies itself (rows, bytes, value length), and as a role that may only read the
allowed tables when the server allows one (:mod:`routegate.apps.support.postgres_tool`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from routegate._extras import needs

with needs("desk"):
    from sqlglot import exp
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.errors import OptimizeError
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
    from sqlglot.optimizer.qualify_columns import qualify_columns, validate_qualify_columns
    from sqlglot.optimizer.scope import Scope, traverse_scope
    from sqlglot.schema import MappingSchema
    from sqlglot.tokenizer_core import Token, TokenType

from routegate.apps.support import _sqlallow as allow
from routegate.apps.support._sqlallow import ALLOWED_COLUMNS, ALLOWED_FUNCTIONS, ALLOWED_TABLES
from routegate.errors import RoutegateError

__all__ = ["ALLOWED_COLUMNS", "ALLOWED_FUNCTIONS", "ALLOWED_TABLES", "CheckedQuery", "SqlRefusedError", "check_sql"]

MAX_SQL_CHARS: Final = 4000
MAX_PARAM_CHARS: Final = 500
MAX_PARAMS: Final = 20
MAX_IDENTIFIER_BYTES: Final = 63  # PostgreSQL truncates longer names: refuse them instead of guessing
_ALLOWED_NODES: Final = (*allow.SYNTAX_NODES, *allow.FUNCTION_NODES)
_POSTGRES: Final = Dialect.get_or_raise("postgres")
# what a statement may start with; VAR (an unknown word, a typo) goes on to the parser for its error message
_STATEMENT_STARTS: Final = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.VAR})
_NODE_ARGS: Final[tuple[tuple[type[exp.Expression], frozenset[str]], ...]] = (
    (exp.Select, allow.QUERY_ARGS),
    (exp.SetOperation, allow.SET_OPERATION_ARGS),
    (exp.Table, allow.TABLE_ARGS),
    (exp.CTE, allow.CTE_ARGS),
    (exp.With, allow.WITH_ARGS),
)


class SqlRefusedError(RoutegateError, ValueError):
    """The SQL guard refused a query. ``code`` is a short machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    """A query that passed the guard: the SQL to execute (the guard's rendering), its parameters, and the real
    tables it reads."""

    sql: str
    params: Mapping[str, Any] | None
    tables: frozenset[str]


def _refuse(code: str, message: str) -> SqlRefusedError:
    return SqlRefusedError(code, f"query refused ({code}): {message}")


def _check_params(params: object, placeholders: frozenset[str]) -> dict[str, Any] | None:
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise _refuse("bad_params", f"params must be an object, got {type(params).__name__}")
    if len(params) > MAX_PARAMS:
        raise _refuse("bad_params", f"at most {MAX_PARAMS} params, got {len(params)}")
    names = {str(k) for k in params}
    if names != placeholders:
        missing, extra = sorted(placeholders - names), sorted(names - placeholders)
        raise _refuse("bad_params", f"params do not match the placeholders (missing {missing}, unused {extra})")
    checked: dict[str, Any] = {}
    for key, value in params.items():
        if value is not None and not isinstance(value, str | int | float | bool):
            raise _refuse("bad_params", f"param {str(key)!r} must be a scalar, got {type(value).__name__}")
        if isinstance(value, str) and (len(value) > MAX_PARAM_CHARS or "\x00" in value):
            raise _refuse("bad_params", f"param {str(key)!r} is longer than {MAX_PARAM_CHARS} characters or has NUL")
        checked[str(key)] = value
    return checked or None


def check_sql(
    query: object,
    params: object = None,
    *,
    tables: Collection[str] = ALLOWED_TABLES,
    schema: str | None = None,
    columns: Mapping[str, Sequence[str]] = ALLOWED_COLUMNS,
) -> CheckedQuery:
    """Check one query; return what to execute or raise :class:`SqlRefusedError` naming the problem.

    ``tables`` are the relations it may read; ``schema`` is the desk's schema, the one qualifier allowed
    (``support.customers``); unqualified names are looked up there by the tool's pinned ``search_path``.
    ``columns`` are the real columns of those tables, in table order (a table missing here has none: every
    column reference to it is refused)."""
    if not isinstance(query, str):
        raise _refuse("not_text", f"the query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise _refuse("empty", "the query is empty")
    if len(query) > MAX_SQL_CHARS:
        raise _refuse("too_long", f"the query has {len(query)} characters, over the {MAX_SQL_CHARS} limit")
    if "\x00" in query:
        raise _refuse("nul_byte", "the query contains a NUL byte")
    known = tuple(sorted((t, tuple(columns.get(t, ()))) for t in set(tables)))
    analysed = _analyse(query, frozenset(tables), schema, known)
    checked_params = _check_params(params, analysed.placeholders)
    rendered = analysed.sql_for_params if checked_params is not None else analysed.sql
    return CheckedQuery(sql=rendered, params=checked_params, tables=analysed.tables)


@dataclass(frozen=True, slots=True)
class _Analysed:
    sql: str  # the checked tree rendered back (what runs without params)
    sql_for_params: str  # the same with "%" escaped in string literals (what runs with params)
    placeholders: frozenset[str]
    tables: frozenset[str]


@functools.lru_cache(maxsize=512)
def _analyse(
    query: str, allowed: frozenset[str], schema: str | None, columns: tuple[tuple[str, tuple[str, ...]], ...]
) -> _Analysed:
    """Parse, resolve and check the query text (cached: the templates and repeated model queries are checked
    once; refusals raise and are never cached)."""
    try:
        return _analyse_uncached(query, allowed, schema, dict(columns))
    except SqlRefusedError:
        raise
    except RecursionError:
        raise _refuse("parse_error", "the query is nested too deeply") from None
    except Exception as exc:  # fail closed: whatever the parser or the scope machinery trips on
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise _refuse("parse_error", f"not a query the guard can read: {first}") from None


def _analyse_uncached(
    query: str, allowed: frozenset[str], schema: str | None, columns: Mapping[str, tuple[str, ...]]
) -> _Analysed:
    tokens = _POSTGRES.tokenize(query)
    _check_statement_start(tokens)
    statements = [s for s in _POSTGRES.parser().parse(tokens, query) if s is not None]
    if len(statements) != 1:
        raise _refuse("not_one_statement", f"exactly one statement is allowed, got {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise _refuse("not_select", f"only SELECT is allowed, got {tree.key.upper()}")
    # fold unquoted names the way PostgreSQL does, so that what is resolved is what is rendered (quoted) and run
    tree = normalize_identifiers(tree, dialect="postgres")
    placeholders = _check_nodes(tree)
    tables = _resolve_tables(tree, allowed, schema)
    _resolve_columns(tree, columns)
    plain = _render(tree)
    # psycopg reads "%" as the start of a placeholder when params are passed: escape it in string literals, and
    # write the modulo operator as mod() (identifiers with "%" are refused)
    for literal in list(tree.find_all(exp.Literal)):
        if literal.is_string and "%" in literal.this:
            literal.replace(exp.Literal.string(literal.this.replace("%", "%%")))
    for modulo in list(tree.find_all(exp.Mod)):
        modulo.replace(exp.Anonymous(this="mod", expressions=[modulo.this, modulo.expression]))
    return _Analysed(plain, _render(tree), frozenset(placeholders), tables)


def _check_statement_start(tokens: list[Token]) -> None:
    """Refuse before parsing what is not one SELECT: the parser would log the text of a statement it does not
    know (``DO``, ``CALL``, ``SET ROLE``) while falling back to a generic command."""
    started = ended = False
    for token in tokens:
        if token.token_type is TokenType.SEMICOLON:
            ended = started
        elif ended:
            raise _refuse("not_one_statement", "exactly one statement is allowed, got more than one")
        elif not started and token.token_type is not TokenType.L_PAREN:
            started = True
            if token.token_type not in _STATEMENT_STARTS:
                kind = token.text.upper()[:30]
                raise _refuse("not_select", f"only SELECT is allowed, got {kind}")


def _render(tree: exp.Expression) -> str:
    # every identifier quoted (no keyword or case folding can change a name's meaning), comments dropped
    return tree.sql(dialect="postgres", identify=True, comments=False)


def _check_nodes(tree: exp.Expression) -> set[str]:
    """Every node is an allowed kind with allowed arguments; return the placeholder names."""
    placeholders: set[str] = set()
    for node in tree.walk():
        if not isinstance(node, _ALLOWED_NODES):
            if isinstance(node, exp.Func):
                raise _refuse(
                    "function_not_allowed",
                    f"function {_function_name(node)}() is not allowed (allowed: {sorted(ALLOWED_FUNCTIONS)})",
                )
            raise _refuse("construct_not_allowed", f"{node.key.upper()} is not allowed in a read-only query")
        _check_args(node)
        if isinstance(node, exp.Literal):
            if not node.is_string and not node.is_number:
                raise _refuse("construct_not_allowed", "unsupported literal")
            if node.is_string and "\\" in node.this:
                # its meaning depends on standard_conforming_strings: pass such a value as a parameter instead
                raise _refuse("construct_not_allowed", "a backslash in a string literal is not allowed: use a :param")
        elif isinstance(node, exp.Identifier):
            _check_identifier(node)
        elif isinstance(node, exp.Column):
            ident = node.this
            if isinstance(ident, exp.Identifier) and not ident.quoted and ident.name in allow.SQL_KEYWORD_FUNCTIONS:
                raise _refuse(
                    "function_not_allowed",
                    f"{ident.name} is a function in PostgreSQL (it returns server or session facts) and is not allowed",
                )
        elif isinstance(node, exp.Var) and not (isinstance(node.parent, allow.VAR_PARENTS) and node.name.isalpha()):
            raise _refuse("construct_not_allowed", f"the keyword {node.name!r} is not allowed here")
        elif isinstance(node, exp.DataType) and node.this not in allow.CAST_TYPES:
            raise _refuse("construct_not_allowed", f"a cast to {node.sql('postgres')} is not allowed")
        elif isinstance(node, exp.Placeholder):
            name = str(node.name or "")
            if not name or not name.isidentifier():
                raise _refuse("bad_params", "placeholders must be named, like :customer_id")
            placeholders.add(name)
    return placeholders


def _check_args(node: exp.Expression) -> None:
    for kind, permitted in _NODE_ARGS:
        if isinstance(node, kind):
            for arg, value in node.args.items():
                if value and arg not in permitted:
                    what = allow.CLAUSE_NAMES.get(arg, f"the {arg.rstrip('_').upper()} clause")
                    raise _refuse("forbidden_clause", f"{what} is not allowed")
            return


def _check_identifier(node: exp.Identifier) -> None:
    name = node.name
    if len(name.encode()) > MAX_IDENTIFIER_BYTES:
        raise _refuse("bad_identifier", f"identifier {name[:20]!r}... is longer than {MAX_IDENTIFIER_BYTES} bytes")
    if not name.isprintable() or any(c in name for c in '"%\\'):
        raise _refuse("bad_identifier", f"identifier {name!r} has a quote, '%', '\\' or a control character")


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def _resolve_tables(tree: exp.Expression, allowed: frozenset[str], schema: str | None) -> frozenset[str]:
    """Resolve every table reference by scope; each must be a CTE visible there or an allowed table."""
    placed: dict[int, bool] = {}  # id(table node) -> is a CTE reference
    for scope in traverse_scope(tree):
        for table in scope.tables:
            is_cte = not table.args.get("db") and table.name in scope.cte_sources
            if placed.setdefault(id(table), is_cte) != is_cte:
                raise _refuse("unresolved", f"table reference {table.sql('postgres')} is ambiguous")
    read: set[str] = set()
    for table in tree.find_all(exp.Table):
        if id(table) not in placed:
            raise _refuse("unresolved", f"table reference {table.sql('postgres')} could not be resolved")
        if placed[id(table)]:
            continue
        if not isinstance(table.this, exp.Identifier):
            raise _refuse("table_not_allowed", "only plain table names are allowed in FROM / JOIN")
        qualifier = table.args.get("db")
        if qualifier is not None and (schema is None or qualifier.name != schema):
            where = f"the desk's schema {schema!r}" if schema else "no schema"
            raise _refuse("table_not_allowed", f"{table.sql('postgres')} is outside {where}: name tables unqualified")
        if table.name not in allowed:
            raise _refuse(
                "table_not_allowed", f"table {table.name!r} is not allowed (allowed: {', '.join(sorted(allowed))})"
            )
        read.add(table.name)
    return frozenset(read)


def _resolve_columns(tree: exp.Expression, columns: Mapping[str, tuple[str, ...]]) -> None:
    """Every column reference names a real column of the source it resolves to, by scope (PostgreSQL's rules):
    ``alias.name`` a column of that table, CTE or derived table (or of an enclosing query's, when correlated); an
    unqualified name a column of exactly one source in reach, or an output name in ORDER BY / GROUP BY. Anything
    else — ``c.row_to_json`` (a function call), ``c`` or ``c.customers`` (the whole row), ``a.b.c`` — is refused.

    Resolution runs on a copy (the tables' schema qualifier dropped: :func:`_resolve_tables` has checked it), with
    sqlglot's column qualifier, then every reference it qualified is checked again here (fail closed)."""
    copy = tree.copy()
    for table in copy.find_all(exp.Table):
        table.set("db", None)
        table.set("catalog", None)
    known = MappingSchema(
        {name: dict.fromkeys(cols, "text") for name, cols in columns.items() if cols},
        dialect="postgres",
        normalize=False,
    )
    try:
        qualified = validate_qualify_columns(qualify_columns(copy, schema=known, dialect="postgres"))
    except OptimizeError as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else "unresolved"
        raise _refuse(
            "unknown_column",
            f"{first} (PostgreSQL reads alias.f that names no column as the function f(alias)): "
            "name only real columns of the tables the query reads",
        ) from None
    for node in qualified.walk():
        if isinstance(node, exp.TableColumn | exp.Dot):
            raise _refuse("unknown_column", f"{node.sql('postgres')} is a whole row or a field of one, not a column")
    checked: set[int] = set()
    for scope in traverse_scope(qualified):
        for column in scope.columns:
            _check_column(scope, column, columns)
            checked.add(id(column))
    for column in qualified.find_all(exp.Column):
        if id(column) in checked:
            continue
        query = column.find_ancestor(exp.Query)
        # what scope leaves out is an output name referenced in ORDER BY / GROUP BY / HAVING of its query
        if column.table or query is None or column.name not in query.named_selects:
            raise _refuse("unknown_column", f"column {column.sql('postgres')} could not be resolved")


def _check_column(scope: Scope, column: exp.Column, columns: Mapping[str, tuple[str, ...]]) -> None:
    ref = column.sql("postgres")
    query = scope.expression
    if not column.table and isinstance(query, exp.SetOperation) and column.name in query.named_selects:
        return  # ORDER BY of a UNION / INTERSECT / EXCEPT names its output columns
    if not column.table or column.args.get("db") or column.args.get("catalog"):
        raise _refuse("unknown_column", f"column {ref} could not be resolved to one table's column")
    reach: Scope | None = scope
    while reach is not None and column.table not in reach.sources:
        reach = reach.parent
    if reach is None:
        raise _refuse("unknown_column", f"{column.table!r} in {ref} is not a table or alias of the query")
    names = _source_columns(reach.sources[column.table], columns)
    if column.name not in names:
        raise _refuse(
            "unknown_column",
            f"{ref}: {column.table!r} has no column {column.name!r} (it has {', '.join(names) or 'none'}); "
            "PostgreSQL would read it as a function call",
        )


def _source_columns(source: exp.Expression | Scope, columns: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The column names a FROM item exposes: a table's (renamed by its alias list), a CTE's or a subquery's."""
    if isinstance(source, Scope):
        node = source.expression
        alias = node.parent.args.get("alias") if node.parent is not None else None
        names = tuple(node.named_selects) if isinstance(node, exp.Query) else ()
        if "*" in names:
            return ()
    elif isinstance(source, exp.Table):
        alias = source.args.get("alias")
        names = columns.get(source.name, ())
    else:  # pragma: no cover - sources are tables or scopes
        return ()
    renamed = tuple(c.name for c in alias.columns) if isinstance(alias, exp.TableAlias) else ()
    return renamed + names[len(renamed) :]

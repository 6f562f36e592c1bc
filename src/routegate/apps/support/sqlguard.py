"""The SQL guard: only one plain, read-only SELECT over ``customers`` and ``tickets`` gets through.

The text is parsed by a real SQL parser (sqlglot, PostgreSQL dialect) and every node of the tree is checked
against an allowlist: statement kinds, expression kinds, functions, tables. What is executed is the guard's own
rendering of the checked tree — not the text it was given — so a comment, a quoting trick or anything the parser
read differently from PostgreSQL cannot smuggle a second meaning past it. Placeholders are ``:name`` (or
``%(name)s``); ``params`` must supply exactly those names, with scalar values.

The guard is the first of several layers: the Postgres tool also runs the statement in a read-only transaction,
under ``statement_timeout``, with a row cap, and as a role that may only read the two tables when the server
allows one (:mod:`routegate.apps.support.postgres_tool`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from routegate.errors import RoutegateError

ALLOWED_TABLES: Final = frozenset({"customers", "tickets"})
ALLOWED_FUNCTIONS: Final = frozenset(
    {"count", "sum", "avg", "min", "max", "lower", "upper", "coalesce", "length", "trim", "concat"}
)
MAX_SQL_CHARS: Final = 4000
MAX_PARAM_CHARS: Final = 500
MAX_PARAMS: Final = 20

# Every expression kind a read-only query over two plain tables needs; anything else is refused.
_ALLOWED_NODES: Final[tuple[type[exp.Expression], ...]] = (
    exp.Select,
    exp.From,
    exp.Join,
    exp.Table,
    exp.TableAlias,
    exp.Alias,
    exp.Column,
    exp.Identifier,
    exp.Star,
    exp.Where,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Ordered,
    exp.Limit,
    exp.Offset,
    exp.Distinct,
    exp.Paren,
    exp.Subquery,
    exp.With,
    exp.CTE,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Placeholder,
    exp.Tuple,
    exp.And,
    exp.Or,
    exp.Not,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.DPipe,
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Lower,
    exp.Upper,
    exp.Coalesce,
    exp.Length,
    exp.Trim,
    exp.Concat,
)
_FORBIDDEN_SELECT_ARGS: Final = {
    "locks": "a locking clause (FOR UPDATE / FOR SHARE)",
    "into": "SELECT ... INTO (it creates a table)",
    "kind": "a SELECT modifier",
}


class SqlRefusedError(RoutegateError, ValueError):
    """The SQL guard refused a query. ``code`` is a short machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    """A query that passed the guard: the SQL to execute (the guard's rendering) and its parameters."""

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


def _function_name(node: object) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return type(node).__name__.lower()


def check_sql(query: object, params: object = None) -> CheckedQuery:
    """Check one query; return what to execute or raise :class:`SqlRefusedError` naming the problem."""
    if not isinstance(query, str):
        raise _refuse("not_text", f"the query must be a string, got {type(query).__name__}")
    if not query.strip():
        raise _refuse("empty", "the query is empty")
    if len(query) > MAX_SQL_CHARS:
        raise _refuse("too_long", f"the query has {len(query)} characters, over the {MAX_SQL_CHARS} limit")
    if "\x00" in query:
        raise _refuse("nul_byte", "the query contains a NUL byte")
    analysed = _analyse(query)
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
def _analyse(query: str) -> _Analysed:
    """Parse and check the query text (cached: the templates and repeated model queries are checked once;
    refusals raise and are never cached)."""
    try:
        statements = [s for s in sqlglot.parse(query, read="postgres") if s is not None]
    except SqlglotError as exc:
        raise _refuse("parse_error", f"not valid PostgreSQL: {str(exc).splitlines()[0][:200]}") from None
    except RecursionError:
        raise _refuse("parse_error", "the query is nested too deeply") from None
    if len(statements) != 1:
        raise _refuse("not_one_statement", f"exactly one statement is allowed, got {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Select):
        kind = tree.key.upper() if isinstance(tree, exp.Expression) else type(tree).__name__
        raise _refuse("not_select", f"only SELECT is allowed, got {kind}")

    cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    placeholders: set[str] = set()
    tables: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Select):
            for arg, what in _FORBIDDEN_SELECT_ARGS.items():
                if node.args.get(arg):
                    raise _refuse("forbidden_clause", f"{what} is not allowed")
        if not isinstance(node, _ALLOWED_NODES):
            if isinstance(node, exp.Func):
                raise _refuse(
                    "function_not_allowed",
                    f"function {_function_name(node)}() is not allowed (allowed: {sorted(ALLOWED_FUNCTIONS)})",
                )
            raise _refuse("construct_not_allowed", f"{node.key.upper()} is not allowed in a read-only query")
        if isinstance(node, exp.Literal) and not node.is_string and not node.is_number:
            raise _refuse("construct_not_allowed", "unsupported literal")
        if isinstance(node, exp.Placeholder):
            name = str(node.name or "")
            if not name or not name.isidentifier():
                raise _refuse("bad_params", "placeholders must be named, like :customer_id")
            placeholders.add(name)
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):
                raise _refuse("table_not_allowed", "only plain table names are allowed in FROM / JOIN")
            if node.args.get("db") or node.args.get("catalog"):
                raise _refuse("table_not_allowed", f"schema-qualified names are not allowed: {node.sql('postgres')}")
            name = node.name.lower()
            if node.this.quoted and node.name != name:
                raise _refuse("table_not_allowed", f"table {node.name!r} is not allowed (allowed: customers, tickets)")
            if name in cte_names and name not in ALLOWED_TABLES:
                continue
            if name not in ALLOWED_TABLES:
                raise _refuse("table_not_allowed", f"table {name!r} is not allowed (allowed: customers, tickets)")
            tables.add(name)
    plain = tree.sql(dialect="postgres")
    # psycopg reads "%" as the start of a placeholder when params are passed: escape it in string literals
    for literal in list(tree.find_all(exp.Literal)):
        if literal.is_string and "%" in literal.this:
            literal.replace(exp.Literal.string(literal.this.replace("%", "%%")))
    return _Analysed(plain, tree.sql(dialect="postgres"), frozenset(placeholders), frozenset(tables))

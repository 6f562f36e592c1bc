"""The SQL guard's allowlists: the expression kinds, functions, cast types and clauses a reporting query needs.

Anything not named here is refused by :mod:`.sqlguard`. The lists are closed on purpose: a new kind of node in
a future sqlglot, a function PostgreSQL added, a clause the parser learnt — all are refused until added here.
"""

from __future__ import annotations

from typing import Final

from routegate._extras import needs

with needs("desk"):
    from sqlglot import exp

ALLOWED_TABLES: Final = frozenset({"customers", "tickets"})
"""The relations the desk's SQL tool may read by default (``PostgresTool(tables=...)`` changes it)."""

ALLOWED_COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "customers": ("id", "name", "city"),
    "tickets": ("id", "customer_id", "issue", "status"),
}
"""The columns of the default tables, in table order (the desk's DDL). The Postgres tool passes the columns it
reads from the catalog instead; a column reference must name one of them (PostgreSQL reads ``c.f`` that names no
column as the function call ``f(c)``)."""

# Functions, by the sqlglot node the PostgreSQL parser gives them (never by a name typed in the query: a function
# sqlglot does not know parses as ``exp.Anonymous`` and is refused). Pure, read-only, bounded work.
FUNCTION_NODES: Final[dict[type[exp.Expression], str]] = {
    # aggregates
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.Stddev: "stddev",
    exp.StddevPop: "stddev_pop",
    exp.StddevSamp: "stddev_samp",
    exp.Variance: "variance",
    exp.VariancePop: "var_pop",
    exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc",
    # strings
    exp.Lower: "lower",
    exp.Upper: "upper",
    exp.Length: "length",
    exp.Trim: "trim",
    exp.Concat: "concat",
    exp.ConcatWs: "concat_ws",
    exp.Substring: "substring",
    exp.Replace: "replace",
    exp.StrPosition: "position",
    exp.Left: "left",
    exp.Right: "right",
    exp.SplitPart: "split_part",
    exp.StartsWith: "starts_with",
    # numbers and conditionals
    exp.Round: "round",
    exp.Abs: "abs",
    exp.Floor: "floor",
    exp.Ceil: "ceil",
    exp.Coalesce: "coalesce",
    exp.Nullif: "nullif",
    exp.Greatest: "greatest",
    exp.Least: "least",
    # dates
    exp.CurrentDate: "current_date",
    exp.CurrentTimestamp: "now",
    exp.TimestampTrunc: "date_trunc",
    exp.DateTrunc: "date_trunc",
    exp.Extract: "extract",
    exp.TimeToStr: "to_char",
}
ALLOWED_FUNCTIONS: Final = frozenset(FUNCTION_NODES.values())

# Every other expression kind a read-only query over plain tables needs.
SYNTAX_NODES: Final[tuple[type[exp.Expression], ...]] = (
    exp.Select,
    exp.Union,
    exp.Intersect,
    exp.Except,
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
    exp.Exists,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.DPipe,
    exp.Case,
    exp.If,
    exp.Cast,
    exp.DataType,
    exp.Filter,
    exp.WithinGroup,
    exp.Interval,
    exp.Var,  # only as the unit of EXTRACT / INTERVAL / date_trunc (checked in the guard)
)
VAR_PARENTS: Final = (exp.Extract, exp.Interval, exp.TimestampTrunc, exp.DateTrunc)

# Casts: plain value types only (no reg* types that look names up, no composite or array types).
CAST_TYPES: Final = frozenset(
    {
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.INT,
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.DECIMAL,
        exp.DataType.Type.FLOAT,
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.TEXT,
        exp.DataType.Type.VARCHAR,
        exp.DataType.Type.CHAR,
        exp.DataType.Type.BOOLEAN,
        exp.DataType.Type.DATE,
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.TIMESTAMPTZ,
        exp.DataType.Type.INTERVAL,
    }
)

# The arguments each statement-level node may carry (anything else set, e.g. a locking clause, is refused).
QUERY_ARGS: Final = frozenset(
    {"with_", "expressions", "from_", "joins", "where", "group", "having", "order", "limit", "offset", "distinct"}
)
SET_OPERATION_ARGS: Final = frozenset({"with_", "this", "expression", "distinct", "order", "limit", "offset"})
TABLE_ARGS: Final = frozenset({"this", "db", "alias", "only"})
CTE_ARGS: Final = frozenset({"this", "alias", "materialized"})
WITH_ARGS: Final = frozenset({"expressions", "recursive"})
CLAUSE_NAMES: Final = {
    "locks": "a locking clause (FOR UPDATE / FOR SHARE)",
    "into": "SELECT ... INTO (it creates a table)",
    "search": "SEARCH",
    "cycle": "CYCLE",
    "joins": "a parenthesised join",
    "sample": "TABLESAMPLE",
}

# Unquoted, these words are functions in PostgreSQL (they return the role, the schema, the server's time),
# although sqlglot reads some of them as column names. Quoted ("user"), they are plain column names.
SQL_KEYWORD_FUNCTIONS: Final = frozenset(
    {
        "user",
        "current_user",
        "current_role",
        "session_user",
        "system_user",
        "current_schema",
        "current_catalog",
        "current_time",
        "current_timestamp",
        "current_date",
        "localtime",
        "localtimestamp",
    }
)

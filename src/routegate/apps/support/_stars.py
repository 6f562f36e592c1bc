"""``SELECT *`` on a desk whose allowlist names only some columns of a table: the star is expanded to the readable
columns before the SQL guard sees the query, so ``*`` can never reach a column the configuration leaves out
(PostgreSQL would expand it to every column). A star that cannot be expanded is refused."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from routegate._extras import needs

with needs("desk"):
    from sqlglot import exp, parse_one
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
    from sqlglot.optimizer.qualify_columns import qualify_columns
    from sqlglot.schema import MappingSchema

from routegate.apps.support.sqlguard import SqlRefusedError


def expand_stars(query: object, columns: Mapping[str, Sequence[str]]) -> object:
    """``query`` with every ``*`` / ``t.*`` of a select list replaced by the readable columns; ``count(*)`` stays.
    Text the parser cannot read is returned as it is: the guard refuses it with its own reason."""
    if not isinstance(query, str) or "*" not in query:
        return query
    try:
        tree = normalize_identifiers(parse_one(query, read="postgres"), dialect="postgres")
    except Exception:
        return query
    if not any(not isinstance(star.parent, exp.Count) for star in tree.find_all(exp.Star)):
        return query  # count(*) or multiplication: nothing to expand
    schema = MappingSchema({t: dict.fromkeys(cols, "text") for t, cols in columns.items()}, dialect="postgres")
    with contextlib.suppress(Exception):  # a star left in place is refused below
        tree = qualify_columns(tree, schema=schema, expand_stars=True)
    for star in tree.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):
            raise SqlRefusedError(
                "star_not_allowed",
                "query refused (star_not_allowed): * could not be expanded to the readable columns; name the columns",
            )
    return tree.sql(dialect="postgres")

"""A desk's SQL file as statements to run in the desk's own schema: plain ``CREATE TABLE`` / ``INSERT`` files and
the plain-text files ``pg_dump`` writes alike.

The file is read once from start to end (:mod:`._statements` finds where each statement ends, as psql does), and
each statement is lexed once by sqlglot's PostgreSQL tokenizer. A statement a desk's SQL file may not hold (a
server file or program, an untrusted language, a role, an event trigger, ``SET ROLE``...: :mod:`._refusals`) is
refused with its line before anything runs. What ``pg_dump`` writes that a desk cannot run as it stands is taken
apart here, statement by statement:

* names qualified with ``public`` (or with a schema the file creates) lose the qualifier, so that they land in the
  desk's schema, which the loader puts first on the ``search_path``; the same for the ``'public.orders_id_seq'``
  string of a ``nextval``/``setval``/``::regclass``;
* ``COPY ... FROM stdin`` keeps its rows (the lines up to ``\\.``) and where they go (:class:`CopyInto`);
* ``SET x = v`` becomes ``SET LOCAL`` (the load is one transaction), and pg_dump's ``SELECT
  pg_catalog.set_config(..., false)`` line local the same way; ``search_path``, ``client_encoding`` and settings
  this server does not know are left out;
* what a desk does not take from a dump is left out and counted: owners and privileges (``ALTER ... OWNER TO``,
  ``GRANT``, ``REVOKE``, ``ALTER DEFAULT PRIVILEGES``, ``SECURITY LABEL``), schema statements, comments on
  extensions, ``DROP`` (the desk's schema starts empty: a ``DROP`` could only reach a table of another schema),
  transaction control (the load is one transaction) and psql's ``\\restrict`` / ``\\unrestrict``.

Another psql command (``\\connect``: a ``pg_dumpall`` file) is refused with the line it is on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final

from routegate._extras import needs

with needs("desk"):
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.errors import TokenError

    # defined in sqlglot.tokenizer_core by recent sqlglot, in sqlglot.tokens before; tokens re-exports them
    from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]

from routegate.apps.configured._refusals import STRINGS, refusal
from routegate.apps.configured._statements import Span, Unfinished, skip_between, statement_at
from routegate.apps.configured.config import DeskConfigError

_KEEP_SCHEMAS: Final = frozenset({"pg_catalog", "information_schema", "pg_toast"})
_LOCAL_SETTINGS_SKIPPED: Final = frozenset({"search_path", "client_encoding", "role", "session_authorization"})
_WORD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_SEQUENCE_FUNCTIONS: Final = frozenset({"nextval", "setval", "currval"})
_TRANSACTION: Final = frozenset({"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"})
_PSQL_SKIPPED: Final = frozenset({"\\restrict", "\\unrestrict"})


@dataclass(frozen=True, slots=True)
class CopyInto:
    """Where a ``COPY ... FROM stdin`` puts its rows: the table's ``name`` and ``schema`` (``None``: the desk's; a
    remapped schema's qualifier is dropped), its ``columns`` (``None``: every column), and the ``options`` after
    ``FROM stdin``."""

    schema: str | None
    name: str
    columns: tuple[str, ...] | None
    options: str

    @property
    def table(self) -> str:
        """The table as SQL, each name quoted."""
        return quoted(self.name) if self.schema is None else f"{quoted(self.schema)}.{quoted(self.name)}"


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement to run, as the desk runs it. ``copy_rows``: a ``COPY ... FROM stdin``'s data (text format,
    without the ``\\.`` line), ``copy_into`` where they go. ``line``: where it starts in the file (1-based)."""

    sql: str
    line: int
    copy_rows: str | None = None
    copy_into: CopyInto | None = None


@dataclass(frozen=True, slots=True)
class SqlScript:
    statements: tuple[Statement, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)
    """What was left out, by kind (``owner and privileges``, ``settings``, ...): ``desk init`` says it."""

    def skipped_summary(self) -> str:
        return ", ".join(f"{count} {kind}" for kind, count in sorted(self.skipped.items()))


ARCHIVE_MAGIC: Final = b"PGDMP"


def sql_text(data: bytes, *, source: str) -> str:
    """A SQL file's bytes as text (UTF-8, a byte-order mark dropped); an archive of ``pg_dump -Fc`` / ``-Ft``
    (not SQL) and other bytes are refused with what to do."""
    if data.startswith(ARCHIVE_MAGIC) or data[257:262] == b"ustar":
        raise DeskConfigError(
            f"{source}: this is a pg_dump archive (custom or tar format), not SQL; make a plain SQL file with "
            "`pg_restore --no-owner -f FILE.sql ARCHIVE` (or dump with `pg_dump -Fp`)"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DeskConfigError(
            f"{source}: not UTF-8 ({exc}); dump it with `pg_dump -E UTF8` or convert the file to UTF-8"
        ) from None


def parse_script(text: str, *, source: str, known_settings: Iterable[str] | None = None) -> SqlScript:
    """The statements of ``text`` (a SQL file) as the desk runs them in its own schema. ``known_settings``: the
    server's settings (``pg_settings.name``); a ``SET`` of another one (a newer ``pg_dump``'s) is left out. A
    statement a desk's SQL file may not hold (:mod:`._refusals`) is refused with its line."""
    known = frozenset(s.lower() for s in known_settings) if known_settings is not None else None
    reader = _Reader(text, source)
    chunks = list(reader.chunks())
    schemas = {"public"} | {s for chunk in chunks for s in _created_schemas(chunk.tokens)}
    skipped: Counter[str] = Counter()
    out: list[Statement] = []
    for chunk in chunks:
        kind = _never_run(chunk.tokens)
        if kind is None:
            found = refusal(chunk.text, chunk.tokens, setting_line=_setting_line(chunk.tokens))
            if found is not None:
                line = chunk.line + chunk.text.count("\n", 0, found.offset)
                raise DeskConfigError(f"{source} line {line}: {found.message}")
            kind = _skip_kind(chunk.tokens, known)
        if kind is not None:
            skipped[kind] += 1
            continue
        sql = _rewrite(chunk.text, chunk.tokens, schemas)
        into = _copy_into(chunk, schemas, source) if chunk.copy_rows is not None else None
        out.append(Statement(sql, chunk.line, chunk.copy_rows, into))
    skipped.update(reader.skipped)
    return SqlScript(tuple(out), dict(skipped))


@dataclass(slots=True)
class _Chunk:
    text: str  # the statement's text, without its ';'
    tokens: list[Token]  # offsets into text
    line: int
    copy_rows: str | None = None


_COPY_END: Final = re.compile(r"^\\\.\r?$", re.MULTILINE)


class _Reader:
    """The file from start to end, once (:mod:`._statements`): between statements, blanks and ``--`` comments go and
    a psql command line (``\\...`` at a line's start) is handled; each statement is lexed once by sqlglot; after
    ``COPY ... FROM stdin;`` the lines up to ``\\.`` are its rows, never lexed."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.skipped: Counter[str] = Counter()
        self._tokenizer = Postgres().tokenizer_class()

    def chunks(self) -> Iterator[_Chunk]:
        text = self.text
        length = len(text)
        position = 0
        line = 1  # the line of `position`
        while True:
            start = skip_between(text, position)
            line += text.count("\n", position, start)
            if start >= length:
                return
            if text[start] == "\\" and (start == 0 or text[start - 1] == "\n"):
                end = text.find("\n", start)
                position = length if end < 0 else end + 1
                self._psql_command(text[start:position], line)
                line += text.count("\n", start, position)
                continue
            try:
                span = statement_at(text, start)
            except Unfinished:
                raise DeskConfigError(
                    f"{self.source} line {line}: the last statement does not end (an unclosed quote, comment, "
                    "parenthesis or $$ body); close it and end it with ';'"
                ) from None
            body = text[span.start : span.end]
            tokens = self._tokens(body, line)
            position = span.after
            if tokens:
                begin, finish = tokens[0].start, tokens[-1].end + 1
                chunk = _Chunk(
                    body[begin:finish], [_moved(t, begin) for t in tokens], line + body.count("\n", 0, begin)
                )
                if _is_copy_from_stdin(tokens):
                    position, chunk.copy_rows = self._copy_rows(span, chunk.line)
                yield chunk
            line += text.count("\n", start, position)

    def _tokens(self, body: str, line: int) -> list[Token]:
        try:
            return list(self._tokenizer.tokenize(body))
        except TokenError:
            raise DeskConfigError(
                f"{self.source} line {line}: this statement cannot be read as PostgreSQL's SQL (a quote or a "
                "comment that does not close where PostgreSQL would close it?); fix it or remove it"
            ) from None

    def _psql_command(self, line: str, number: int) -> None:
        command = line.split(maxsplit=1)[0]
        if command in _PSQL_SKIPPED:
            self.skipped["psql \\restrict lines"] += 1
            return
        raise DeskConfigError(
            f"{self.source} line {number}: {command} is a psql command, not SQL (a file of pg_dumpall, or a psql "
            "script?); dump one database with `pg_dump --no-owner DBNAME > FILE.sql` or remove the line"
        )

    def _copy_rows(self, span: Span, line: int) -> tuple[int, str]:
        """Where reading goes on after the rows of the ``COPY ... FROM stdin`` of ``span``, and the rows."""
        text = self.text
        if span.end == len(text):
            raise DeskConfigError(f"{self.source}: the file ends after COPY ... FROM stdin, with no rows")
        eol = text.find("\n", span.after)
        rest = text[span.after : len(text) if eol < 0 else eol].strip()
        if rest and not rest.startswith("--"):
            raise DeskConfigError(
                f"{self.source} line {line}: COPY ... FROM stdin must end its line (its rows follow on the next "
                "lines); put the next statement after the \\. line"
            )
        rows_start = len(text) if eol < 0 else eol + 1
        end = _COPY_END.search(text, rows_start)
        if end is None:
            raise DeskConfigError(
                f"{self.source} line {line}: the rows of COPY ... FROM stdin have no end (a line \\.); the file is "
                "cut short: dump it again"
            )
        after = text.find("\n", end.end())
        return (len(text) if after < 0 else after + 1), text[rows_start : end.start()]


def _moved(token: Token, by: int) -> Token:
    return Token(token.token_type, token.text, token.line, token.col, token.start - by, token.end - by, token.comments)


def _words(tokens: Sequence[Token], count: int) -> list[str]:
    return [t.text.upper() for t in tokens[:count] if t.token_type != TokenType.STRING]


def _is_copy_from_stdin(tokens: Sequence[Token]) -> bool:
    if not tokens or tokens[0].text.upper() != "COPY":
        return False
    texts = [t.text.upper() if t.token_type not in STRINGS else "" for t in tokens]
    return any(a == "FROM" and b == "STDIN" for a, b in pairwise(texts))


def _created_schemas(tokens: Sequence[Token]) -> list[str]:
    words = _words(tokens, 6)
    if words[:2] != ["CREATE", "SCHEMA"] or len(tokens) < 3:
        return []
    name = tokens[5] if words[2:5] == ["IF", "NOT", "EXISTS"] and len(tokens) > 5 else tokens[2]
    return [] if name.text.upper() == "AUTHORIZATION" else [_name(name)]


def _name(token: Token) -> str:
    return token.text if token.token_type == TokenType.IDENTIFIER else token.text.lower()


def _never_run(tokens: Sequence[Token]) -> str | None:
    """What a dump holds that a desk never runs (and so never refuses): owners and privileges, schema statements,
    transaction control."""
    words = _words(tokens, 4)
    texts = [t.text.upper() for t in tokens[-4:]]
    first = words[0] if words else ""
    if first in {"GRANT", "REVOKE"} or words[:2] == ["SECURITY", "LABEL"]:
        return "owner and privileges"
    if first == "ALTER" and (words[1:3] == ["DEFAULT", "PRIVILEGES"] or _owner_to(texts)):
        return "owner and privileges"
    if (first in {"CREATE", "ALTER", "DROP"} and words[1:2] == ["SCHEMA"]) or words[:3] in (
        ["COMMENT", "ON", "SCHEMA"],
        ["COMMENT", "ON", "EXTENSION"],
    ):
        return "schema statements"
    if first in _TRANSACTION and words[1:2] != ["ATOMIC"]:
        return "transaction statements"
    return None


def _skip_kind(tokens: Sequence[Token], known: frozenset[str] | None) -> str | None:
    """Why a statement that may run is left out, or ``None`` when it runs."""
    first = tokens[0].text.upper()
    if first == "DROP":
        return "DROP statements"
    if first in {"SET", "RESET"}:
        return _setting_skip(tokens, known)
    name = _set_config_name(tokens)
    return "settings" if name is not None and _setting_left_out(name, known) else None


def _owner_to(texts: Sequence[str]) -> bool:
    """``ALTER ... OWNER TO role`` (not ``RENAME [COLUMN] owner TO x``)."""
    return len(texts) >= 4 and texts[-3:-1] == ["OWNER", "TO"] and texts[-4] not in {"RENAME", "COLUMN"}


def _setting_skip(tokens: Sequence[Token], known: frozenset[str] | None) -> str | None:
    words = [t.text.upper() for t in tokens[:3]]
    if words[1:2] == ["TRANSACTION"] or words[1:3] == ["SESSION", "CHARACTERISTICS"]:
        return "transaction statements"
    if words[0] == "RESET":
        return "settings"
    if words[1:2] == ["CONSTRAINTS"]:
        return None
    at = 2 if words[1:2] in (["LOCAL"], ["SESSION"]) else 1
    name = _name(tokens[at]).lower() if len(tokens) > at else ""
    name = "timezone" if name == "time" else name  # SET TIME ZONE
    return "settings" if _setting_left_out(name, known) else None


def _setting_left_out(name: str, known: frozenset[str] | None) -> bool:
    """``search_path`` and the like are the loader's; a setting the server does not know is a newer pg_dump's
    (``transaction_timeout``); a custom one (``app.x``) runs."""
    return name in _LOCAL_SETTINGS_SKIPPED or (known is not None and name not in known and "." not in name)


def _set_config_name(tokens: Sequence[Token]) -> str | None:
    """``SELECT pg_catalog.set_config('name', ...)``: the setting's name."""
    texts = [t.text.lower() for t in tokens[:6]]
    if texts[:1] != ["select"]:
        return None
    at = 4 if texts[1:3] == ["pg_catalog", "."] else 2
    if len(texts) <= at + 1 or texts[at - 1] != "set_config" or texts[at] != "(":
        return None
    return tokens[at + 1].text.lower() if tokens[at + 1].token_type == TokenType.STRING else None


def _setting_line(tokens: Sequence[Token]) -> bool:
    """pg_dump's line, exactly: ``SELECT [pg_catalog.]set_config('name', 'value', true|false)``."""
    if not tokens or tokens[0].text.upper() != "SELECT":
        return False
    rest = list(tokens[1:])
    if [t.text.lower() for t in rest[:2]] == ["pg_catalog", "."]:
        rest = rest[2:]
    shape = [t.token_type for t in rest[1:]]
    return (
        len(rest) == 8
        and rest[0].text.lower() == "set_config"
        and shape[:5] == [TokenType.L_PAREN, TokenType.STRING, TokenType.COMMA, TokenType.STRING, TokenType.COMMA]
        and rest[6].text.lower() in {"true", "false"}
        and shape[-1] == TokenType.R_PAREN
    )


def _copy_into(chunk: _Chunk, schemas: set[str], source: str) -> CopyInto:
    """The table, columns and options of a ``COPY table [(column, ...)] FROM stdin [options]``."""
    tokens = chunk.tokens
    names: list[str] = []
    index = 1
    while index < len(tokens) and _is_name(tokens[index]):
        names.append(_name(tokens[index]))
        if index + 1 < len(tokens) and tokens[index + 1].token_type == TokenType.DOT:
            index += 2
            continue
        index += 1
        break
    columns: list[str] | None = None
    if index < len(tokens) and tokens[index].token_type == TokenType.L_PAREN:
        columns = []
        index += 1
        while index < len(tokens) and _is_name(tokens[index]):
            columns.append(_name(tokens[index]))
            index += 1
            if index < len(tokens) and tokens[index].token_type == TokenType.COMMA:
                index += 1
        index += 1 if index < len(tokens) and tokens[index].token_type == TokenType.R_PAREN else len(tokens)
    words = [t.text.upper() for t in tokens[index : index + 2]]
    if not 1 <= len(names) <= 2 or words != ["FROM", "STDIN"]:
        raise DeskConfigError(
            f"{source} line {chunk.line}: cannot read the table and columns of this COPY; write it as "
            "COPY table (column, ...) FROM stdin"
        )
    schema = names[0] if len(names) == 2 and (names[0] not in schemas or names[0] in _KEEP_SCHEMAS) else None
    options = chunk.text[tokens[index + 1].end + 1 :].strip()
    return CopyInto(schema, names[-1], tuple(columns) if columns is not None else None, options)


def _is_name(token: Token) -> bool:
    return token.token_type == TokenType.IDENTIFIER or (
        token.token_type not in STRINGS and _WORD.fullmatch(token.text) is not None
    )


def quoted(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _rewrite(text: str, tokens: Sequence[Token], schemas: set[str]) -> str:
    """The statement with the remapped schemas' qualifiers removed, ``SET`` made local, ``set_config`` local."""
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    for index, token in enumerate(tokens):
        after = tokens[index + 1] if index + 1 < len(tokens) else None
        before = tokens[index - 1] if index else None
        if (
            after is not None
            and after.token_type == TokenType.DOT
            and (before is None or before.token_type != TokenType.DOT)
            and (token.token_type == TokenType.IDENTIFIER or _WORD.fullmatch(token.text))
            and _name(token) in schemas
        ):
            edits.append((token.start, after.end + 1, ""))
        elif token.token_type == TokenType.STRING and _names_a_relation(tokens, index):
            unqualified = _unqualified(token.text, schemas)
            if unqualified is not None:
                edits.append((token.start, token.end + 1, "'" + unqualified.replace("'", "''") + "'"))
    words = [t.text.upper() for t in tokens[:2]]
    if words[:1] == ["SET"] and words[1:2] not in (["LOCAL"], ["CONSTRAINTS"]):
        session = tokens[1].text.upper() == "SESSION"
        edits.append((tokens[0].start, (tokens[1] if session else tokens[0]).end + 1, "SET LOCAL"))
    if _set_config_name(tokens) is not None:
        last = [t for t in tokens if t.token_type != TokenType.R_PAREN][-1]
        if last.text.lower() == "false":
            edits.append((last.start, last.end + 1, "true"))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _names_a_relation(tokens: Sequence[Token], index: int) -> bool:
    """A string that names a relation: ``'x'::regclass``, or the first argument of ``nextval``/``setval``."""
    after = tokens[index + 1 : index + 3]
    if len(after) == 2 and after[0].token_type == TokenType.DCOLON and after[1].text.lower() == "regclass":
        return True
    return (
        index >= 2
        and tokens[index - 1].token_type == TokenType.L_PAREN
        and tokens[index - 2].text.lower() in _SEQUENCE_FUNCTIONS
    )


def _unqualified(value: str, schemas: set[str]) -> str | None:
    """``public.orders_id_seq`` → ``orders_id_seq`` (also ``"public"."x"``), ``None`` when not qualified so."""
    match = re.fullmatch(r'(?:"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*))\.(.+)', value, flags=re.DOTALL)
    if match is None:
        return None
    schema = match.group(1).replace('""', '"') if match.group(1) is not None else match.group(2).lower()
    return match.group(3) if schema in schemas and schema not in _KEEP_SCHEMAS else None


MAX_BATCH_CHARS: Final = 256 * 1024


def batches(script: SqlScript) -> list[list[Statement]]:
    """The statements in round trips: consecutive plain statements together (up to :data:`MAX_BATCH_CHARS`),
    each ``COPY`` alone."""
    out: list[list[Statement]] = []
    size = 0
    for statement in script.statements:
        joins = out and out[-1][-1].copy_rows is None and statement.copy_rows is None
        if joins and size + len(statement.sql) <= MAX_BATCH_CHARS:
            out[-1].append(statement)
            size += len(statement.sql)
        else:
            out.append([statement])
            size = len(statement.sql)
    return out


def batch_sql(batch: Sequence[Statement]) -> str:
    """Plain statements as one text, run at once."""
    return ";\n".join(s.sql for s in batch)

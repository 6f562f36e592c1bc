"""What a desk's SQL file may not do, found before anything runs: each refusal names what the statement would do
and what to do instead (:func:`refusal`; :mod:`.script` adds the file and the line).

A desk's SQL file creates and fills the tables of the desk's own schema. Refused: reading or writing the database
server's files or running its programs (``COPY ... TO`` / ``FROM`` a file or ``PROGRAM``; ``COPY ... FROM stdin``,
the rows in the file, loads as ever), untrusted languages (``plpython3u``, ``plperlu``, C), event triggers, roles,
databases, tablespaces and the server's configuration, large objects, the server-file and session-signalling
functions (``pg_read_file``, ``pg_ls_dir``, ``pg_terminate_backend``...), connections to other databases
(``dblink``, foreign servers), changing who runs the statements (``SET ROLE``, ``SET SESSION AUTHORIZATION``) and
``set_config(...)`` other than the ``SELECT pg_catalog.set_config('name', 'value', false)`` line ``pg_dump``
writes. Function and ``DO`` bodies are searched too.

This is the friendly layer: a statement built at run time (``EXECUTE 'COP' || 'Y ...'``) passes it. What holds
then is the role the file runs as (:mod:`._owner`), which has no right outside the desk's schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from routegate._extras import needs

with needs("desk"):
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.errors import TokenError
    from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]  # re-exported from tokenizer_core

STRINGS: Final = frozenset(
    {
        TokenType.STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.BYTE_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.RAW_STRING,
        TokenType.HEREDOC_STRING,
        TokenType.UNICODE_STRING,
    }
)
_COMMANDS: Final = frozenset(Postgres.Tokenizer.COMMANDS)
"""Statements sqlglot keeps as raw text after their first word (``DO``, ``CALL``, ``EXPLAIN``, ``PREPARE``...)."""

_SERVER_FILES: Final = "reads or writes the database server's files"
_FORBIDDEN_CALLS: Final = re.compile(
    r"(?P<files>pg_read_file|pg_read_binary_file|pg_stat_file|pg_ls_\w+|pg_file_\w+)"
    r"|(?P<large>lo_\w+|lowrite|loread)"
    r"|(?P<signal>pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile|pg_promote)"
    r"|(?P<remote>dblink\w*)"
    r"|(?P<setting>set_config)",
    re.IGNORECASE,
)
_CALL_WHY: Final = {
    "files": (_SERVER_FILES, "remove it"),
    "large": (
        "makes or reads large objects, which live outside the desk's schema",
        "dump without them (pg_dump --no-blobs) or remove it",
    ),
    "signal": ("acts on the database server or its other sessions", "remove it"),
    "remote": ("connects to another database", "remove it"),
    "setting": (
        "changes a setting beyond the load (only pg_dump's own `SELECT pg_catalog.set_config('name', 'value', "
        "false)` line is taken, for the load alone)",
        "write SET LOCAL name = value, or remove it",
    ),
}
_BODY: Final = re.compile(
    r"\b(?P<call>" + _FORBIDDEN_CALLS.pattern + r")\s*\("
    r"|\b(?P<role>set\s+(?:local\s+|session\s+)?role|session\s+authorization)\b"
    r"|\b(?P<system>(?:create|alter|drop)\s+(?:role|user|group|database|tablespace)|alter\s+system)\b"
    r"|\b(?P<event>event\s+trigger)\b"
    r"|\b(?P<copy>copy\s[^;]*?\b(?:to\b|from\s+program\b|from\s+'))",
    re.IGNORECASE,
)
_SYSTEM_OBJECTS: Final = frozenset({"ROLE", "USER", "GROUP", "DATABASE", "TABLESPACE"})
_REMOTE: Final = ("SERVER", "FOREIGN", "SUBSCRIPTION", "PUBLICATION")
_UNTRUSTED_EXTENSIONS: Final = frozenset({"dblink", "postgres_fdw", "file_fdw", "adminpack", "lo"})
_ROUTINES: Final = frozenset({"FUNCTION", "PROCEDURE"})
_LANGUAGE_OPTIONS: Final = frozenset({"OR", "REPLACE", "TRUSTED", "PROCEDURAL"})


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a statement is refused: ``offset`` in its text (for the line), ``message`` (what it does; what to do)."""

    offset: int
    message: str


def untrusted_language(name: str) -> bool:
    """C, internal, and the untrusted procedural languages (``plpython3u``, ``plperlu``, ``pltclu``...)."""
    lower = name.lower()
    return lower in {"c", "internal", "plsh", "plr"} or (lower.startswith("pl") and lower.endswith("u"))


def _words(tokens: Sequence[Token]) -> list[str]:
    return [t.text.upper() for t in tokens if t.token_type not in STRINGS]


def _name(token: Token) -> str:
    return token.text if token.token_type == TokenType.IDENTIFIER else token.text.lower()


def _refused(token: Token, what: str, todo: str) -> Refusal:
    return Refusal(token.start, f"{what}; a desk's SQL file may not: {todo}")


def refusal(text: str, tokens: Sequence[Token], *, setting_line: bool) -> Refusal | None:
    """Why ``text`` (one statement, lexed as ``tokens``) is refused, or ``None``. ``setting_line``: the statement is
    pg_dump's own ``SELECT pg_catalog.set_config(...)`` line, which is taken (for the load alone)."""
    if not tokens:
        return None
    words = _words(tokens[:8]) or [""]
    found = _statement_refusal(tokens, words)
    if found is not None:
        return found
    for index, token in enumerate(tokens[:-1]):
        if token.token_type in STRINGS or tokens[index + 1].token_type != TokenType.L_PAREN:
            continue
        call = _FORBIDDEN_CALLS.fullmatch(_name(token))
        if call is not None and not (call.lastgroup == "setting" and setting_line):
            what, todo = _CALL_WHY[str(call.lastgroup)]
            return _refused(token, f"{_name(token)}(...) {what}", todo)
    if tokens[0].token_type in _COMMANDS or words[0] == "DO":
        return _raw_text(text, tokens)
    if words[0] == "CREATE" and _ROUTINES & set(words[1:5]):
        return _bodies(tokens)
    return None


def _statement_refusal(tokens: Sequence[Token], words: list[str]) -> Refusal | None:
    first = tokens[0]
    head = words[0]
    second = words[1:2]
    if head in {"CREATE", "ALTER", "DROP"} and second and second[0] in _SYSTEM_OBJECTS and words[2:3] != ["MAPPING"]:
        return _refused(
            first,
            f"{head} {second[0]} changes the database server's roles, databases or tablespaces",
            "remove it (pg_dump --no-owner of one database writes none)",
        )
    if words[:2] == ["ALTER", "SYSTEM"]:
        return _refused(first, "ALTER SYSTEM changes the database server's configuration", "remove it")
    if head == "COMMENT" and words[2:3] and words[2] in _SYSTEM_OBJECTS:
        return _refused(first, f"COMMENT ON {words[2]} changes the database server's configuration", "remove it")
    if head in {"CREATE", "ALTER"} and words[1:3] == ["EVENT", "TRIGGER"]:
        return _refused(first, "an event trigger acts on every statement of the database", "remove it")
    if head == "CREATE" and [w for w in words[1:6] if w not in _LANGUAGE_OPTIONS][:1] == ["LANGUAGE"]:
        return _refused(first, "CREATE LANGUAGE installs a language in the database", "remove it")
    if head in {"CREATE", "ALTER", "IMPORT"} and (
        (second and second[0] in _REMOTE) or words[1:3] == ["USER", "MAPPING"]
    ):
        what = " ".join(words[:3])
        return _refused(first, f"{what} reaches other servers or databases (foreign servers, replication)", "remove it")
    if head == "LOAD":
        return _refused(first, "LOAD loads a library into the database server", "remove it")
    if head == "SET" and _sets_role(tokens):
        what = (
            "SET SESSION AUTHORIZATION" if {"AUTHORIZATION", "SESSION_AUTHORIZATION"} & set(words[:4]) else "SET ROLE"
        )
        return _refused(
            first,
            f"{what} changes who runs the statements (the file runs as the desk's owner role)",
            "remove it (pg_dump --no-owner writes none)",
        )
    if head == "COPY":
        return _copy(tokens)
    if head == "CREATE" and second == ["EXTENSION"]:
        name = next(
            (
                t
                for t in tokens[2:6]
                if t.token_type in {TokenType.VAR, TokenType.IDENTIFIER}
                and t.text.upper() not in {"IF", "NOT", "EXISTS", "EXTENSION"}
            ),
            None,
        )
        if name is not None and (_name(name) in _UNTRUSTED_EXTENSIONS or untrusted_language(_name(name))):
            return _refused(
                name, f"the extension {_name(name)} reaches files, programs or other databases", "remove it"
            )
    return _language(tokens)


def _sets_role(tokens: Sequence[Token]) -> bool:
    names = [_name(t).lower() for t in tokens[1:4]]
    if names[:2] == ["session", "authorization"]:
        return True
    at = 1 if names[:1] in (["local"], ["session"]) else 0
    rest = names[at : at + 2]
    return rest[:1] in (["role"], ["session_authorization"]) or rest == ["session", "authorization"]


def _copy(tokens: Sequence[Token]) -> Refusal | None:
    texts = [t.text.upper() if t.token_type not in STRINGS else "" for t in tokens]
    stdin = next((i for i in range(1, len(texts)) if texts[i - 1] == "FROM" and texts[i] == "STDIN"), None)
    if stdin is None:
        return _refused(
            tokens[0],
            f"COPY to or from a file or a program {_SERVER_FILES} or runs its programs",
            "keep the rows in the file (COPY ... FROM stdin, as pg_dump writes) or use INSERT",
        )
    where = next((t for t in tokens[stdin + 1 :] if t.text.upper() == "WHERE"), None)
    if where is not None:
        return _refused(
            where,
            "COPY ... FROM stdin WHERE runs an expression on every row as it loads",
            "filter the rows before they go in the file",
        )
    return None


def _language(tokens: Sequence[Token]) -> Refusal | None:
    for index, token in enumerate(tokens[:-1]):
        if token.token_type not in STRINGS and token.text.upper() == "LANGUAGE":
            name = tokens[index + 1]
            language = name.text
            if untrusted_language(language):
                return _refused(
                    name,
                    f"language {language} runs unchecked code on the database server",
                    "write the function in sql or plpgsql, or remove it",
                )
    return None


def _bodies(tokens: Sequence[Token]) -> Refusal | None:
    for token in tokens:
        if token.token_type in STRINGS:
            found = _body_refusal(token.text, token.start)
            if found is not None:
                return found
    return None


def _raw_text(text: str, tokens: Sequence[Token]) -> Refusal | None:
    """A statement sqlglot keeps as raw text (``DO $$ ... $$``, ``EXPLAIN ...``, ``CALL ...``): lexed again, else
    searched as a body."""
    start = tokens[0].end + 1
    rest = text[start:]
    try:
        inner = [_moved(t, start) for t in Postgres().tokenizer_class().tokenize(rest)]
    except TokenError:
        return _body_refusal(rest, start)
    if not inner:
        return None
    found = refusal(text, inner, setting_line=False) if inner[0].token_type not in _COMMANDS else None
    return found if found is not None else _language(inner) or _bodies(inner)


def _moved(token: Token, by: int) -> Token:
    return Token(token.token_type, token.text, token.line, token.col, token.start + by, token.end + by, token.comments)


def _body_refusal(body: str, offset: int) -> Refusal | None:
    """A function's (or ``DO``'s) body, searched for what the statements themselves may not do."""
    found = _BODY.search(body)
    if found is None:
        return None
    at = offset + found.start()
    kind = found.lastgroup
    if found.group("call") is not None:
        name = found.group("call").lower()
        call = _FORBIDDEN_CALLS.fullmatch(name)
        what, todo = _CALL_WHY[str(call.lastgroup if call is not None else "setting")]
        return Refusal(at, f"a body calls {name}(...), which {what}; a desk's SQL file may not: {todo}")
    why = {
        "role": "changes who runs the statements",
        "system": "changes the database server's roles, databases or configuration",
        "event": "makes an event trigger, which acts on every statement of the database",
        "copy": f"copies to or from a file or a program ({_SERVER_FILES})",
    }
    return Refusal(at, f"a body {why.get(str(kind), 'does what a desk may not')}; a desk's SQL file may not: remove it")

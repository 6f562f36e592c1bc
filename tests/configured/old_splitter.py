"""The statement splitter the desk had before its linear reader, kept as the property test's oracle: line by line,
the pending text lexed again by sqlglot at each line that may end a statement (quadratic in a body of ``;``
lines). Statements, their lines and ``COPY ... FROM stdin`` rows, for the files it read right."""

from __future__ import annotations

from itertools import pairwise

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType  # type: ignore[attr-defined]  # re-exported from tokenizer_core

Split = tuple[str, int, str | None]


def _may_end(line: str) -> bool:
    code = line.rstrip()
    return code.endswith(";") or (";" in code and code.split(";")[-1].lstrip().startswith("--"))


def _depth(tokens: list[Token], depth: int) -> int:
    first = [t.text.upper() for t in tokens[:5]]
    if not (first[:1] == ["CREATE"] and ("FUNCTION" in first or "PROCEDURE" in first)):
        return depth
    word = tokens[-1].text.upper()
    if word == "BEGIN" or (word == "CASE" and depth > 0):
        return depth + 1
    return depth - 1 if word == "END" and depth > 0 else depth


def _split(text: str) -> list[tuple[str, list[Token], int]] | None:
    try:
        tokens = list(Postgres().tokenizer_class().tokenize(text))
    except TokenError:
        return None
    if not tokens or tokens[-1].token_type != TokenType.SEMICOLON:
        return None
    out: list[tuple[str, list[Token], int]] = []
    current: list[Token] = []
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON and depth == 0:
            if current:
                begin = current[0].start
                out.append((text[begin : current[-1].end + 1], current, begin))
            current = []
            continue
        current.append(token)
        depth = _depth(current, depth)
    return out if depth == 0 and not current else None


def _copy(tokens: list[Token]) -> bool:
    texts = [t.text.upper() for t in tokens]
    return texts[:1] == ["COPY"] and any(a == "FROM" and b == "STDIN" for a, b in pairwise(texts))


def old_statements(text: str) -> list[Split]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    out: list[Split] = []
    pending: list[str] = []
    start = index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not pending:
            if not line.strip() or line.strip().startswith("--"):
                continue
            start = index
        pending.append(line)
        if not _may_end(line):
            continue
        joined = "".join(pending)
        split = _split(joined)
        if split is None:
            continue
        pending = []
        for chunk, tokens, offset in split:
            rows = None
            if _copy(tokens):
                taken: list[str] = []
                while lines[index].rstrip("\r\n") != "\\.":
                    taken.append(lines[index])
                    index += 1
                index += 1
                rows = "".join(taken)
            out.append((chunk, start + joined.count("\n", 0, offset), rows))
    if pending:
        joined = "".join(pending) + "\n;"
        split = _split(joined)
        assert split is not None
        out += [(chunk, start + joined.count("\n", 0, offset), None) for chunk, _, offset in split]
    return out

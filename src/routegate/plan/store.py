"""``Store``: the key-value blackboard that ``Step(writes="key")`` writes each step's payload into."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from routegate.errors import ConfigurationError
from routegate.plan._signature import signing_key as signing_key_bytes
from routegate.plan.checkpoint import Checkpoints, HistoryKeep, MemoryCheckpoints, SqliteCheckpoints
from routegate.plan.envelope import payload_text


class Store:
    """An in-memory key-value store shared by the steps of a plan (and across its runs, if you keep it).

    ``Step(writes="draft")`` stores the step's payload under ``"draft"`` after the step succeeds. Read it back
    with ``store["draft"]`` / ``store.read("draft")``; ``text()`` renders the whole store for a model prompt
    (LLM steps that list the store in ``sources=`` get that text). An empty store is falsy like a dict, but a
    plan checks ``is not None``: an empty store still receives writes.

    ``db=`` is where the checkpoints of durable runs (``Plan(..., checkpoint_key=...)``) go: ``None`` keeps them
    in this process, a file path in SQLite, a ``postgresql://`` URL in PostgreSQL (see docs/plan.md, "Durable
    runs"). The backend is opened on first use; ``close()`` closes it.

    ``signing_key=`` (at least 16 bytes; text is UTF-8) signs every checkpoint written through this store with
    HMAC-SHA256, and a resume through it refuses a checkpoint that is unsigned or whose signature does not match:
    whoever can write the database but has not the key cannot forge an interrupt's answer, a route or a position.

    ``history=`` is how much of each durable run's history the store keeps (``plan.history(key)``,
    ``plan.fork(key, at=...)``): ``True`` (the default) every checkpoint until the run is deleted, ``False`` only
    the latest (a run can then only be resumed, not re-run from an earlier step), ``N`` at least the latest ``N``
    checkpoints of each run (older ones are deleted ``N`` at a time).
    """

    __slots__ = ("_checkpoints", "_data", "_keep", "_signing_key", "db")

    def __init__(
        self,
        initial: Mapping[str, Any] | None = None,
        *,
        db: str | os.PathLike[str] | None = None,
        signing_key: str | bytes | None = None,
        history: bool | int = True,
    ) -> None:
        self._data: dict[str, Any] = dict(initial) if initial else {}
        self.db = db
        self._signing_key = signing_key_bytes(signing_key)
        self._keep = history_keep(history)
        self._checkpoints: Checkpoints | None = None

    @property
    def signing_key(self) -> bytes | None:
        """The key that signs and checks this store's checkpoints (``None``: they are neither signed nor checked)."""
        return self._signing_key

    @property
    def checkpoints(self) -> Checkpoints:
        """The checkpoint backend of this store (opened on first use)."""
        if self._checkpoints is None:
            self._checkpoints = open_checkpoints(self.db, self._keep)
        return self._checkpoints

    def close(self) -> None:
        """Close the checkpoint backend, if one was opened."""
        if self._checkpoints is not None:
            self._checkpoints.close()
            self._checkpoints = None

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    get = read

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clear(self) -> None:
        self._data.clear()

    def keys(self) -> list[str]:
        return list(self._data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def text(self) -> str:
        """One ``key: value`` line per entry, values as JSON (strings as they are)."""
        lines = []
        for key, value in self._data.items():
            lines.append(f"{key}: {payload_text(value)}")
        return "\n".join(lines)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __repr__(self) -> str:
        if self.db is not None:
            db = os.fspath(self.db)
            if "://" in db:  # a URL may carry a password: show only its scheme
                db = db.split("://", 1)[0] + "://…"
            return f"Store({self._data!r}, db={db!r})"
        return f"Store({self._data!r})"


def history_keep(history: object) -> HistoryKeep:
    """``Store(history=...)`` as what a backend keeps: ``None`` all, ``0`` none, ``N`` the latest ``N``."""
    if history is True:
        return None
    if history is False:
        return 0
    if isinstance(history, int) and history >= 1:
        return history
    raise ConfigurationError(
        f"Store(history={history!r}): give True (keep every checkpoint of a run), False (only the latest) or a "
        "number of checkpoints to keep per run (>= 1)"
    )


def open_checkpoints(db: str | os.PathLike[str] | None, keep: HistoryKeep = None) -> Checkpoints:
    """The backend for ``Store(db=...)``: memory for ``None``, PostgreSQL for a ``postgresql://`` URL, else a
    SQLite file path; keeping ``keep`` of each run's history. The PostgreSQL backend (and psycopg) is imported only
    when asked for."""
    if db is None:
        return MemoryCheckpoints(keep)
    text = os.fspath(db)
    if text.startswith(("postgresql://", "postgres://")):
        from routegate.plan._pg import PostgresCheckpoints

        return PostgresCheckpoints(text, keep)
    if not text or text == ":memory:":
        raise ValueError(
            f"Store(db={text!r}): give a SQLite file path or a postgresql:// URL; for an in-memory store use Store()"
        )
    return SqliteCheckpoints(text, keep)

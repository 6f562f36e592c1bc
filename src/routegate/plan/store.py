"""``Store``: the key-value blackboard that ``Step(writes="key")`` writes each step's payload into."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from routegate.plan.envelope import payload_text


class Store:
    """An in-memory key-value store shared by the steps of a plan (and across its runs, if you keep it).

    ``Step(writes="draft")`` stores the step's payload under ``"draft"`` after the step succeeds. Read it back
    with ``store["draft"]`` / ``store.read("draft")``; ``text()`` renders the whole store for a model prompt
    (LLM steps that list the store in ``sources=`` get that text). An empty store is falsy like a dict, but a
    plan checks ``is not None``: an empty store still receives writes.
    """

    __slots__ = ("_data",)

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(initial) if initial else {}

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
        return f"Store({self._data!r})"

"""A dataclass's fields as a dict: where a ``to_dict`` is the fields themselves, it starts from this."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def fields_dict(record: DataclassInstance, *, leave_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``{name: value}`` of every field of ``record`` not in ``leave_out``, in the order they are declared.

    The values are the record's own (no copy, no conversion; ``dataclasses.asdict`` would deep-copy them). A
    ``to_dict`` converts what needs it by updating the result, which keeps each key where it is:
    ``fields_dict(self) | {"isolation": list(self.isolation)}``; a key wanted first goes first in a dict the
    fields update: ``{"type": self.type} | fields_dict(self)``.
    """
    return {field.name: getattr(record, field.name) for field in fields(record) if field.name not in leave_out}

"""Cheap construction of the frozen ``slots`` dataclasses a run builds on every step.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__`` (the class's own
``__setattr__`` refuses), which costs about 0.7k instructions a field. The setter of the field's slot descriptor
stores it for a fraction of that. A class built on the hot path declares ``init=False`` and a hand-written
``__init__`` (same parameters, same defaults) that stores its fields through :func:`slot_setters`; it stays
frozen (assigning a field still raises ``FrozenInstanceError``), and compares, hashes, prints, pickles and
``dataclasses.replace``-s as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Setter = Callable[[Any, Any], None]


def slot_setters(cls: type, *names: str) -> tuple[Setter, ...]:
    """The setters of the slots ``names`` of ``cls`` (a ``slots`` dataclass), in that order."""
    return tuple(cls.__dict__[name].__set__ for name in names)

"""How a mistake in a desk's configuration is said: the file it is in (``gym/desk.toml: ...``) and the name that was
meant (``unknown column 'emial' (did you mean 'email'?)``, a desk directory beside a mistyped one).

The checks stay where the configuration is read (:mod:`.config`, :mod:`.database`); they word what they refuse
with these helpers, so every message about ``desk.toml`` starts with the same path and suggests alike.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from pydantic import BaseModel

from routegate._suggest import close_ones, did_you_mean

CONFIG_FILE: Final = "desk.toml"
_LOOKED_AT: Final = 10_000
"""At most this many names of a desk directory's parent are read for a did you mean."""


def config_file(desk_dir: Path) -> Path:
    """``DIR/desk.toml``: the file each message about a desk's configuration starts with."""
    return Path(desk_dir) / CONFIG_FILE


def unknown_names(what: str, names: Sequence[str], known: Iterable[str]) -> str:
    """``unknown column 'emial' (did you mean 'email'?)``; ``unknown columns 'a', 'b' (did you mean 'c'?)``."""
    choices = tuple(known)
    listed = ", ".join(f"{name!r}{did_you_mean(name, choices)}" for name in names)
    return f"unknown {what}{'s' if len(names) > 1 else ''} {listed}"


def missing_desk(desk_dir: Path) -> str:
    """Why ``DIR/desk.toml`` is not there and what to do: the desk beside it whose name is close (``gym`` for a
    mistyped ``gmy``), else how to create one."""
    desk_dir = Path(desk_dir)
    path = config_file(desk_dir)
    if not desk_dir.exists():
        try:
            names = [entry.name for entry in itertools.islice(desk_dir.parent.iterdir(), _LOOKED_AT)]
        except OSError:
            names = []
        near = next((n for n in close_ones(desk_dir.name, names) if config_file(desk_dir.parent / n).is_file()), None)
        if near is not None:
            return f"{path} does not exist: did you mean {desk_dir.parent / near}? (a desk directory beside it)"
    return f"{path} does not exist: create the desk with `routegate desk init {desk_dir} --from-sql SCHEMA.sql`"


def fields_at(model: type[BaseModel], loc: Sequence[int | str]) -> tuple[str, ...]:
    """The fields, as the file writes them (aliases), of the table at ``loc`` of ``model`` (``("tables", 0)``:
    a ``[[tables]]`` entry's); ``()`` when ``loc`` leads to no table."""
    found: type[BaseModel] | None = model
    for item in loc:
        if found is None:
            return ()
        if isinstance(item, str):
            field = found.model_fields.get(item)
            found = _model_in(field.annotation) if field is not None else None
    return tuple(f.alias or name for name, f in found.model_fields.items()) if found is not None else ()


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The model a field holds (``list[TableConfig]`` -> ``TableConfig``), else ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)

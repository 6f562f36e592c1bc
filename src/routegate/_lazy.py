"""A package's exports imported on first use (:pep:`562`): importing the package loads none of its modules, and
a name's module is imported the first time the name is looked up."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping


def lazy_exports(
    package: str, where: Mapping[str, str], exports: Collection[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``where`` maps each exported name to the submodule that
    holds it (relative to the package), or to ``"submodule:attribute"`` when it is exported under another name; a
    name that is its submodule's own name is the submodule itself."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        place = where.get(name)
        if place is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = place.partition(":")
        found = importlib.import_module(f"{package}.{module}")
        value = found if module.rsplit(".", 1)[-1] == name else getattr(found, attribute or name)
        namespace[name] = value  # once: later lookups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__

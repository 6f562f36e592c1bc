"""A package's exports imported on first use (:pep:`562`): importing the package loads none of its modules, and
a name's module is imported the first time the name is looked up.

Every package of routegate that defers an import does it through :func:`lazy_exports`: no package writes its
own module ``__getattr__``.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Collection, Mapping


def lazy_exports(
    package: str,
    where: Mapping[str, str],
    exports: Collection[str],
    *,
    renamed: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    ``where`` maps each lazily exported name to the module that holds it, relative to the package (``"core"``,
    ``"llm.openai_chat"``), or to ``"module:attribute"`` when it is exported under another name; a name that is
    its module's own name is the module itself. The value is imported on the first lookup and kept in the
    package's namespace, so later lookups do not come here.

    ``renamed`` maps an old name that still resolves to ``(place, warning)``: each lookup issues the
    :class:`DeprecationWarning` ``warning`` and returns what ``place`` (as in ``where``) names; it is not kept,
    so every use warns."""
    namespace = vars(sys.modules[package])
    old = renamed or {}

    def load(place: str, name: str) -> object:
        module, _, attribute = place.partition(":")
        found = importlib.import_module(f"{package}.{module}")
        return found if module.rsplit(".", 1)[-1] == name else getattr(found, attribute or name)

    def __getattr__(name: str) -> object:
        place = where.get(name)
        if place is None:
            if name in old:
                place, warning = old[name]
                warnings.warn(warning, DeprecationWarning, stacklevel=2)
                return load(place, name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = load(place, name)
        namespace[name] = value  # once: later lookups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__

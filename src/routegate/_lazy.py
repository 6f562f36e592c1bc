"""A package's exports imported on first use (:pep:`562`): importing the package loads none of its modules, and
a name's module is imported the first time the name is looked up.

Every package of routegate that defers an import does it through :func:`lazy_exports`: no package writes its
own module ``__getattr__``. Old names go through here too, for the one release they keep working: a name a
package renamed or stopped exporting (``renamed=``, ``moved=``), a method's old name (:func:`renamed_method`,
which warns through :func:`warn_old_method`) and
an attribute's old name (:func:`warn_old_attribute`) warn with a :class:`DeprecationWarning` that names what to use
instead.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Concatenate, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")

_ROOT = "routegate."


def lazy_exports(
    package: str,
    where: Mapping[str, str],
    exports: Collection[str],
    *,
    renamed: Mapping[str, tuple[str, str]] | None = None,
    moved: Mapping[str, str] | None = None,
    removed: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    ``where`` maps each lazily exported name to the module that holds it, relative to the package (``"core"``,
    ``"llm.openai_chat"``), or to ``"module:attribute"`` when it is exported under another name; a name that is
    its module's own name is the module itself (a full name, ``"routegate.plan.agent"``, names a module of
    another package). The value is imported on the first lookup and kept in the
    package's namespace, so later lookups do not come here.

    ``renamed`` maps an old name that still resolves to ``(place, warning)``: each lookup issues the
    :class:`DeprecationWarning` ``warning`` and returns what ``place`` (as in ``where``) names; it is not kept,
    so every use warns.

    ``moved`` maps a name the package no longer exports to the place (as in ``where``) that defines it: a
    ``renamed`` entry whose warning names that place, for the one release the old import keeps working.

    ``removed`` maps a name that is gone, with nothing that could stand in for it, to what to use instead: looking
    it up (``from package import name`` too) raises :class:`ImportError` with that text, not a bare "cannot
    import name", for the one release after it went."""
    namespace = vars(sys.modules[package])
    old = {name: (place, _moved_warning(package, name, place)) for name, place in (moved or {}).items()}
    old.update(renamed or {})

    def load(place: str, name: str) -> object:
        module, _, attribute = place.partition(":")
        found = importlib.import_module(_module(package, module))
        return found if module.rsplit(".", 1)[-1] == name else getattr(found, attribute or name)

    def __getattr__(name: str) -> object:
        place = where.get(name)
        if place is None:
            if name in old:
                place, warning = old[name]
                warnings.warn(warning, DeprecationWarning, stacklevel=2)
                return load(place, name)
            if removed is not None and name in removed:
                raise ImportError(f"{package}.{name} was removed: {removed[name]}", name=package)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = load(place, name)
        namespace[name] = value  # once: later lookups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def warn_old_method(owner: str, old: str, new: str) -> None:
    """Issue the :class:`DeprecationWarning` of the method ``old`` of ``owner``, kept for one release as another
    name of ``new``; called first thing by the old method, so the warning points at its caller."""
    _warn_old(f"{owner}.{old} is deprecated: call {owner}.{new}, the same method.")


def renamed_method(new: Callable[Concatenate[_S, _P], _R], owner: str, old: str) -> Callable[Concatenate[_S, _P], _R]:
    """The method ``old`` of ``owner``, kept for one release as another name of ``new`` (a method of the same
    class): in the class body, ``astream = renamed_method(iter, "Plan", "astream")``. Calling it warns (naming
    ``new``), then calls ``new`` with the same arguments."""

    def alias(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        warn_old_method(owner, old, new.__name__)
        return new(self, *args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated: :meth:`{new.__name__}` under its old name (warns)."
    return alias


def warn_old_attribute(owner: str, old: str, new: str) -> None:
    """Issue the :class:`DeprecationWarning` of the attribute ``old`` of ``owner``, kept for one release as another
    name of ``new``; called first thing by the old name's property getter, so the warning points at the line that
    read it (Python's default filter shows it once per such line)."""
    _warn_old(f"{owner}.{old} is deprecated: read {owner}.{new}, the same value.")


def _warn_old(what: str) -> None:
    warnings.warn(f"{what} The old name goes in the next release.", DeprecationWarning, stacklevel=4)


def _module(package: str, module: str) -> str:
    """The full name of ``module``: relative to ``package``, unless it is a full name (``routegate.plan.agent``:
    a name that moved to another package)."""
    return module if module.startswith(_ROOT) else f"{package}.{module}"


def _moved_warning(package: str, name: str, place: str) -> str:
    module, _, attribute = place.partition(":")
    there = _module(package, module)
    what = f"{attribute} from {there}" if attribute else f"it from {there}"
    return (
        f"{package}.{name} is no longer exported by {package}; import {what}. "
        "The old import works until the next release."
    )

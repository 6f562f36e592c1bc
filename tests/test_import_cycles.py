"""No import circle in ``src/`` but the named, deliberate ones.

The module graph is built with grimp (import-linter's engine) from the installed sources: every import statement,
at module level or inside a function, counts; imports under ``if TYPE_CHECKING:`` do not (they never run). Every
strongly connected group of two or more modules must be listed in :data:`ALLOWED` with why it is deliberate
(``docs/architecture.md`` names them too).
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

ALLOWED: dict[frozenset[str], str] = {
    frozenset({"routegate.apps.support.embedded", "routegate.apps.support.warm"}): (
        "the watcher process (warm) attaches to the server as an EmbeddedPostgres; EmbeddedPostgres.start imports "
        "warm only when a keep-warm time is set, inside the call (a command without one never loads it)"
    ),
}
"""Deliberate cycles, each with why. ``plan.checkpoint`` ↔ ``plan._pg`` was one until ``open_checkpoints`` moved to
``plan.store``, the one module that opens a backend."""


def cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("routegate", exclude_type_checking_imports=True, cache_dir=None)


def test_no_import_cycle_in_src_but_the_named_ones(graph: grimp.ImportGraph) -> None:
    unexpected = [sorted(group) for group in cycles(graph) if group not in ALLOWED]
    assert not unexpected, (
        f"import cycles between modules: {unexpected}; break them (move the shared part into a module both "
        "import, pass a class or callable in, or import under TYPE_CHECKING), or, for a deliberate lazy backend "
        "registry, add it to ALLOWED here and name it in docs/architecture.md"
    )


def test_every_allowed_cycle_still_exists(graph: grimp.ImportGraph) -> None:
    found = set(cycles(graph))
    assert set(ALLOWED) <= found, f"allowed cycles that are gone (drop them from ALLOWED): {set(ALLOWED) - found}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    fake = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        fake.add_module(module)
    fake.add_import(importer="pkg.a", imported="pkg.b")
    fake.add_import(importer="pkg.b", imported="pkg.c")
    fake.add_import(importer="pkg.c", imported="pkg.a")
    fake.add_import(importer="pkg.c", imported="pkg.d")
    assert cycles(fake) == [frozenset({"pkg.a", "pkg.b", "pkg.c"})]

"""The engine's boundaries, read from the source of ``src/``: a runtime outside ``routegate/plan`` reaches the engine
only through its public seam (no private name of the engine, no private engine module); nothing anywhere builds
an object behind its constructor's back (``object.__new__``, a slot's setter); nothing drives asyncio through its
private attributes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "routegate"
ENGINE = SRC / "plan"
ASYNCIO_PRIVATE = frozenset({"_run_once", "_ready", "_set_running_loop", "_thread_id", "_get_running_loop"})


def _sources(root: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_names(tree: ast.Module) -> set[str]:
    """The private names ``tree`` defines: its private functions, classes and constants, and the private attributes
    and methods of its classes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
            names.add(node.id)
    return names


def _engine_private_names() -> frozenset[str]:
    """The private names only the engine defines (a name another module of ``src/`` defines too — ``_lock``,
    ``_open`` — is that module's own when it uses it)."""
    engine: set[str] = set()
    elsewhere: set[str] = set()
    for path, tree in _sources(SRC):
        (engine if ENGINE in path.parents else elsewhere).update(_private_names(tree))
    return frozenset(engine - elsewhere)


def _uses_of_engine_privates(path: Path, tree: ast.Module, private: frozenset[str]) -> list[str]:
    found: list[str] = []
    where = path.relative_to(SRC.parent)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("routegate.plan"):
            parts = node.module.split(".")
            if any(_private(part) for part in parts):
                found.append(f"{where}:{node.lineno}: imports the engine's private module {node.module}")
            found += [
                f"{where}:{node.lineno}: imports {alias.name} from {node.module}"
                for alias in node.names
                if _private(alias.name)
            ]
        elif isinstance(node, ast.Import):
            found += [
                f"{where}:{node.lineno}: imports the engine's private module {alias.name}"
                for alias in node.names
                if alias.name.startswith("routegate.plan.") and any(_private(p) for p in alias.name.split("."))
            ]
        elif isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue  # the file's own private attribute, which happens to share a name
            found.append(f"{where}:{node.lineno}: reads or sets the engine's private name .{node.attr}")
    return found


def test_no_file_outside_the_engine_uses_a_private_name_of_the_engine() -> None:
    private = _engine_private_names()
    assert {"_compiled", "_lean", "_store_for", "_bind"} <= private  # the scan sees the engine's names
    found: list[str] = []
    for path, tree in _sources(SRC):
        if ENGINE not in path.parents:
            found += _uses_of_engine_privates(path, tree, private)
    assert found == []


def test_the_scan_finds_what_the_runtimes_once_did() -> None:
    """The scan above fails on the old private seam: a runtime reading and setting the engine's private names."""
    old = ast.parse(
        "from routegate.plan._spans import RunSpans\n"
        "plan._result_type = ended\n"
        "result = await self.plan._drive(state, None, deps)\n"
    )
    found = _uses_of_engine_privates(SRC / "technique" / "x.py", old, frozenset({"_result_type", "_drive"}))
    assert len(found) == 3


def test_nothing_in_src_builds_an_object_without_its_constructor() -> None:
    found = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}"
        for path, tree in _sources(SRC)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "__new__"
        and isinstance(node.value, ast.Name)
        and node.value.id == "object"
    ]
    assert found == []


def test_nothing_in_src_stores_a_field_through_its_slot_descriptor() -> None:
    """A frozen value is built by its own ``__init__``: nothing sets its fields through the slots' setters
    (``Cls.__dict__[name].__set__``), which would skip the constructor and its checks."""
    found = [
        f"{path.relative_to(SRC.parent)}:{node.lineno}"
        for path, tree in _sources(SRC)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "__set__"
    ]
    assert found == []


def test_the_scan_finds_a_slot_setter() -> None:
    old = ast.parse('setter = RouteIntent.__dict__["target"].__set__\nsetter(self, target)\n')
    assert [node for node in ast.walk(old) if isinstance(node, ast.Attribute) and node.attr == "__set__"]


def test_nothing_in_src_touches_a_private_attribute_of_asyncio() -> None:
    found: list[str] = []
    for path, tree in _sources(SRC):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            root: ast.expr = node
            while isinstance(root, ast.Attribute):
                root = root.value
            on_asyncio = isinstance(root, ast.Name) and root.id == "asyncio" and _private(node.attr)
            if on_asyncio or node.attr in ASYNCIO_PRIVATE:
                found.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: .{node.attr}")
    assert found == []


def test_the_tool_agent_is_built_on_the_public_seam_from_the_outside_in() -> None:
    """The tool agent lives beside the engine but uses it as a runtime outside it would: no private module and
    no private name of the engine's other modules (its own private names are its own)."""
    agent = [ENGINE / "tool_agent.py", ENGINE / "tool_result.py"]
    own: set[str] = set()
    for path in agent:
        own |= _private_names(ast.parse(path.read_text(encoding="utf-8")))
    others: set[str] = set()
    for path, tree in _sources(ENGINE):
        if path not in agent:
            others |= _private_names(tree)
    private = frozenset(others - own)
    assert {"_compiled", "_store_for"} <= private  # the scan sees the engine's names
    found = [
        hit for path in agent for hit in _uses_of_engine_privates(path, ast.parse(path.read_text("utf-8")), private)
    ]
    assert found == []

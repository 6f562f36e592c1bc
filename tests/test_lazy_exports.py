"""Deferred imports go through one helper (``routegate._lazy.lazy_exports``): a package's lazily exported name
loads its module on first lookup and not before, shows in ``dir()``, and an old name warns on every use."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "routegate"

LAZY = [  # (package, a name it exports lazily, the module that name loads)
    ("routegate", "RoutingAgent", "routegate.core"),
    ("routegate", "__version__", "routegate._version"),
    ("routegate.llm", "OpenAIChatModel", "routegate.llm.openai_chat"),
    ("routegate.technique", "MCPToolPool", "routegate.technique.tools"),
]


@pytest.mark.parametrize(("package", "name", "module"), LAZY)
def test_a_lazy_name_loads_its_module_on_first_lookup_only(package: str, name: str, module: str) -> None:
    code = (
        "import importlib, json, sys\n"
        f"pkg = importlib.import_module({package!r})\n"
        f"before = {module!r} in sys.modules\n"
        f"listed = {name!r} in dir(pkg)\n"
        f"value = getattr(pkg, {name!r})\n"
        f"print(json.dumps([before, listed, {module!r} in sys.modules, getattr(pkg, {name!r}) is value]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, True, True, True]


def test_an_old_name_warns_on_every_lookup_and_resolves_to_the_new_one() -> None:
    import routegate.testing as testing

    for _ in range(2):
        with pytest.warns(DeprecationWarning, match="renamed ServerStep"):
            assert testing.Step is testing.ServerStep  # type: ignore[attr-defined]  # the deprecated alias
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        testing.Nope  # type: ignore[attr-defined]  # noqa: B018 - the lookup is the test


def test_no_package_hand_writes_a_module_getattr() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "_lazy.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == [], "use routegate._lazy.lazy_exports"

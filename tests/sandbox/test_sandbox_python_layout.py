"""Where each kind of install lands inside the sandbox: the bubblewrap mounts built from an interpreter's answers.

The interpreter's own description of itself (``_probe``) is replaced by the answers a Debian ``/usr``, a
``/usr/local`` build with a shared ``libpython`` (the official container images), a pyenv install and a
broken layout would give; the directories exist under ``tmp_path``. Real interpreters are run in
``tests/technique/test_technique_sandbox_interpreters.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from routegate.sandbox import _python
from routegate.sandbox._python import EXECUTABLE, PREFIX, interpreter


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    interpreter.cache_clear()
    yield
    interpreter.cache_clear()


def _install(root: Path, version: str = "3.12") -> dict[str, str]:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / f"python{version}").write_bytes(b"")
    stdlib = root / "lib" / f"python{version}"
    (stdlib / "lib-dynload").mkdir(parents=True)
    return {
        "executable": str(root / "bin" / f"python{version}"),
        "prefix": str(root),
        "exec_prefix": str(root),
        "platlibdir": "lib",
        "stdlib": str(stdlib),
        "platstdlib": str(stdlib),
        "dynload": str(stdlib / "lib-dynload"),
        "libdir": str(root / "lib"),
        "ldlibrary": f"libpython{version}.so",
        "soname": f"libpython{version}.so.1.0",
        "multiarch": "x86_64-linux-gnu",
    }


def _binds(mounts: tuple[str, ...]) -> dict[str, str]:
    return {mounts[i + 2]: mounts[i + 1] for i in range(len(mounts)) if mounts[i] == "--ro-bind"}


def test_a_system_install_maps_its_standard_library_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = _install(tmp_path / "usr", "3.11")
    monkeypatch.setattr(_python, "SYSTEM_PREFIXES", (info["prefix"],))
    monkeypatch.setattr(_python, "_probe", lambda python: info)
    layout = interpreter("/usr/bin/python3")
    binds = _binds(layout.mounts)
    assert binds[EXECUTABLE] == info["executable"]
    assert binds[f"{PREFIX}/lib/python3.11"] == info["stdlib"]  # lib-dynload is inside it: no bind of its own
    assert not any(target.startswith(f"{PREFIX}/lib/python3.11/") for target in binds)
    assert layout.library_path == ""  # no libpython file there: the binary is static, as Debian's is


def test_a_shared_libpython_outside_the_system_directories_is_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = _install(tmp_path / "usr" / "local")
    (tmp_path / "usr" / "local" / "lib" / "libpython3.12.so").write_bytes(b"\x7fELF")
    monkeypatch.setattr(_python, "SYSTEM_PREFIXES", (info["prefix"],))
    monkeypatch.setattr(_python, "_probe", lambda python: info)
    layout = interpreter("/usr/local/bin/python3")
    binds = _binds(layout.mounts)
    assert binds[f"{PREFIX}/lib/libpython3.12.so.1.0"] == info["libdir"] + "/libpython3.12.so"  # by its soname
    assert layout.library_path == f"{PREFIX}/lib"  # the loader finds it there (no ld.so.cache inside)


def test_an_install_of_its_own_maps_its_whole_lib_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = _install(tmp_path / "root" / ".pyenv" / "versions" / "3.12.1")
    monkeypatch.setattr(_python, "_probe", lambda python: info)
    layout = interpreter(info["executable"])
    binds = _binds(layout.mounts)
    assert binds[f"{PREFIX}/lib"] == info["libdir"]  # libpython, the standard library, conda's libssl...
    assert set(binds) >= {EXECUTABLE, f"{PREFIX}/lib"}
    assert not [target for target in binds if target.startswith(f"{PREFIX}/lib/")]
    assert layout.library_path == f"{PREFIX}/lib"
    assert all(str(tmp_path) not in target for target in binds)  # host paths only ever as sources


def test_a_standard_library_outside_the_prefix_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = _install(tmp_path / "opt" / "python")
    elsewhere = tmp_path / "elsewhere" / "python3.12"
    elsewhere.mkdir(parents=True)
    info["stdlib"] = str(elsewhere)
    monkeypatch.setattr(_python, "SYSTEM_PREFIXES", (info["prefix"],))
    monkeypatch.setattr(_python, "_probe", lambda python: info)
    with pytest.raises(ValueError, match=r"elsewhere/python3.12 is outside the interpreter's prefix"):
        interpreter("/opt/python/bin/python3")

"""The sandbox shows the same machine whichever interpreter runs it, and never the host's directories.

Three interpreters: the system one (``/usr/bin/python3``, when present), a pyenv-style install under a
world-readable ``<tmp>/root/.pyenv/versions/X.Y.Z`` (the running interpreter's base install, hard-linked or
copied there: the host of issue 22, whose ``/root`` was mode 755, so the sandbox mounted ``/root/.pyenv``), and a
virtual environment made from that install with ``python -m venv``. From inside each, the code reports what a
program can see of itself — ``os.listdir('/')``, ``sys.executable``, ``sys.prefix``, ``sys.path``, modules'
``__file__``, ``/proc/self/exe``, the environment, a traceback through the standard library — and the test,
outside, looks for host paths in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from routegate.technique.sandbox import CodeRun, SandboxLimits, SandboxRunner
from technique._sandbox_procs import needs_os_sandbox

PROJECT = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(wall_seconds=30, cpu_seconds=5)
INSIDE = "/usr/local/routegate-python"
REPORT = """
import ctypes, json, os, sys, traceback
try:
    json.loads('{')
except ValueError:
    caught = traceback.format_exc()
print(json.dumps({
    'root': sorted(os.listdir('/')),
    'executable': sys.executable,
    'prefixes': [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix],
    'path': sys.path,
    'files': [os.__file__, json.__file__, ctypes.__file__, sys.modules['_json'].__file__],
    'proc_exe': os.readlink('/proc/self/exe'),
    'environ': dict(os.environ),
    'traceback': caught,
}))
json.loads('[')  # uncaught: the traceback on stderr walks through the standard library
"""
_STDLIB_LEFT_OUT = {"site-packages", "test", "idlelib", "ensurepip", "turtledemo"}


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _probe(python: str) -> dict[str, str]:
    script = (
        "import json, sys, sysconfig\n"
        "print(json.dumps({'executable': getattr(sys, '_base_executable', sys.executable),"
        " 'stdlib': sysconfig.get_paths()['stdlib'], 'dynload': sysconfig.get_config_var('DESTSHARED') or '',"
        " 'library': '%s/%s' % (sysconfig.get_config_var('LIBDIR'), sysconfig.get_config_var('LDLIBRARY')),"
        " 'soname': sysconfig.get_config_var('INSTSONAME') or '', 'version': '%d.%d' % sys.version_info[:2]}))"
    )
    done = subprocess.run([python, "-I", "-S", "-c", script], capture_output=True, text=True, check=True, timeout=60)
    info: dict[str, str] = json.loads(done.stdout)
    return info


def _pyenv_like(base: Path) -> Path:
    """This interpreter's base install, laid out as pyenv does, below ``base`` (every directory mode 755)."""
    info = _probe(sys.executable)
    version = info["version"]
    prefix = base / "root" / ".pyenv" / "versions" / f"{version}.0"
    (prefix / "bin").mkdir(parents=True)
    binary = prefix / "bin" / f"python{version}"
    _link_or_copy(os.path.realpath(info["executable"]), str(binary))
    for alias in ("python3", "python"):
        (prefix / "bin" / alias).symlink_to(binary.name)
    stdlib = prefix / "lib" / f"python{version}"

    def left_out(directory: str, names: list[str]) -> set[str]:
        return (
            _STDLIB_LEFT_OUT & set(names) if os.path.realpath(directory) == os.path.realpath(info["stdlib"]) else set()
        )

    shutil.copytree(info["stdlib"], stdlib, symlinks=True, ignore=left_out, copy_function=_link_or_copy)
    dynload = stdlib / "lib-dynload"
    if info["dynload"] and not dynload.exists():
        shutil.copytree(info["dynload"], dynload, copy_function=_link_or_copy)
    site_packages = stdlib / "site-packages"
    site_packages.mkdir()
    (site_packages / "routegate_site_probe.py").write_text("VALUE = 42\n")
    (site_packages / "routegate-probe.pth").write_text("import os; os.environ['ROUTEGATE_PTH_RAN'] = '1'\n")
    library = Path(info["library"])
    if library.suffix != ".a" and library.exists():
        _link_or_copy(os.path.realpath(library), str(prefix / "lib" / (info["soname"] or library.name)))
    for path in [base, *base.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    return binary


@pytest.fixture(scope="module")
def world_readable_tmp() -> Iterator[Path]:
    """A temporary directory another uid can traverse (pytest's own is 0700), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="routegate-interpreters-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def interpreters(world_readable_tmp: Path) -> dict[str, str]:
    """name -> interpreter path: the system one if present, a pyenv-style install, a venv made from it."""
    found: dict[str, str] = {}
    if os.path.exists("/usr/bin/python3"):
        found["system"] = "/usr/bin/python3"
    pyenv = _pyenv_like(world_readable_tmp)
    found["pyenv"] = str(pyenv)
    venv = world_readable_tmp / "work" / "project" / ".venv"
    subprocess.run([str(pyenv), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    found["venv"] = str(venv / "bin" / "python")
    return found


def _host_paths(python: str, tmp: Path) -> set[str]:
    """Strings that name the host's side: the install's directory (unless it is /usr), temp, home, checkout."""
    install = os.path.dirname(os.path.dirname(os.path.realpath(python)))  # <prefix>/bin/python3 -> <prefix>
    host = {str(tmp), "/root", "/work", ".pyenv", "/home/", str(PROJECT)}
    return host | {path for path in (install, sys.prefix, sys.base_prefix) if path not in ("/usr", "/usr/local")}


def _report(run: CodeRun) -> dict[str, object]:
    assert run.stop_reason == "sandbox_exit:1", (run.stop_reason, run.message, run.stderr[-2000:])
    report: dict[str, object] = json.loads(run.stdout)
    return report


@needs_os_sandbox
@pytest.mark.parametrize("name", ["system", "pyenv", "venv"])
async def test_no_host_path_reaches_the_code(name: str, interpreters: dict[str, str], world_readable_tmp: Path) -> None:
    if name not in interpreters:
        pytest.skip(f"no {name} interpreter on this host")
    python = interpreters[name]
    run = await SandboxRunner(limits=LIMITS, python=python).run(REPORT)
    report = _report(run)
    assert report["executable"] == report["proc_exe"] == f"{INSIDE}/bin/python3"
    assert report["prefixes"] == [INSIDE] * 4
    paths = report["path"]
    assert isinstance(paths, list) and paths and all(entry.startswith(f"{INSIDE}/lib/") for entry in paths)
    files = report["files"]
    assert isinstance(files, list) and all(entry.startswith(f"{INSIDE}/lib/") for entry in files)
    assert report["environ"] == {
        "HOME": "/sandbox",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PATH": "/usr/bin:/bin",
        "PWD": "/sandbox",
        "TMPDIR": "/tmp",
    }
    assert f'File "{INSIDE}/lib/python' in str(report["traceback"])
    assert f'File "{INSIDE}/lib/python' in run.stderr and "JSONDecodeError" in run.stderr
    host = _host_paths(python, world_readable_tmp)
    seen = run.stdout + run.stderr
    assert [path for path in host if path in seen] == []


@needs_os_sandbox
async def test_the_root_lists_the_same_entries_for_every_interpreter(interpreters: dict[str, str]) -> None:
    roots = {}
    for name, python in interpreters.items():
        run = await SandboxRunner(limits=LIMITS, python=python).run(REPORT)
        roots[name] = _report(run)["root"]
    assert len(interpreters) >= 2
    first = next(iter(roots.values()))
    assert all(root == first for root in roots.values()), roots
    assert set(first) <= {"dev", "lib", "lib64", "proc", "sandbox", "tmp", "usr"}  # lib, lib64: as the host has them


@needs_os_sandbox
async def test_the_installs_site_packages_import_without_its_pth_files(interpreters: dict[str, str]) -> None:
    code = (
        "import os, routegate_site_probe\nprint(routegate_site_probe.VALUE, 'ROUTEGATE_PTH_RAN' in os.environ)\nexit(4)"
    )
    run = await SandboxRunner(limits=LIMITS, python=interpreters["pyenv"]).run(code)
    assert (run.stop_reason, run.stdout) == ("sandbox_exit:4", "42 False\n"), run.stderr[-1000:]

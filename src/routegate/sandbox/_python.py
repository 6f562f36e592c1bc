"""Where the interpreter sits inside the sandbox: always at :data:`PREFIX`, wherever it is installed on the host.

The host's interpreter may live in ``/usr``, under a pyenv or conda directory in someone's home, or behind a
virtual environment. Inside the sandbox it is always ``/usr/local/routegate-python/bin/python3`` with its
standard library below ``/usr/local/routegate-python/lib``, so what the code can see and print —
``sys.executable``, ``sys.prefix``, ``sys.path``, the ``__file__`` of every module, tracebacks,
``/proc/self/exe``, the environment — names no host directory, and ``os.listdir('/')`` is the same for every
interpreter. Python finds its prefix from the executable's location (the ``lib/python3.X/os.py`` landmark), so
no ``PYTHONHOME`` is needed; a virtual environment contributes its base interpreter.

Mapped: the base executable; for an install of its own (pyenv, conda, a self-built prefix) its whole ``lib``
directory, shared libraries included; for a system install (``/usr``, ``/usr/local``) only its standard
library, its extension modules and, when it is not in a system library directory, ``libpython``. When a
library is mapped below the prefix, ``LD_LIBRARY_PATH`` points the loader at it (an install's ``RUNPATH`` names
its host directory); the bootstrap removes that variable before the code runs. The system's shared library
directories are mounted where they are.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PREFIX = "/usr/local/routegate-python"
EXECUTABLE = f"{PREFIX}/bin/python3"
SYSTEM_PREFIXES = ("/usr", "/usr/local")

_PROBE = (
    "import json, sys, sysconfig\n"
    "paths = sysconfig.get_paths()\n"
    "var = lambda name: sysconfig.get_config_var(name) or ''\n"
    "print(json.dumps({'executable': getattr(sys, '_base_executable', '') or sys.executable,"
    " 'prefix': sys.base_prefix, 'exec_prefix': sys.base_exec_prefix, 'platlibdir': sys.platlibdir,"
    " 'stdlib': paths['stdlib'], 'platstdlib': paths['platstdlib'],"
    " 'dynload': next((p for p in sys.path if p.endswith('lib-dynload')), ''),"
    " 'libdir': var('LIBDIR'), 'ldlibrary': var('LDLIBRARY'), 'soname': var('INSTSONAME'),"
    " 'multiarch': var('MULTIARCH')}))\n"
)


@dataclass(frozen=True, slots=True)
class Interpreter:
    """How one host interpreter appears in the sandbox: bwrap mount arguments and the loader's search path."""

    mounts: tuple[str, ...]
    library_path: str  # LD_LIBRARY_PATH inside the sandbox ("" when the system directories suffice)


def _probe(python: str) -> dict[str, str]:
    real = os.path.realpath(python)
    out = subprocess.run(
        [real, "-I", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True, env={}
    ).stdout
    info = json.loads(out)
    if not isinstance(info, dict) or not all(isinstance(value, str) for value in info.values()):
        raise ValueError(f"{python} described itself as {out[:200]!r}")
    return info


def _system_library_dirs(multiarch: str) -> list[str]:
    """The host's shared-library directories, mounted at the same paths (the loader's default search path)."""
    wanted = [f"/usr/lib/{multiarch}" if multiarch else "/usr/lib", "/usr/lib64", "/lib64"]
    present = [path for path in wanted if os.path.exists(path)]
    return [path for path in present if not any(path.startswith(other + "/") for other in present)]


def _inside(path: str, roots: dict[str, str]) -> str:
    """The sandbox path of host ``path``, which lies below one of ``roots`` (host prefix -> sandbox prefix)."""
    for host, sandbox in roots.items():
        if path == host or path.startswith(host.rstrip("/") + "/"):
            return sandbox + path[len(host.rstrip("/")) :]
    raise ValueError(f"{path} is outside the interpreter's prefix ({', '.join(roots)}): cannot map it")


def _outermost(binds: dict[str, str]) -> dict[str, str]:
    """Drop the binds whose sandbox path already lies inside another bind (same source, nothing to add)."""
    targets = list(binds.values())
    return {
        source: target
        for source, target in binds.items()
        if not any(target != other and target.startswith(other + "/") for other in targets)
    }


@cache
def interpreter(python: str) -> Interpreter:
    """The mounts that make ``python`` appear at :data:`PREFIX` (one short probe run per interpreter, cached).

    Raises ``OSError`` or ``subprocess.SubprocessError`` when it cannot be run and ``ValueError`` when its
    layout cannot be mapped.
    """
    info = _probe(python)
    prefix, exec_prefix = info["prefix"].rstrip("/") or "/", info["exec_prefix"].rstrip("/") or "/"
    roots = {prefix: PREFIX, exec_prefix: PREFIX}
    own = prefix not in SYSTEM_PREFIXES
    binds: dict[str, str] = {}  # host path (unresolved) -> sandbox path
    library_dirs: list[str] = []
    if own:  # the install's own lib directories hold its shared libraries (libpython, and conda's libssl...)
        for base in dict.fromkeys((prefix, exec_prefix)):
            for lib in dict.fromkeys(("lib", info["platlibdir"] or "lib")):
                if os.path.isdir(os.path.join(base, lib)):
                    binds[os.path.join(base, lib)] = f"{PREFIX}/{lib}"
                    library_dirs.append(f"{PREFIX}/{lib}")
    for key in ("stdlib", "platstdlib", "dynload"):
        if info[key] and os.path.isdir(info[key]):
            binds.setdefault(info[key], _inside(info[key], roots))
    system_dirs = _system_library_dirs(info["multiarch"])
    library = Path(info["libdir"], info["ldlibrary"])
    system_real = {os.path.realpath(path) for path in system_dirs}
    if (
        not own
        and info["ldlibrary"]
        and library.suffix != ".a"
        and library.exists()
        and os.path.realpath(info["libdir"]) not in system_real
    ):
        name = info["soname"] or library.name
        binds[str(library)] = f"{PREFIX}/lib/{name}"
        library_dirs.append(f"{PREFIX}/lib")
    mounts = ["--ro-bind", os.path.realpath(info["executable"] or python), EXECUTABLE]
    for source, target in _outermost(binds).items():
        mounts += ["--ro-bind", os.path.realpath(source), target]
    for path in system_dirs:
        if os.path.islink(path):
            mounts += ["--symlink", os.readlink(path), path]
        else:
            mounts += ["--ro-bind", os.path.realpath(path), path]
    for top in ("/lib", "/lib64"):
        if os.path.islink(top) and top not in system_dirs:
            mounts += ["--symlink", os.readlink(top), top]
    return Interpreter(tuple(mounts), ":".join(dict.fromkeys(library_dirs)))

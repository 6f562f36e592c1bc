"""The sandbox's operating-system boundary: the bubblewrap (``bwrap``) command line for one run.

Each run gets fresh user, mount, PID, network, IPC, UTS and cgroup namespaces. Its file system is built from
nothing: a read-only root holding only the interpreter, its standard library and the shared libraries it
loads; ``/proc`` of its own PID namespace; ``/dev/null``, ``/dev/zero`` and ``/dev/urandom``; and two private,
size-limited tmpfs mounts, the working directory :data:`WORKDIR` and ``/tmp``, which disappear with the mount
namespace when the run ends. Nothing of the project, the checkout, any home directory or the server's data is
mounted. ``--die-with-parent`` and the PID namespace make every process of the run die with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

WORKDIR = "/sandbox"
BWRAP_CANDIDATES = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")

_PROBE = (
    "import json, sys, sysconfig\n"
    "paths = sysconfig.get_paths()\n"
    "print(json.dumps({'stdlib': paths['stdlib'], 'platstdlib': paths['platstdlib'],"
    " 'dynload': sysconfig.get_config_var('DESTSHARED') or '', 'libdir': sysconfig.get_config_var('LIBDIR') or '',"
    " 'ldlibrary': sysconfig.get_config_var('LDLIBRARY') or '', 'multiarch': sysconfig.get_config_var('MULTIARCH') or ''}))\n"
)


def find_bwrap() -> str | None:
    found = shutil.which("bwrap")
    if found:
        return found
    return next((path for path in BWRAP_CANDIDATES if os.access(path, os.X_OK)), None)


@cache
def missing_mechanism() -> str | None:
    """What this host lacks for the OS boundary, as a sentence naming it and the fix; None when all is there."""
    if sys.platform != "linux":
        return f"the OS sandbox needs Linux (namespaces, seccomp); this is {sys.platform}"
    if find_bwrap() is None:
        return "bubblewrap ('bwrap') is not installed: apt-get install bubblewrap (Debian/Ubuntu)"
    try:
        max_ns = int(Path("/proc/sys/user/max_user_namespaces").read_text())
    except (OSError, ValueError):
        max_ns = 1
    if max_ns < 1:
        return "user namespaces are off (/proc/sys/user/max_user_namespaces is 0): sysctl user.max_user_namespaces"
    try:
        unprivileged = Path("/proc/sys/kernel/unprivileged_userns_clone").read_text().strip()
    except OSError:
        unprivileged = "1"
    if unprivileged == "0":
        return "unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1"
    return None


@cache
def interpreter_mounts(python: str) -> tuple[str, ...]:
    """``--ro-bind`` arguments for ``python``: the binary, its standard library and the system library dirs.

    Asks the interpreter itself where its standard library lives (one short run per interpreter, cached).
    Raises ``OSError`` when it cannot be run and ``ValueError`` when it answers nonsense.
    """
    real = os.path.realpath(python)
    out = subprocess.run(
        [real, "-I", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True, env={}
    ).stdout
    info = json.loads(out)
    multiarch = str(info["multiarch"])
    wanted = [real, info["stdlib"], info["platstdlib"], info["dynload"]]
    library = Path(str(info["libdir"]), str(info["ldlibrary"]))
    if info["ldlibrary"] and library.suffix != ".a" and library.exists():
        wanted.append(str(library.resolve()))
    wanted += [f"/usr/lib/{multiarch}" if multiarch else "/usr/lib", "/usr/lib64", "/lib64"]
    present = [p for p in dict.fromkeys(wanted) if p and os.path.exists(p)]
    binds = [p for p in present if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in present)]
    args: list[str] = []
    for path in binds:
        if os.path.islink(path) and path in ("/lib", "/lib64"):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", os.path.realpath(path), path]
    for top in ("/lib", "/lib64"):
        if os.path.islink(top) and top not in binds:
            args += ["--symlink", os.readlink(top), top]
    return tuple(args)


def command(
    bwrap: str,
    python: str,
    boot: str,
    config: str,
    *,
    info_fd: int,
    block_fd: int,
    code_fd: int,
    tmpfs_bytes: int,
) -> list[str]:
    """The full ``bwrap`` argv: namespaces, mounts, environment, then the interpreter running the bootstrap."""
    real = os.path.realpath(python)
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        # the interpreter is the PID namespace's first process: when it ends, the kernel kills the rest of the
        # namespace. Without it bwrap puts an init of its own there, whose exit the outer bwrap reports without
        # reaping it, so every run left a zombie on hosts whose PID 1 does not reap orphans (containers, VMs)
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--info-fd",
        str(info_fd),
        "--block-fd",
        str(block_fd),
        *interpreter_mounts(python),
        "--proc",
        "/proc",
        "--dir",
        "/dev",
        *("--dev-bind", "/dev/null", "/dev/null"),
        *("--dev-bind", "/dev/zero", "/dev/zero"),
        *("--dev-bind", "/dev/urandom", "/dev/urandom"),
        *("--size", str(tmpfs_bytes), "--perms", "1777", "--tmpfs", "/tmp"),
        *("--size", str(tmpfs_bytes), "--perms", "0700", "--tmpfs", WORKDIR),
        *("--perms", "0600", "--file", str(code_fd), f"{WORKDIR}/main.py"),
        *("--remount-ro", "/"),
        *("--chdir", WORKDIR),
        "--clearenv",
        *("--setenv", "HOME", WORKDIR),
        *("--setenv", "TMPDIR", "/tmp"),
        *("--setenv", "PATH", "/usr/bin:/bin"),
        *("--setenv", "LANG", "C.UTF-8"),
        *("--setenv", "LC_ALL", "C.UTF-8"),
        "--",
        real,
        "-I",
        "-B",
        "-c",
        boot,
        config,
    ]

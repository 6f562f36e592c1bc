"""The sandbox's operating-system boundary: the bubblewrap (``bwrap``) command line for one run.

Each run gets fresh user, mount, PID, network, IPC, UTS and cgroup namespaces. Its file system is built from
nothing: a read-only root holding only the interpreter (always at the same path, see :mod:`._python`),
its standard library and the shared libraries it loads; ``/proc`` of its own PID namespace; ``/dev/null``,
``/dev/zero`` and ``/dev/urandom``; and two private, size-limited tmpfs mounts, the working directory :data:`WORKDIR` and ``/tmp``, which disappear with the mount
namespace when the run ends. Nothing of the project, the checkout, any home directory or the server's data is
mounted. ``--die-with-parent`` and the PID namespace make every process of the run die with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from routegate.sandbox._python import EXECUTABLE, interpreter

WORKDIR = "/sandbox"
BWRAP_CANDIDATES = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")
# RLIMIT_NPROC 2 in a fresh user namespace, then one fork: the kernel counts the namespace's own tasks (1, then 2:
# allowed) since Linux 5.14, every task of the uid before (the server, bwrap and the probe: at least 3, refused)
_NPROC_PROBE = """
import os, resource
resource.setrlimit(resource.RLIMIT_NPROC, (2, 2))
try:
    pid = os.fork()
except BlockingIOError:
    print("uid")
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("namespace")
"""


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
def nproc_counting(bwrap: str) -> str:
    """How the kernel counts ``RLIMIT_NPROC`` in a user namespace that bubblewrap makes: ``"namespace"`` (only
    the namespace's own tasks, Linux 5.14 and later), ``"uid"`` (every task of the uid, in every namespace), or
    a sentence saying why the probe could not tell. Run once per process, not as root, with this interpreter
    (the host's whole file system is bound read-only: the probe is ours, and the runs' interpreter is not
    involved)."""
    python = sys.executable
    argv = [bwrap, "--unshare-user", "--ro-bind", "/", "/", "--", python, "-I", "-S", "-c", _NPROC_PROBE]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={}, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not run {bwrap!r}: {exc}"
    answer = done.stdout.strip()
    if done.returncode == 0 and answer in ("namespace", "uid"):
        return answer
    detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1][:300]
    return f"{bwrap!r} could not start {python!r} in a user namespace: {detail}"


def command(
    bwrap: str,
    python: str,
    boot: str,
    config: str,
    *,
    info_fd: int,
    code_fd: int,
    tmpfs_bytes: int,
) -> list[str]:
    """The full ``bwrap`` argv: namespaces, mounts, environment, then the interpreter running the bootstrap."""
    python_inside = interpreter(python)
    library_path = ("--setenv", "LD_LIBRARY_PATH", python_inside.library_path) if python_inside.library_path else ()
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
        *python_inside.mounts,
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
        *library_path,
        "--",
        EXECUTABLE,
        "-I",
        "-S",
        "-B",
        "-c",
        boot,
        config,
    ]

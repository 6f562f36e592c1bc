"""The sandbox child's bootstrap. Its *source* is passed to ``python -I -S -B -c``: stdlib only, no routegate import.

It imports as little as it can (every run pays for it): no ``json``, no ``typing``, no ``site`` (``-S``: an
install's ``site-packages`` can hold hundreds of ``.pth`` files, +60 ms per run for pyenv's); the install's own
``site-packages`` directories are put on ``sys.path`` directly, so packages installed in the interpreter still
import. The configuration is one ``key=value`` line per setting (:func:`encode_config`).

Inside the OS sandbox (``mode="os"``), before any sandboxed code runs: (1) set the resource limits (CPU,
address space, file size, processes, no core dumps), soft = hard so the code cannot raise them; (2) install
the seccomp filter the supervisor built (``PR_SET_NO_NEW_PRIVS`` + ``PR_SET_SECCOMP``); (3) write one byte to
the *ready* pipe and close it, so the supervisor knows set-up finished before the code ran (the code never
holds that descriptor); (4) run ``main.py`` as ``__main__``. Between (2) and (3) it waits for the supervisor's
start signal on a second pipe: bubblewrap mounts and the interpreter starts while the supervisor moves the
process into its control group (on cgroup v1 that move waits for an RCU grace period, ~10 ms), and no code runs
before the move. Anything that goes wrong before (4) exits with
status 70 and no ready byte: the supervisor reports ``sandbox_error:setup_failed``.

``mode="guard"`` is the explicit, weaker opt-in for hosts without the OS mechanism: no namespaces of its own
beyond an optional network namespace and per-run uid (as root), the limits, and an audit hook that refuses
sockets, writes outside the working directory, running programs and ``ctypes`` with a clear
``PermissionError``. Code can switch the hook off: it is NOT a security boundary.

Nothing here reports a verdict: the supervisor decides from what it observes itself.
"""

from __future__ import annotations

import errno
import os
import resource
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # never at run time: importing typing costs every run a few milliseconds
    from typing import Any, NoReturn

SETUP_FAILED = 70
INT_SETTINGS = frozenset(
    {"cpu_seconds", "address_space_bytes", "max_file_bytes", "nproc", "ready_fd", "go_fd", "uid", "gid"}
)


def encode_config(config: dict[str, Any]) -> str:
    """The settings as ``key=value`` lines (None is empty, a bool 1 or 0); values hold no newline."""
    lines = []
    for key, value in config.items():
        text = "" if value is None else str(int(value)) if isinstance(value, bool) else str(value)
        if "\n" in text or "=" in key:
            raise ValueError(f"sandbox setting {key!r} cannot be encoded: {text[:80]!r}")
        lines.append(f"{key}={text}")
    return "\n".join(lines)


def decode_config(text: str) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for line in text.split("\n"):
        key, _, value = line.partition("=")
        config[key] = (int(value) if value else None) if key in INT_SETTINGS else value
    return config


def _site_packages() -> None:
    """The install's own site-packages on sys.path and ``exit``/``quit``/``help`` in the builtins, as ``site``
    would do, without its ``.pth`` processing (``import site`` under ``-S`` runs nothing by itself)."""
    import site

    site.setquit()
    site.sethelper()
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for lib in dict.fromkeys(("lib", sys.platlibdir)):
        path = f"{sys.prefix}/{lib}/{version}/site-packages"
        if os.path.isdir(path):
            sys.path.append(path)


def _isolate_network() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.unshare(0x40000000) == 0)  # CLONE_NEWNET
    except Exception:
        return False


def _limit(name: int, soft: int, hard: int | None = None) -> None:
    resource.setrlimit(name, (soft, soft if hard is None else hard))


def _install_seccomp(program: bytes) -> None:
    """Load the classic-BPF filter on this process (and so on every later thread and child)."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    # glibc reserves 64 MiB of address space per thread arena: with RLIMIT_AS as the backstop, a handful of
    # threads would exhaust it before the task limit. Two arenas bound that (the control group bounds memory)
    libc.mallopt(-8, 2)  # M_ARENA_MAX
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    ulong = ctypes.c_ulong
    if libc.prctl(38, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(22, ulong(2), ctypes.byref(fprog), ulong(0), ulong(0)) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _install_guard(root: str, allow_fork: bool, allow_exec: bool) -> dict[str, bool]:
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    devices = frozenset({"/dev/null"})
    unix = 1  # AF_UNIX: socketpair() for asyncio's self-pipe stays usable
    network = frozenset(
        {
            "socket.connect",
            "socket.bind",
            "socket.sendto",
            "socket.sendmsg",
            "socket.getaddrinfo",
            "socket.gethostbyname",
            "socket.gethostbyaddr",
            "socket.getnameinfo",
        }
    )
    path_writes: dict[str, tuple[int, ...]] = {
        "os.mkdir": (0,),
        "os.rmdir": (0,),
        "os.remove": (0,),
        "os.rename": (0, 1),
        "os.symlink": (1,),
        "os.link": (1,),
        "os.chmod": (0,),
        "os.chown": (0,),
        "os.truncate": (0,),
        "os.utime": (0,),
        "os.chflags": (0,),
        "os.lchflags": (0,),
        "os.setxattr": (0,),
        "os.removexattr": (0,),
    }
    spawns = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn"})
    forks = frozenset({"os.fork", "os.forkpty"})
    native = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function"})
    introspection = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents"})
    signals = frozenset({"os.kill", "os.killpg", "signal.pthread_kill"})
    state: dict[str, bool] = {"busy": False, "forked": False}
    realpath, fspath, join, getcwd = os.path.realpath, os.fspath, os.path.join, os.getcwd

    def inside(path: Any) -> bool:
        if isinstance(path, int):
            return True  # an already open descriptor
        full = realpath(join(getcwd(), os.fsdecode(fspath(path))))
        return full == root or full.startswith(root + os.sep) or full in devices

    def refuse(kind: str, detail: str) -> NoReturn:
        raise PermissionError(errno.EPERM, f"sandbox: {detail} is not allowed")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if state["busy"]:
            return
        state["busy"] = True
        try:
            if event == "open":
                flags = args[2]
                if isinstance(flags, int) and flags & write_flags and not inside(args[0]):
                    refuse("filesystem", f"writing {args[0]!s:.80} outside the working directory")
            elif event in path_writes:
                for index in path_writes[event]:
                    if not inside(args[index]):
                        refuse("filesystem", f"{event} on {args[index]!s:.80} outside the working directory")
            elif event == "socket.__new__":
                if args[1] != unix:
                    refuse("network", "network access")
            elif event in network:
                refuse("network", "network access")
            elif event in spawns:
                if not allow_exec:
                    refuse("exec", "running another program")
            elif event in forks:
                state["forked"] = True
                if not allow_fork:
                    refuse("processes", "creating processes")
            elif event in native:
                refuse("native", "loading native code (ctypes)")
            elif event in signals:
                refuse("signal", "sending signals")
            elif event in introspection:
                refuse("introspection", "gc object introspection")
        finally:
            state["busy"] = False

    sys.addaudithook(hook)
    return state


def _set_limits(config: dict[str, Any]) -> None:
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, config["cpu_seconds"], config["cpu_seconds"] + 1)
    _limit(resource.RLIMIT_AS, config["address_space_bytes"])
    _limit(resource.RLIMIT_FSIZE, config["max_file_bytes"])
    if config["nproc"] is not None:
        _limit(resource.RLIMIT_NPROC, config["nproc"])


def _setup(config: dict[str, Any]) -> bytes:
    """Everything before the code runs, ending with reading it; raises on any failure (exit SETUP_FAILED)."""
    if config["mode"] == "os":
        # the loader read it at start-up; the code's environment holds the documented variables only
        os.environ.pop("LD_LIBRARY_PATH", None)
        _site_packages()
        _set_limits(config)
        _install_seccomp(bytes.fromhex(config["seccomp"]))
        # the supervisor writes once this process is in the run's control group (it started up meanwhile)
        started = os.read(config["go_fd"], 2)
        os.close(config["go_fd"])
        if started != b"go":
            raise RuntimeError("the supervisor did not start the run")
    else:
        if config["isolate_network"] == "1":
            _isolate_network()
        _set_limits(config)
        if config["uid"] is not None:
            os.setgroups([])
            os.setgid(config["gid"])
            os.setuid(config["uid"])
        root = os.path.realpath(config["workdir"])
        os.chdir(root)
        _install_guard(root, config["nproc"] is not None, allow_exec=False)
    with open("main.py", "rb") as handle:
        source = handle.read()  # bytes: invalid UTF-8 is the code's SyntaxError, not a set-up failure
    os.write(config["ready_fd"], b"1")
    os.close(config["ready_fd"])
    return source


def main() -> None:
    config = decode_config(sys.argv[1])
    try:
        source = _setup(config)
    except BaseException as exc:
        sys.stderr.write(f"sandbox set-up failed: {type(exc).__name__}: {exc}\n")
        os._exit(SETUP_FAILED)
    try:
        code = compile(source, "main.py", "exec")
        exec(code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
    except SystemExit:
        raise
    except BaseException as exc:
        import traceback  # only now: start-up time is paid by every run

        frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename != "<string>"]
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
        sys.stderr.write("".join(lines + traceback.format_exception_only(type(exc), exc)))
        sys.exit(1)


if __name__ == "__main__":
    main()

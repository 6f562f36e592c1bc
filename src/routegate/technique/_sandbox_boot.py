"""The sandbox child's bootstrap. Its *source* is passed to ``python -I -B -c``: stdlib only, no routegate import.

In the child, before any sandboxed code runs: (1) as root, move into a new network namespace (no interface but
a down loopback); (2) set the resource limits (CPU, address space, file size, processes, no core dumps);
(3) as root, drop to the per-run uid/gid chosen by the parent; (4) install an audit hook — the interpreter-level
tripwire that refuses sockets, DNS, writes outside the working directory, running programs, native code
(``ctypes``), signals and ``gc`` introspection, and reports each refusal to the parent as a marker line on
stderr; (5) run ``main.py`` as ``__main__``.

The OS layers (namespace, uid, limits) are the boundary; the hook makes refusals clear and covers what the OS
layers cannot when they are unavailable (not root, no namespaces). A refusal is reported even if the sandboxed
code catches the ``PermissionError``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import sys
import traceback
from typing import Any, NoReturn

MARK = "routegate-sandbox:"


def _mark(kind: str, detail: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"\n{MARK}{kind}:{detail}\n".encode())


def _isolate_network() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.unshare(0x40000000) == 0)  # CLONE_NEWNET
    except Exception:
        return False


def _limit(name: int, soft: int, hard: int | None = None) -> None:
    resource.setrlimit(name, (soft, soft if hard is None else hard))


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
        _mark("violation", kind)
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


def main() -> None:
    config = json.loads(sys.argv[1])
    workdir = config["workdir"]
    layers = []
    if config["isolate_network"] and _isolate_network():
        layers.append("netns")
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_CPU, config["cpu_seconds"], config["cpu_seconds"] + 1)
    _limit(resource.RLIMIT_AS, config["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, config["max_file_bytes"])
    if config["nproc"] is not None:
        _limit(resource.RLIMIT_NPROC, config["nproc"])
        layers.append("nproc")
    if config["uid"] is not None:
        os.setgroups([])
        os.setgid(config["gid"])
        os.setuid(config["uid"])
        layers.append("uid")
    os.chdir(workdir)
    with open("main.py", encoding="utf-8") as handle:
        source = handle.read()
    state = {"forked": False}
    if config["guard"]:
        state = _install_guard(os.path.realpath(workdir), config["nproc"] is not None, config["allow_exec"])
        layers.append("guard")
    _mark("isolation", ",".join(layers))
    try:
        code = compile(source, "main.py", "exec")
        exec(code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
    except SystemExit:
        raise
    except MemoryError:
        _mark("violation", "memory")
        os._exit(1)
    except BaseException as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EAGAIN and state.get("forked"):
            _mark("violation", "processes")
        elif isinstance(exc, OSError) and exc.errno == errno.EFBIG:
            _mark("violation", "filesize")  # Python ignores SIGXFSZ: RLIMIT_FSIZE shows up as EFBIG
        frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename != "<string>"]
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
        sys.stderr.write("".join(lines + traceback.format_exception_only(type(exc), exc)))
        sys.exit(1)


if __name__ == "__main__":
    main()

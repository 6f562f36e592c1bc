"""A hostile corpus against the OS sandbox, checked from outside.

Each case is code an attacker would run; its ``tried`` line says what. After every run the test looks at the
host, never at a flag of the sandbox: a canary directory outside must stay empty, no file named after the
run's marker may appear in ``/tmp`` or ``/dev/shm``, the project's files keep their content, a secret kept in
a host file and in the test process's environment never shows up in the run's output, a loopback listener
(TCP, UDP, Unix and abstract sockets) receives nothing, a host process stays alive, and no process of a
sandbox uid is left. Some cases also pin the stop reason the supervisor observed. Part of the corpus runs
through the public ``TechniqueDispatcher`` -> ``CodeHandler(SandboxRunner())`` path.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import string
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from routegate.technique import CodeHandler, TechniqueDispatcher, TechniqueRouter
from routegate.technique.sandbox import CodeRun, SandboxLimits, SandboxRunner
from technique._sandbox_procs import sandbox_processes, subreaper

LIMITS = SandboxLimits(
    wall_seconds=20, cpu_seconds=2, memory_bytes=256 * 1024 * 1024, max_processes=16, tmpfs_bytes=32 * 1024 * 1024
)
RUNNER = SandboxRunner(limits=LIMITS)
MISSING = RUNNER.missing()
pytestmark = pytest.mark.skipif(
    MISSING is not None, reason=f"OS sandbox unavailable on this host: {MISSING} (dev.py installs bubblewrap as root)"
)
PROJECT = Path(__file__).resolve().parents[2]
PROJECT_FILES = (PROJECT / "pyproject.toml", PROJECT / "src" / "routegate" / "sandbox" / "supervisor.py")
EXECUTED = "EXEC" + "UTED-BY-CHILD"  # only a program the code managed to start would print this


@dataclass(frozen=True)
class Hostile:
    name: str
    tried: str
    code: str
    expect: str | None = None  # the stop reason the supervisor must report, when it is fixed
    stderr_has: str | None = None
    stdout_has: str | None = None


PRELUDE = "import ctypes, os, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nsyscall = libc.syscall\n"
CHILD = f"print('{EXECUTED[:4]}' + '{EXECUTED[4:]}')"

CORPUS = [
    # -- writing outside ------------------------------------------------------------------------------------------
    Hostile(
        "dir_fd_tmp",
        "os.open with dir_fd on /tmp (the issue's bypass): must land in the private tmpfs",
        "fd = os.open('/tmp', os.O_RDONLY)\nos.close(os.open('$MARK', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n"
        "print(os.listdir('/tmp'))",
        expect="success",
    ),
    Hostile(
        "dir_fd_shm",
        "os.open with dir_fd on /dev/shm",
        "fd = os.open('/dev/shm', os.O_RDONLY)\nos.open('$MARK', os.O_WRONLY | os.O_CREAT, dir_fd=fd)",
        expect="sandbox_exit:1",
        stderr_has="FileNotFoundError",
    ),
    Hostile(
        "shm_90mib",
        "leave 90 MiB in /dev/shm (as in the review)",
        "open('/dev/shm/$MARK', 'wb').write(b'x' * 90 * 1024 * 1024)",
        expect="sandbox_exit:1",
    ),
    Hostile("canary_direct", "write straight into a host directory", "open('$CANARY/$MARK', 'w').write('x')"),
    Hostile(
        "openat2",
        "openat2(2) via ctypes on a host path",
        "class How(ctypes.Structure):\n    _fields_ = [('flags', ctypes.c_uint64), ('mode', ctypes.c_uint64),"
        " ('resolve', ctypes.c_uint64)]\nhow = How(os.O_WRONLY | os.O_CREAT, 0o644, 0)\n"
        "print('openat2', syscall(437, -100, b'$CANARY/$MARK', ctypes.byref(how), ctypes.sizeof(how)))",
        stderr_has=None,
    ),
    Hostile(
        "symlink_out",
        "a symlink from the work dir to a host directory",
        "os.symlink('$CANARY', 'link')\nopen('link/$MARK', 'w').write('x')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "hardlink_project",
        "hard-link a read-only project/stdlib file into the work dir and write through it",
        "os.link(os.__file__, 'os_link.py')\nopen('os_link.py', 'a').write('# $MARK')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "proc_self_fd",
        "reach outside through /proc/self/fd and /proc/self/root",
        "fd = os.open('/', os.O_RDONLY)\nopen(f'/proc/self/fd/{fd}/tmp/$MARK', 'w').write('x')\n"
        "open('/proc/self/root/../../tmp/$MARK-2', 'w').write('x')\nopen('/proc/1/root/$MARK', 'w')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "stdlib_write",
        "write into the interpreter's standard library",
        "open(os.path.join(os.path.dirname(os.__file__), '$MARK.py'), 'w')",
        expect="sandbox_exit:1",
        stderr_has="Read-only file system",
    ),
    Hostile("root_write", "create a file at /", "open('/$MARK', 'w')", expect="sandbox_exit:1"),
    Hostile(
        "fill_workdir",
        "fill the work dir's tmpfs with many files (RLIMIT_FSIZE is per file)",
        "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 1024 * 1024)\n    i += 1",
        expect="sandbox_exit:1",
        stderr_has="No space left on device",
    ),
    Hostile(
        "fill_tmp",
        "fill /tmp",
        "i = 0\nwhile True:\n    open(f'/tmp/f{i}', 'wb').write(b'x' * 1024 * 1024)\n    i += 1",
        expect="sandbox_exit:1",
        stderr_has="No space left on device",
    ),
    Hostile(
        "mknod", "create a device node", "os.mknod('sda', 0o600 | 0o060000, os.makedev(8, 0))", expect="sandbox_exit:1"
    ),
    Hostile(
        "mount_ctypes",
        "mount a tmpfs over /usr via ctypes",
        "print('mount', libc.mount(b'none', b'/usr', b'tmpfs', 0, None), ctypes.get_errno())",
        expect="success",
    ),
    Hostile("chroot", "chroot(2) to escape", "print('chroot', libc.chroot(b'/tmp'))", expect="success"),
    # -- reading ----------------------------------------------------------------------------------------------------
    Hostile("etc_passwd", "read /etc/passwd", "print(open('/etc/passwd').read())", expect="sandbox_exit:1"),
    Hostile("pyproject", "read the checkout's pyproject.toml", "print(open('$PROJECT/pyproject.toml').read())"),
    Hostile(
        "project_source",
        "read the project's source",
        "print(open('$PROJECT/src/routegate/sandbox/supervisor.py').read())",
    ),
    Hostile("host_secret_file", "read a secret file the server keeps", "print(open('$SECRET_FILE').read())"),
    Hostile("home", "list the user's home directory", "print(os.listdir('$HOME'))", expect="sandbox_exit:1"),
    Hostile(
        "walk_root",
        "walk the whole visible file system for the secret",
        # the interpreter's own install (mounted read-only at a fixed path: a pyenv one holds ~50,000 files of
        # site-packages) is the host's public install, not where a secret could be: reading it all would only spend
        # the block's CPU budget
        "for d, _, files in os.walk('/'):\n    if d.startswith(('/proc', '/usr/local/routegate-python')):\n"
        "        continue\n"
        "    for f in files:\n        try:\n            data = open(os.path.join(d, f), 'rb').read(1 << 20)\n"
        "        except OSError:\n            continue\n        if b'$SECRET_HEAD' in data:\n"
        "            print('found', data)",
        expect="success",
    ),
    Hostile(
        "proc_cmdlines",
        "read every process's command line (the server's included)",
        "for p in os.listdir('/proc'):\n    if p.isdigit():\n        for part in ('cmdline', 'environ'):\n"
        "            try:\n                print(p, open(f'/proc/{p}/{part}', 'rb').read())\n"
        "            except OSError as e:\n                print(p, e)",
        expect="success",
    ),
    Hostile(
        "host_pid",
        "open the test process's /proc entry by its host pid",
        "print(open('/proc/$HOSTPID/cmdline').read(), open('/proc/$HOSTPID/environ').read())",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "parent_env", "read the parent's environment", "print(dict(os.environ), open('/proc/self/environ').read())"
    ),
    Hostile("sys_fs", "look at /sys (cgroups, devices)", "print(os.listdir('/sys'))", expect="sandbox_exit:1"),
    Hostile(
        "dev_nodes",
        "find device nodes beyond null/zero/urandom",
        "assert sorted(os.listdir('/dev')) == ['null', 'urandom', 'zero'], os.listdir('/dev')\nprint('dev ok')",
        expect="success",
    ),
    # -- running programs ------------------------------------------------------------------------------------------
    Hostile(
        "posixsubprocess_sh",
        "run /bin/sh through subprocess (_posixsubprocess.fork_exec, the issue's bypass)",
        "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'echo $MARK > $CANARY/$MARK'])",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "posixsubprocess_python",
        "fork_exec the sandbox's own interpreter",
        f"import subprocess\nsubprocess.run([sys.executable, '-c', {CHILD!r}])",
        expect="sandbox_exit:1",
        stderr_has="Operation not permitted",
    ),
    Hostile(
        "os_execv",
        "os.execv the interpreter",
        f"os.execv(sys.executable, [sys.executable, '-c', {CHILD!r}])",
        expect="sandbox_exit:1",
        stderr_has="Operation not permitted",
    ),
    Hostile(
        "posix_spawn",
        "os.posix_spawn the interpreter",
        f"os.waitpid(os.posix_spawn(sys.executable, [sys.executable, '-c', {CHILD!r}], {{}}), 0)",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "ctypes_execve",
        "execve(2) through ctypes, past any Python-level hook",
        "argv = (ctypes.c_char_p * 4)(sys.executable.encode(), b'-c', " + repr(CHILD.encode()) + ", None)\n"
        "print('execve', libc.execve(sys.executable.encode(), argv, None), ctypes.get_errno())",
        expect="success",
    ),
    Hostile(
        "memfd_exec",
        "memfd_create + execveat (a binary that is nowhere on disk)",
        "fd = os.memfd_create('x')\nos.write(fd, open(sys.executable, 'rb').read())\n"
        "os.execve(fd, [sys.executable, '-c', " + repr(CHILD) + "], {})",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "script_in_tmpfs",
        "write an executable script to the work dir and run it",
        "open('x', 'w').write('#!' + sys.executable + '\\n" + CHILD + "\\n')\nos.chmod('x', 0o755)\n"
        "os.execv('./x', ['./x'])",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "os_system",
        "os.system a shell command",
        "print('status', os.system('echo $MARK > $CANARY/$MARK'))",
        expect="success",
    ),
    Hostile(
        "disable_guard_then_exec",
        "switch off the old audit hook via sys._getframe (the issue's bypass), then exec",
        "f = sys._getframe(1)\nwhile f is not None:\n    st = f.f_locals.get('state')\n"
        "    if isinstance(st, dict):\n        st['busy'] = True\n    f = f.f_back\n"
        f"os.execv(sys.executable, [sys.executable, '-c', {CHILD!r}])",
        expect="sandbox_exit:1",
        stderr_has="Operation not permitted",
    ),
    # -- kernel attack surface ---------------------------------------------------------------------------------------
    Hostile(
        "ptrace",
        "ptrace(PTRACE_ATTACH) the namespace's pid 1, and PTRACE_TRACEME",
        "print('ptrace', libc.ptrace(16, 1, 0, 0), libc.ptrace(0, 0, 0, 0))",
        expect="success",
    ),
    Hostile(
        "process_vm_readv",
        "read another process's memory",
        "print('vm', syscall(310, 1, 0, 0, 0, 0, 0))",
        expect="success",
    ),
    Hostile(
        "unshare_user", "a new user namespace (to regain capabilities)", "print('unshare', libc.unshare(0x10000000))"
    ),
    Hostile("setns", "join another namespace", "print('setns', libc.setns(0, 0))", expect="success"),
    Hostile("bpf", "load a BPF program", "print('bpf', syscall(321, 5, 0, 0))", expect="success"),
    Hostile(
        "clone_newns",
        "clone with CLONE_NEWNS|CLONE_NEWUSER via the raw syscall",
        "print('clone', syscall(56, 0x10020000 | 17, 0, 0, 0, 0))",
        expect="success",
    ),
    Hostile(
        "x32_abi",
        "an x32-ABI system call number (filter bypass on x86_64)",
        "print('x32', syscall(0x40000000 | 39))",
        expect="sandbox_signal:SIGSYS",  # the filter kills the process: bwrap reports 128+SIGSYS
    ),
    # -- processes ---------------------------------------------------------------------------------------------------
    Hostile(
        "fork_bomb",
        "a fork bomb that swallows the refusals",
        "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end:\n    try:\n        os.fork()\n"
        "    except OSError:\n        pass\nos._exit(0)",
        expect="sandbox_processes:limit",
    ),
    Hostile(
        "thread_bomb",
        "a thread bomb",
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
        expect="sandbox_processes:limit",
    ),
    Hostile(
        "daemon",
        "leave a double-forked daemon behind that keeps trying to write outside",
        "import time, signal\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "        for _ in range(600):\n            try:\n                open('$CANARY/$MARK', 'w')\n"
        "            except OSError:\n                pass\n            time.sleep(0.05)\n    os._exit(0)\n"
        "print('parent done')",
        expect="success",
    ),
    Hostile(
        "kill_host",
        "signal a host process by pid, and everything with kill(-1)",
        "import signal\ntry:\n    os.kill($SLEEPER, signal.SIGKILL)\nexcept OSError as e:\n    print('kill', e.errno)\n"
        "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    print('kill -1', e.errno)",
    ),
    # -- network -----------------------------------------------------------------------------------------------------
    Hostile(
        "tcp_loopback",
        "connect to a TCP listener on the host's loopback",
        "import socket\nsocket.create_connection(('127.0.0.1', $PORT), timeout=2).sendall(b'$MARK')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "udp_loopback",
        "send UDP to the host's loopback",
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "print('sent', s.sendto(b'$MARK', ('127.0.0.1', $UDPPORT)))",
        expect="success",
    ),
    Hostile(
        "unix_path",
        "connect to a Unix socket on the host's file system",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('$UNIX')\ns.sendall(b'$MARK')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "unix_abstract",
        "connect to a host abstract Unix socket (not tied to the file system)",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0$ABSTRACT')\ns.sendall(b'$MARK')",
        expect="sandbox_exit:1",
    ),
    Hostile(
        "raw_packet",
        "open a raw packet socket",
        "import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
        expect="sandbox_exit:1",
    ),
    *(
        Hostile(
            f"family_{name.lower()}",
            f"open an {name} socket (outside the seccomp filter's allowlist of families)",
            f"import socket\ns = socket.socket({number}, socket.{kind})\nprint('opened', s)",
            expect="sandbox_exit:1",
            stderr_has="[Errno 97] Address family not supported by protocol",
        )
        for name, number, kind in (
            ("AF_PACKET", 17, "SOCK_DGRAM"),
            ("AF_NETLINK", 16, "SOCK_RAW"),
            ("AF_BLUETOOTH", 31, "SOCK_STREAM"),
            ("AF_ALG", 38, "SOCK_SEQPACKET"),
        )
    ),
    Hostile(
        "vsock_listen",
        "bind and listen on an AF_VSOCK socket: the network namespace does not isolate vsock (issue 23)",
        "import socket\ns = socket.socket(40, socket.SOCK_STREAM)\ns.bind((0xFFFFFFFF, 5000))\ns.listen()\n"
        "print('listening', s.getsockname())",
        expect="sandbox_exit:1",
        stderr_has="[Errno 97] Address family not supported by protocol",
    ),
    Hostile(
        "vsock_connect_host",
        "connect over AF_VSOCK to the host (CID 2) through ctypes, past the socket module",
        "print('vsock', libc.socket(40, 1, 0), ctypes.get_errno())",
        expect="success",
        stdout_has="vsock -1 97",
    ),
    # -- the verdict -------------------------------------------------------------------------------------------------
    Hostile(
        "spoof_marker",
        "print the old violation marker to turn a clean run into a memory stop",
        "print('\\nroutegate-sandbox:violation:memory', file=sys.stderr)\n"
        "print('routegate-sandbox:isolation:', file=sys.stderr)",
        expect="success",
    ),
    Hostile(
        "spoof_cpu_status",
        "exit with 128+SIGXCPU without using CPU, to fake a CPU stop",
        "os._exit(152)",
        expect="sandbox_signal:SIGXCPU",
    ),
    Hostile(
        "hide_memory",
        "close fd 2 and then go over the memory limit (hide a real violation)",
        "os.close(2)\nos.close(1)\nblock = b'x' * (600 * 1024 * 1024)",
        expect="sandbox_memory:limit",
    ),
    Hostile(
        "scribble_fds",
        "write into every inherited descriptor (the supervisor's pipes) and close them",
        "for fd in range(3, 256):\n    try:\n        os.write(fd, b'1{\"child-pid\": 1}')\n    except OSError:\n"
        "        pass\n    try:\n        os.close(fd)\n    except OSError:\n        pass\nprint('scribbled')",
        expect="success",
    ),
]


@dataclass(frozen=True)
class World:
    """The host around the sandbox, prepared by the test and inspected after every run."""

    mark: str
    secret: str
    canary: Path
    secret_file: Path
    port: int
    udp_port: int
    unix_path: str
    abstract: str
    sleeper: subprocess.Popen[bytes]
    tcp: socket.socket
    udp: socket.socket
    unix: socket.socket
    abstract_sock: socket.socket
    project_digests: dict[Path, str]

    def substitute(self, code: str) -> str:
        return string.Template(PRELUDE + code).substitute(
            MARK=self.mark,
            CANARY=self.canary,
            SECRET_FILE=self.secret_file,
            SECRET_HEAD=self.secret[:12],
            PROJECT=PROJECT,
            HOME=Path.home(),
            HOSTPID=os.getpid(),
            SLEEPER=self.sleeper.pid,
            PORT=self.port,
            UDPPORT=self.udp_port,
            UNIX=self.unix_path,
            ABSTRACT=self.abstract,
        )

    def assert_no_effect(self, run: CodeRun) -> None:
        output = run.stdout + run.stderr + run.message
        assert self.secret not in output, "a secret of the host reached the run's output"
        assert EXECUTED not in output, "the code started another program"
        assert "root:x:0:0" not in output and "[project]" not in output and ".pyenv" not in output
        assert list(self.canary.iterdir()) == [], "something was written into the host canary directory"
        for place in ("/tmp", "/dev/shm", "/"):
            assert not [n for n in os.listdir(place) if self.mark in n], f"a file of the run was left in {place}"
        for path, digest in self.project_digests.items():
            assert _digest(path) == digest, f"{path} changed"
        assert self.sleeper.poll() is None, "a host process was killed"
        for listener in (self.tcp, self.unix, self.abstract_sock):
            with pytest.raises(BlockingIOError):
                listener.accept()
        with pytest.raises(BlockingIOError):
            self.udp.recv(64)
        assert sandbox_processes() == [], "a process of the run is still alive"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("hostile")
    mark = f"rg-hostile-{secrets.token_hex(4)}"
    secret = f"rg-secret-{secrets.token_hex(12)}"
    canary = base / "canary"
    canary.mkdir()
    canary.chmod(0o777)  # writable by anyone: only the sandbox's view of the file system keeps it empty
    secret_file = base / "server-secret.txt"
    secret_file.write_text(secret)
    secret_file.chmod(0o644)
    os.environ["ROUTEGATE_HOSTILE_SECRET"] = secret
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    unix_path = str(base / "host.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen()
    unix.setblocking(False)
    abstract = f"routegate-{mark}"
    abstract_sock = socket.socket(socket.AF_UNIX)
    abstract_sock.bind("\0" + abstract)
    abstract_sock.listen()
    abstract_sock.setblocking(False)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    digests = {path: _digest(path) for path in PROJECT_FILES}
    try:
        with subreaper():
            yield World(
                mark,
                secret,
                canary,
                secret_file,
                tcp.getsockname()[1],
                udp.getsockname()[1],
                unix_path,
                abstract,
                sleeper,
                tcp,
                udp,
                unix,
                abstract_sock,
                digests,
            )
    finally:
        del os.environ["ROUTEGATE_HOSTILE_SECRET"]
        sleeper.kill()
        sleeper.wait()
        for sock in (tcp, udp, unix, abstract_sock):
            sock.close()


def _check(case: Hostile, run: CodeRun) -> None:
    """The pinned stop reason; the memory and process verdicts need the control group's counters."""
    group_only = ("sandbox_memory:limit", "sandbox_processes:limit")
    if case.expect is not None and (case.expect not in group_only or "cgroup" in run.isolation):
        assert run.stop_reason == case.expect, (run.stop_reason, run.stderr[-500:])
    if case.stderr_has is not None:
        assert case.stderr_has in run.stderr, run.stderr[-500:]
    if case.stdout_has is not None:
        assert case.stdout_has in run.stdout, run.stdout[-500:]


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40
    assert len({case.name for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.name)
async def test_hostile_code_has_no_effect_outside(case: Hostile, world: World) -> None:
    run = await RUNNER.run(world.substitute(case.code))
    world.assert_no_effect(run)
    _check(case, run)


THROUGH_DISPATCH = ("dir_fd_tmp", "shm_90mib", "pyproject", "proc_cmdlines", "os_execv", "ctypes_execve")
THROUGH_DISPATCH += ("disable_guard_then_exec", "daemon", "tcp_loopback", "spoof_marker", "fork_bomb")


@pytest.mark.parametrize("name", THROUGH_DISPATCH)
async def test_hostile_code_through_the_public_dispatcher(name: str, world: World) -> None:
    case = next(case for case in CORPUS if case.name == name)
    dispatcher = TechniqueDispatcher(handlers=[CodeHandler(SandboxRunner(limits=LIMITS))], allow=["code:python"])
    answer = f"Here is the code:\n```python\n{world.substitute(case.code)}\n```\n"
    result = await dispatcher.adispatch(TechniqueRouter().classify(answer))
    run = result.output[0].value
    assert isinstance(run, CodeRun)
    world.assert_no_effect(run)
    _check(case, run)
    assert result.stop_reason == run.stop_reason


async def test_nothing_of_a_run_survives_into_the_next(world: World) -> None:
    first = await RUNNER.run("open('/tmp/left', 'w').write('x')\nopen('left', 'w').write('x')\nprint('written')")
    second = await RUNNER.run("import os\nprint(sorted(os.listdir('/tmp')), sorted(os.listdir('.')))")
    assert (first.stdout, second.stdout) == ("written\n", "[] ['main.py']\n")
    world.assert_no_effect(second)

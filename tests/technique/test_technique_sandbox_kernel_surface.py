"""What the seccomp filter leaves of the kernel, observed from inside a real run.

Sockets: only ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` can be opened (``AF_VSOCK`` could bind and listen before:
a network namespace does not isolate vsock); system calls a Python run never needs are refused, called raw
through ``ctypes`` so no Python-level check is in the way; and an ordinary workload — imports, threads, a
forked Python child, json, math, sqlite, hashing, asyncio — still runs. Each run prints what the kernel
answered and the test compares it.
"""

from __future__ import annotations

import json
import os
import platform

import pytest

from routegate.technique.sandbox import SandboxLimits, SandboxRunner
from technique._sandbox_procs import needs_os_sandbox

RUNNER = SandboxRunner(limits=SandboxLimits(wall_seconds=30, cpu_seconds=5, memory_bytes=256 * 1024 * 1024))
FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
REFUSED_FAMILIES = {"AF_VSOCK": 40, "AF_PACKET": 17, "AF_NETLINK": 16, "AF_BLUETOOTH": 31, "AF_ALG": 38}
# from the kernel's unistd tables, written out here so a wrong number in the filter's own table shows up
REFUSED_CALLS = {
    "x86_64": {"modify_ldt": 154, "personality": 135, "kcmp": 312, "pidfd_open": 434, "landlock_create_ruleset": 444},
    "aarch64": {"personality": 92, "kcmp": 272, "pidfd_open": 434, "landlock_create_ruleset": 444},
}
SOCKETS = """
import errno, json, socket
seen = {}
for name, family in %r.items():
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET, socket.SOCK_RAW):
        try:
            socket.socket(family, kind).close()
            seen[name] = 'opened'
            break
        except OSError as exc:
            seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
for name, family in %r.items():
    try:
        for end in socket.socketpair(family):
            end.close()
        seen['pair_' + name] = 'opened'
    except OSError as exc:
        seen['pair_' + name] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(seen))
"""


@needs_os_sandbox
async def test_only_unix_and_ip_sockets_can_be_opened() -> None:
    both = FAMILIES | REFUSED_FAMILIES
    run = await RUNNER.run(SOCKETS % (both, {"AF_UNIX": 1, "AF_VSOCK": 40}))
    assert run.stop_reason == "success", run.stderr[-1000:]
    seen = json.loads(run.stdout)
    assert {name: seen[name] for name in REFUSED_FAMILIES} == dict.fromkeys(REFUSED_FAMILIES, "EAFNOSUPPORT")
    assert seen["AF_UNIX"] == seen["AF_INET"] == "opened"
    assert seen["AF_INET6"] in ("opened", "EADDRNOTAVAIL")  # a host with IPv6 switched off: the kernel's answer
    assert (seen["pair_AF_UNIX"], seen["pair_AF_VSOCK"]) == ("opened", "EAFNOSUPPORT")


@needs_os_sandbox
async def test_a_tcp_round_trip_on_the_runs_own_loopback_works() -> None:
    code = (
        "import socket, threading\nserver = socket.create_server(('127.0.0.1', 0))\n"
        "def serve():\n    conn, _ = server.accept()\n    conn.sendall(conn.recv(5).upper())\n    conn.close()\n"
        "threading.Thread(target=serve).start()\n"
        "client = socket.create_connection(server.getsockname())\nclient.sendall(b'hello')\nprint(client.recv(5))\n"
    )
    run = await RUNNER.run(code)
    assert (run.stop_reason, run.stdout) == ("success", "b'HELLO'\n"), run.stderr[-1000:]


@needs_os_sandbox
async def test_calls_a_python_run_never_needs_are_refused() -> None:
    calls = REFUSED_CALLS.get(platform.machine())
    if calls is None:
        pytest.skip(f"no system call numbers written out for {platform.machine()}")
    code = (
        "import ctypes, json\nlibc = ctypes.CDLL(None, use_errno=True)\nseen = {}\n"
        f"for name, number in {calls!r}.items():\n"
        "    ctypes.set_errno(0)\n"
        "    result = libc.syscall(number, 0, 0, 0, 0, 0)\n"
        "    seen[name] = [result, ctypes.get_errno()]\n"
        "print(json.dumps(seen))\n"
    )
    run = await RUNNER.run(code)
    assert run.stop_reason == "success", run.stderr[-1000:]
    assert json.loads(run.stdout) == {name: [-1, 1] for name in calls}  # -1 with EPERM


@needs_os_sandbox
async def test_an_ordinary_workload_still_runs() -> None:
    code = """
import asyncio, decimal, hashlib, json, math, os, sqlite3, statistics, threading, zlib
from concurrent.futures import ThreadPoolExecutor

with ThreadPoolExecutor(4) as pool:
    squares = list(pool.map(lambda n: n * n, range(100)))
read, write = os.pipe()
child = os.fork()
if child == 0:  # a forked Python child computes and reports through a pipe
    os.write(write, json.dumps({'pi': round(math.pi, 5), 'fsum': math.fsum([0.1] * 10)}).encode())
    os._exit(0)
os.close(write)
from_child = json.loads(os.read(read, 4096))
_, status = os.waitpid(child, 0)
db = sqlite3.connect(':memory:')
db.execute('create table t (x)')
db.executemany('insert into t values (?)', [(n,) for n in range(10)])
async def main():
    await asyncio.sleep(0)
    return sum(await asyncio.gather(*(asyncio.to_thread(pow, 2, n) for n in range(5))))
print(json.dumps({
    'squares': sum(squares), 'child': from_child, 'status': os.waitstatus_to_exitcode(status),
    'sqlite': db.execute('select sum(x) from t').fetchone()[0], 'async': asyncio.run(main()),
    'sha': hashlib.sha256(b'x').hexdigest()[:8], 'zlib': len(zlib.compress(b'a' * 1000)) < 100,
    'decimal': str(decimal.Decimal(1) / 7)[:6], 'mean': statistics.mean([1, 2, 3]),
    'threads': threading.active_count(), 'cpus': os.cpu_count() is not None,
}))
"""
    run = await RUNNER.run(code)
    assert run.stop_reason == "success", run.stderr[-2000:]
    assert json.loads(run.stdout) == {
        "squares": 328350,
        "child": {"pi": 3.14159, "fsum": 1.0},
        "status": 0,
        "sqlite": 45,
        "async": 31,
        "sha": "2d711642",
        "zlib": True,
        "decimal": "0.1428",
        "mean": 2,
        "threads": 1,
        "cpus": True,
    }


@needs_os_sandbox
async def test_the_run_has_a_uid_of_its_own_no_groups_and_no_capabilities() -> None:
    code = "import os\nstatus = open('/proc/self/status').read()\nprint(os.getuid(), os.getgid(), os.getgroups(), "
    code += "status.split('CapEff:')[1].split()[0])"
    run = await RUNNER.run(code)
    uid, gid, groups, capabilities = run.stdout.split(" ", 3)
    if os.geteuid() == 0:  # a fresh uid per run, switched to before bwrap starts (setpriv, or the credentials)
        assert 1_000_000 <= int(uid) < 2_000_000 and gid == uid
    else:
        assert int(uid) == os.getuid()
    assert (groups, capabilities) == ("[]", "0000000000000000\n")

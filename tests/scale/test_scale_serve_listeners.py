"""``routegate serve --ray`` keeps the local Ray cluster it starts off the network, read from outside.

Ray's head answers jobs and its dashboard's APIs; a head reachable from the network runs anyone's code (the public
"ShadowRay" attacks). So the cluster the command starts must listen on loopback only — its GCS, raylet, object
manager, agents, dashboard, every worker's own port, and Ray Serve's HTTP proxy on the default ``--host`` —
whatever this machine's other addresses are. The check reads the kernel's socket tables (``/proc/net/tcp`` and
``tcp6``) and the descriptors of every process below the command.

That includes each Ray Serve replica's inter-deployment gRPC server, which Ray's own code binds to every interface
(``[::]:0``, no setting): on a loopback node the replica binds it to loopback (``routegate.server.ray_loopback``),
and it still refuses a call without the cluster's token (``UNAUTHENTICATED``).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
from pathlib import Path

import pytest

from routegate.server.testing import free_port
from routegate_process import start_routegate
from server.rawhttp import descendants

pytest.importorskip("ray", reason="needs the routegate[ray] extra")


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address of ``/proc/net/tcp{,6}`` (little-endian 32-bit words, as the kernel prints them)."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _listening() -> dict[str, tuple[str, int]]:
    """Every listening TCP socket on this machine: its inode -> (address, port)."""
    found: dict[str, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            address, port = fields[1].split(":")
            found[fields[9]] = (str(_address(address)), int(port, 16))
    return found


def _sockets_of(pids: set[int]) -> dict[str, int]:
    """The socket inodes the processes hold: inode -> pid."""
    held: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    held[target[8:-1]] = pid
        except OSError:
            continue  # gone meanwhile
    return held


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _unauthenticated_call(port: int) -> str:
    """The status a call without the cluster's token gets from the replica's gRPC server on ``port``."""
    import grpc  # type: ignore[import-untyped]  # grpcio (Ray's dependency) ships no type information

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/ray.serve.ASGIService/HandleRequest")
        try:
            call(b"", timeout=30)
        except grpc.RpcError as failed:
            return str(failed.code().name)  # the RpcError raised by a call is also a grpc.Call
    return "OK"


@pytest.mark.e2e
@pytest.mark.integration
@pytest.mark.timeout(420)
def test_the_cluster_serve_ray_starts_listens_on_loopback_only(data_dir: Path) -> None:
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    try:
        proc, lines = start_routegate(["serve", "--ray", "--replicas", "1", "--port", str(port)], env, within=300)
    except AssertionError as failed:
        if "failed to start" in str(failed).lower():
            pytest.skip(f"Ray cannot start on this machine:\n{str(failed)[-2000:]}")
        raise
    try:
        run = descendants(proc.pid) | {proc.pid}
        listening = _listening()
        ours = {inode: pid for inode, pid in _sockets_of(run).items() if inode in listening}
        assert len(ours) >= 5, (ours, "".join(lines))  # Ray's GCS, raylet, agents, workers, the HTTP proxy
        assert ("127.0.0.1", port) in {listening[inode] for inode in ours}  # Ray Serve's proxy, on --host
        exposed = sorted(
            f"{listening[inode][0]}:{listening[inode][1]} ({_name(pid)}, pid {pid})"
            for inode, pid in ours.items()
            if not _loopback(listening[inode][0])
        )
        assert exposed == [], f"processes of the run listen beyond loopback: {exposed}"
        replica = [listening[inode][1] for inode, pid in ours.items() if _name(pid) == "ray::ServeRepli"]
        calls = {_unauthenticated_call(listened) for listened in replica}  # its gRPC servers: Ray's own and Serve's
        assert "UNAUTHENTICATED" in calls and "OK" not in calls, calls
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: Ray Serve, Ray and PostgreSQL stop
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_local_cluster_is_not_started_without_rays_token_authentication(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one listener Ray binds to every interface is guarded by the cluster's token only: without it, no cluster."""
    from routegate.errors import ConfigurationError
    from routegate.routers.ray_batch import AUTH_MODE_ENV, LOCAL_ONLY_ENV, import_ray, ray_session

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv(LOCAL_ONLY_ENV, "0")
    monkeypatch.setenv(AUTH_MODE_ENV, "disabled")
    if import_ray().is_initialized():
        pytest.skip("a Ray of another test runs in this process")
    refused = pytest.raises(ConfigurationError, match="RAY_AUTH_MODE=disabled: routegate does not start a local Ray")
    with refused, ray_session(num_cpus=1):
        raise AssertionError("a cluster started")
    assert not import_ray().is_initialized()


def test_only_the_every_interface_address_is_rebound() -> None:
    from routegate.server.ray_loopback import loopback_address

    assert loopback_address("[::]:0") == "127.0.0.1:0"
    assert loopback_address("[::]:8265") == "127.0.0.1:8265"
    assert loopback_address("10.0.0.5:0") == "10.0.0.5:0"  # an address someone chose stays theirs
    assert loopback_address("[::1]:0") == "[::1]:0"

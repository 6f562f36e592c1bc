"""Each Ray Serve replica's inter-deployment gRPC server on loopback, when the whole cluster is this machine.

Ray Serve (2.5x and later) starts a gRPC server in every replica for calls between deployments and binds it to
every interface: its replica code passes ``"[::]:0"`` to one binding helper, and no setting names another address.
On a cluster whose node address is loopback — the local cluster ``routegate serve --ray`` starts — every caller of
that server (the HTTP proxy, other replicas) is on this machine and dials the node's loopback address, so the
server loses nothing by listening on ``127.0.0.1`` only, and the network cannot reach it at all.

:func:`keep_replica_grpc_on_loopback` runs in the replica's process when its callable is built, which Ray does
before it starts that server: it wraps the helper *as the replica module sees it*, turning an every-interface
address into the loopback one and leaving any other address alone. This reaches into Ray's private replica
module. A Ray whose replica no longer binds through that name keeps its own default (the server still refuses
calls without the cluster's token); ``tests/scale/test_scale_serve_listeners.py``, which reads the kernel's socket
tables, then fails and says so.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from routegate._extras import needs

logger = logging.getLogger(__name__)

EVERY_INTERFACE = "[::]:"
LOOPBACK = "127.0.0.1:"
_HELPER = "add_port_to_grpc_server"  # ray/serve/_private/replica.py: add_port_to_grpc_server(server, "[::]:0")


def loopback_address(address: str) -> str:
    """``"[::]:PORT"`` -> ``"127.0.0.1:PORT"``; any other address unchanged."""
    if address.startswith(EVERY_INTERFACE):
        return LOOPBACK + address[len(EVERY_INTERFACE) :]
    return address


def keep_replica_grpc_on_loopback() -> bool:
    """In a Ray Serve replica on a loopback node: bind the replica's inter-deployment gRPC server to loopback.
    Returns whether the replica's binding is now on loopback (False on a node with a network address, where other
    machines must reach it, and on a Ray whose replica has no such helper)."""
    with needs("ray"):
        import ray
        from ray.serve._private import replica

    node = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
    if not ipaddress.ip_address(node).is_loopback:
        return False

    bind: Callable[[Any, str], int] | None = getattr(replica, _HELPER, None)
    if bind is None:
        logger.warning("this Ray's replica has no %s: its gRPC server keeps Ray's own address", _HELPER)
        return False
    if getattr(bind, "binds_loopback", False):  # a second replica in the same worker process
        return True

    def bind_on_loopback(server: Any, address: str) -> int:
        return bind(server, loopback_address(address))

    bind_on_loopback.binds_loopback = True  # type: ignore[attr-defined]  # a marker on the wrapper
    setattr(replica, _HELPER, bind_on_loopback)
    return True

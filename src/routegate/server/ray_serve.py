"""The chat app as a Ray Serve deployment (``routegate serve --ray``; the ``routegate[ray]`` extra).

Each replica builds the whole app of ``routegate serve`` (every endpoint, streaming included) in its own process,
with its own desk (connection pool, encoder) over the shared PostgreSQL named by the settings it is given; the
driver (``routegate serve --ray``) starts the embedded PostgreSQL once for all replicas when ``DATABASE_URL`` is
not set. Ray Serve's HTTP proxy spreads the requests over the replicas; every response carries
``X-Routegate-Replica``, the id of the replica that answered.

Ray is imported by :func:`deployment` when it runs, never when this module is imported.
"""

from __future__ import annotations

import functools
from typing import Any

from routegate._extras import needs
from routegate.server._asgi import ASGIApp, HttpMiddleware, Message, Receive, Scope, Send
from routegate.server.app import create_app
from routegate.server.workers import open_serving_desk
from routegate.settings import Settings

REPLICA_HEADER = "X-Routegate-Replica"
DEPLOYMENT_NAME = "routegate"
MAX_ONGOING_REQUESTS = 64  # per replica; the autoscaler aims at a quarter of it


class ReplicaHeader(HttpMiddleware):
    """ASGI middleware: adds ``X-Routegate-Replica: <id>`` to every HTTP response (streamed ones too)."""

    def __init__(self, app: ASGIApp, replica_id: str) -> None:
        super().__init__(app)
        self.header = (REPLICA_HEADER.lower().encode(), replica_id.encode())

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), self.header]
            await send(message)

        await self.app(scope, receive, send_with_header)


def replica_app(settings: Settings, replica_id: str) -> Any:
    """The app of one replica: the desk opens in the app's lifespan (Ray Serve runs it when the replica starts);
    your own desk when ``settings.desk`` is set."""
    app = create_app(open_desk=functools.partial(open_serving_desk, settings), settings=settings)
    app.add_middleware(ReplicaHeader, replica_id=replica_id)
    return app


def deployment(settings: Settings, *, replicas: int = 1, autoscale: tuple[int, int] | None = None) -> Any:
    """The bound Ray Serve application: ``replicas`` replicas, or ``autoscale=(min, max)`` with Ray Serve's
    request-based autoscaling. ``settings.database_url`` must name the PostgreSQL every replica uses."""
    with needs("ray"):
        from ray import serve

    if not settings.database_url:
        raise ValueError("the replicas need a shared database: set settings.database_url")

    @serve.ingress()
    class RoutegateReplica:
        def __init__(self, settings: Settings) -> None:
            from routegate.server.ray_loopback import keep_replica_grpc_on_loopback

            keep_replica_grpc_on_loopback()  # before Ray Serve starts the replica's gRPC server (after this)
            self.settings = settings

        def __serve_build_asgi_app__(self) -> Any:
            replica_id = serve.get_replica_context().replica_id.unique_id
            return replica_app(self.settings, replica_id)

    options: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        "ray_actor_options": {"num_cpus": 1},
        # the app is asynchronous and takes many turns at once (Ray Serve's default of 5 queued the rest in the
        # proxy: ~15 req/s instead of ~250 at concurrency 32 on two cores)
        "max_ongoing_requests": MAX_ONGOING_REQUESTS,
        "logging_config": {"log_level": "WARNING", "enable_access_log": False},
    }
    if autoscale is None:
        options["num_replicas"] = replicas
    else:
        low, high = autoscale
        options["autoscaling_config"] = {
            "min_replicas": low,
            "max_replicas": high,
            "target_ongoing_requests": MAX_ONGOING_REQUESTS // 4,
        }
    return serve.deployment(**options)(RoutegateReplica).bind(settings)

"""``routegate serve --ray``: the driver of the Ray Serve deployment (:mod:`routegate.server.ray_serve`).

It starts the embedded PostgreSQL once (unless ``DATABASE_URL``), primes the schema and the router's fitted layer,
starts a local Ray cluster on loopback or joins ``RAY_ADDRESS``, starts Ray Serve's HTTP proxy on ``--host/--port``
(with :mod:`routegate.server.ray_proxy` around it: a request whose replica died is a 503) and deploys the replicas,
then waits. Ctrl-C (130) or SIGTERM (143) shuts Ray Serve down, then Ray (a local
cluster stops with it), then PostgreSQL, and prints ``routegate: stopped.``.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from typing import Any

from routegate._extras import needs
from routegate.cli._signals import exit_status, terminate_like_interrupt
from routegate.errors import ConfigurationError
from routegate.settings import Settings


def parse_autoscale(text: str) -> tuple[int, int]:
    """``MIN:MAX`` -> ``(min, max)``; :class:`ConfigurationError` says what a good value looks like."""
    low, sep, high = text.partition(":")
    try:
        bounds = (int(low), int(high)) if sep else None
    except ValueError:
        bounds = None
    if bounds is None or bounds[0] < 1 or bounds[1] < bounds[0]:
        raise ConfigurationError(f"--autoscale takes MIN:MAX replicas with 1 <= MIN <= MAX, e.g. 1:4 (got {text!r})")
    return bounds


def serve_on_ray(settings: Settings, *, replicas: int, autoscale: tuple[int, int] | None) -> int:
    from routegate.apps.support.factory import database_url
    from routegate.routers.ray_batch import ray_session
    from routegate.server.ray_proxy import PROXY_CALLBACK, PROXY_CALLBACK_ENV

    url, embedded = database_url(settings)
    stopped_by = 0
    try:
        primed = settings.model_copy(update={"database_url": url})
        from routegate.apps.support.factory import prime_support_desk

        if settings.desk is not None:  # your own desk: every replica opens it
            primed = primed.model_copy(update={"desk": settings.desk.resolve()})  # replicas run elsewhere
        prime_support_desk(primed, url)  # loaded and ingested once here
        # a request whose replica dies is a 503 (not Ray Serve's bare 500): the local cluster's proxy inherits this
        os.environ.setdefault(PROXY_CALLBACK_ENV, PROXY_CALLBACK)
        most = autoscale[1] if autoscale else replicas
        with terminate_like_interrupt(), ray_session(num_cpus=max(os.cpu_count() or 1, most)) as ray:
            signal.signal(signal.SIGTERM, _raise_terminated)  # Ray's driver installs its own on init
            try:
                _deploy(ray, primed, replicas=replicas, autoscale=autoscale)
                threading.Event().wait()  # until Ctrl-C / SIGTERM
            except KeyboardInterrupt as interrupt:
                stopped_by = exit_status(interrupt)
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            finally:
                _shutdown_serve()
    finally:
        if embedded is not None:
            embedded.stop()
    print("routegate: stopped.", flush=True)
    return stopped_by


def _raise_terminated(signum: int, frame: Any) -> None:
    from routegate.cli._signals import Terminated

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def _deploy(ray: Any, settings: Settings, *, replicas: int, autoscale: tuple[int, int] | None) -> None:
    with needs("ray"):  # ray installed without Ray Serve
        from ray import serve

    from routegate.server.ray_serve import deployment

    host, port = settings.server_host, settings.server_port
    # the proxy closes idle keep-alive connections as `routegate serve` does (Ray Serve's default is 90 s); the
    # other connection bounds are applied by the proxy hook (routegate.server.ray_proxy)
    keep_alive = max(1, math.ceil(settings.server_keepalive_timeout_seconds))
    serve.start(
        http_options={"host": host, "port": port, "keep_alive_timeout_s": keep_alive},
        logging_config={"log_level": "WARNING"},
    )
    started = time.monotonic()
    serve.run(deployment(settings, replicas=replicas, autoscale=autoscale), name="routegate", route_prefix="/")
    count = f"autoscaling {autoscale[0]}-{autoscale[1]} replicas" if autoscale else f"{replicas} replica(s)"
    print(
        f"routegate server: http://{host}:{port}  (Ray Serve, {count}, ready in {time.monotonic() - started:.0f} s; "
        f"API docs http://{host}:{port}/docs)",
        flush=True,
    )
    print("Ctrl-C stops everything.", flush=True)


def _shutdown_serve() -> None:
    with needs("ray"):
        from ray import serve

    with contextlib.suppress(Exception):  # Ray already going down (its processes got the terminal's Ctrl-C too)
        serve.shutdown()  # type: ignore[no-untyped-call]

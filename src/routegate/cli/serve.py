"""``routegate serve`` (the HTTP server), ``routegate ui`` (the Streamlit UI) and ``routegate up`` (embedded
Postgres + server + UI together). Wiring only: the desk comes from ``open_support_desk`` (``--desk DIR``, else
the built-in desk's configuration), the app from
``create_app``. uvicorn, httpx and the server are imported by these commands when they run, not when the parser
is built (every command's parser is).

Ctrl-C exits 130 and SIGTERM 143 after everything the command started has stopped, with one line
``routegate: stopped.``; with ``--workers N`` too, once every worker process has exited. The first Ctrl-C lets
open requests finish; a second one ends them with an answer (an open ``/chat`` stream with an ``error`` event
``server_shutting_down``) before the desk closes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate._extras import require
from routegate.cli._command import add_command
from routegate.cli.desk import DESK_HELP
from routegate.errors import ConfigurationError, RuntimeFaultError
from routegate.settings import Settings

if TYPE_CHECKING:
    from routegate.apps.support.desk import SupportAgent

_UI_START_TIMEOUT = 60.0


def register(subparsers: Any) -> None:
    serve = add_command(subparsers, "serve", run_serve)
    serve.add_argument("--host", default=None, help="interface to bind (default: ROUTEGATE_SERVER_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: ROUTEGATE_SERVER_PORT or 8000)")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes, each with its own desk on the same PostgreSQL (default 1)",
    )
    serve.add_argument(
        "--ray",
        action="store_true",
        help="run the app as a Ray Serve deployment behind Ray Serve's HTTP proxy (the routegate[ray] extra): a "
        "local Ray cluster, or the one RAY_ADDRESS names; see docs/deploy.md",
    )
    serve.add_argument(
        "--replicas", type=int, default=None, help="with --ray: replicas, each with its own desk (default 1)"
    )
    serve.add_argument(
        "--autoscale", default=None, metavar="MIN:MAX", help="with --ray: autoscale between MIN and MAX replicas"
    )
    serve.add_argument("--desk", type=Path, default=None, help=DESK_HELP)

    ui = add_command(subparsers, "ui", run_ui)
    ui.add_argument("--host", default=None, help="interface to bind (default: ROUTEGATE_UI_HOST or 127.0.0.1)")
    ui.add_argument("--port", type=int, default=None, help="port (default: ROUTEGATE_UI_PORT or 8501)")
    ui.add_argument("--server-url", default=None, help="the server (default: ROUTEGATE_UI_SERVER_URL)")

    up = add_command(subparsers, "up", run_up)
    up.add_argument("--host", default=None, help="interface for both (default: 127.0.0.1)")
    up.add_argument("--port", type=int, default=None, help="server port (default: 8000)")
    up.add_argument("--ui-port", type=int, default=None, help="UI port (default: 8501)")
    up.add_argument("--desk", type=Path, default=None, help=DESK_HELP)


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings()
    updates: dict[str, Any] = {}
    if getattr(args, "host", None):
        updates["server_host"] = updates["ui_host"] = args.host
    if getattr(args, "port", None) is not None:
        updates["server_port"] = args.port
    if getattr(args, "ui_port", None) is not None:
        updates["ui_port"] = args.ui_port
    if getattr(args, "desk", None) is not None:
        updates["desk"] = args.desk
    return settings.model_copy(update=updates)


def run_serve(args: argparse.Namespace) -> int:
    """run the support desk's HTTP API (POST /chat, /v1/chat/completions, /healthz, /metrics, /docs)

    Start the support desk (embedded PostgreSQL unless DATABASE_URL is set) and serve it over HTTP with uvicorn.
    ROUTEGATE_SERVER_API_KEY turns on bearer authentication; ROUTEGATE_SERVER_CORS_ORIGINS (a JSON list) turns on
    CORS.
    """
    require("server")  # the missing extra is said before any database starts
    settings = _settings(args)
    workers = getattr(args, "workers", 1)
    if workers < 1:
        raise SystemExit(f"--workers must be at least 1 (got {workers})")
    if getattr(args, "ray", False):
        return _serve_ray(settings, args, workers)
    if getattr(args, "replicas", None) is not None or getattr(args, "autoscale", None) is not None:
        raise SystemExit("--replicas and --autoscale need --ray (or use --workers N without Ray)")
    listener = _listening_socket(settings.server_host, settings.server_port)  # a busy port is said before any start
    if workers > 1:
        return _serve_workers(settings, workers, listener)
    return _run(_serve(settings, listener, with_ui=False))


def _serve_ray(settings: Settings, args: argparse.Namespace, workers: int) -> int:
    from routegate.cli._ray_serve import parse_autoscale, serve_on_ray
    from routegate.routers.ray_batch import import_ray

    if workers != 1:
        raise SystemExit("--workers does not apply with --ray: use --replicas N or --autoscale MIN:MAX")
    if args.replicas is not None and args.autoscale is not None:
        raise SystemExit("give either --replicas N or --autoscale MIN:MAX, not both")
    replicas = 1 if args.replicas is None else args.replicas
    if replicas < 1:
        raise SystemExit(f"--replicas must be at least 1 (got {replicas})")
    autoscale = parse_autoscale(args.autoscale) if args.autoscale is not None else None
    import_ray()  # the missing extra is said before any database starts
    return serve_on_ray(settings, replicas=replicas, autoscale=autoscale)


def _run(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop when it is installed (it is a dependency on POSIX; about a third less CPU per request
    than the stock asyncio loop under load), else on asyncio's own loop."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows, or installed without it
        return None
    return uvloop.new_event_loop


def _serve_workers(settings: Settings, workers: int, listener: socket.socket) -> int:
    """Several uvicorn worker processes over one PostgreSQL: the parent starts the embedded server (unless
    DATABASE_URL), primes the schema and the router's fitted layer once, then hands the URL to the workers."""
    from routegate.apps.support.factory import database_url
    from routegate.cli._uvicorn import SignalledSupervisor
    from routegate.server.serving import server_config

    url, embedded = database_url(settings)
    try:
        from routegate.apps.support.factory import prime_support_desk

        prime_support_desk(settings, url)  # the desk loaded and ingested once here; the workers open it
        if settings.desk is not None:
            os.environ["ROUTEGATE_DESK"] = str(settings.desk.resolve())
        os.environ["DATABASE_URL"] = url  # the workers' Settings() read it
        host, port = settings.server_host, listener.getsockname()[1]
        print(
            f"routegate server: http://{host}:{port}  ({workers} workers; API docs http://{host}:{port}/docs)",
            flush=True,
        )
        config = server_config(
            "routegate.server.workers:app_from_environment",
            settings,
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
        )
        supervisor = SignalledSupervisor(config, sockets=[listener])
        supervisor.run()  # returns once every worker has exited
    finally:
        if embedded is not None:
            embedded.stop()
    if not supervisor.stopped_by:
        raise RuntimeFaultError(
            f"the server's workers stopped on their own (could not start on {host}:{port}?); "
            "see the messages above, or rerun with --workers 1 to see the cause"
        )
    print("routegate: stopped.", flush=True)
    return 128 + supervisor.stopped_by


def run_up(args: argparse.Namespace) -> int:
    """start embedded Postgres, the HTTP server and the UI together; Ctrl-C stops everything

    Start the whole product: the support desk on embedded PostgreSQL (or DATABASE_URL), the HTTP server and the
    Streamlit UI, print both URLs, and stop everything on Ctrl-C.
    """
    require("server", "ui")  # the missing extras are said before any database starts, both in the pip line
    settings = _settings(args)
    listener = _listening_socket(settings.server_host, settings.server_port)
    try:  # Streamlit binds the UI's port itself: only checked here, so that a busy one is said before any start
        _listening_socket(settings.ui_host, settings.ui_port, flag="--ui-port").close()
    except BaseException:
        listener.close()
        raise
    return _run(_serve(settings, listener, with_ui=True))


def run_ui(args: argparse.Namespace) -> int:
    """run the Streamlit chat UI against a running server

    Start the Streamlit chat UI; it talks to the server at --server-url over HTTP.
    """
    from routegate.ui.launch import streamlit_command, streamlit_env

    require("ui")  # before Streamlit's child process would fail with a bare "No module named streamlit"
    settings = Settings()
    host = args.host or settings.ui_host
    port = settings.ui_port if args.port is None else args.port
    server_url = args.server_url or settings.ui_server_url
    _listening_socket(host, port).close()  # a busy port is one error line, not Streamlit's
    proc = subprocess.Popen(streamlit_command(host=host, port=port), env=streamlit_env(server_url=server_url))
    print(f"routegate UI: http://{host}:{port}  (server {server_url}; Ctrl-C to stop)", flush=True)
    try:
        return proc.wait()
    finally:  # Ctrl-C or SIGTERM (a KeyboardInterrupt, see cli._signals): stop Streamlit before exiting 130/143
        _stop(proc)


async def _serve(settings: Settings, listener: socket.socket, *, with_ui: bool) -> int:
    """Serve until SIGINT/SIGTERM, then stop the UI, the server, the desk and PostgreSQL in that order; the exit
    status is 130 after SIGINT (Ctrl-C), 143 after SIGTERM. A signal during start-up raises KeyboardInterrupt
    (:mod:`routegate.cli._signals`) and the same clean-up runs as the coroutine unwinds."""
    from routegate.apps.support.factory import check_model
    from routegate.cli._uvicorn import QuietSignalsServer
    from routegate.server import create_app
    from routegate.server.app import end_open_requests

    host, port = settings.server_host, listener.getsockname()[1]
    print(
        f"routegate: starting {'the desk in ' + str(settings.desk) if settings.desk else 'the support desk'} "
        f"({'DATABASE_URL' if settings.database_url else 'embedded PostgreSQL'})…",
        flush=True,
    )
    from routegate.server.heap import freeze_startup_heap
    from routegate.server.serving import server_config
    from routegate.server.workers import open_serving_desk

    # your own desk (--desk / ROUTEGATE_DESK), else the built-in desk's configuration; its encoders loaded
    opened: contextlib.AbstractAsyncContextManager[SupportAgent] = open_serving_desk(settings)
    async with opened as desk:
        print(await check_model(desk, settings), flush=True)  # an unreachable model is said at once, not per turn
        app = create_app(desk=desk, settings=settings)
        freeze_startup_heap()  # full GC passes over the start-up heap were the p99 of /chat
        server = QuietSignalsServer(
            server_config(app, settings, host=host, port=port, lifespan="off", log_level="warning")
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):  # stop serving, then let the cleanup below run to its end
            loop.add_signal_handler(sig, server.request_exit, sig)
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        ui: subprocess.Popen[bytes] | None = None
        try:
            while not server.started:  # uvicorn's readiness flag; fails fast if serve() ended (port in use)
                if serving.done():
                    await serving
                    raise SystemExit(f"routegate: the server could not start on {host}:{port}")
                await asyncio.sleep(0.05)
            server_url = f"http://{host}:{port}"
            print(f"routegate server: {server_url}  (API docs {server_url}/docs)", flush=True)
            if with_ui:
                ui = await asyncio.to_thread(_start_ui, settings.model_copy(update={"ui_server_url": server_url}))
                print(f"routegate UI:     http://{settings.ui_host}:{settings.ui_port}", flush=True)
            print("Ctrl-C stops everything.", flush=True)
            await serving
        finally:
            if ui is not None:
                await asyncio.to_thread(_stop, ui)
            if not serving.done():
                server.should_exit = True
                await serving
            # before the desk closes: requests still open (a second Ctrl-C) end with an answer, not cancelled
            await server.end_open_requests(functools.partial(end_open_requests, app))
    print("routegate: stopped.", flush=True)
    return 128 + server.stopped_by if server.stopped_by else 0


def _listening_socket(host: str, port: int, *, flag: str = "--port") -> socket.socket:
    """The server's socket, bound here before anything starts (uvicorn listens on it), so that a port in use is
    one ``error:`` line naming ``flag``, exit 2, not uvicorn's ``[Errno 98]``. Created as a TCP socket
    (``proto=IPPROTO_TCP``): asyncio sets TCP_NODELAY only on connections of such sockets, and without it small
    responses wait for delayed ACKs (~40 ms per request at concurrency 1)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise _bind_error(exc, host, port, flag) from None
    sock.set_inheritable(True)
    return sock


def _bind_error(exc: OSError, host: str, port: int, flag: str) -> ConfigurationError:
    if exc.errno == errno.EADDRINUSE:
        return ConfigurationError(f"port {port} on {host} is already in use: stop the other server or pass {flag} N")
    if exc.errno == errno.EACCES:
        return ConfigurationError(f"no permission to listen on port {port} of {host}: pass {flag} N with N >= 1024")
    reason = exc.strerror or str(exc)
    return ConfigurationError(
        f"cannot listen on {host}:{port} ({reason}); pass --host with an address of this machine (127.0.0.1, 0.0.0.0)"
    )


def _start_ui(settings: Settings) -> subprocess.Popen[bytes]:
    import httpx

    from routegate.ui.launch import streamlit_command, streamlit_env

    host, port = settings.ui_host, settings.ui_port
    proc = subprocess.Popen(
        streamlit_command(host=host, port=port),
        env=streamlit_env(server_url=settings.ui_server_url),
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + _UI_START_TIMEOUT
    while True:  # readiness probe, bounded
        if proc.poll() is not None:
            raise SystemExit(f"routegate: the UI exited with status {proc.returncode} (is port {port} free?)")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"http://{host}:{port}/_stcore/health", timeout=2).status_code == 200:
                return proc
        if time.monotonic() > deadline:
            _stop(proc)
            raise SystemExit(f"routegate: the UI did not start within {_UI_START_TIMEOUT:.0f} s")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `routegate serve`, `routegate ui` or `routegate up`")

"""Test helpers shipped with the server: a uvicorn server running on a free loopback port in a background thread
(real HTTP, real sockets), the app around the real desk, SSE parsing, and processes. The scripted in-memory desk,
:class:`~routegate.apps.support.fake.FakeSupportDesk`, lives beside the real desk and is re-exported here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import IO, TYPE_CHECKING, Any

import httpx

from routegate._extras import needs

with needs("server"):
    import uvicorn
    from fastapi import FastAPI

from routegate.apps.support.fake import FakeSupportDesk as FakeSupportDesk  # its home is beside the real desk
from routegate.embed import Encoder
from routegate.server.serving import server_config

if TYPE_CHECKING:
    from routegate.apps.support.semantic import EmbeddingLayer
    from routegate.core import Budget
    from routegate.llm.protocol import ChatModel
from routegate.settings import Settings


class ServerThread:
    """uvicorn serving an app on ``127.0.0.1:<free port>`` in a daemon thread; a context manager.

    Pass ``app``, or ``app_factory``: an async context manager entered *in the server's event loop* that yields
    the app (for a desk whose connections belong to that loop, e.g. the real desk on PostgreSQL). uvicorn is
    configured as ``routegate serve`` configures it (:func:`~routegate.server.serving.server_config`, with the
    app's settings); ``uvicorn_options`` override single options (e.g. ``http=`` another protocol class)."""

    def __init__(
        self,
        app: FastAPI | None = None,
        *,
        app_factory: Callable[[], AbstractAsyncContextManager[FastAPI]] | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 60.0,
        uvicorn_options: dict[str, Any] | None = None,
    ) -> None:
        if (app is None) == (app_factory is None):
            raise ValueError("pass exactly one of app and app_factory")
        self._app = app
        self._app_factory = app_factory
        self.host = host
        self.startup_timeout = startup_timeout
        self._options = {
            "log_level": "warning",
            "lifespan": "off",
            "timeout_graceful_shutdown": 5,
            **(uvicorn_options or {}),
        }
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: uvicorn.Server | None = None
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY on
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name=f"uvicorn-{self.port}", daemon=True)
        self._error: BaseException | None = None

    @property
    def app(self) -> FastAPI:
        if self._app is None:
            raise RuntimeError("the app is built when the server starts")
        return self._app

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by start()
            self._error = exc

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self._app_factory is None:
            await self._serve_app(self.app)
            return
        async with self._app_factory() as app:
            self._app = app
            await self._serve_app(app)

    async def _serve_app(self, app: FastAPI) -> None:
        settings = getattr(app.state, "settings", None) or Settings()  # the app's own bound slow clients, as in serve
        config = server_config(app, settings, **self._options)
        self.server = uvicorn.Server(config)
        await self.server.serve(sockets=[self._sock])

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while self.server is None or not self.server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the test server did not start: {self._error!r}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the test server did not start within {self.startup_timeout} s")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self._thread.join(timeout=30)
        with contextlib.suppress(OSError):
            self._sock.close()

    def tasks(self) -> int:
        """How many asyncio tasks the server's loop has right now (for leak checks)."""
        loop = self.loop
        if loop is None:
            return 0
        future = asyncio.run_coroutine_threadsafe(_count_tasks(), loop)
        return future.result(timeout=5)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _count_tasks() -> int:
    return len(asyncio.all_tasks()) - 1  # minus the counting task itself


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """``[(event, data), ...]`` from a whole text/event-stream body; unnamed events are ``message``; JSON data
    is decoded, ``[DONE]`` is kept as the string."""
    events: list[tuple[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].removeprefix(" "))
        raw = "\n".join(data)
        events.append((name, raw if raw == "[DONE]" else json.loads(raw)))
    return events


@contextlib.contextmanager
def serve_in_thread(app: FastAPI) -> Iterator[ServerThread]:
    with ServerThread(app) as server:
        yield server


@contextlib.asynccontextmanager
async def support_desk_app(
    database_url: str,
    *,
    settings: Settings,
    schema: str | None = None,
    encoder: Encoder | None = None,
    semantic: EmbeddingLayer | None = None,
    pool_size: int = 8,
    budget: Budget | None = None,
    chat_model: ChatModel | None = None,
) -> AsyncIterator[FastAPI]:
    """The app around the *real* support desk on ``database_url``, in a schema of its own (dropped on exit).
    Enter it in the loop that will serve the app (see ``ServerThread(app_factory=...)``). ``encoder`` and
    ``semantic`` (the router's embedding layer) can be shared between tests: both are costly to build.
    ``budget``: the desk's per-turn budget (default :data:`~routegate.apps.support.desk.SUPPORT_BUDGET`); the
    session locks are bounded by ``settings.db_max_advisory_locks``. ``chat_model``: the desk's model (none:
    offline)."""
    from routegate.apps.support.db import SupportDatabase
    from routegate.apps.support.desk import SUPPORT_BUDGET, SupportAgent
    from routegate.embed import default_encoder
    from routegate.server.app import create_app

    schema = schema or f"srv_{uuid.uuid4().hex[:12]}"
    db = SupportDatabase(
        database_url, schema=schema, max_size=pool_size, max_advisory_locks=settings.db_max_advisory_locks
    )
    await db.open()
    try:
        desk = SupportAgent(
            db=db,
            encoder=encoder or default_encoder(),
            semantic=semantic,
            budget=budget or SUPPORT_BUDGET,
            chat_model=chat_model,
        )
        await desk.start()
        yield create_app(desk=desk, settings=settings)
    finally:
        with contextlib.suppress(Exception):
            async with db.connection() as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await db.close()


# -- processes: for tests and benchmarks that start `routegate serve`, `routegate ui` and the like --------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_serving(
    url: str, proc: subprocess.Popen[Any] | None = None, *, timeout: float = 120.0, what: str = "the server"
) -> None:
    """Poll ``GET url`` until it answers 200 (bounded by ``timeout``); fail at once if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before answering {url}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not answer {url} within {timeout:g} s")
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen[Any], timeout: float = 15.0) -> None:
    """SIGTERM, wait up to ``timeout``, then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def serve_process(
    *args: str,
    env: dict[str, str],
    start_timeout: float = 120.0,
    stop_timeout: float = 60.0,
    stderr: int | IO[bytes] = subprocess.DEVNULL,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``routegate serve --port <free port> *args`` in a process group of its own, with ``env``; yields its URL and
    the process once ``/healthz`` answers and, with ``--workers N``, once every worker has said it is ready (one
    worker answering says nothing of the others, which may still be loading). On exit it stops the group as Ctrl-C
    does (SIGINT; the exit status is then ``process.returncode``, 130 when it stopped cleanly) and kills it after
    ``stop_timeout``. ``stderr``: where the server's standard error goes (a file, to read what it printed; not a
    pipe nobody reads)."""
    port = free_port()
    cli = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    with tempfile.TemporaryFile() as stdout:
        proc = subprocess.Popen(
            [*cli, "serve", "--port", str(port), *args],
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(f"{url}/healthz", proc, timeout=start_timeout)
            _wait_for_workers(stdout, _workers(args), proc, timeout=start_timeout)
            yield url, proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=stop_timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def _workers(args: tuple[str, ...]) -> int:
    """The ``--workers N`` among ``serve``'s arguments (0: one process, no worker lines)."""
    for i, arg in enumerate(args):
        if arg == "--workers" and i + 1 < len(args):
            return int(args[i + 1])
        if arg.startswith("--workers="):
            return int(arg.split("=", 1)[1])
    return 0


_WORKER_READY = re.compile(rb"^routegate: worker \d+ ready$", re.MULTILINE)


def _wait_for_workers(stdout: IO[bytes], workers: int, proc: subprocess.Popen[bytes], *, timeout: float) -> None:
    """Until ``stdout`` holds a ``routegate: worker <pid> ready`` line per worker (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    while workers:
        stdout.seek(0)
        if len(_WORKER_READY.findall(stdout.read())) >= workers:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before its {workers} workers were ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server's {workers} workers were not all ready within {timeout:g} s")
        time.sleep(0.1)

"""Start-up cost of a one-shot command: ``routegate ask "<question>"`` run as a fresh process, end to end.

Three situations on one data dir (``--data-dir``, default a new temporary directory):

* cold: the first ``ask`` on an empty data dir (initdb, schema, seed rows, embeddings, router fit);
* warm, no server: the data dir is ready, nothing is running, so ``ask`` starts the embedded PostgreSQL and stops
  it again before exiting;
* warm, database up: a process holding the embedded PostgreSQL for the same data dir is running (what ``routegate
  up`` / ``serve`` do), so ``ask`` attaches to it and leaves it running.

Plus the import time of ``routegate.cli`` (``python -X importtime``, cumulative) and the wall time of
``python -c "import routegate.cli"``. Offline: no API key, no ``DATABASE_URL``.

``--desk DIR`` measures your own desk instead (``routegate ask --desk DIR``), the loop a desk author lives in: the
first call with nothing running and the second call right after it, with the embedded PostgreSQL kept warm between
commands (``ROUTEGATE_DB_KEEP_WARM_SECONDS``, default 300) and without (``=0``: every command starts and stops it,
as before the warm desk). ``routegate data stop`` before each pair; interleaved.

``--server`` measures the first questions after a server start instead: ``routegate serve`` is started, and once
``/healthz`` answers, the same knowledge-base question is asked three times over ``POST /chat`` (JSON); the first
answer's time against the next ones' says what a turn still loaded after the server said ready.

Bytecode: the commands inherit the environment. With ``PYTHONDONTWRITEBYTECODE=1`` set (as on the shared
development machine) an editable install compiles routegate's own modules (about 160 on the ``ask --desk`` path) at
every start, which an installed package (``pip`` writes the ``.pyc`` files) never does. ``--bytecode-cache`` runs
every command with a bytecode cache of its own (``PYTHONPYCACHEPREFIX`` in a temporary directory, filled by the
first, uncounted call; nothing is written into the checkout) to measure what an installed routegate costs.
``machine`` says which applied.

Run with another checkout's interpreter (``/path/to/other/.venv/bin/python bench/startup.py ...``) to measure that
checkout's code: the commands run as ``sys.executable -m routegate``.

Run: python bench/startup.py [--runs N] [--data-dir DIR] [--question TEXT] [--desk DIR | --server] [--bytecode-cache]
[--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "routegate"]
QUESTIONS = ("What is the status of ticket 1?", "How do I reset my password?")
_HOLDER = (
    "import sys; from pathlib import Path; from routegate.apps.support.db import EmbeddedPostgres; "
    "server = EmbeddedPostgres(Path(sys.argv[1])); server.start(); print('ready', flush=True); sys.stdin.read(); "
    "server.stop()"
)


_BYTECODE: dict[str, str] = {}
"""``PYTHONPYCACHEPREFIX`` for every command when ``--bytecode-cache`` is given (set by :func:`main`)."""


def _env(data_dir: Path, keep_warm_seconds: float = 0) -> dict[str, str]:
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), ROUTEGATE_DB_KEEP_WARM_SECONDS=f"{keep_warm_seconds:g}")
    for name in ("OPENAI_API_KEY", "DATABASE_URL", "ROUTEGATE_DEBUG"):
        env.pop(name, None)
    if _BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(_BYTECODE)
    return env


def _timed_cpu(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds of the command and the CPU seconds it used itself (user + system; not the PostgreSQL it
    started, nor the watcher): on a machine shared with other work the second is the steadier figure."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _timed(argv: Sequence[str], env: dict[str, str]) -> float:
    return _timed_cpu(argv, env)[0]


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median_s": round(statistics.median(ordered), 3), "p90_s": round(p90, 3), "runs": len(ordered)}


@contextmanager
def database_held(data_dir: Path) -> Iterator[None]:
    """The embedded PostgreSQL of ``data_dir`` held open by another process, as ``routegate up`` holds it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(data_dir / "support-pg")],
        env=_env(data_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        if holder.stdout.readline().strip() != "ready":
            raise SystemExit("the process holding the database did not start")
        yield
    finally:
        holder.communicate(timeout=60)  # closes its stdin: it stops the server and exits


def import_time_us(module: str) -> int:
    """Cumulative microseconds of importing ``module`` in a fresh interpreter (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    )
    for line in reversed(done.stderr.splitlines()):
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() == module:
            return int(parts[1])
    raise SystemExit(f"no import time reported for {module}")


def measure(data_dir: Path, runs: int, questions: Sequence[str]) -> dict[str, Any]:
    env = _env(data_dir)
    fresh = not (data_dir / "support-pg" / "PG_VERSION").exists()
    asks = [[*CLI, "ask", questions[i % len(questions)]] for i in range(runs)]
    result: dict[str, Any] = {}
    cold = _timed(asks[0], env)  # prepares the data dir when it is new
    if fresh:
        result["cold_first_ask_s"] = round(cold, 3)
    # interleaved, so that load from other processes on the machine falls on both series alike
    no_server: list[float] = []
    db_up: list[float] = []
    for argv in asks:
        no_server.append(_timed(argv, env))
        with database_held(data_dir):
            db_up.append(_timed(argv, env))
    result["ask_warm_no_server"] = _summary(no_server)
    result["ask_warm_database_up"] = _summary(db_up)
    result["import_routegate_cli_ms"] = round(
        statistics.median(import_time_us("routegate.cli") for _ in range(3)) / 1000
    )
    bare = [_timed([sys.executable, "-c", "pass"], env) for _ in range(runs)]
    cli = [_timed([sys.executable, "-c", "import routegate.cli"], env) for _ in range(runs)]
    result["python_startup_s"] = _summary(bare)
    result["python_import_routegate_cli_s"] = _summary(cli)
    return result


def measure_desk(data_dir: Path, desk: Path, runs: int, question: str) -> dict[str, Any]:
    """``ask --desk`` first and second call, kept warm between commands and not (interleaved)."""
    argv = [*CLI, "ask", "--desk", str(desk), question]

    def stop(env: dict[str, str]) -> None:  # a checkout before `data stop` has none: its server stopped already
        subprocess.run([*CLI, "data", "stop"], env=env, capture_output=True, check=False)

    _timed(argv, _env(data_dir))  # prepares the data dir (loads the SQL file, embeds the documents, fits)
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(runs):
        for mode, keep in (("not_kept_warm", 0.0), ("kept_warm", 300.0)):
            env = _env(data_dir, keep)
            stop(env)
            for call in ("first", "second"):
                seconds, used = _timed_cpu(argv, env)
                wall.setdefault(f"ask_desk_{call}_{mode}", []).append(seconds)
                cpu.setdefault(f"ask_desk_{call}_{mode}", []).append(used)
    stop(_env(data_dir))
    return {name: {**_summary(wall[name]), "cpu_median_s": round(statistics.median(cpu[name]), 3)} for name in wall}


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure_server(data_dir: Path, runs: int, question: str) -> dict[str, Any]:
    """The first three ``POST /chat`` answers after ``routegate serve`` says ready, over ``runs`` starts (after one
    that prepares the data dir). Kept warm or not, each start finds the embedded PostgreSQL as the last left it."""
    import httpx

    from routegate.server.testing import wait_until_serving

    env = _env(data_dir)
    turns: list[list[float]] = [[], [], []]
    ready: list[float] = []
    for run in range(runs + 1):  # the first start prepares the data dir (schema, articles, router fit): not counted
        port = _free_port()
        started = time.perf_counter()
        server = subprocess.Popen([*CLI, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL)
        try:
            wait_until_serving(f"http://127.0.0.1:{port}/healthz", server, timeout=300)
            if run:
                ready.append(time.perf_counter() - started)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                for series in turns:
                    began = time.perf_counter()
                    answer = client.post("/chat", json={"message": question}, headers={"Accept": "application/json"})
                    if run:
                        series.append(time.perf_counter() - began)
                    answer.raise_for_status()
        finally:
            server.send_signal(2)  # SIGINT: its clean-up runs
            server.wait(timeout=120)
    return {
        "serve_ready_s": _summary(ready),
        "first_question_s": _summary(turns[0]),
        "second_question_s": _summary(turns[1]),
        "third_question_s": _summary(turns[2]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="asks per situation (default 7)")
    parser.add_argument("--data-dir", type=Path, default=None, help="data dir to use (default: a new temp dir)")
    parser.add_argument("--question", action="append", help="question to ask (repeatable; default: two)")
    parser.add_argument("--desk", type=Path, default=None, help="measure `ask --desk DIR` first and second calls")
    parser.add_argument("--server", action="store_true", help="measure the first questions after `serve` starts")
    parser.add_argument(
        "--bytecode-cache",
        action="store_true",
        help="run the commands with a bytecode cache of their own (as an installed package has its .pyc files)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    pycache = Path(tempfile.mkdtemp(prefix="routegate-startup-pyc-")) if args.bytecode_cache else None
    if pycache is not None:
        _BYTECODE["PYTHONPYCACHEPREFIX"] = str(pycache)
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="routegate-startup-")) if temporary else args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.server:
            result = measure_server(data_dir, args.runs, (args.question or ["How do I reset my password?"])[0])
        elif args.desk is not None:
            result = measure_desk(data_dir, args.desk, args.runs, (args.question or ["How many orders are there?"])[0])
        else:
            result = measure(data_dir, args.runs, args.question or QUESTIONS)
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
        if pycache is not None:
            shutil.rmtree(pycache, ignore_errors=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
        "bytecode": "own cache"
        if pycache is not None
        else ("not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "written"),
        "uptime": uptime,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    for name, value in result.items():
        print(f"{name:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

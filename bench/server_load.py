"""Load benchmark of ``POST /chat`` on loopback: requests/s and p50/p99 latency, JSON and streaming, at a few
concurrency levels. Bounded: each level runs for ``--seconds`` (default 3).

    .venv/bin/python bench/server_load.py                   # spawns `routegate serve` (embedded PostgreSQL)
    .venv/bin/python bench/server_load.py --workers 2       # two server processes over one PostgreSQL
    .venv/bin/python bench/server_load.py --desk fake       # the same server around the in-memory fake desk
    .venv/bin/python bench/server_load.py --desk both --concurrency 32 --modes json --rounds 2
                                                            # fake and real desk servers in turn, in one run
    .venv/bin/python bench/server_load.py --mix unsure      # 2 of 5 messages decided by the embedding layer
    .venv/bin/python bench/server_load.py --url http://127.0.0.1:8000   # an already running server
    .venv/bin/python bench/server_load.py --desk both --concurrency 32 --modes json --profile /tmp/prof
                                                            # each server under cProfile after its warm-up

The server runs in its own process (so the load generator does not share its GIL); the client is a minimal
keep-alive HTTP/1.1 client on asyncio streams (cheaper per request than a general-purpose client, so more of
the two cores go to the server). Each worker is one session sending its messages one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from routegate.server.testing import free_port, stop_process, wait_until_serving

MIXES = {
    # the spec's five question kinds: four settled by the rules, the password how-to embedded for the KB search
    "spec": (
        "What is the status of ticket 2?",
        "How do I reset my password?",
        "What's the weather today?",
        "Which city is customer 3 from?",
        "Can you help me?",
    ),
    # two of five messages the rules cannot settle: the embedding layer decides them (then the KB search)
    "unsure": (
        "What is the status of ticket 2?",
        "I cannot log in to my account",
        "What's the weather today?",
        "I was charged twice",
        "Can you help me?",
    ),
}
QUESTIONS = MIXES["spec"]


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the whole answer (length or chunked)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, accept: str) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Accept: {accept}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        chunks = []
        while True:
            size = int((await self.reader.readline()).strip(), 16)
            if size == 0:
                await self.reader.readline()
                break
            chunks.append(await self.reader.readexactly(size))
            await self.reader.readline()
        return status, b"".join(chunks)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()


async def run_level(
    url: str, *, concurrency: int, mode: str, seconds: float, questions: tuple[str, ...] = QUESTIONS
) -> dict[str, float]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    accept = "application/json" if mode == "json" else "text/event-stream"
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    run = f"{mode}-{concurrency}-{time.time_ns()}"

    async def worker(w: int) -> None:
        nonlocal errors
        conn = Connection(host, port)
        i = 0
        try:
            while time.perf_counter() < deadline:
                body = json.dumps({"message": questions[(w + i) % len(questions)], "session_id": f"{run}-{w}"}).encode()
                started = time.perf_counter()
                status, payload = await conn.post("/chat", body, accept)
                latencies.append(time.perf_counter() - started)
                if status != 200 or (mode == "stream" and b"event: final" not in payload):
                    errors += 1
                i += 1
        finally:
            await conn.close()

    began = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {
        "mode": mode,  # type: ignore[dict-item]
        "concurrency": concurrency,
        "requests": len(ordered),
        "errors": errors,
        "rps": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def cpu_probe_seconds(iterations: int = 5_000_000) -> float:
    """Seconds for a fixed pure-Python loop: how fast this machine's cores are right now. On a shared virtual
    machine it moved by almost 2x within an hour, idle (docs/benchmarks/server.md); print it beside the figures."""
    started = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i
    return time.perf_counter() - started


@contextlib.contextmanager
def spawned_server(
    desk: str, workers: int = 1, profile: Path | None = None
) -> Iterator[tuple[str, Callable[[], None]]]:
    """A server of ``desk`` on a free port: its URL, and what to call once the warm-up is done (with ``profile``,
    the file its cProfile is written to when it stops: profiling starts then)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="routegate-bench-") as data_dir:
        env = dict(os.environ, ROUTEGATE_DATA_DIR=data_dir)
        env.pop("OPENAI_API_KEY", None)  # the offline default
        # the load generator is one tenant: lift the per-tenant bound on running turns (64) unless set, so that a
        # level above it measures the server, not the bound
        env.setdefault("ROUTEGATE_TENANT_MAX_CONCURRENT_TURNS", "0")
        if profile is not None:
            cmd = [
                sys.executable,
                __file__,
                "--serve-profiled",
                str(profile),
                "--serve-desk",
                desk,
                "--serve-port",
                str(port),
            ]
        elif desk == "fake":
            cmd = [sys.executable, __file__, "--serve-fake", str(port)]
        else:
            cmd = [
                sys.executable,
                "-c",
                "import sys; from routegate.cli import main; sys.exit(main())",
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
            ]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_until_serving(f"{url}/healthz", proc, timeout=120)
            except (RuntimeError, TimeoutError) as exc:
                raise SystemExit(str(exc)) from exc
            yield url, (lambda: proc.send_signal(signal.SIGUSR1)) if profile is not None else _nothing
        finally:
            stop_process(proc, timeout=20)


def _nothing() -> None:
    pass


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_profiled(out: str, desk: str, port: int) -> None:
    """The server of ``desk`` under cProfile (its event loop thread's CPU time: ``time.thread_time``), switched on
    by SIGUSR1 (after the warm-up) and written to ``out`` when the server stops."""
    import cProfile

    profiler = cProfile.Profile(time.thread_time)
    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    try:
        if desk == "fake":
            # uvicorn stops on SIGTERM, then raises it again with the handler found before it ran: this one, which
            # unwinds to the dump below (the default handler would end the process before it)
            signal.signal(signal.SIGTERM, _interrupted)
            with contextlib.suppress(KeyboardInterrupt):
                serve_fake(port)
        else:
            from routegate.cli import main as cli

            cli(["serve", "--port", str(port)])
    finally:
        profiler.disable()
        profiler.dump_stats(out)


def serve_fake(port: int) -> None:
    import uvicorn

    from routegate.server import create_app
    from routegate.server.testing import FakeSupportDesk
    from routegate.settings import Settings

    app = create_app(desk=FakeSupportDesk(), settings=Settings())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


async def bench(
    url: str,
    levels: list[int],
    modes: list[str],
    seconds: float,
    warmup: float,
    questions: tuple[str, ...],
    warmed: Callable[[], None] = _nothing,
) -> list[dict[str, float]]:
    await run_level(url, concurrency=4, mode="json", seconds=warmup, questions=questions)
    warmed()
    results = []
    for mode in modes:
        for c in levels:
            results.append(await run_level(url, concurrency=c, mode=mode, seconds=seconds, questions=questions))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="benchmark this running server instead of spawning one")
    parser.add_argument(
        "--desk",
        choices=["real", "fake", "both"],
        default="real",
        help="desk of the spawned server; both: a fake-desk and a real-desk server in turn, --rounds times",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --desk both: rounds of the pair (default 1)")
    parser.add_argument("--workers", type=int, default=1, help="server processes of the spawned real-desk server")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated levels (default 1,8,32)")
    parser.add_argument("--modes", default="json,stream", help="json, stream or both (default)")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each level (default 3)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before measuring (default 1)")
    parser.add_argument(
        "--mix", choices=sorted(MIXES), default="spec", help="the messages each session cycles through (default spec)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--profile",
        type=Path,
        help="run each spawned server under cProfile from the end of its warm-up (its event loop thread's CPU "
        "time); write DIR/<desk>-<round>.prof when it stops (read with pstats)",
        metavar="DIR",
    )
    parser.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-profiled", help=argparse.SUPPRESS)
    parser.add_argument("--serve-desk", help=argparse.SUPPRESS)
    parser.add_argument("--serve-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.serve_fake)
        return 0
    if args.serve_profiled:
        serve_profiled(args.serve_profiled, args.serve_desk, args.serve_port)
        return 0
    if args.profile is not None:
        if args.url or args.workers != 1:
            parser.error("--profile profiles a spawned one-worker server: drop --url and --workers")
        args.profile.mkdir(parents=True, exist_ok=True)
    levels = [int(c) for c in args.concurrency.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    load, probe = os.getloadavg()[0], cpu_probe_seconds()  # before the server starts
    if args.desk == "both" and not args.url:
        return _both(args, levels, modes, load, probe)
    with contextlib.ExitStack() as stack:
        warmed: Callable[[], None] = _nothing
        if args.url:
            url = args.url
        else:
            profile = args.profile / f"{args.desk}-1.prof" if args.profile is not None else None
            url, warmed = stack.enter_context(spawned_server(args.desk, args.workers, profile))
        results = asyncio.run(bench(url, levels, modes, args.seconds, args.warmup, MIXES[args.mix], warmed))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    where = "the given server" if args.url else f"{args.desk} desk, {args.workers} worker(s)"
    print(f"POST /chat on {where}, {args.mix!r} messages, {args.seconds:g} s per level")
    print(f"machine before the run: load average {load:.2f}, CPU probe {probe:.2f} s (lower is faster)")
    print(f"{'mode':<7}{'conc':>5}{'requests':>10}{'errors':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for r in results:
        print(
            f"{r['mode']:<7}{r['concurrency']:>5}{r['requests']:>10}{r['errors']:>8}"
            f"{r['rps']:>9.1f}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
        )
    return 0


def _both(args: argparse.Namespace, levels: list[int], modes: list[str], load: float, probe: float) -> int:
    """A fake-desk server then a real-desk server, ``--rounds`` times (so a shared machine's drift spreads over
    both); the real desk's req/s as a share of the fake desk's, and its p99 as a multiple, per round."""
    rows: list[dict[str, object]] = []
    for r in range(args.rounds):
        for desk in ("fake", "real"):
            profile = args.profile / f"{desk}-{r + 1}.prof" if args.profile is not None else None
            with spawned_server(desk, args.workers, profile) as (url, warmed):
                mix = MIXES[args.mix]
                for result in asyncio.run(bench(url, levels, modes, args.seconds, args.warmup, mix, warmed)):
                    rows.append({"round": r + 1, "desk": desk, "load": os.getloadavg()[0], **result})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"POST /chat, fake then real desk ({args.workers} worker(s)) per round, {args.mix!r} messages,")
    print(f"{args.seconds:g} s per level; before the run: load average {load:.2f}, CPU probe {probe:.2f} s")
    print(
        f"{'round':<6}{'mode':<7}{'conc':>5}{'fake req/s':>11}{'p99 ms':>8}{'real req/s':>11}{'p99 ms':>8}"
        f"{'real/fake':>10}{'p99 x':>7}{'load':>6}"
    )
    for r in range(1, args.rounds + 1):
        for mode in modes:
            for c in levels:
                fake, real = (
                    next(x for x in rows if (x["round"], x["desk"], x["mode"], x["concurrency"]) == (r, d, mode, c))
                    for d in ("fake", "real")
                )
                share = float(real["rps"]) / float(fake["rps"])  # type: ignore[arg-type]
                times = float(real["p99_ms"]) / float(fake["p99_ms"])  # type: ignore[arg-type]
                print(
                    f"{r:<6}{mode:<7}{c:>5}{fake['rps']:>11.1f}{fake['p99_ms']:>8.1f}{real['rps']:>11.1f}"
                    f"{real['p99_ms']:>8.1f}{share:>10.0%}{times:>7.1f}{real['load']:>6.2f}"
                )
    errors = sum(int(x["errors"]) for x in rows)  # type: ignore[call-overload]
    if errors:
        print(f"errors: {errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

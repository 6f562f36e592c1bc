"""``routegate serve --ray --replicas 2`` on a local Ray cluster, from outside: JSON, SSE and ``/v1`` answered
through Ray Serve's proxy, both replicas serve (``X-Routegate-Replica``), concurrent turns of one session on both
replicas run one at a time, and Ctrl-C stops everything: exit 130 and no process the command started (Ray's daemons
and workers, the replicas, PostgreSQL) is left in the process table. A replica killed under load: its requests end
with a clean 503, no acknowledged turn is lost, Ray replaces it.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from routegate.cli import build_parser
from routegate.server.testing import free_port, parse_sse, wait_until_serving
from routegate_process import start_routegate
from server.rawhttp import descendants
from session_chain import FIRST, FOLLOW_UP, carried_from, check_serialised

pytest.importorskip("ray", reason="needs the routegate[ray] extra")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_serve_ray_options_are_checked_before_anything_starts() -> None:
    from routegate.cli._ray_serve import parse_autoscale
    from routegate.errors import ConfigurationError

    args = build_parser().parse_args(["serve", "--ray", "--autoscale", "1:3"])
    assert (args.ray, args.autoscale, args.replicas) == (True, "1:3", None)
    assert parse_autoscale("1:3") == (1, 3)
    for bad in ("3:1", "0:2", "2", "a:b", ""):
        with pytest.raises(ConfigurationError, match="MIN:MAX"):
            parse_autoscale(bad)


def _chain_runs_one_turn_at_a_time(url: str) -> set[str]:
    """A session's turns sent at once and spread over the replicas run one at a time (:mod:`session_chain`).
    Returns the replicas that answered the follow-ups."""
    session = "chain"

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            json_mode = {"Accept": "application/json"}
            first = {"message": FIRST, "session_id": session}
            assert (await c.post("/chat", json=first, headers=json_mode)).status_code == 200
            follow_ups = [{"message": FOLLOW_UP.format(n), "session_id": session} for n in range(12)]
            return await asyncio.gather(*(c.post("/chat", json=body, headers=json_mode) for body in follow_ups))

    answers = asyncio.run(run())
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    carried = {n: carried_from(r.json()["trace"]) for n, r in enumerate(answers)}
    stored = httpx.get(f"{url}/sessions/{session}", timeout=60).json()["messages"]
    check_serialised(carried, stored, {n: r.json()["answer"] for n, r in enumerate(answers)})
    return {r.headers["X-Routegate-Replica"] for r in answers}


@pytest.mark.e2e
@pytest.mark.integration
def test_serve_on_ray_with_two_replicas(data_dir: Path) -> None:
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    # its own process group, as a terminal's Ctrl-C would address
    proc, lines = start_routegate(["serve", "--ray", "--replicas", "2", "--port", str(port)], env, within=240)
    started: set[int] = set()
    url = f"http://127.0.0.1:{port}"
    try:
        started = descendants(proc.pid)
        assert len(started) >= 3, started  # Ray's daemons and workers run below the command
        replicas: set[str] = set()
        with httpx.Client(base_url=url, timeout=60) as c:
            json_mode = {"Accept": "application/json"}
            for i in range(12):  # a session's turns may land on either replica: the memory is in PostgreSQL
                body = {"message": f"What is the status of ticket {i % 3 + 1}?", "session_id": "r"}
                answer = c.post("/chat", json=body, headers=json_mode)
                assert answer.status_code == 200, answer.text
                assert answer.json()["route"] == "POSTGRES"
                replicas.add(answer.headers["X-Routegate-Replica"])
            assert len(replicas) == 2, replicas  # both replicas served
            assert len(c.get("/sessions/r").json()["messages"]) == 10  # the memory window, whichever replica
            assert _chain_runs_one_turn_at_a_time(url) == replicas  # concurrent turns of a session, both replicas

            with c.stream("POST", "/chat", json={"message": "What is your refund policy?"}) as sse:
                assert sse.status_code == 200
                assert sse.headers["content-type"].startswith("text/event-stream")
                assert sse.headers["X-Routegate-Replica"] in replicas
                events = [line.removeprefix("event: ") for line in sse.iter_lines() if line.startswith("event: ")]
            assert events[0] == "route"
            assert events[-1] == "final"

            v1 = c.post(
                "/v1/chat/completions",
                json={"model": "routegate-support", "messages": [{"role": "user", "content": "status of ticket 2"}]},
            )
            assert v1.status_code == 200, v1.text
            assert v1.json()["choices"][0]["message"]["content"]
            assert v1.headers["X-Routegate-Replica"] in replicas
            assert c.get("/healthz").json()["status"] == "ok"

        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        rest, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, "".join(lines) + rest  # 128 + SIGINT
        assert "routegate: stopped." in rest
        left = sorted(pid for pid in started if _alive(pid))
        assert not left, f"processes left after Ctrl-C: {left}"
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/healthz", timeout=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):  # a failed test leaves no open pipe to a later one
            if pipe is not None:
                pipe.close()
        for pid in started:  # never leave a Ray daemon behind a failed test
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


async def _turn(c: httpx.AsyncClient, session: str, *, stream: bool) -> tuple[str, str | None]:
    """One turn; how it ended: ``("answered", answer)``, ``("503", None)`` or ``("stream error", None)``. Anything
    else (a bare 500, a cut-off stream, a hang: the client's 60 s timeout) fails the test."""
    body = {"message": "I cannot log in", "session_id": session}
    if not stream:
        r = await c.post("/chat", json=body, headers={"Accept": "application/json"})
        if r.status_code == 503:
            assert r.headers["Retry-After"] == "1", r.headers
            assert r.json()["error"]["code"] == "replica_unavailable", r.text
            return "503", None
        assert r.status_code == 200, r.text
        answer: str = r.json()["answer"]
        return "answered", answer
    async with c.stream("POST", "/chat", json=body) as r:
        if r.status_code == 503:
            assert (await r.aread()) and r.headers["Retry-After"] == "1"
            return "503", None
        assert r.status_code == 200
        events = parse_sse((await r.aread()).decode())  # a stream cut off mid-body raises here
    name, data = events[-1]
    if name == "error":
        assert data["code"] == "replica_unavailable", events
        return "stream error", None
    assert name == "final", events
    return "answered", data["answer"]


@pytest.mark.e2e
@pytest.mark.integration
def test_a_killed_replica_is_replaced_and_loses_no_acknowledged_turn(data_dir: Path) -> None:
    """SIGKILL one replica's process under load (6 JSON clients, 2 streaming): no request hangs, the ones it held
    end cleanly (503 ``replica_unavailable`` with Retry-After, or a stream's final ``error`` event; never Ray
    Serve's bare 500), every answered turn is in PostgreSQL and no turn is half-written, and Ray starts a
    replacement that serves."""
    port = free_port()
    env = dict(os.environ, ROUTEGATE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", None)
    cmd = [sys.executable, "-c", "import sys; from routegate.cli import main; sys.exit(main())"]
    proc = subprocess.Popen(
        [*cmd, "serve", "--ray", "--replicas", "2", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    started: set[int] = set()

    def replicas() -> set[int]:
        found = set()
        for pid in descendants(proc.pid):
            try:
                if b"ServeReplica:routegate" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(pid)
            except OSError:
                pass
        return found

    try:
        wait_until_serving(f"{url}/healthz", proc, timeout=240)
        before = replicas()
        assert len(before) == 2, before
        started = descendants(proc.pid)
        endings: dict[str, tuple[str, str | None]] = {}
        load_done = asyncio.Event()
        under_load, after_kill = asyncio.Event(), asyncio.Event()
        killed_at: list[int] = []  # how many turns had ended when the replica was killed

        async def client(c: httpx.AsyncClient, w: int) -> None:
            i = 0
            while not load_done.is_set():
                session = f"kill-{w}-{i}"
                endings[session] = await _turn(c, session, stream=w < 2)
                if len(endings) >= 40:
                    under_load.set()
                if killed_at and len(endings) >= killed_at[0] + 80:  # the load went on, on what is left
                    after_kill.set()
                i += 1

        async def load() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=60) as c:  # a hang would raise ReadTimeout
                tasks = [asyncio.create_task(client(c, w)) for w in range(8)]
                await asyncio.wait_for(under_load.wait(), 120)
                os.kill(min(before), signal.SIGKILL)
                killed_at.append(len(endings))
                await asyncio.wait_for(after_kill.wait(), 120)  # a hung or failed client ends here
                load_done.set()
                await asyncio.gather(*tasks)
                for session, (how, answer) in endings.items():
                    history = (await c.get(f"/sessions/{session}")).json()["messages"]
                    if how == "answered":  # acknowledged: stored, whole
                        assert [(m["role"], m["content"]) for m in history] == [
                            ("user", "I cannot log in"),
                            ("assistant", answer),
                        ], (session, history)
                    else:  # failed: the turn is wholly there or not at all
                        assert [m["role"] for m in history] in ([], ["user", "assistant"]), (session, history)

        asyncio.run(load())
        counts = collections.Counter(how for how, _ in endings.values())
        assert counts["answered"] >= 100, counts
        deadline = time.monotonic() + 120
        while len(replicas() - before) < 1:  # Ray replaces the dead replica
            assert time.monotonic() < deadline, "no replacement replica within 120 s"
            time.sleep(0.5)
        assert (
            httpx.post(
                f"{url}/chat", json={"message": "hello"}, headers={"Accept": "application/json"}, timeout=60
            ).status_code
            == 200
        )
        started |= descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=120) == 130
        assert not [pid for pid in started if _alive(pid)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):  # a failed test leaves no open pipe to a later one
            if pipe is not None:
                pipe.close()
        for pid in started:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

"""A warm desk between commands: the embedded PostgreSQL one ``routegate ask --desk`` started is reused by the next,
kept by a small watcher process, shown by ``routegate data`` and stopped by ``routegate data stop`` (and ``data
reset``, and by itself once idle). Checked from outside: real command processes, the postmaster's ``postmaster.pid``
and ``/proc``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli._env import RUN_CLI, offline_env, run_cli
from routegate.apps.support.warm import stop_server, wait_for_watcher_exit, warm_dir

from .test_desk_config import _desk

pytestmark = pytest.mark.integration

QUESTION = "What is the status of order 1042?"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # outside /tmp/pytest-of-<user>, which a concurrent pytest run may rotate away under PostgreSQL
    path = Path(tempfile.mkdtemp(prefix="routegate-warm-")) / "routegate"
    path.mkdir()
    yield path
    if (path / "support-pg").is_dir():
        stop_server(path / "support-pg")  # whatever the test left running
    shutil.rmtree(path.parent, ignore_errors=True)


def run(args: list[str], data_dir: Path, keep_warm: float = 600) -> subprocess.CompletedProcess[str]:
    return run_cli(args, data_dir, keep_warm_seconds=keep_warm, timeout=300)


def alive(pid: int) -> bool:
    """``pid`` is a running process (``/proc``; a zombie is not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def postmaster(data_dir: Path) -> tuple[int, str]:
    """The postmaster's PID and start time, from its ``postmaster.pid``."""
    lines = (data_dir / "support-pg" / "postmaster.pid").read_text().splitlines()
    return int(lines[0]), lines[2]


def watchers(data_dir: Path) -> list[int]:
    """The running watcher processes of this data dir, found in ``/proc`` by their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = b"routegate.apps.support.warm" in argv and str(data_dir / "support-pg").encode() in argv
        if ours and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_second_ask_reuses_the_running_database_and_data_stop_stops_it(shop_dir: Path, data_dir: Path) -> None:
    first = run(["ask", "--desk", str(shop_dir), QUESTION], data_dir)
    assert first.returncode == 0, first.stderr
    pid, started = postmaster(data_dir)
    assert alive(pid)  # the command exited; its database did not
    [watcher] = watchers(data_dir)

    second = run(["ask", "--desk", str(shop_dir), QUESTION], data_dir)
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    assert postmaster(data_dir) == (pid, started)  # the same postmaster, not a new one with a reused PID
    assert watchers(data_dir) == [watcher]

    shown = json.loads(run(["data", "--json"], data_dir).stdout)["postgres"]
    assert shown["pid"] == pid and shown["watcher_pid"] == watcher and shown["users"] == []
    assert 0 < shown["idle_seconds_left"] <= 600 and shown["keep_warm_seconds"] == 600
    text = run(["data"], data_dir).stdout
    assert f"the embedded PostgreSQL is running: pid {pid}" in text and f"kept warm by pid {watcher}" in text

    stopped = run(["data", "stop"], data_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.strip() == f"stopped the embedded PostgreSQL in {data_dir / 'support-pg'} (pid {pid})"
    assert not alive(pid) and not alive(watcher)
    assert "the embedded PostgreSQL is not running" in run(["data"], data_dir).stdout
    assert "is not running" in run(["data", "stop"], data_dir).stdout


def test_without_a_keep_warm_time_the_database_stops_with_the_command(shop_dir: Path, data_dir: Path) -> None:
    done = run(["ask", "--desk", str(shop_dir), QUESTION], data_dir, keep_warm=0)
    assert done.returncode == 0, done.stderr
    pid, _ = postmaster(data_dir) if (data_dir / "support-pg" / "postmaster.pid").exists() else (None, None)
    assert pid is None or not alive(pid)
    assert watchers(data_dir) == []


def test_an_idle_database_stops_by_itself(shop_dir: Path, data_dir: Path) -> None:
    done = run(["ask", "--desk", str(shop_dir), QUESTION], data_dir, keep_warm=1)
    assert done.returncode == 0, done.stderr
    pid, _ = postmaster(data_dir) if (data_dir / "support-pg" / "postmaster.pid").exists() else (0, "")
    waiter = threading.Thread(target=wait_for_watcher_exit, args=(data_dir / "support-pg",), daemon=True)
    waiter.start()  # returns when the watcher's "alive" lock is released, i.e. when the watcher has exited
    waiter.join(timeout=120)  # a hang guard, not a measurement
    assert not waiter.is_alive(), "the watcher of an idle database did not leave"
    assert not alive(pid) and watchers(data_dir) == []


def test_a_crashed_postmaster_is_started_again_with_a_new_watcher(shop_dir: Path, data_dir: Path) -> None:
    assert run(["ask", "--desk", str(shop_dir), QUESTION], data_dir).returncode == 0
    pid, _ = postmaster(data_dir)
    os.kill(pid, signal.SIGKILL)  # the postmaster crashes; its postmaster.pid stays behind
    done = run(["ask", "--desk", str(shop_dir), QUESTION], data_dir)
    assert done.returncode == 0, done.stderr
    new, _ = postmaster(data_dir)
    assert new != pid and alive(new)
    record = json.loads((warm_dir(data_dir / "support-pg") / "watcher.json").read_text())
    assert record["postmaster_pid"] == new and alive(record["pid"])
    assert run(["data", "stop"], data_dir).returncode == 0
    assert not alive(new)


def test_two_asks_at_once_start_one_database_and_one_watcher(shop_dir: Path, data_dir: Path) -> None:
    env = offline_env(data_dir, keep_warm_seconds=600)
    argv = [sys.executable, "-c", RUN_CLI, "ask", "--desk", str(shop_dir), QUESTION]
    both = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    outcomes = [(p.wait(timeout=300), *p.communicate()) for p in both]
    assert [code for code, _, _ in outcomes] == [0, 0], [err for _, _, err in outcomes]
    assert outcomes[0][1].splitlines()[0] == outcomes[1][1].splitlines()[0]
    pid, _ = postmaster(data_dir)
    assert alive(pid) and len(watchers(data_dir)) == 1


def test_data_reset_stops_a_warm_database_first(shop_dir: Path, data_dir: Path) -> None:
    assert run(["ask", "--desk", str(shop_dir), QUESTION], data_dir).returncode == 0
    pid, _ = postmaster(data_dir)
    [watcher] = watchers(data_dir)
    done = run(["data", "reset", "--yes"], data_dir)
    assert done.returncode == 0, done.stderr
    assert not data_dir.exists() and not alive(pid) and not alive(watcher)


def test_a_desk_toml_mistake_is_reported_before_anything_starts(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "broken").mkdir()
    desk = _desk(tmp_path / "broken", "[desk]\nname = 'gym'\n[[tables]]\nname = 'members'\ncolums = ['id']\n")
    done = run(["ask", "--desk", str(desk), QUESTION], data_dir)
    assert done.returncode == 2 and str(desk / "desk.toml") in done.stderr, done.stderr
    assert not (data_dir / "support-pg").exists() and watchers(data_dir) == []

"""``routegate data`` shows where the data lives and how big each part is; ``routegate data reset`` removes it
after a confirmation, and refuses while the embedded PostgreSQL in it runs or when the directory is not
routegate's. Checked from outside: a real process (at a terminal for the confirmation) and the disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli._env import RUN_CLI, offline_env, run_cli
from cli._tty import Terminal
from routegate.apps.support.db import EmbeddedPostgres


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # outside /tmp/pytest-of-<user>, which a concurrent pytest run may rotate away under PostgreSQL
    path = Path(tempfile.mkdtemp(prefix="routegate-data-")) / "routegate"
    path.mkdir()
    (path / "support-router-0123abcd").mkdir()
    (path / "support-router-0123abcd" / "coef.npy").write_bytes(b"\0" * 3000)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def run(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, data_dir)


def test_data_shows_the_dir_and_the_size_of_each_part(data_dir: Path) -> None:
    (data_dir / "support-pg").mkdir()
    (data_dir / "support-pg" / "base").write_bytes(b"x" * 5000)
    done = run(["data"], data_dir)
    assert done.returncode == 0, done.stderr
    assert f"data dir: {data_dir}" in done.stdout
    assert "4.9 KB  support-pg" in done.stdout and "embedded PostgreSQL" in done.stdout
    assert "2.9 KB  support-router-0123abcd" in done.stdout
    shown = json.loads(run(["data", "--json"], data_dir).stdout)
    assert shown["data_dir"] == str(data_dir) and shown["bytes"] == 8000
    assert {p["name"]: p["bytes"] for p in shown["parts"]} == {"support-pg": 5000, "support-router-0123abcd": 3000}


def test_data_reset_needs_a_confirmation(data_dir: Path) -> None:
    done = run(["data", "reset"], data_dir)  # standard input is not a terminal: nobody to ask
    assert done.returncode == 2 and "pass --yes" in done.stderr
    assert data_dir.is_dir()
    env = offline_env(data_dir)
    with Terminal([sys.executable, "-c", RUN_CLI, "data", "reset"], env=env) as terminal:
        assert b"? [y/N] " in terminal.read_until(b"[y/N] ")
        terminal.type(b"n\r")
        assert terminal.wait()[0] == 1
    assert data_dir.is_dir()
    with Terminal([sys.executable, "-c", RUN_CLI, "data", "reset"], env=env) as terminal:
        terminal.read_until(b"[y/N] ")
        terminal.type(b"y\r")
        status, rest = terminal.wait()
    assert status == 0 and f"removed {data_dir}".encode() in rest
    assert not data_dir.exists()


def test_data_reset_refuses_a_directory_that_is_not_routegates(data_dir: Path) -> None:
    (data_dir / "thesis.tex").write_text("years of work")
    done = run(["data", "reset", "--yes"], data_dir)
    assert done.returncode == 2 and "thesis.tex" in done.stderr and "nothing removed" in done.stderr
    assert (data_dir / "thesis.tex").read_text() == "years of work"


@pytest.mark.integration
def test_data_reset_refuses_while_the_embedded_postgres_runs(data_dir: Path) -> None:
    server = EmbeddedPostgres(data_dir / "support-pg")
    server.start()
    try:
        done = run(["data", "reset", "--yes"], data_dir)
        assert done.returncode == 2, done.stderr
        assert "the embedded PostgreSQL" in done.stderr and "is running" in done.stderr
        assert (data_dir / "support-pg" / "postmaster.pid").exists()
    finally:
        server.stop()
    done = run(["data", "reset", "--yes"], data_dir)
    assert done.returncode == 0, done.stderr
    assert not data_dir.exists()


def test_data_lists_and_reset_removes_a_desks_example_vectors(data_dir: Path) -> None:
    (data_dir / "desk-examples-0123456789ab-0123456789abcdef0123.npy").write_bytes(b"\0" * 2000)
    shown = json.loads(run(["data", "--json"], data_dir).stdout)
    (part,) = [p for p in shown["parts"] if p["name"].startswith("desk-examples-")]
    assert part["bytes"] == 2000 and "route examples" in part["what"]
    done = run(["data", "reset", "--yes"], data_dir)  # routegate's own file: not taken for someone else's
    assert done.returncode == 0, done.stderr
    assert not data_dir.exists()


def test_data_shows_the_model_cache_and_which_file_this_install_reads(data_dir: Path, tmp_path: Path) -> None:
    from routegate.embed._model_cache import cache_file
    from routegate.embed.minilm import int8_cache_key

    cache = tmp_path / "xdg-cache" / "routegate"
    cache.mkdir(parents=True)
    read_here = cache_file(int8_cache_key(), cache)
    read_here.write_bytes(b"m" * 4000)
    stale = cache_file("0" * 20, cache)  # an older build's key
    stale.write_bytes(b"s" * 1000)
    env = {**offline_env(data_dir), "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}

    def show(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI, "data", *extra], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = json.loads(show("--json"))["model_cache"]
    assert shown["dir"] == str(cache) and shown["bytes"] == 5000
    assert {f["name"]: f["current"] for f in shown["files"]} == {read_here.name: True, stale.name: False}
    lines = show().splitlines()
    assert f"model cache: {cache}  (XDG_CACHE_HOME to move it; not removed by `routegate data reset`)" in lines
    [stale_line] = [line for line in lines if stale.name in line]
    assert "not read by this install" in stale_line
    [read_line] = [line for line in lines if read_here.name in line]
    assert "the embedded encoder's int8 model" in read_line
    assert read_here.read_bytes() == b"m" * 4000 and stale.is_file()  # shown, never touched

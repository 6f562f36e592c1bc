"""How the CLI tests run the real command: in a process of its own (``RUN_CLI``), offline — no model, no database
URL, no routegate settings from the caller's environment — with a data directory of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN_CLI = "import sys; from routegate.cli import main; sys.exit(main())"
_CALLERS_SETTINGS = ("OPENAI_", "ROUTEGATE_", "DATABASE_URL")


def offline_env(data_dir: Path, *, keep_warm_seconds: float = 0) -> dict[str, str]:
    """This process's environment without the caller's model, database and routegate settings, for a CLI process;
    its embedded PostgreSQL stops with it unless ``keep_warm_seconds`` says otherwise."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(_CALLERS_SETTINGS)}
    return {**clean, "ROUTEGATE_DATA_DIR": str(data_dir), "ROUTEGATE_DB_KEEP_WARM_SECONDS": f"{keep_warm_seconds:g}"}


def go_offline(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    """The same for the CLI run in this process (``main([...])``)."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DATABASE_URL", "ROUTEGATE_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(data_dir))


def run_cli(
    args: list[str], data_dir: Path, *, keep_warm_seconds: float = 0, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``routegate ARGS`` in a process of its own, offline (:func:`offline_env`), no standard input, output captured."""
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, *args],
        env=offline_env(data_dir, keep_warm_seconds=keep_warm_seconds),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )

"""How to start the Streamlit UI as a child process (used by ``routegate ui`` / ``up`` and the browser test)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_PATH = Path(__file__).with_name("app.py")


def streamlit_command(*, host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_PATH),
        f"--server.address={host}",
        f"--server.port={port}",
        "--server.headless=true",
        "--server.fileWatcherType=none",
        "--browser.gatherUsageStats=false",
        "--global.developmentMode=false",
        "--client.toolbarMode=minimal",
    ]


def streamlit_env(*, server_url: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the caller's, plus where the routegate server is."""
    env = dict(os.environ if base is None else base)
    env["ROUTEGATE_UI_SERVER_URL"] = server_url
    env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    return env

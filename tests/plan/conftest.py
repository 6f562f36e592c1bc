"""Fixtures of the plan tests: the checkpoint backends of durable runs (SQLite file, embedded PostgreSQL)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def plan_pg_url() -> Iterator[str]:
    """A real PostgreSQL (pgserver), started once for the plan tests that need one."""
    from routegate.apps.support.db import EmbeddedPostgres

    base = Path(tempfile.mkdtemp(prefix="routegate-plan-pg-"))
    try:
        server = EmbeddedPostgres(base / "data")
        url = server.start()
        yield url
        server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def plan_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a durable plan keeps its checkpoints: a SQLite file, or the embedded PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "plans.sqlite")
    url: str = request.getfixturevalue("plan_pg_url")
    return url

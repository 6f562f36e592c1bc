"""Ready means ready: a server process loads what a turn needs (the encoder's model, the fitted router) before it
answers ``/healthz``, so the first question after a start costs what the next ones do. Counted from outside the
desk: the ONNX sessions onnxruntime creates, through the worker app uvicorn runs (``app_from_environment``)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnxruntime
import pytest
from fastapi.testclient import TestClient

from routegate.server.workers import app_from_environment, open_serving_desk
from routegate.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def data_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="routegate-ready-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_encoder_is_loaded_before_the_server_says_ready(
    pg_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(data_dir))

    async def first_start() -> None:  # fits the router and ingests the articles: both embed, so both load a model
        async with open_serving_desk(Settings()):
            pass

    asyncio.run(first_start())  # what is left for the next start is loading, nothing to embed

    sessions: list[Any] = []
    real = onnxruntime.InferenceSession

    def counted(*args: Any, **kwargs: Any) -> Any:
        session = real(*args, **kwargs)
        sessions.append(session)
        return session

    monkeypatch.setattr(onnxruntime, "InferenceSession", counted)
    with TestClient(app_from_environment()) as client:  # the lifespan has run: the server would listen now
        loaded = len(sessions)
        assert client.get("/healthz").json()["status"] == "ok"
        assert loaded == 1  # the encoder's model, once
        answer = client.post(
            "/chat", json={"message": "How do I reset my password?"}, headers={"Accept": "application/json"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["route"] == "VECTOR"
    assert len(sessions) == loaded  # the first turn loaded nothing more

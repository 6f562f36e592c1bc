"""``serve --ray --desk DIR``: every Ray Serve replica opens your own desk (the app of one replica, run here
without Ray: its lifespan opens the desk on the shared PostgreSQL, as a replica does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from routegate.embed import MiniLMEncoder
from routegate.settings import Settings

pytest.importorskip("fastapi", reason="needs the routegate[server] extra")


def test_a_replica_serves_your_own_desk(
    shop_dir: Path, pg_url: str, tmp_path: Path, encoder: MiniLMEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from routegate.server import encoder as serving
    from routegate.server.ray_serve import replica_app

    monkeypatch.setattr(serving, "serving_encoder", lambda settings: encoder)  # the session's warm encoder
    settings = Settings(database_url=pg_url, data_dir=tmp_path, desk=shop_dir.resolve())
    with TestClient(replica_app(settings, "replica-a")) as client:
        answer = client.post(
            "/chat",
            json={"message": "What is the status of order 1042?", "session_id": "ray-desk"},
            headers={"Accept": "application/json"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["answer"] == "Order 1042: status is open."
    assert answer.headers["X-Routegate-Replica"] == "replica-a"

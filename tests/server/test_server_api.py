"""The public names of ``routegate.server`` and ``routegate.ui`` are pinned; the app factory builds nothing
at import time and takes its collaborators as arguments."""

from __future__ import annotations

from routegate.server import create_app
from routegate.server._metrics import ServerMetrics
from routegate.server.testing import FakeSupportDesk
from routegate.settings import Settings


def test_each_app_has_its_own_metrics_and_desk() -> None:
    a = create_app(desk=FakeSupportDesk(), settings=Settings())
    b = create_app(desk=FakeSupportDesk(), settings=Settings(), metrics=ServerMetrics())
    assert a.state.services.metrics.registry is not b.state.services.metrics.registry
    assert a.state.services.desk is not b.state.services.desk

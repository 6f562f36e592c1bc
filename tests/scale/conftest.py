"""Fixtures of the scale-out tests: a local Ray cluster on loopback (two CPUs, no dashboard), shut down afterwards;
a data directory for a ``routegate serve --ray`` run."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """ROUTEGATE_DATA_DIR of one command run (outside pytest's temporary tree, which a concurrent run may rotate)."""
    path = Path(tempfile.mkdtemp(prefix="routegate-ray-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="needs the routegate[ray] extra")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray
    finally:
        ray.shutdown()

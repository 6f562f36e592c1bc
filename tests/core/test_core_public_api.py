"""The public surface is pinned: a change to it is a deliberate change to this test."""

from __future__ import annotations

import importlib.metadata

import routegate
import routegate.core


def test_version_comes_from_package_metadata() -> None:
    assert routegate.__version__ == importlib.metadata.version("routegate")

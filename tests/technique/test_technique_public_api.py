"""The public surface of routegate.technique is pinned: changing it is a deliberate change to this test."""

from __future__ import annotations

import pytest

import routegate.technique as technique


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        getattr(technique, "NoSuchThing")  # noqa: B009  # the lazy __getattr__ must refuse it

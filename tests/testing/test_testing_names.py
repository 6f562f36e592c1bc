"""The scripted server's step type is ``ServerStep``; the old name ``Step`` (which read like the Plan's) still
imports, with a deprecation warning."""

from __future__ import annotations

import pytest

import routegate.testing
from routegate.plan import Step as PlanStep
from routegate.testing import ErrorReply, Reply, ServerStep


def test_server_step_is_the_scripted_servers_answer() -> None:
    assert "ServerStep" in routegate.testing.__all__
    assert "Step" not in routegate.testing.__all__
    assert set(ServerStep.__args__) >= {Reply, ErrorReply}  # type: ignore[attr-defined]  # a union alias


def test_the_old_name_still_imports_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="renamed ServerStep"):
        from routegate.testing import Step
    assert Step is ServerStep
    assert Step is not PlanStep


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        routegate.testing.Nope  # noqa: B018

"""The public names of routegate.llm, routegate.routers.llm and routegate.testing are pinned."""

from __future__ import annotations

import subprocess
import sys

import pytest

import routegate.llm
import routegate.routers.llm
import routegate.testing


def test_llm_router_names() -> None:
    for name in ("LLMRouter", "route_payload", "route_messages", "RECENT_HISTORY"):
        assert hasattr(routegate.routers.llm, name), name


def test_the_openai_sdk_is_imported_only_when_the_client_is_used() -> None:
    code = (
        "import sys, routegate.llm, routegate.routers.llm, routegate.testing\n"
        "assert 'openai' not in sys.modules, 'openai imported eagerly'\n"
        "from routegate.llm import OpenAIChatModel\n"
        "assert 'openai' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        routegate.llm.Nope  # noqa: B018

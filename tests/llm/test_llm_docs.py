"""The Python examples of docs/llm.md run as written (against the scripted server, through the real client)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from routegate.testing import RecordedRequest, Reply, ScriptedOpenAIServer, ServerStep

DOC = Path(__file__).resolve().parents[2] / "docs" / "llm.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_doc_has_its_examples() -> None:
    assert len(BLOCKS) == 2


def _answer(request: RecordedRequest) -> ServerStep:
    if request.json_mode:
        ticket = request.user_json()["goal"]
        return Reply(json.dumps({"kind": "route", "target": "billing_specialist", "args": {"ticket": ticket}}))
    return Reply("The billing specialist approved a refund of 49.00 USD.")


def test_python_wiring_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedOpenAIServer(fallback=_answer) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_MODEL", "scripted-model")
        exec(compile(BLOCKS[0], f"{DOC}:wiring", "exec"), {"__name__": "docs_llm"})
    assert capsys.readouterr().out.strip() == "ok success billing_specialist"
    assert [r.json_mode for r in server.chat_requests] == [True, False]


def test_python_wiring_example_is_offline_without_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(BLOCKS[0], f"{DOC}:wiring", "exec"), {"__name__": "docs_llm"})
    assert capsys.readouterr().out.strip() == "ok success billing_specialist"


def test_test_double_example_runs() -> None:
    exec(compile(BLOCKS[1], f"{DOC}:double", "exec"), {"__name__": "docs_llm"})

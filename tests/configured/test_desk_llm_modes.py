"""``routegate ask`` on a desk whose LLM router stage routes by tool call, through the scripted OpenAI-compatible
server: the real client path, the desk's policy on the tool call's route."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from routegate.testing import RecordedRequest, Reply, ScriptedOpenAIServer, ServerStep, ToolCallReply


def _model(request: RecordedRequest) -> ServerStep:
    """Route every question to the LLM route by a tool call; answer the rest in words."""
    if request.output_mode == "tools":
        return ToolCallReply((("LLM", {"query": request.user_json()["goal"]}),))
    return Reply("The model answers: a quiet day, thanks for asking.")


@pytest.mark.parametrize("lacks", [(), ("tools",)])
def test_ask_routes_by_tool_call_and_falls_back_when_the_server_lacks_tools(
    shop_dir: Path,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lacks: tuple[str, ...],
) -> None:
    from routegate.cli import main

    shutil.copytree(shop_dir.parent, tmp_path / "base")  # the desk with the SQL file and the docs beside it
    desk = tmp_path / "base" / shop_dir.name
    config = desk / "desk.toml"
    text = re.sub(
        r"(?m)^(mode|min_score|min_margin|fitted|fit_at_start)\s*=.*\n", "", config.read_text(encoding="utf-8")
    )
    settings = 'mode = "auto"\nmin_score = 0.99\nmin_margin = 0.99\n'  # the embedding layer always unsure
    text = (
        text.replace("[router]\n", f"[router]\n{settings}", 1)
        if "[router]\n" in text
        else f"{text}\n[router]\n{settings}"
    )
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ROUTEGATE_DATA_DIR", str(tmp_path / "data"))
    with ScriptedOpenAIServer(fallback=_model, lacks=lacks, dialect="ollama") as server:
        if lacks:  # Ollama without tools: the stage asks once, is refused, asks again with one strict schema
            server.script(
                lambda r: Reply(json.dumps({"route": {"kind": "route", "target": "LLM", "args": {"query": "q"}}}))
            )
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert main(["ask", "--desk", str(desk), "--json", "Tell me about your day"]) == 0
        result = json.loads(capsys.readouterr().out)
        modes = [r.output_mode for r in server.chat_requests]
    assert result["route"] == "LLM" and result["stop_reason"] == "success"
    assert result["answer"] == "The model answers: a quiet day, thanks for asking."
    routed = next(t for t in result["trace"] if t.get("node") == "router")
    assert routed["layer"] == "llm"
    assert modes[0] == "tools"
    assert modes[1:] == (["json_schema", "text"] if lacks else ["text"])  # the fallback, then the answer

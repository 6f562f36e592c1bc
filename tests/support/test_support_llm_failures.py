"""An LLM failure is reported as an LLM failure: never as a database failure, and never as a timeout when the
endpoint could not be reached. Message checks at the desk's entry points."""

from __future__ import annotations

import pytest

from routegate.apps.configured.routes import builtin_config
from routegate.apps.support.answers import DeskAnswers
from routegate.apps.support.contracts import TurnError
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.apps.support.semantic import ExampleEmbeddingLayer
from routegate.core.messages import InvalidMessageError
from routegate.embed import MiniLMEncoder
from routegate.llm import LLMConnectError
from routegate.testing import ScriptedChatModel


def test_the_composer_blames_the_model_not_the_database() -> None:
    compose = DeskAnswers(builtin_config()).compose
    answer = compose("ticket 12?", "POSTGRES", {"fallback": "llm_failed:llm_error:connect", "call": None})
    assert "language model" in answer and "llm_error:connect" in answer
    assert "database" not in answer


@pytest.mark.integration
async def test_text_to_sql_failure_is_answered_offline_never_blaming_the_database(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer
) -> None:
    """Formerly the turn answered "the language model service failed… nothing was looked up"; now the offline
    template serves it: the same answer as a desk with no model, and the turn says the model was unavailable."""
    down = LLMConnectError("model at http://127.0.0.1:9 could not be reached")
    model = ScriptedChatModel([down, down])  # text-to-SQL, then the Respond node
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, chat_model=model)
    await desk.start()
    offline = SupportAgent(db=db, encoder=encoder, semantic=semantic)
    await offline.start()
    result = await desk.ask("What is the status of ticket 1?", session_id="llm-down")
    expected = await offline.ask("What is the status of ticket 1?", session_id="no-llm")
    assert result.route == "POSTGRES"
    assert result.fallback == "llm_unavailable" and result.stop_reason == "success"
    assert result.answer == expected.answer and expected.fallback is None
    assert "database" not in result.answer and "language model" not in result.answer
    assert {"node": "desk", "answered": "offline", "llm_failed": "llm_error:connect"} in result.notes
    model.assert_consumed()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("message", "code", "words"),
    [
        ("bad \udcff byte", "invalid_text", "lone surrogate (U+DCFF) at position 4"),
        ("nul\x00", "invalid_text", "NUL character at position 3"),
        ("x" * 11, "message_too_long", "over the 10 limit"),
        (" \n", "empty_message", "empty"),
    ],
)
async def test_the_desk_refuses_invalid_messages_before_anything_runs(
    db: SupportDatabase, encoder: MiniLMEncoder, semantic: ExampleEmbeddingLayer, message: str, code: str, words: str
) -> None:
    desk = SupportAgent(db=db, encoder=encoder, semantic=semantic, max_message_chars=10)
    await desk.start()
    events = [e async for e in desk.iter(message, session_id="bad-input")]
    assert len(events) == 1 and isinstance(events[0], TurnError)
    assert events[0].code == code and words in events[0].message
    with pytest.raises(InvalidMessageError) as refused:
        await desk.route(message)
    assert refused.value.code == code
    with pytest.raises(InvalidMessageError) as refused:
        await desk.ask(message, session_id="bad-input")
    assert refused.value.code == code
    assert await desk.history("bad-input") == []  # nothing was stored

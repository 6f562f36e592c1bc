"""The Streamlit page under ``AppTest``, talking to a real server over HTTP."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from routegate.server.testing import FakeSupportDesk, ServerThread
from routegate.ui.launch import APP_PATH

pytestmark = pytest.mark.e2e


@pytest.fixture
def app(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ROUTEGATE_UI_SERVER_URL", server.url)
    at = AppTest.from_file(str(APP_PATH), default_timeout=30)
    at.run()
    assert not at.exception
    return at


def _texts(elements: object) -> str:
    return "\n".join(str(e.value) for e in elements)  # type: ignore[attr-defined]


def test_first_page(app: AppTest) -> None:
    assert app.title[0].value == "routegate support desk"
    assert len(app.chat_input) == 1
    assert "ok (database ok)" in _texts(app.sidebar.caption)


def test_a_turn_streams_and_shows_its_panel(app: AppTest, desk: FakeSupportDesk) -> None:
    app.chat_input[0].set_value("What is the status of ticket 1?").run()
    assert not app.exception
    assert "[POSTGRES] answer to: What is the status of ticket 1?" in _texts(app.markdown)
    sidebar = _texts(app.sidebar.markdown)
    assert "**Route:** `POSTGRES` — decided by the `rules` layer" in sidebar
    assert "**Scores:** POSTGRES 1.00" in sidebar
    assert "**Tool:** `postgres` — 1 row (ok)" in sidebar
    assert "**Fallback:** none" in sidebar
    assert "**Latency:**" in sidebar
    assert app.expander[0].label.startswith("POSTGRES · layer rules · ")
    session_id = app.session_state["session_id"]
    assert desk.histories[session_id][0].content == "What is the status of ticket 1?"


def test_fallback_and_turn_picker(app: AppTest) -> None:
    app.chat_input[0].set_value("customer nothing").run()
    app.chat_input[0].set_value("Can you help me?").run()
    assert len(app.session_state["turns"]) == 2
    sidebar = _texts(app.sidebar.markdown)
    assert "**Route:** `LLM`" in sidebar
    assert "**Tool:** none" in sidebar
    app.sidebar.selectbox[0].set_value(0).run()
    sidebar = _texts(app.sidebar.markdown)
    assert "**Fallback:** empty: postgres returned no data" in sidebar
    assert "failed or empty" in sidebar


def test_reset_and_new_session(app: AppTest, desk: FakeSupportDesk) -> None:
    app.chat_input[0].set_value("weather?").run()
    first = app.session_state["session_id"]
    assert first in desk.histories
    app.sidebar.button(key="reset_session").click().run()
    assert app.session_state["turns"] == []
    assert first not in desk.histories
    assert app.session_state["session_id"] == first
    app.sidebar.button(key="new_session").click().run()
    assert app.session_state["session_id"] != first


def test_server_errors_are_shown(app: AppTest, desk: FakeSupportDesk) -> None:
    desk.database_up = False
    app.chat_input[0].set_value("ticket 1").run()
    assert not app.exception
    assert "the database is unavailable" in _texts(app.error)


def test_reset_clears_the_page_in_the_same_run(app: AppTest) -> None:
    app.chat_input[0].set_value("weather?").run()
    assert len(app.chat_message) == 2
    app.sidebar.button(key="reset_session").click().run()
    assert len(app.chat_message) == 0


def test_reset_error_is_shown(app: AppTest, desk: FakeSupportDesk) -> None:
    desk.database_up = False
    app.sidebar.button(key="reset_session").click().run()
    assert "the database is unavailable" in _texts(app.sidebar.error)

"""The turn picker follows the newest turn without Streamlit's "value set two ways" warning (issue: a 25-line
stack in the server log after the second message)."""

from __future__ import annotations

import logging

import pytest
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest

from routegate.server.testing import ServerThread
from routegate.ui.launch import APP_PATH

pytestmark = pytest.mark.e2e


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_two_turns_log_no_widget_state_warning(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTEGATE_UI_SERVER_URL", server.url)
    # the check only runs under a runtime and warns once per process: make it run and able to warn here
    monkeypatch.setattr(policies.runtime, "exists", lambda: True)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    records = _Records()
    logger = logging.getLogger(policies.__name__)
    logger.addHandler(records)
    try:
        app = AppTest.from_file(str(APP_PATH), default_timeout=30)
        app.run()
        app.chat_input[0].set_value("customer nothing").run()
        app.chat_input[0].set_value("Can you help me?").run()
        app.chat_input[0].set_value("weather?").run()
    finally:
        logger.removeHandler(records)
    assert not app.exception
    assert app.sidebar.selectbox[0].value == 2  # the picker follows the newest turn
    assert not [m for m in records.messages if "turn_pick" in m]
    app.sidebar.selectbox[0].set_value(0).run()
    assert "**Fallback:** empty: postgres returned no data" in "\n".join(str(m.value) for m in app.sidebar.markdown)

"""The Streamlit chat UI and its HTTP client for the routegate server."""

from pathlib import Path

from routegate.ui.client import ChatClient, ChatClientError, ServerEvent, iter_sse

APP_PATH = Path(__file__).with_name("app.py")

__all__ = ["APP_PATH", "ChatClient", "ChatClientError", "ServerEvent", "iter_sse"]

"""The Streamlit chat UI and its HTTP client for the routegate server."""

from routegate.ui.client import ChatClient, ChatClientError, ServerEvent, iter_sse
from routegate.ui.launch import APP_PATH, streamlit_command, streamlit_env

__all__ = ["APP_PATH", "ChatClient", "ChatClientError", "ServerEvent", "iter_sse", "streamlit_command", "streamlit_env"]

"""The Streamlit chat UI and its HTTP client for the routegate server."""

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.ui.client import ChatClient, ChatClientError

__all__ = ["ChatClient", "ChatClientError"]

_MOVED = {  # the client's wire record and the launcher the CLI uses
    "APP_PATH": "launch",
    "ServerEvent": "client",
    "iter_sse": "client",
    "streamlit_command": "launch",
    "streamlit_env": "launch",
}
__getattr__, __dir__ = _lazy_exports(__name__, {}, __all__, moved=_MOVED)

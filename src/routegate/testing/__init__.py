"""routegate.testing: the test doubles routegate ships for its own suites and yours.

* :class:`ScriptedOpenAIServer` — an OpenAI-compatible HTTP server on loopback answering from a script
  (:class:`Reply`, :class:`ToolCallReply`, :class:`ErrorReply`, :class:`Hang`, :class:`RawReply`,
  :class:`EmbeddingReply`), so the real ``openai`` client path runs; it records every request and checks the script
  was used up. ``lacks=`` plays a server without tool calls or JSON schemas (:mod:`routegate.testing.dialects`).
* :class:`WeakModel` — a responder for that server playing a model that routes right but misspells an argument or
  wraps its JSON in prose in a set share of its answers (seeded), in whichever output format it is asked for.
* :class:`ScriptedChatModel` — an in-process :class:`~routegate.llm.ChatModel` for fast unit tests.
* :class:`ScriptedRouter` — a router returning scripted raw outputs, for tests of the core runtime.
"""

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.testing.openai_server import ScriptedOpenAIServer
from routegate.testing.scripted import ScriptedChatModel, ScriptedRouter, ScriptExhaustedError
from routegate.testing.steps import (
    EmbeddingReply,
    ErrorReply,
    Hang,
    RawReply,
    RecordedRequest,
    Reply,
    ServerStep,
    ToolCallReply,
)
from routegate.testing.weak_model import WeakModel

__all__ = [
    "EmbeddingReply",
    "ErrorReply",
    "Hang",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "ScriptedOpenAIServer",
    "ScriptedRouter",
    "ServerStep",
    "ToolCallReply",
    "WeakModel",
]


_RENAMED = {  # the old name, which read like the Plan's Step
    "Step": (
        "steps:ServerStep",
        "routegate.testing.Step is renamed ServerStep (one scripted answer of ScriptedOpenAIServer)",
    )
}
_MOVED = {  # the script's item types: a script is written with the steps themselves
    "ChatCall": "scripted",
    "ChatStep": "scripted",
    "Responder": "steps",
    "RouteStep": "scripted",
    "ScriptItem": "steps",
}
__getattr__, __dir__ = _lazy_exports(__name__, {}, __all__, renamed=_RENAMED, moved=_MOVED)

"""The output modes a structured answer is asked in, strongest first, and the fall back from one to the next.

``tools`` (a function tool call), ``json_schema`` (one strict JSON schema) and ``json`` (a JSON object, the routing
agent's original contract) are tried in that order from the mode asked for; :meth:`ModeLadder.first` runs the caller's attempt in
each until one answers. A mode is passed over, with a note for the trace and one log line per kind, when the
endpoint refuses it (:class:`~routegate.llm.errors.LLMModeRefusedError`), when strict mode cannot express the
schema (:class:`~routegate.llm.strict.StrictSchemaError`) or when the model answers a tools request without a call
(:class:`NoToolCall`). JSON, last, is never passed over: its failures are the caller's as they always were.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final, Literal, TypeVar, get_args

from routegate.errors import ConfigurationError
from routegate.llm.errors import LLMModeRefusedError
from routegate.llm.protocol import ChatModel
from routegate.llm.strict import StrictSchemaError
from routegate.llm.structured import StructuredChatModel

logger = logging.getLogger(__name__)

Mode = Literal["json", "json_schema", "tools", "auto"]
"""How a structured answer is asked for: one of the three formats, or ``auto`` (the strongest the endpoint takes)."""
Format = Literal["tools", "json_schema", "json"]
LADDER: Final[tuple[Format, ...]] = ("tools", "json_schema", "json")
AnswerT = TypeVar("AnswerT")


class NoToolCall(Exception):
    """The model answered a tools request without calling one (the message says what it answered)."""


class ModeLadder:
    """The formats ``owner`` asks ``chat_model`` in for ``mode``: ``json`` alone, or from ``mode`` (``auto``:
    ``tools``) down to ``json``. The structured formats need a
    :class:`~routegate.llm.structured.StructuredChatModel`: asked for explicitly with another model, that is a
    :class:`~routegate.errors.ConfigurationError`; with ``auto``, JSON alone."""

    def __init__(self, mode: Mode, chat_model: ChatModel, *, owner: str) -> None:
        if mode not in get_args(Mode):
            raise ConfigurationError(f"{owner}.mode must be one of {', '.join(get_args(Mode))}, got {mode!r}")
        structured = chat_model if isinstance(chat_model, StructuredChatModel) else None
        if mode in ("tools", "json_schema") and structured is None:
            raise ConfigurationError(
                f"{owner}(mode={mode!r}) needs a chat model with respond() (OpenAIChatModel, ScriptedChatModel); "
                f"{type(chat_model).__name__} has none: use mode='json' or mode='auto'"
            )
        self.structured = structured
        if mode == "json" or structured is None:
            self.formats: tuple[Format, ...] = ("json",)
        else:
            self.formats = LADDER[LADDER.index("tools" if mode == "auto" else mode) :]
        self._said: set[str] = set()

    def model(self) -> StructuredChatModel:
        """The structured chat model (only asked for while a structured format is tried)."""
        assert self.structured is not None  # the ladder holds structured formats only for a structured model
        return self.structured

    async def first(self, ask: Callable[[Format], Awaitable[AnswerT]]) -> tuple[AnswerT, list[str]]:
        """``ask``'s answer in the first format that gives one, and the notes of the formats passed over."""
        notes: list[str] = []
        for fmt in self.formats:
            if fmt == "json":
                return await ask(fmt), notes
            try:
                return await ask(fmt), notes
            except LLMModeRefusedError as refused:
                notes.append(f"{fmt} refused by the endpoint" + (" (earlier)" if refused.remembered else ""))
                self._say(f"{fmt}:refused", "the endpoint refused %s (%s): falling back", fmt, refused.message)
            except StrictSchemaError as exc:
                notes.append(f"{fmt} skipped: {exc}")
                self._say(f"{fmt}:{exc}", "strict mode cannot express the schema (%s): falling back", exc)
            except NoToolCall as exc:
                notes.append(f"{fmt}: {exc}")
                logger.info("the model answered without a tool call (%s): falling back", exc)
        raise AssertionError("unreachable: every ladder ends with json")  # pragma: no cover

    def _say(self, key: str, message: str, *args: object) -> None:
        """One warning per kind of fall back; the later ones at debug level."""
        level = logging.DEBUG if key in self._said else logging.WARNING
        self._said.add(key)
        logger.log(level, message, *args)

"""The doors every desk opens to a turn, written once: :class:`DeskDoors`.

The real desk (:class:`~routegate.apps.support.desk.SupportAgent`) and its test double
(:class:`~routegate.apps.support.fake.FakeSupportDesk`) both take a turn through these doors, so they refuse the same
input with the same ``error`` event and end ``ask`` the same way; each writes only what its turn does with accepted
input (:meth:`DeskDoors._turn_events`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from routegate.apps.support.contracts import Message, SupportEvent, TurnResult
from routegate.apps.support.inputs import check_input, turn_refusal, turn_result
from routegate.apps.support.tenancy import ANONYMOUS


class DeskDoors:
    """``iter`` and ``ask`` of a :class:`~routegate.apps.support.contracts.SupportDesk`, over the desk's
    :meth:`_turn_events` (a subclass's) and its ``max_message_chars``."""

    max_message_chars: int

    def iter(
        self,
        message: str,
        *,
        session_id: str,
        tenant: str = ANONYMOUS,
        history: Sequence[Message] | None = None,
    ) -> AsyncIterator[SupportEvent]:
        """One turn as events: ``route`` → ``tool`` (not on the LLM route) → ``token``* → ``final`` | ``error``;
        the ``final`` event is a :class:`~routegate.core.FinalEvent` carrying the turn's :class:`TurnResult`. A
        refused message or session id is one ``error`` event whose code names the problem (``empty_message``,
        ``message_too_long``, ``invalid_text``, ``bad_session_id``).

        ``tenant``: whose turn it is (the server's API key). ``history``: the conversation the caller keeps (an
        OpenAI client's ``messages`` before the last), read instead of the session's stored messages, as untrusted
        context; the turn is still stored in the session. Closing the iterator early ends the turn."""
        refused = turn_refusal(message, session_id, self.max_message_chars)
        if refused is not None:
            return _single(refused)
        return self._turn_events(message, session_id, tenant, history)

    def _turn_events(
        self, message: str, session_id: str, tenant: str, history: Sequence[Message] | None
    ) -> AsyncIterator[SupportEvent]:
        """The events of a turn on accepted input: what the desk itself does."""
        raise NotImplementedError

    async def ask(self, message: str, *, session_id: str, tenant: str = ANONYMOUS) -> TurnResult:
        """One turn to its end. Raises :class:`~routegate.core.messages.InvalidMessageError` for a refused message,
        :class:`~routegate.apps.support.errors.InvalidSessionIdError` for a refused session id and
        :class:`~routegate.apps.support.errors.TurnFailedError` (with the event's code) when the turn ends with an
        ``error`` event."""
        check_input(message, session_id, self.max_message_chars)
        return await turn_result(self.iter(message, session_id=session_id, tenant=tenant))

    def takes_history(self) -> bool:
        """True: :meth:`iter` takes ``history=``, a conversation the caller supplies."""
        return True


async def _single(event: SupportEvent) -> AsyncIterator[SupportEvent]:
    yield event

"""Running one chat turn against the injected :class:`SupportDesk`: per-session serialisation, metrics,
turning desk exceptions into ``TurnError`` events, and closing the desk's stream whatever happens."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from routegate.apps.support.contracts import (
    AnswerToken,
    Message,
    ReportsModelHealth,
    RouteChosen,
    SerialisesSessions,
    SupportDesk,
    SupportEvent,
    TakesHistory,
    ToolUsed,
    TurnError,
    TurnResult,
)
from routegate.apps.support.tenancy import ANONYMOUS
from routegate.core import messages
from routegate.core.events import FinalEvent
from routegate.server._auth import KeyRing, SessionRef, Tenant
from routegate.server._errors import ApiError
from routegate.server._fairness import Lease, Refused, TenantLimiter
from routegate.server._metrics import ServerMetrics
from routegate.server._shutdown import SERVER_SHUTTING_DOWN, OpenRequests
from routegate.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

DATABASE_UNAVAILABLE = "database_unavailable"
SESSION_BUSY = "session_busy"
SERVER_BUSY = "server_busy"
_UNAVAILABLE_MESSAGE = "the database is unavailable right now; try again shortly"


class SessionLocks:
    """A process runs a session's turns one at a time, in the order they arrived, whatever desk it serves: with
    one lock per session, and one only. A desk that serialises its sessions itself (:class:`SerialisesSessions`:
    the support desk, on a PostgreSQL advisory lock per session that holds across processes,
    :meth:`routegate.apps.support.memory.MessageStore.hold`) is that lock: :meth:`hold` then leaves the session to
    the desk, and ``len()`` counts the desk's sessions. For any other desk (the fake desk), one
    :class:`asyncio.Lock` per active session, dropped when nobody holds or waits for it."""

    def __init__(self, desk: object = None) -> None:
        self._desk = desk if isinstance(desk, SerialisesSessions) else None
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def hold(self, session_id: str) -> AbstractAsyncContextManager[None]:
        if self._desk is not None and self._desk.serialises_sessions():
            return nullcontext()  # the desk's iter and reset take the session's lock themselves
        return self._hold(session_id)

    @asynccontextmanager
    async def _hold(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[session_id]
            if users <= 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)

    def __len__(self) -> int:
        held = self._desk.sessions_held() if self._desk is not None and self._desk.serialises_sessions() else 0
        return held + len(self._locks)


class DatabaseState:
    """What the last health check said. While the database is known to be down, requests fail fast with 503;
    the database is checked again (bounded by ``server_health_timeout_seconds``) at most once per
    ``RECHECK_SECONDS``, so an outage costs neither a pool timeout nor a health check per request."""

    RECHECK_SECONDS = 1.0

    def __init__(self) -> None:
        self.down = False
        self.checked_at = 0.0

    def mark(self, *, up: bool) -> None:
        if up == self.down:
            log.warning("the database is %s", "back" if up else "down")
        self.down = not up
        self.checked_at = time.monotonic()


@dataclass(frozen=True, slots=True)
class Services:
    """What the endpoints share; built by :func:`routegate.server.create_app` around the desk it is given, or
    around the desk it opened (``open_desk=``), each time it opens it."""

    desk: SupportDesk
    settings: Settings
    metrics: ServerMetrics
    locks: SessionLocks
    keys: KeyRing = field(default_factory=lambda: KeyRing(()))
    database: DatabaseState = field(default_factory=DatabaseState)
    open_requests: OpenRequests = field(default_factory=OpenRequests)
    limiter: TenantLimiter = field(default_factory=lambda: TenantLimiter(max_concurrent=0, rate=0, burst=1))
    tenanted: bool = True
    """Whether the desk's ``iter``, ``history`` and ``reset`` take ``tenant=`` (:func:`for_tenant`)."""


def for_tenant(services: Services, tenant: str) -> dict[str, str]:
    """The keyword a desk call names its tenant with: ``tenant=``, or nothing for a desk written before it existed
    (served one more release; :func:`routegate.server.create_app` warns)."""
    return {"tenant": tenant} if services.tenanted else {}


def limiter_for(settings: Settings) -> TenantLimiter:
    return TenantLimiter(
        max_concurrent=settings.tenant_max_concurrent_turns,
        rate=settings.tenant_rate_per_second,
        burst=settings.tenant_rate_burst,
    )


def admit_turn(services: Services, tenant: Tenant) -> Lease:
    """The tenant's lease for one turn, or 429 (``rate_limited`` / ``too_many_concurrent_turns``, with
    ``Retry-After``). Hand the lease to :func:`run_turn`, which gives it back when the turn ends; release it
    yourself if the turn never starts."""
    verdict = services.limiter.admit(tenant.id, who=tenant.who)
    if isinstance(verdict, Refused):
        services.metrics.refusals.labels(verdict.code).inc()
        raise ApiError(429, verdict.code, verdict.message, headers={"Retry-After": str(verdict.retry_after)})
    return verdict


@contextmanager
def released_on_error(lease: Lease) -> Iterator[Lease]:
    """Give ``lease`` back if the block raises: a turn refused or failed before :func:`run_turn` could end it
    (which gives the lease back when the turn ends) holds no place of its tenant."""
    try:
        yield lease
    except BaseException:
        lease.release()
        raise


async def first_event(events: AsyncGenerator[SupportEvent, None]) -> SupportEvent:
    """The turn's first event, read before a streamed response starts (an error answers with its own status
    instead); a first ``TurnError`` closes the stream."""
    first = await anext(events)
    if isinstance(first, TurnError):
        await events.aclose()
    return first


def new_session_id() -> str:
    return uuid.uuid4().hex


def check_message(message: str, settings: Settings) -> str:
    """The one message rule (:func:`routegate.core.messages.check_message`) as a 422 with the rule's code."""
    try:
        return messages.check_message(message, max_chars=settings.max_message_chars)
    except messages.InvalidMessageError as exc:
        raise ApiError(422, exc.code, str(exc)) from None


LOOP_LAG_SECONDS = 0.1
"""How late a health check's timeout may fire before the check is put down to this server's own event loop."""


async def desk_healthy(services: Services) -> bool:
    """Ask the desk (the database, on the health check's own connection). A check that times out because this
    server's event loop is behind (its timeout fired more than :data:`LOOP_LAG_SECONDS` late: a flood of requests
    to answer) says nothing about the database, and the last known state stands."""
    loop = asyncio.get_running_loop()
    limit = services.settings.server_health_timeout_seconds
    started = loop.time()
    try:
        ok = bool(await asyncio.wait_for(services.desk.healthy(), limit))
    except TimeoutError:
        late = loop.time() - started - limit
        if late > LOOP_LAG_SECONDS:
            log.warning("health check timed out with the event loop %.2f s behind: the database state stands", late)
            return not services.database.down
        log.warning("health check failed: TimeoutError")
        ok = False
    except Exception as exc:
        log.warning("health check failed: %s", type(exc).__name__)
        ok = False
    services.database.mark(up=ok)
    return ok


_MODEL_STATES: tuple[Literal["ok", "degraded", "down", "off"], ...] = ("ok", "degraded", "down", "off")


def model_health(services: Services) -> Literal["ok", "degraded", "down", "off"] | None:
    """The desk's chat model state, when the desk can tell (``None`` otherwise)."""
    desk = services.desk
    state = desk.model_health() if isinstance(desk, ReportsModelHealth) else None
    for known in _MODEL_STATES:
        if state == known:
            return known
    return None


async def known_down(services: Services) -> bool:
    """True when the database was seen down and still is (then the caller answers 503 at once)."""
    state = services.database
    if not state.down:
        return False
    if time.monotonic() - state.checked_at < state.RECHECK_SECONDS:
        return True
    return not await desk_healthy(services)


def unavailable() -> ApiError:
    return ApiError(503, DATABASE_UNAVAILABLE, _UNAVAILABLE_MESSAGE, headers={"Retry-After": "5"})


async def call_desk(services: Services, doing: str, call: Awaitable[T]) -> T:
    """A bounded desk call (history, reset): 503 when the database is down, 504 when it takes too long."""
    if await known_down(services):
        if inspect.iscoroutine(call):
            call.close()
        raise unavailable()
    limit = services.settings.server_desk_timeout_seconds
    try:
        return await asyncio.wait_for(call, limit)
    except TimeoutError:
        if not await desk_healthy(services):
            raise unavailable() from None
        raise ApiError(504, "desk_timeout", f"the support desk took longer than {limit:g} s while {doing}") from None
    except Exception as exc:
        raise await desk_fault(services, exc, doing) from None


async def _error_for(services: Services, exc: BaseException) -> TurnError:
    if not await desk_healthy(services):
        log.warning("a turn failed while the database is down: %s", type(exc).__name__)
        return TurnError(message=_UNAVAILABLE_MESSAGE, code=DATABASE_UNAVAILABLE)
    log.error("support desk failed on a turn: %s", type(exc).__name__, exc_info=exc)
    return TurnError(
        message="the support desk failed on this turn; the details are in the server log", code="internal_error"
    )


async def run_turn(
    services: Services,
    message: str,
    session: SessionRef,
    lease: Lease | None = None,
    *,
    history: Sequence[Message] | None = None,
) -> AsyncGenerator[SupportEvent, None]:
    """The desk's events for one turn, always ending in exactly one ``FinalEvent`` or ``TurnError``. The desk
    works on ``session.internal``; the result names ``session.public``, and errors carry the server's words only.
    ``lease`` (the tenant's place, :func:`admit_turn`) is given back when the turn ends, however it ends.
    ``history``: the conversation the client sent (untrusted), for a desk that takes one
    (:class:`~routegate.apps.support.contracts.TakesHistory`); another desk's turn runs without it."""
    metrics = services.metrics
    finished = False
    with _given_back(lease):
        if await known_down(services):
            metrics.turn_failed(DATABASE_UNAVAILABLE)
            yield TurnError(message=_UNAVAILABLE_MESSAGE, code=DATABASE_UNAVAILABLE)
            return
        async with services.locks.hold(session.internal):
            # the turn is this tenant's: the desk's database connections are shared fairly between tenants
            tenant = for_tenant(services, lease.tenant if lease is not None else ANONYMOUS)
            stream = start_turn(services.desk, message, session.internal, history, tenant)
            try:
                async for item in stream:
                    if isinstance(item, AnswerToken):  # most of a turn's events: nothing to count or refine
                        yield item
                        continue
                    event = _event_of(item)
                    if isinstance(event, RouteChosen):
                        metrics.route_chosen(event)
                    elif isinstance(event, FinalEvent):
                        if event.result.session_id != session.public:  # a keyed session: the client's name for it
                            event = FinalEvent(event.result.in_session(session.public))
                        metrics.turn_finished(event.result)
                    elif isinstance(event, TurnError):
                        event = await _refine(services, event)
                        metrics.turn_failed(event.code)
                    finished = isinstance(event, FinalEvent | TurnError)
                    yield event
                    if finished:
                        return
            except Exception as exc:  # a desk bug or a storage fault: report it as data, never as a traceback
                error = await _error_for(services, exc)
                metrics.turn_failed(error.code)
                finished = True
                yield error
                return
            finally:
                if not finished:
                    metrics.disconnects.inc()
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
        if not finished:
            error = TurnError(message="the support desk ended the turn without a result", code="incomplete_turn")
            metrics.turn_failed(error.code)
            yield error


def start_turn(
    desk: SupportDesk,
    message: str,
    session_id: str,
    history: Sequence[Message] | None = None,
    tenant: Mapping[str, str] | None = None,
) -> AsyncIterator[SupportEvent]:
    """``desk.iter`` on one turn, with the client's ``history`` when there is one and the desk takes it
    (:class:`~routegate.apps.support.contracts.TakesHistory`); without it otherwise. ``tenant``: the keyword the
    desk names its tenant with (:func:`for_tenant`; empty for a desk written before it existed)."""
    tenant = tenant or {}
    if history is not None and isinstance(desk, TakesHistory) and desk.takes_history():
        return desk.iter(message, session_id=session_id, history=history, **tenant)
    return desk.iter(message, session_id=session_id, **tenant)


def _event_of(item: object) -> SupportEvent:
    """``item`` as a turn's event. A desk whose stream still ends with a bare :class:`TurnResult` (the form
    before a turn's last event was a :class:`FinalEvent`) is served for one more release, with a warning."""
    if isinstance(item, TurnResult):
        warnings.warn(
            "a desk's turn ended with a bare TurnResult; end it with FinalEvent(result) (routegate.core.FinalEvent). "
            "The bare form is refused in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return FinalEvent(item)
    return cast("SupportEvent", item)


@contextmanager
def _given_back(lease: Lease | None) -> Iterator[None]:
    try:
        yield
    finally:
        if lease is not None:
            lease.release()


async def desk_fault(services: Services, exc: Exception, doing: str) -> ApiError:
    """An :class:`ApiError` for a desk call (history, reset) that raised: 503 when the database is down."""
    if not await desk_healthy(services):
        log.warning("support desk failed while %s, the database is down: %s", doing, type(exc).__name__)
        return unavailable()
    log.error("support desk failed while %s: %s", doing, type(exc).__name__, exc_info=exc)
    return ApiError(500, "internal_error", f"the support desk failed while {doing}; the details are in the server log")


_INPUT_ERRORS = frozenset({"empty_message", "message_too_long", "bad_session_id"})


# What the client reads for an error the desk reported: the server's own words, never the desk's message (which
# may quote an exception or the database driver). The desk logs its exception; the server logs the code.
_MESSAGES = {
    DATABASE_UNAVAILABLE: _UNAVAILABLE_MESSAGE,
    "empty_message": "message is empty; send the user's text in `message`",
    "message_too_long": "message is over the support desk's length limit; send a shorter text",
    "bad_session_id": "the session id is not valid: use 1-128 letters, digits and ._:@- (starting with a letter or digit)",
    SESSION_BUSY: "this session's previous turn is still running (turns of a session run one at a time), or the "
    "server holds all the sessions it may at once; try again",
    SERVER_BUSY: "the server is at capacity (no database connection came free in time); try again shortly",
}
_TIMEOUT_MESSAGE = "the support desk took too long on this turn; try again"
_FAILED_MESSAGE = "the support desk failed on this turn; the details are in the server log"


def _own_words(error: TurnError) -> TurnError:
    if error.code in _MESSAGES:
        message = _MESSAGES[error.code]
    else:
        message = _TIMEOUT_MESSAGE if status_for(error) == 504 else _FAILED_MESSAGE
        log.warning("the support desk ended a turn with %s", error.code[:64])
    return TurnError(message=message, code=error.code)


async def _refine(services: Services, error: TurnError) -> TurnError:
    """The error in the server's words; a desk's generic failure while the database is down is reported as the
    database being down. Whether it is down is the health check's word alone (its own connection, never the
    pool's): a desk that reports the database unavailable because the pool was saturated does not make every
    other turn fail fast."""
    if error.code in _INPUT_ERRORS:
        return _own_words(error)
    healthy = await desk_healthy(services)
    if healthy or error.code == DATABASE_UNAVAILABLE:
        return _own_words(error)
    return TurnError(message=_UNAVAILABLE_MESSAGE, code=DATABASE_UNAVAILABLE)


def status_for(error: TurnError) -> int:
    if error.code in (DATABASE_UNAVAILABLE, SESSION_BUSY, SERVER_BUSY, SERVER_SHUTTING_DOWN) or error.code.endswith(
        "_unavailable"
    ):
        return 503
    if error.code.endswith("timeout"):
        return 504
    if error.code in _INPUT_ERRORS or error.code.startswith(("invalid", "bad_")):
        return 422
    return 500


def raise_for(error: TurnError) -> None:
    status = status_for(error)
    headers = {"Retry-After": "5"} if status == 503 else None
    raise ApiError(status, error.code, error.message, headers=headers)


def route_payload(event: RouteChosen, session_id: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "route": event.route,
        "layer": event.layer,
        "scores": {str(k): float(v) for k, v in event.scores.items()},
        "why": event.why,
    }


def tool_payload(event: ToolUsed) -> dict[str, Any]:
    return {
        "tool": event.tool,
        "call": _plain(event.call),
        "summary": event.summary,
        "ok": event.ok,
        "evidence": _plain(event.evidence),
    }


def event_payload(event: SupportEvent, session_id: str) -> dict[str, Any]:
    if isinstance(event, RouteChosen):
        return route_payload(event, session_id)
    if isinstance(event, ToolUsed):
        return tool_payload(event)
    if isinstance(event, AnswerToken):
        return {"text": event.text}
    if isinstance(event, FinalEvent):
        return event.result.to_dict()  # the desk's wire form of its result, not FinalEvent.to_dict()
    return {"code": event.code, "message": event.message}


_LEAVES: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """Mappings and sequences the desk hands over (frozen or not) as JSON-ready dicts and lists."""
    if type(value) in _LEAVES:  # most values of a tool's evidence: no abstract-class checks for them
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)

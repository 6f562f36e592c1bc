"""OpenAI-compatible ``POST /v1/chat/completions`` (stream and non-stream) and ``GET /v1/models``.

The last message of ``messages`` is the turn's (it must be the user's). The session is the ``user`` field, else the
``X-Session-Id`` header, else a new one per request:

* with a session, the desk follows the conversation it stored; the earlier ``messages`` the client sends are
  not read (the stored history wins);
* without one, the earlier ``messages`` are the conversation (what chat front-ends send), handed to a desk that
  takes one (:class:`~routegate.apps.support.contracts.TakesHistory`) as untrusted context: the support desk reads
  the user's messages only, bounded, to resolve a follow-up, and never as evidence
  (:mod:`routegate.apps.support.supplied`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any

from routegate._extras import needs

with needs("server"):
    from fastapi import APIRouter, Depends, Header, Response
    from fastapi.responses import JSONResponse

from routegate.apps.support.contracts import AnswerToken, Message, SupportEvent, TurnError, TurnResult
from routegate.core.events import FinalEvent
from routegate.server._deps import CallerDep, ServicesDep, TenantDep, require_api_key
from routegate.server._errors import ApiError, error_body, error_response
from routegate.server._schemas import SESSION_PATTERN, ChatCompletionRequest
from routegate.server._sessions import session_for_turn
from routegate.server._shutdown import SERVER_SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE
from routegate.server._sse import EventStreamResponse, dumps, encode_data
from routegate.server._text import Text
from routegate.server._turns import (
    admit_turn,
    check_message,
    first_event,
    raise_for,
    released_on_error,
    run_turn,
    status_for,
)

MODEL_ID = "routegate-support"

router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_key)])


def _last_user_text(body: ChatCompletionRequest) -> str:
    last = body.messages[-1]
    if last.role != "user":
        raise ApiError(422, "invalid_request", f"the last message must have role 'user' (got '{last.role}')")
    return last.text()


def _earlier(body: ChatCompletionRequest) -> tuple[Message, ...]:
    """The client's conversation before its last message: the user's and the assistant's text (the system's,
    the developer's and the tools' messages are not the conversation, and are not passed on)."""
    return tuple(Message(m.role, m.text()) for m in body.messages[:-1] if m.role == "user" or m.role == "assistant")


def _extension(result: TurnResult) -> dict[str, Any]:
    return {
        "session_id": result.session_id,
        "route": result.route,
        "stop_reason": result.stop_reason,
        "fallback": result.fallback,
        "latency_ms": round(result.latency_ms, 3),
    }


def _usage(prompt: str, answer: str) -> dict[str, int]:
    # The offline composer has no tokenizer: whitespace-separated words stand in for tokens.
    p, c = len(prompt.split()), len(answer.split())
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


@router.get("/models", summary="The one model this server offers (OpenAI-compatible)")
async def models() -> dict[str, Any]:
    return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "routegate"}]}


@router.post(
    "/chat/completions", summary="OpenAI-compatible chat completion (stream and non-stream)", response_model=None
)
async def chat_completions(
    body: ChatCompletionRequest,
    services: ServicesDep,
    caller: CallerDep,
    tenant: TenantDep,
    x_session_id: Annotated[Text | None, Header(pattern=SESSION_PATTERN)] = None,
) -> Response:
    message = check_message(_last_user_text(body), services.settings)
    named = body.user or x_session_id
    # without a session, the client's own conversation is the turn's (untrusted: the desk says how it reads it)
    history = _earlier(body) if named is None else None
    # the lease before any database work: a refused turn costs the database nothing
    with released_on_error(admit_turn(services, tenant)) as lease:
        session = await session_for_turn(services, caller, named, tenant.id)
        session_id = session.public
        services.metrics.turns.labels("openai", "stream" if body.stream else "json").inc()
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        events = run_turn(services, message, session, lease, history=history)  # gives the lease back at the end
        headers = {"X-Session-Id": session_id}
        if not body.stream:
            result = await _final(events)
            return JSONResponse(_completion(completion_id, created, message, result), headers=headers)
        first = await first_event(events)
    if isinstance(first, TurnError):
        return error_response(status_for(first), first.code, first.message, headers)
    chunk = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": MODEL_ID}
    farewell = encode_data(dumps(error_body(503, SERVER_SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE))) + encode_data("[DONE]")
    return EventStreamResponse(_chunks(chunk, first, events), headers=headers, farewell=farewell)


def _completion(completion_id: str, created: int, message: str, result: TurnResult) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer}, "finish_reason": "stop"}],
        "usage": _usage(message, result.answer),
        "routegate": _extension(result),
    }


async def _final(events: AsyncGenerator[SupportEvent, None]) -> TurnResult:
    async with aclosing(events):
        async for event in events:
            if isinstance(event, FinalEvent):
                return event.result
            if isinstance(event, TurnError):
                raise_for(event)
    raise AssertionError("run_turn always ends with a result or an error")  # pragma: no cover


async def _chunks(
    base: dict[str, Any], first: SupportEvent, events: AsyncGenerator[SupportEvent, None]
) -> AsyncIterator[bytes]:
    def delta(content: dict[str, str], finish: str | None = None, **extra: Any) -> bytes:
        choice = {"index": 0, "delta": content, "finish_reason": finish}
        return encode_data(dumps({**base, "choices": [choice], **extra}))

    def render(event: SupportEvent) -> bytes | None:
        if isinstance(event, AnswerToken) and event.text:
            return delta({"content": event.text})
        if isinstance(event, FinalEvent):
            return delta({}, "stop", routegate=_extension(event.result))
        if isinstance(event, TurnError):
            return encode_data(dumps(error_body(status_for(event), event.code, event.message)))
        return None  # route and tool events have no place in OpenAI's format

    async with aclosing(events):
        yield delta({"role": "assistant", "content": ""})
        if (out := render(first)) is not None:
            yield out
        async for event in events:
            if (out := render(event)) is not None:
                yield out
        yield encode_data("[DONE]")

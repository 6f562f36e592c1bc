"""``POST /chat`` (SSE or JSON), ``/sessions/{id}``, ``/healthz`` and ``/metrics``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Any

from routegate._extras import needs

with needs("server"):
    from fastapi import APIRouter, Depends, Path, Request, Response
    from fastapi.responses import JSONResponse

from routegate.apps.support.contracts import AnswerToken, RouteChosen, SupportEvent, ToolUsed, TurnError
from routegate.core.events import FinalEvent
from routegate.server._deps import (
    DESK_NOT_OPEN_MESSAGE,
    CallerDep,
    ServicesDep,
    TenantDep,
    require_api_key,
    services_of,
)
from routegate.server._errors import error_response
from routegate.server._metrics import CONTENT_TYPE
from routegate.server._schemas import SESSION_PATTERN, ChatRequest, ChatResponse, Health, SessionOut
from routegate.server._sessions import not_found, session_for_turn, session_to_delete
from routegate.server._shutdown import SERVER_SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE
from routegate.server._sse import EventStreamResponse, encode_event
from routegate.server._text import Text
from routegate.server._turns import (
    admit_turn,
    call_desk,
    check_message,
    desk_healthy,
    event_payload,
    first_event,
    for_tenant,
    model_health,
    raise_for,
    released_on_error,
    route_payload,
    run_turn,
    status_for,
    tool_payload,
)

SessionPath = Annotated[Text, Path(pattern=SESSION_PATTERN, description="the conversation id")]

public = APIRouter()
protected = APIRouter(dependencies=[Depends(require_api_key)])

_CHAT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ChatResponse,
        "description": "Server-Sent Events `route`, `tool`, `token`*, then `final` or `error` (default); with "
        "`Accept: application/json`, one JSON body (`ChatResponse`).",
        "content": {"text/event-stream": {}},
    },
    401: {"description": "API key missing or wrong (when the server has keys)"},
    404: {"description": "`session_id` is a session of another API key"},
    413: {"description": "request body over the size limit"},
    422: {"description": "bad input: empty or over-long message, wrong types, bad session id"},
    429: {"description": "the key's limit on turns running at once or per second (`Retry-After`)"},
    503: {"description": "the database is unavailable"},
}


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "").lower()
    return "application/json" in accept and "text/event-stream" not in accept


@protected.post("/chat", responses=_CHAT_RESPONSES, response_model=None, summary="Ask the support desk")
async def chat(
    body: ChatRequest, request: Request, services: ServicesDep, caller: CallerDep, tenant: TenantDep
) -> Response:
    message = check_message(body.message, services.settings)
    # the lease before any database work: a refused turn costs the database nothing
    with released_on_error(admit_turn(services, tenant)) as lease:
        session = await session_for_turn(services, caller, body.session_id, tenant.id)
        session_id = session.public
        mode = "json" if wants_json(request) else "stream"
        services.metrics.turns.labels("chat", mode).inc()
        events = run_turn(services, message, session, lease)  # gives the lease back when the turn ends
        headers = {"X-Session-Id": session_id}
        if mode == "json":
            return JSONResponse(await _collect(events, session_id), headers=headers)
        first = await first_event(events)
    if isinstance(first, TurnError):
        status = status_for(first)
        if status == 503:
            headers["Retry-After"] = "5"
        return error_response(status, first.code, first.message, headers)
    farewell = encode_event("error", {"code": SERVER_SHUTTING_DOWN, "message": SHUTTING_DOWN_MESSAGE})
    return EventStreamResponse(_sse(first, events, session_id), headers=headers, farewell=farewell)


async def _collect(events: AsyncGenerator[SupportEvent, None], session_id: str) -> dict[str, Any]:
    decision: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = []
    async with aclosing(events):
        async for event in events:
            if isinstance(event, AnswerToken):  # the JSON body has the whole answer: its tokens are not needed
                continue
            if isinstance(event, RouteChosen):
                decision = route_payload(event, session_id)
                decision.pop("session_id")
            elif isinstance(event, ToolUsed):
                tools.append(tool_payload(event))
            elif isinstance(event, FinalEvent):
                return {**event.result.to_dict(), "decision": decision, "tools": tools}
            elif isinstance(event, TurnError):
                raise_for(event)
    raise AssertionError("run_turn always ends with a result or an error")  # pragma: no cover


async def _sse(
    first: SupportEvent, events: AsyncGenerator[SupportEvent, None], session_id: str
) -> AsyncIterator[bytes]:
    async with aclosing(events):
        yield encode_event(first.type, event_payload(first, session_id))
        async for event in events:
            yield encode_event(event.type, event_payload(event, session_id))


@protected.get(
    "/sessions/{session_id}",
    summary="A session's history (with API keys: 404 unless the key's turns created it; without: empty if unknown)",
)
async def get_session(
    session_id: SessionPath, services: ServicesDep, caller: CallerDep, tenant: TenantDep
) -> SessionOut:
    internal = caller.session(session_id).internal
    history = services.desk.history(internal, **for_tenant(services, tenant.id))  # the database serves tenants in turn
    messages = await call_desk(services, "reading the history", history)
    if not messages and caller.owner is not None:
        raise not_found(session_id)
    return SessionOut.model_validate({"session_id": session_id, "messages": [m.to_dict() for m in messages]})


@protected.delete("/sessions/{session_id}", status_code=204, summary="Forget a session (404 if another key's)")
async def delete_session(
    session_id: SessionPath, services: ServicesDep, caller: CallerDep, tenant: TenantDep
) -> Response:
    internal = (await session_to_delete(services, caller, session_id, tenant.id)).internal
    async with services.locks.hold(internal):
        reset = services.desk.reset(internal, **for_tenant(services, tenant.id))  # the database serves tenants in turn
        await call_desk(services, "resetting the session", reset)
    return Response(status_code=204)


@public.get("/healthz", summary="Liveness and database check (never needs the API key)")
async def healthz(request: Request) -> JSONResponse:
    services = services_of(request.app)
    if services is None:  # an app that opens its desk itself, before it opened it or after it closed it
        body = Health(status="unavailable", database="unavailable", detail=DESK_NOT_OPEN_MESSAGE)
        return JSONResponse(body.model_dump(exclude_none=True), status_code=503, headers={"Retry-After": "5"})
    model = model_health(services)
    if await desk_healthy(services):
        if model in ("down", "degraded"):
            detail = f"the chat model is {model}: turns that need it are answered offline"
            return JSONResponse(Health(status="degraded", database="ok", detail=detail, model=model).model_dump())
        return JSONResponse(Health(status="ok", database="ok", model=model).model_dump(exclude_none=True))
    body = Health(status="unavailable", database="unavailable", detail="the database does not answer", model=model)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=503, headers={"Retry-After": "5"})


@protected.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    services.metrics.model_state(model_health(services))
    return Response(services.metrics.render(), media_type=CONTENT_TYPE)

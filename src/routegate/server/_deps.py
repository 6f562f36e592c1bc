"""Dependencies shared by the routers: the services built by the app factory, and the caller (its API key)."""

from __future__ import annotations

from typing import Annotated, Final, cast

from routegate._extras import needs

with needs("server"):
    from fastapi import Depends, FastAPI, Request
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from routegate.server._auth import ANONYMOUS, Caller, Tenant, tenant_of
from routegate.server._errors import ApiError
from routegate.server._turns import Services

DESK_NOT_OPEN: Final = "desk_not_open"
DESK_NOT_OPEN_MESSAGE: Final = (
    "the support desk of this server is not open (the server is starting or stopping); try again shortly"
)

_bearer = HTTPBearer(auto_error=False, description="the server's API key (`ROUTEGATE_SERVER_API_KEY(S)`), when set")


def services_of(app: FastAPI) -> Services | None:
    """The app's services, ``None`` while its desk is not open (an app given ``open_desk=``: before its lifespan
    opened the desk or after it closed it)."""
    return cast("Services | None", app.state.services)


# Both dependencies are ``async def`` on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, two
# thread hand-offs per request for what is an attribute read and a string comparison.
async def get_services(request: Request) -> Services:
    """The app's services, or 503 ``desk_not_open`` (``Retry-After: 5``) while its desk is not open."""
    services = services_of(request.app)
    if services is None:
        raise ApiError(503, DESK_NOT_OPEN, DESK_NOT_OPEN_MESSAGE, headers={"Retry-After": "5"})
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def require_api_key(
    services: ServicesDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    """The caller (its key's tenant), or 401. On a server without keys every caller is the same anonymous one."""
    keys = services.keys
    if not keys:
        return ANONYMOUS
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(
            401,
            "missing_api_key",
            "this server needs an API key: send `Authorization: Bearer <key>`",
            headers=challenge,
        )
    caller = keys.identify(credentials.credentials)
    if caller is None:
        raise ApiError(401, "invalid_api_key", "the API key is not valid", headers=challenge)
    return caller


CallerDep = Annotated[Caller, Depends(require_api_key)]


async def get_tenant(request: Request, caller: CallerDep) -> Tenant:
    """The tenant a turn of this request counts against: the key, or without keys the client's address (the peer,
    or the address a trusted proxy forwarded: uvicorn's ``--forwarded-allow-ips``)."""
    return tenant_of(caller, request.client.host if request.client is not None else None)


TenantDep = Annotated[Tenant, Depends(get_tenant)]

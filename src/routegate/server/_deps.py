"""Dependencies shared by the routers: the services built by the app factory, and the caller (its API key)."""

from __future__ import annotations

from typing import Annotated, cast

from routegate._extras import needs

with needs("server"):
    from fastapi import Depends, Request
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from routegate.server._auth import ANONYMOUS, Caller, Tenant, tenant_of
from routegate.server._errors import ApiError
from routegate.server._turns import Services

_bearer = HTTPBearer(auto_error=False, description="the server's API key (`ROUTEGATE_SERVER_API_KEY(S)`), when set")


# Both dependencies are ``async def`` on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, two
# thread hand-offs per request for what is an attribute read and a string comparison.
async def get_services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


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

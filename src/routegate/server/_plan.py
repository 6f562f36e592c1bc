"""``GET /plan``: the desk's plan as a diagram's plain data, for a client that draws each turn's path on it.

The data is :meth:`routegate.plan.Plan.diagram`'s ``to_dict()`` (:mod:`routegate.diagram` reads it back, draws a
path and renders it). A turn's path is already in its ``final`` event: the trace entries whose ``node`` is
``"plan"`` name the steps it ran, in order. A desk without a plan (a scripted one) answers 404 ``no_plan``.
"""

from __future__ import annotations

from typing import Any

from routegate._extras import needs

with needs("server"):
    from fastapi import APIRouter, Depends
    from fastapi.responses import JSONResponse

from routegate.errors import ConfigurationError
from routegate.plan import Plan
from routegate.server._deps import ServicesDep, require_api_key
from routegate.server._errors import ApiError

router = APIRouter(dependencies=[Depends(require_api_key)])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the plan's diagram: `name`, `max_iterations`, `nodes`, `edges` (routegate.diagram)"},
    401: {"description": "API key missing or wrong (when the server has keys)"},
    404: {"description": "`no_plan`: this desk is not built on a plan"},
}


@router.get("/plan", responses=_RESPONSES, response_class=JSONResponse, summary="The desk's plan, as a diagram")
async def plan(services: ServicesDep) -> JSONResponse:
    try:
        found = getattr(services.desk, "plan", None)
    except ConfigurationError:  # a desk that has not started has no plan yet
        found = None
    if not isinstance(found, Plan):
        raise ApiError(404, "no_plan", "this desk is not built on a plan: there is no diagram to show")
    return JSONResponse(found.diagram().to_dict())

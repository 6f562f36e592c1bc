"""Error responses: one JSON shape for every 4xx/5xx, never a stack trace.

The shape follows OpenAI's so that OpenAI clients surface the message:
``{"error": {"type": ..., "code": ..., "message": ...}}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from routegate._extras import needs

with needs("server"):
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

from routegate.server._text import INVALID_TEXT

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    414: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    431: "invalid_request_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class ApiError(Exception):
    """An error the server reports to the client as ``status`` with a clear ``message``."""

    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    return {"error": {"type": _TYPES.get(status, "server_error"), "code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, code, message), status_code=status, headers=headers)


def _loc(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def describe_validation_errors(errors: Sequence[Any]) -> str:
    """``message: Input should be a valid string; session_id: String should match pattern ...``."""
    out: list[str] = []
    for err in errors[:5]:
        if err.get("type") == "json_invalid":
            detail = (err.get("ctx") or {}).get("error", "")
            out.append(f"the request body is not valid JSON ({detail})" if detail else "the request body is not JSON")
            continue
        if err.get("type") == "missing" and tuple(err.get("loc", ())) == ("body",):
            out.append("the request body is missing; send a JSON object")
            continue
        if err.get("type") == INVALID_TEXT:  # the same words on every endpoint, wherever the text was
            ctx = err.get("ctx") or {}
            out.append(f"{ctx.get('where') or _loc(err.get('loc', ()))}: {ctx.get('problem', 'invalid text')}")
            continue
        out.append(f"{_loc(err.get('loc', ()))}: {err.get('msg', 'invalid')}")
    if len(errors) > 5:
        out.append(f"and {len(errors) - 5} more")
    return "; ".join(out)


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


async def _on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, "invalid_request", describe_validation_errors(exc.errors()))


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif exc.status_code == 400 and message == "There was an error parsing the body":
        message = "the request body could not be parsed; send a UTF-8 JSON object"
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return error_response(exc.status_code, code, message, dict(exc.headers) if exc.headers else None)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)

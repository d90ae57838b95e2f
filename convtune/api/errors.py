"""Errors of the API: every error answer is JSON ``{"detail": "...", "field": "..." | null}``.

Bad input never becomes a 500: a malformed body or parameter is 422 naming the field, an invalid
problem is 422 naming ConvProblem's field, a missing or wrong key is 401, a key over its queue limit
429, a body over ``max_request_bytes`` 413 (refused by :class:`BodyLimitMiddleware` before it is read).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from convtune.errors import (
    ConvtuneError,
    InvalidConfig,
    InvalidInput,
    InvalidProblem,
    NotFound,
    StorageError,
    UnknownMachine,
)

log = logging.getLogger(__name__)


class ErrorOut(BaseModel):
    """Every error answer."""

    detail: str
    field: str | None = None

    model_config = {"json_schema_extra": {"examples": [{"detail": "stride_h=0 is out of range: must be an integer "
                                                                  ">= 1", "field": "stride_h"}]}}


class ApiError(Exception):
    """An HTTP error with a JSON body; ``headers`` are added to the answer."""

    status_code = 400

    def __init__(self, detail: str, field: str | None = None, *, status_code: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.headers = headers
        if status_code is not None:
            self.status_code = status_code


class Unauthorized(ApiError):
    """No key, or a key that is unknown or revoked (401)."""

    status_code = 401

    def __init__(self, detail: str) -> None:
        super().__init__(detail, "X-API-Key", headers={"WWW-Authenticate": 'Bearer realm="convtune"'})


class QueueLimit(ApiError):
    """The key already has ``max_queued_jobs`` queued or running jobs (429)."""

    status_code = 429


class Conflict(ApiError):
    """The request contradicts the state of a resource (409), e.g. cancelling a finished job."""

    status_code = 409


class ResourceNotFound(ApiError):
    status_code = 404


#: Seconds a shed client is told to wait (``Retry-After``).
RETRY_AFTER_S = 1


class ServiceBusy(ApiError):
    """Too many requests at the database (503 with ``Retry-After``): shed at once instead of queued."""

    status_code = 503

    def __init__(self, detail: str) -> None:
        super().__init__(detail, None, headers={"Retry-After": str(RETRY_AFTER_S)})


#: Documented error answers, for the OpenAPI ``responses`` of each route.
def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {400: "The body cannot be read (e.g. not UTF-8)", 401: "Missing, unknown or revoked API key",
                    404: "Not found",
                    409: "Conflicts with the resource's state", 413: "Request body too large",
                    422: "Invalid input; `field` names it", 429: "The key's queue limit is reached",
                    503: "Database unavailable, or the server is busy (shed: retry after `Retry-After` seconds)"}
    return {code: {"model": ErrorOut, "description": descriptions[code]} for code in codes}


def _clean(text: str) -> str:
    """Text that encodes as UTF-8: user input (a lone surrogate in a field name) must not break the answer."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _json(status: int, detail: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": _clean(" ".join(detail.split())), "field": None if field is None else _clean(field)},
                        status_code=status, headers=headers)


def _loc_field(loc: Sequence[Any]) -> str:
    """``("body", "problem", "N")`` -> ``"problem.N"``; ``("query", "wait")`` -> ``"wait"``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie") and len(parts) > 1:
        parts = parts[1:]
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "body"


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first: dict[str, Any] = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    if first.get("type") == "json_invalid":  # loc is ("body", position)
        position = list(first.get("loc", ()))[1:]
        error = (first.get("ctx") or {}).get("error", "")
        return _json(422, f"body: not valid JSON{f' at position {position[0]}' if position else ''}: {error}", "body")
    field = _loc_field(first.get("loc", ()))
    message = str(first.get("msg", "invalid"))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return _json(422, f"{field}: {message}{more}", field)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return _json(exc.status_code, exc.detail, exc.field, exc.headers)


async def _convtune_error(request: Request, exc: ConvtuneError) -> JSONResponse:
    if isinstance(exc, InvalidProblem | InvalidConfig | InvalidInput):
        return _json(422, f"{exc.field}: {exc.detail}", exc.field)
    if isinstance(exc, UnknownMachine):
        return _json(422, str(exc), "device")
    if isinstance(exc, NotFound):
        return _json(404, str(exc))
    if isinstance(exc, StorageError):
        log.error("storage error: %s", exc)
        return _json(503, "database unavailable or failing; try again later")
    return _json(400, str(exc))


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request, headers.get("Allow", ""))
    return _json(exc.status_code, detail, "body" if exc.status_code == 413 else None, headers or None)


def _allowed_methods(request: Request, allow: str) -> str:
    """Every method served at this path. Starlette's 405 names only the methods of the first route that
    matched the path; GET and POST /v1/jobs are two routes. The OpenAPI paths hold them all."""
    methods = {m.strip().upper() for m in allow.split(",") if m.strip()}
    for path, operations in request.app.openapi().get("paths", {}).items():
        if compile_path(path)[0].match(request.url.path):
            methods |= {m.upper() for m in operations if m.lower() in _HTTP_METHODS}
    if "GET" in methods:
        methods.add("HEAD")
    return ", ".join(sorted(methods))


_HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(500, "internal error; the server log has the details")


def install_error_handlers(app: FastAPI) -> None:
    """Register the JSON error handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(ConvtuneError, _convtune_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes`` with 413: by ``Content-Length`` before reading, and while
    streaming a body sent without one (chunked), so an endless body is cut off too."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                too_large = int(length) > self.max_bytes
            except ValueError:
                await _send_json(send, 400, "Content-Length is not an integer", "Content-Length")
                return
            if too_large:
                await _send_json(send, 413, f"request body of {int(length)} bytes exceeds the limit of "
                                            f"{self.max_bytes} bytes", "body")
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # an HTTPException passes FastAPI's body reading unchanged and becomes our JSON 413
                    raise StarletteHTTPException(413, f"request body exceeds the limit of {self.max_bytes} bytes")
            return message

        await self.app(scope, limited_receive, send)


async def _send_json(send: Send, status: int, detail: str, field: str | None) -> None:
    body = json.dumps({"detail": detail, "field": field}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})

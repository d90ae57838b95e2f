"""Typed dependencies of the routes: settings, the database session, the API key, the clock.

``SettingsDep``, ``SessionDep``, ``WriteKeyDep``, ``ReadKeyDep`` and ``ClockDep`` are ``Annotated`` aliases,
so a route says what it needs in its signature::

    @router.get("/v1/jobs/{job_id}")
    def get_job(job_id: int, session: SessionDep, _: ReadKeyDep) -> JobOut: ...

Tests replace the clock with ``app.dependency_overrides[get_clock] = lambda: lambda: fixed_time``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from convtune.api.errors import Unauthorized
from convtune.api.settings import Settings
from convtune.storage import repository as repo
from convtune.storage.migrate import upgrade
from convtune.storage.session import make_engine, session_scope

API_KEY_HEADER = "X-API-Key"
_engine_lock = threading.Lock()


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read from the environment once (``create_app()`` without arguments uses them)."""
    return Settings()


# Dependencies without I/O are ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, one
# thread hand-off per dependency per request, which is most of a stored-answer request's overhead.
async def app_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(app_settings)]


def open_database(app: FastAPI) -> Engine:
    """The app's engine, created (and the schema brought to head) on first use; the lifespan calls this
    at start-up, so requests normally find it ready."""
    engine: Engine | None = getattr(app.state, "engine", None)
    if engine is not None:
        return engine
    with _engine_lock:
        engine = getattr(app.state, "engine", None)
        if engine is None:
            settings: Settings = app.state.settings
            engine = make_engine(settings.database_url)
            upgrade(engine)
            app.state.engine = engine
    return engine


async def get_engine(request: Request) -> Engine:
    """The app's engine (opened by the lifespan; opened here on first use where no lifespan ran)."""
    engine: Engine | None = getattr(request.app.state, "engine", None)
    return engine if engine is not None else await run_in_threadpool(open_database, request.app)


EngineDep = Annotated[Engine, Depends(get_engine)]


def get_session(engine: EngineDep) -> Iterator[Session]:
    """One transaction per request: committed when the route returns (before the answer is sent), rolled
    back when it raises."""
    with session_scope(engine) as session:
        yield session


# scope="function": the commit happens before the response is sent, so a client that got its answer sees
# its writes in the next request (and a failing commit is an error answer, not a lost write).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


async def get_clock() -> Callable[[], datetime]:
    """The time source (timezone-aware UTC); overridden in tests to inject time."""
    return lambda: datetime.now(UTC)


ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]

_api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                               description="API key (`convtune keys create NAME`); needed by every POST and DELETE")
_bearer = HTTPBearer(auto_error=False, description="The API key as a bearer token (alternative to X-API-Key)")


def _secret(header: str | None, bearer: HTTPAuthorizationCredentials | None) -> str | None:
    if header:
        return header.strip()
    if bearer is not None and bearer.credentials:
        return bearer.credentials.strip()
    return None


def _lookup(session: Session, secret: str | None) -> Any:
    if not secret:
        raise Unauthorized(f"an API key is required: send it as '{API_KEY_HEADER}: <key>' or "
                           "'Authorization: Bearer <key>'")
    key = repo.find_api_key(session, secret)
    if key is None:
        raise Unauthorized("the API key is unknown or revoked")
    return key


def require_key(session: SessionDep, header: Annotated[str | None, Security(_api_key_header)] = None,
                bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None) -> Any:
    """The caller's active API key (an ``ApiKey`` row); 401 without one. Every POST and DELETE needs it."""
    return _lookup(session, _secret(header, bearer))


def read_key(request: Request, session: SessionDep, settings: SettingsDep) -> Any:
    """For GET routes: ``None`` while reads are open (the default); with ``require_key_for_reads`` the
    caller's key, 401 without one. Reads the headers itself so the OpenAPI schema of an open server does
    not claim that reads need a key."""
    if not settings.require_key_for_reads:
        return None
    header = request.headers.get(API_KEY_HEADER)
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    bearer = HTTPAuthorizationCredentials(scheme=scheme, credentials=token) if scheme.lower() == "bearer" else None
    return _lookup(session, _secret(header, bearer))


WriteKeyDep = Annotated[Any, Depends(require_key)]
ReadKeyDep = Annotated[Any, Depends(read_key)]

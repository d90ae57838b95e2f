"""Typed dependencies of the routes: settings, the database gate, the caller's credentials, the clock.

Every route is ``async``; its database work is one function of a session, run by :class:`Database` in a
worker thread inside one transaction::

    @router.get("/v1/jobs/{job_id}")
    async def get_job(job_id: JobId, db: DbDep, caller: WriterDep) -> JobOut:
        return await db.run(lambda session: tuning.get_job(session, caller.key(session), job_id))

Why this shape (it is what keeps the service alive under load): a thread that holds a connection never
waits for another thread, and at most ``max_in_flight`` requests hold one at a time (the thread limiter and
the connection pool are at least that large), so neither threads nor connections can run out while their
holders wait for the other — the deadlock of a shared 40-thread pool in front of a 15-connection pool.
Requests beyond ``max_in_flight`` wait up to ``queue_timeout_s`` (at most ``max_waiting`` of them), the rest
are answered 503 with ``Retry-After`` at once. Routes without database work (``/healthz``) never wait.

Tests replace the clock with ``app.dependency_overrides[get_clock] = lambda: lambda: fixed_time``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import Depends, FastAPI, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from convtune.api.errors import ServiceBusy, Unauthorized
from convtune.api.settings import Settings
from convtune.errors import StorageError
from convtune.storage import queries as repo
from convtune.storage.migrate import upgrade
from convtune.storage.session import make_engine, session_scope

API_KEY_HEADER = "X-API-Key"
#: Connections beyond ``max_in_flight``: the in-process worker's heartbeat, trial and claim sessions.
RESERVED_CONNECTIONS = 6
#: Threads for CPU work without the database (provisional predictions, each bounded by predict_budget_s).
CPU_THREADS = 2
_engine_lock = threading.Lock()
T = TypeVar("T")


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read from the environment once (``create_app()`` without arguments uses them)."""
    return Settings()


async def app_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(app_settings)]


# ---- the database gate -----------------------------------------------------------------------------------
def engine_options(settings: Settings) -> dict[str, Any]:
    """Pool options: at least one connection per admitted request plus the worker's, no overflow, and a
    checkout that fails fast (:data:`RESERVED_CONNECTIONS`)."""
    if settings.database_url.startswith("sqlite") and ":memory:" in settings.database_url:
        return {}  # one shared in-memory connection (tests)
    return {"pool_size": settings.max_in_flight + RESERVED_CONNECTIONS, "max_overflow": 0,
            "pool_timeout": settings.db_pool_timeout_s}


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
            engine = make_engine(settings.database_url, **engine_options(settings))
            upgrade(engine)
            app.state.engine = engine
    return engine


class KeyCache:
    """Active API keys by secret for ``ttl_s`` seconds (0: off): a request whose answer is cached too then
    needs no database at all. A key revoked (``convtune keys revoke``) stops working within ``ttl_s``;
    unknown or revoked secrets are never cached, so a new key works at once."""

    def __init__(self, ttl_s: float, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._keys: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, secret: str) -> Any:
        if self.ttl_s <= 0:
            return None
        with self._lock:
            entry = self._keys.get(secret)
            if entry is None:
                return None
            if entry[0] < self.clock():
                del self._keys[secret]
                return None
            return entry[1]

    def put(self, secret: str, key: Any) -> None:
        if self.ttl_s <= 0 or key is None:
            return
        with self._lock:
            if len(self._keys) >= self.max_entries:
                self._keys.clear()  # a flood of distinct secrets: start over rather than grow
            self._keys[secret] = (self.clock() + self.ttl_s, key)


class Database:
    """Runs a request's database work in a worker thread, one transaction, behind the admission gate.

    Args:
        app: the app (its engine is opened on first use).
        max_in_flight: requests working on the database at once.
        max_waiting: requests waiting for a turn; one more is answered 503 at once.
        queue_timeout_s: how long a request waits for its turn before it is answered 503.
    """

    def __init__(self, app: FastAPI, *, max_in_flight: int, max_waiting: int, queue_timeout_s: float,
                 key_cache_s: float = 0.0) -> None:
        self.app = app
        self.keys = KeyCache(key_cache_s)
        self.max_in_flight = max_in_flight
        self.max_waiting = max_waiting
        self.queue_timeout_s = queue_timeout_s
        self._slots: asyncio.Semaphore | None = None
        self._limiter: CapacityLimiter | None = None
        self._cpu: CapacityLimiter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.waiting = 0
        self.in_flight = 0
        self.shed = 0  # requests answered 503 by the gate since start

    def _gate(self) -> tuple[asyncio.Semaphore, CapacityLimiter]:
        # made inside the event loop that serves the app (a test client may start a new loop per session)
        loop = asyncio.get_running_loop()
        if self._slots is None or self._limiter is None or self._loop is not loop:
            self._slots = asyncio.Semaphore(self.max_in_flight)
            self._limiter = CapacityLimiter(self.max_in_flight)
            self._cpu = CapacityLimiter(CPU_THREADS)
            self._loop = loop
        return self._slots, self._limiter

    async def key(self, caller: Caller) -> Any:
        """The caller's key: from :class:`KeyCache` when it was checked within ``key_cache_s`` (no database),
        else read on a bare connection; 401 without one."""
        if caller.secret:
            key = self.keys.get(caller.secret)
            if key is not None:
                return key
        key = await self.read(caller.key)
        self.keys.put(caller.secret or "", key)
        return key

    async def read(self, work: Callable[[Connection], T]) -> T:
        """``work(connection)`` in a worker thread on a bare connection (no ORM session, rolled back when
        done): for the one indexed read of a cached answer's key check, a third of a session's cost."""
        return await self.run(work, bare=True)

    async def run_cpu(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` in one of :data:`CPU_THREADS` worker threads, without a database connection: CPU
        work (the model's ranking), so that a burst of it queues here instead of taking every core."""
        self._gate()
        assert self._cpu is not None
        return await anyio.to_thread.run_sync(work, *args, limiter=self._cpu)

    def busy(self, why: str) -> ServiceBusy:
        self.shed += 1
        return ServiceBusy(f"the server is busy ({self.in_flight} requests at the database, {self.waiting} "
                           f"waiting: {why}); retry in a second")

    async def run(self, work: Callable[[Any], T], *, bare: bool = False) -> T:
        """``work(session)`` in a worker thread, committed when it returns (rolled back when it raises);
        with ``bare``, ``work(connection)`` on a connection that is rolled back (reads only).

        Raises:
            ServiceBusy: no turn within ``queue_timeout_s``, or ``max_waiting`` requests wait already (503).
        """
        slots, limiter = self._gate()
        if slots.locked():
            if self.waiting >= self.max_waiting:
                raise self.busy(f"more than {self.max_waiting} waiting")
            self.waiting += 1
            try:
                await asyncio.wait_for(slots.acquire(), self.queue_timeout_s)
            except TimeoutError:
                raise self.busy(f"no turn within {self.queue_timeout_s:g} s") from None
            finally:
                self.waiting -= 1
        else:
            await slots.acquire()
        self.in_flight += 1
        try:
            engine = open_database(self.app) if self.app.state.engine is None else self.app.state.engine
            return await anyio.to_thread.run_sync(_read if bare else _transaction, engine, work, limiter=limiter)
        finally:
            self.in_flight -= 1
            slots.release()


def _transaction(engine: Engine, work: Callable[[Session], T]) -> T:
    with session_scope(engine) as session:
        return work(session)


def _read(engine: Engine, work: Callable[[Connection], T]) -> T:
    try:
        with engine.connect() as connection:
            return work(connection)
    except SQLAlchemyError as exc:  # as session_scope does: the error handlers answer 503
        raise StorageError(f"database error: {exc}") from exc


async def get_database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


DbDep = Annotated[Database, Depends(get_database)]


async def get_clock() -> Callable[[], datetime]:
    """The time source (timezone-aware UTC); overridden in tests to inject time."""
    return lambda: datetime.now(UTC)


ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]


# ---- the caller ------------------------------------------------------------------------------------------
_api_key_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False,
                               description="API key (`convtune keys create NAME`); needed by every POST and DELETE "
                                           "and by the job and batch routes")
_bearer = HTTPBearer(auto_error=False, description="The API key as a bearer token (alternative to X-API-Key)")


def _secret(header: str | None, bearer: HTTPAuthorizationCredentials | None) -> str | None:
    if header:
        return header.strip()
    if bearer is not None and bearer.credentials:
        return bearer.credentials.strip()
    return None


@dataclass(frozen=True, slots=True)
class Caller:
    """The credentials a request carries; looked up in the request's own transaction (no extra hop)."""

    secret: str | None
    required: bool

    def key(self, session: Session | Connection) -> Any:
        """The caller's active key (a row of id, name, prefix, max_queued_jobs, is_admin); 401 without one."""
        key = repo.find_api_key(session, self.secret) if self.secret else None
        if key is None:
            raise Unauthorized("the API key is unknown or revoked" if self.secret else _missing())
        return key

    def reader(self, session: Session | Connection) -> Any:
        """For reads: the caller's key where reads need one (or one was sent); ``None`` on an open server
        without a key."""
        if self.secret or self.required:
            return self.key(session)
        return None


def _missing() -> str:
    return (f"an API key is required: send it as '{API_KEY_HEADER}: <key>' or 'Authorization: Bearer <key>'")


async def writer(header: Annotated[str | None, Security(_api_key_header)] = None,
           bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None) -> Caller:
    """Writes (POST, DELETE) and the job and batch routes: a key is required; a request without one is
    answered 401 before it reaches the database."""
    secret = _secret(header, bearer)
    if not secret:
        raise Unauthorized(_missing())
    return Caller(secret, True)


async def reader(request: Request, settings: SettingsDep) -> Caller:
    """For GET routes: open unless ``require_key_for_reads``. Reads the headers itself so the OpenAPI schema
    of an open server does not claim that reads need a key."""
    auth = request.headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    bearer = HTTPAuthorizationCredentials(scheme=scheme, credentials=token) if scheme.lower() == "bearer" else None
    secret = _secret(request.headers.get(API_KEY_HEADER), bearer)
    if settings.require_key_for_reads and not secret:
        raise Unauthorized(_missing())
    return Caller(secret, settings.require_key_for_reads)


WriterDep = Annotated[Caller, Depends(writer)]
ReaderDep = Annotated[Caller, Depends(reader)]

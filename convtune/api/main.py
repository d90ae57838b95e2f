"""The app factory: ``create_app(settings)`` -> a FastAPI app with every router, error handler and limit.

The lifespan opens the database (engine + ``upgrade`` to head) and, with ``worker_in_process``, runs one
worker thread that claims and tunes the queued jobs; both stop with the app. Example::

    app = create_app(Settings(database_url="sqlite:////tmp/convtune.db", backend="model"))
    uvicorn.run(app, host="127.0.0.1", port=8000)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import convtune
from convtune.api.answers import AnswerCache
from convtune.api.deps import Database, get_settings, open_database
from convtune.api.docs import install_docs
from convtune.api.errors import BodyLimitMiddleware, install_error_handlers
from convtune.api.metrics import LatencyMiddleware, ServiceMetrics
from convtune.api.pages import router as pages_router
from convtune.api.routes import batches, configs, health, jobs, problems, tune
from convtune.api.settings import Settings
from convtune.api.shedding import DoorCount, LoadShedding
from convtune.api.shutdown import shutdown_event, signal_shutdown
from convtune.storage.migrate import head_revision

log = logging.getLogger(__name__)

DESCRIPTION = """Auto-tuning of GPU convolution kernels driven by I/O lower bounds.

POST a convolution to `/v1/tune` for its best configuration: measured (200), or predicted by the analytic
model while a tuning job measures (202). Browse problems, trials and jobs under `/v1`; queue batches
(e.g. every layer of a network, overnight) at `/v1/batches`.

Writes (POST, DELETE) need an API key (`convtune keys create NAME`) in `X-API-Key` or as a bearer token.
Errors are JSON `{"detail": ..., "field": ...}`.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app for ``settings`` (default: :func:`~convtune.api.deps.get_settings`, the environment)."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = open_database(app)
        app.state.revision = head_revision()
        shutdown_event(app)  # made in the serving loop, so a signal handler can set it
        worker = start_in_process_worker(app) if settings.worker_in_process else None
        app.state.worker = worker
        try:
            yield
        finally:
            signal_shutdown(app)
            if worker is not None:
                worker.stop()
                worker.join()
            engine.dispose()
            app.state.engine = None

    # docs_url/redoc_url None: FastAPI's pages load their scripts from a CDN; install_docs serves packaged ones
    app = FastAPI(title="convtune", version=convtune.__version__, description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.engine = None
    app.state.revision = None
    app.state.worker = None
    app.state.answers = AnswerCache(settings.answer_cache_s)
    app.state.database = Database(app, max_in_flight=settings.max_in_flight, max_waiting=settings.max_waiting,
                                  queue_timeout_s=settings.queue_timeout_s, key_cache_s=settings.key_cache_s)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.state.metrics = ServiceMetrics()
    # inside the door: a request shed there never reached a route (counted in convtune_requests_shed_at_door)
    app.add_middleware(LatencyMiddleware, metrics=app.state.metrics)
    app.state.door = DoorCount()
    app.add_middleware(LoadShedding, max_concurrent=settings.max_concurrent, count=app.state.door)  # outermost
    for module in (tune, configs, problems, jobs, batches, health):
        app.include_router(module.router)
    app.include_router(pages_router)
    install_docs(app)
    return app


class InProcessWorker:
    """A worker thread inside the API process (``worker_in_process``); see :mod:`convtune.service.runner`.

    :meth:`stop` only asks (it is called from a signal handler too); :meth:`join` waits for the trial in
    flight to finish and the job to be released.
    """

    def __init__(self, app: FastAPI) -> None:
        from convtune.service.runner import Worker  # the worker imports the tuner (Optuna) and perhaps CuPy

        settings: Settings = app.state.settings
        self.worker = Worker.for_settings(settings, engine=app.state.engine)
        self.thread = self.worker.start_thread()

    def stop(self) -> None:
        self.worker.stop()

    def join(self, timeout_s: float = 60.0) -> None:
        self.thread.join(timeout=timeout_s)
        if self.thread.is_alive():
            log.warning("the in-process worker did not stop within %g s", timeout_s)


def start_in_process_worker(app: FastAPI) -> InProcessWorker:
    return InProcessWorker(app)

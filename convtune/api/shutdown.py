"""The app's shutdown signal: set by ``convtune serve`` on SIGTERM/SIGINT (and by the lifespan's end), so
that requests waiting on a job (``POST /v1/tune?wait=``) answer at once with their job instead of holding
the server's shutdown for their whole wait."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI


def shutdown_event(app: FastAPI) -> asyncio.Event:
    """The app's shutdown event, made on first use in the serving event loop."""
    event: asyncio.Event | None = getattr(app.state, "shutdown", None)
    loop = asyncio.get_running_loop()
    if event is None or getattr(app.state, "shutdown_loop", None) is not loop:
        event = asyncio.Event()
        app.state.shutdown = event
        app.state.shutdown_loop = loop
    return event


def signal_shutdown(app: FastAPI) -> None:
    """Set the shutdown event from any thread (a signal handler, uvicorn's exit hook)."""
    event: asyncio.Event | None = getattr(app.state, "shutdown", None)
    loop: asyncio.AbstractEventLoop | None = getattr(app.state, "shutdown_loop", None)
    if event is None or loop is None or loop.is_closed():
        return
    loop.call_soon_threadsafe(event.set)  # safe from a signal handler and from any thread

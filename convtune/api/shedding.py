"""Load shedding at the door: more than ``max_concurrent`` requests inside the app are answered 503 at once.

Above its capacity a server that admits everything only grows a queue: every answer gets later, clients
time out, and the backlog outlives the load. Counting the requests inside the app (parsed, not yet
answered) and refusing the excess with a ready-made 503 + ``Retry-After`` — before routing, validation or
the database — keeps the admitted requests fast and the server able to answer ``/healthz`` (never shed)
through any overload; it recovers as soon as the load falls below capacity.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from convtune.api.errors import RETRY_AFTER_S

#: Paths never shed: the liveness probe must answer through any overload.
NEVER_SHED = frozenset({"/healthz"})


class DoorCount:
    """What the door saw: requests inside now, and refused since start (``/metrics`` reads them)."""

    def __init__(self) -> None:
        self.inside = 0
        self.shed = 0


class LoadShedding:
    """ASGI middleware: at most ``max_concurrent`` HTTP requests at a time, counted in ``count``."""

    def __init__(self, app: ASGIApp, max_concurrent: int, count: DoorCount) -> None:
        self.app = app
        self.max_concurrent = max_concurrent
        self.count = count
        detail = (f"the server is at its limit of {max_concurrent} concurrent requests; retry in "
                  f"{RETRY_AFTER_S} s")
        self._body = json.dumps({"detail": detail, "field": None}).encode()
        self._start = {"type": "http.response.start", "status": 503,
                       "headers": [(b"content-type", b"application/json"),
                                   (b"content-length", str(len(self._body)).encode()),
                                   (b"retry-after", str(RETRY_AFTER_S).encode())]}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in NEVER_SHED:
            await self.app(scope, receive, send)
            return
        count = self.count
        if count.inside >= self.max_concurrent:
            count.shed += 1
            await send(self._start)
            await send({"type": "http.response.body", "body": self._body})
            return
        count.inside += 1
        try:
            await self.app(scope, receive, send)
        finally:
            count.inside -= 1

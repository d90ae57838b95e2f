"""Stored answers kept in the process for a second: the serialized JSON of a 200 answer per request key.

A tuned shape is asked for again and again (every process start of every client), and its answer changes
only when a tuning job finishes with a better configuration. Keeping the serialized answer for
``answer_cache_s`` (default 1 s) turns a repeated ``POST /v1/tune`` into one indexed read (the caller's
key) and a repeated ``GET /v1/configs/best`` into none; a new best is served at most that long after it
was stored. Only 200 answers are kept: a 202 (nothing measured yet) is always asked of the database, so a
finished job's result shows at once. Bounded (least recently used entries go first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from fastapi.responses import Response

MEDIA_TYPE = "application/json"


class AnswerCache:
    """``key -> (expiry, JSON bytes)``, at most ``max_entries``, each for ``ttl_s`` seconds (0: off)."""

    def __init__(self, ttl_s: float, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        if self.ttl_s <= 0:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] < self.clock():
                if entry is not None:
                    del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Hashable, body: bytes) -> None:
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._entries[key] = (self.clock() + self.ttl_s, body)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def json_response(body: bytes, status_code: int = 200) -> Response:
    """An answer already serialized (FastAPI does not validate or encode it again)."""
    return Response(content=body, status_code=status_code, media_type=MEDIA_TYPE)

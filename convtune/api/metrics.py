"""Prometheus metrics of the service through ``prometheus-client``, one :class:`CollectorRegistry` per app.

* ``convtune_http_request_duration_seconds`` — a histogram of request latency (seconds, from the first
  byte of the request reaching the app to the last byte of the answer leaving it) per ``method``,
  ``route`` (the route's template, e.g. ``/v1/problems/{problem_id}``, never the raw path: a scan of
  unknown URLs must not grow the label set; unmatched paths are ``<unmatched>``) and ``status``.
  Timed by :class:`LatencyMiddleware`, a pure ASGI middleware (no ``BaseHTTPMiddleware``: that one costs a
  task and a memory stream per request on the hot path), into :class:`LatencyHistogram` (lock-free counts).
* ``process_*`` and ``python_info`` — prometheus-client's own process and platform collectors (CPU seconds,
  resident memory, open file descriptors, start time; the interpreter's version).
* the queue and gate gauges (``convtune_queue_depth``, ``convtune_jobs{status}``, ...) — figures read from
  the database at scrape time (:func:`queue_families`), so they are rendered per scrape, not kept.

The registry is per app (tests build many apps in one process: a global registry would refuse a second
histogram of the same name, and one app's counts would leak into another's).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from convtune.vocabulary import JOB_STATUSES as JOB_STATUSES

#: The text exposition format that :func:`generate_latest` writes (0.0.4; scrapers of every age read it).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: the window (seconds) of queue_stats' measurement count
RATE_WINDOW_S = 60.0
UNMATCHED = "<unmatched>"
#: latency buckets (seconds): a cached answer takes ~0.1 ms, a cold report or a batch insert ~100 ms.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LatencyHistogram(Collector):
    """The request latency histogram, counted in plain lists and turned into a metric family at scrape time.

    prometheus-client's ``Histogram.observe`` takes a lock per counter (~5 µs a request); these counts are only
    ever touched from the event loop's thread (by :class:`LatencyMiddleware`, and read by the ``/metrics``
    route, an ``async`` endpoint on the same loop), so an observation is a bisect and two additions (~1.5 µs on
    the 2-core CI machine).
    """

    name = "convtune_http_request_duration_seconds"
    documentation = "Time from a request reaching the app to its answer's last byte (seconds)."
    labels = ("method", "route", "status")

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.bounds = tuple(sorted(buckets))
        self._le = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        # (method, route, status) -> [count per bucket (the last: above every bound)..., sum of seconds]
        self._series: dict[tuple[str, str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0.0] * (len(self.bounds) + 2)
        series[bisect_left(self.bounds, seconds)] += 1  # the first bucket whose bound is >= seconds ("le")
        series[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for key, series in sorted(self._series.items()):
            cumulative = list(accumulate(series[:-1]))
            family.add_metric(list(key), list(zip(self._le, cumulative, strict=True)), series[-1])
        yield family


class ServiceMetrics:
    """An app's registry: the latency histogram and the process and platform collectors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = LatencyHistogram()
        self.registry.register(self.latency)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.observe(method, route, status, seconds)

    def exposition(self, extra: Iterable[Metric] = ()) -> bytes:
        """The text exposition of the registry, preceded by the ``extra`` families (the scrape's gauges)."""
        scrape = CollectorRegistry(auto_describe=False)
        scrape.register(_Families(list(extra)))
        scrape.register(_Forward(self.registry))
        return generate_latest(scrape)


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


class _Forward(Collector):
    """The app registry's families inside a scrape's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


def route_template(scope: Scope) -> str:
    """The matched route's path template (set by Starlette's router in ``scope["route"]``), else ``<unmatched>``."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


class LatencyMiddleware:
    """ASGI middleware: times each HTTP request into ``metrics`` (:meth:`ServiceMetrics.observe`).

    The status is taken from ``http.response.start``; a request that raised before answering counts as 500
    (what the error middleware outside answers). The route is read after the app ran, when the router has
    put the matched route into the scope.
    """

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.observe = metrics.latency.observe  # bound once: one call less per request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.observe(scope["method"], route_template(scope), status, time.perf_counter() - start)


def queue_families(stats: Mapping[str, Any], gate: Mapping[str, int] | None = None) -> list[Metric]:
    """The gauges of :func:`~convtune.storage.queries.results.queue_stats`' figures and of the database gate and
    the door (``gate``: in_flight, waiting, shed, inside, door_shed)."""
    by_status = dict.fromkeys(JOB_STATUSES, 0) | {str(k): int(v) for k, v in stats["jobs_by_status"].items()}
    recent = int(stats["measurements_last_60s"])
    out: list[Metric] = [_gauge("convtune_queue_depth", "Jobs waiting to be claimed (queued).", stats["queue_depth"]),
           _gauge("convtune_queue_eligible",
                  "Queued jobs a worker could start now (past not_before, inside their window).",
                  stats.get("eligible_now", 0))]
    jobs = GaugeMetricFamily("convtune_jobs", "Jobs by status.", labels=["status"])
    for status, n in sorted(by_status.items()):
        jobs.add_metric([status], n)
    out += [jobs,
            _gauge("convtune_active_workers", "Workers with a live heartbeat.", stats.get("active_workers", 0)),
            _gauge("convtune_trials_per_second", "Measurements stored per second over the last minute.",
                   recent / RATE_WINDOW_S),
            _gauge("convtune_measurements_last_minute", "Measurements stored in the last 60 seconds.", recent)]
    if gate is not None:
        out += [
            _gauge("convtune_requests_in_flight", "Requests working on the database now.", gate["in_flight"]),
            _gauge("convtune_requests_waiting", "Requests waiting for a turn at the database.", gate["waiting"]),
            _gauge("convtune_requests_shed", "Requests answered 503 by the database gate since start.", gate["shed"]),
            _gauge("convtune_requests_inside", "Requests inside the server now.", gate.get("inside", 0)),
            _gauge("convtune_requests_shed_at_door",
                   "Requests answered 503 at the door (max_concurrent) since start.", gate.get("door_shed", 0)),
        ]
    return out


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=float(value))

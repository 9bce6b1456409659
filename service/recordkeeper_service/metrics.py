"""Prometheus metrics of the service, correct with several worker processes.

=============================================  =========  ==================================
metric                                         type       labels
=============================================  =========  ==================================
``recordkeeper_http_requests_total``           counter    ``route`` (template), ``method``,
                                                          ``status``
``recordkeeper_http_request_duration_seconds`` histogram  ``route``, ``method``
``recordkeeper_versions_committed_total``      counter
``recordkeeper_shards_registered_total``       counter
``recordkeeper_shard_bytes_registered_total``  counter
``recordkeeper_verification_failures_total``   counter    ``reason``, ``mode`` (fast/deep)
``recordkeeper_db_pool_connections``           gauge      ``state`` (``in_use``, ``open``)
``recordkeeper_db_pool_limit``                 gauge      (pool size + overflow allowed)
``recordkeeper_http_requests_in_flight``       gauge      (requests being answered now)
``recordkeeper_cache_lookups_total``           counter    ``cache`` (``versions``,
                                                          ``rendered_pages``), ``result``
                                                          (``hit``, ``miss``)
``process_cpu_seconds_total``,                 (stdlib    prometheus_client's
``process_resident_memory_bytes``, …           process)   ProcessCollector (Linux ``/proc``)
=============================================  =========  ==================================

A cache's hit ratio is ``rate(recordkeeper_cache_lookups_total{result="hit"}[5m]) /
rate(recordkeeper_cache_lookups_total[5m])`` per ``cache`` (docs/operations.md).  The
``process_*`` metrics are those of the process that answers the scrape; with several workers
each scrape may come from another worker (``process_*`` then describe that worker only: watch
the container's own CPU and memory for the total).

Label values are bounded: ``route`` is the route *template* (``/api/v1/versions/{ref}``), or
``unmatched`` for a path no route serves; ``method`` is one of the HTTP methods the service
knows or ``OTHER``; ``reason`` is one of :data:`recordkeeper.core.verification.REASONS`.

**Several processes.**  With ``PROMETHEUS_MULTIPROC_DIR`` set (``recordkeeper serve --workers
N`` sets it up), every worker writes its values to files in that directory and ``/metrics``
sums them over all workers, whichever worker answers the scrape: counters and histograms are
summed (a restarted worker's counts are kept), the pool gauges summed over the live workers.
Without it, values live in the process (one worker).
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
    values,
)
from sqlalchemy import event

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "METHODS",
    "MULTIPROCESS_ENV",
    "UNMATCHED_ROUTE",
    "ServiceMetrics",
]

#: The environment variable naming the directory shared by the worker processes.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: The text exposition format served at ``/metrics``.
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Request latency buckets in seconds: the resolve path answers in about a millisecond, shard
#: registration of 10,000 shards takes seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The ``route`` label of a request no route serves (404).
UNMATCHED_ROUTE = "unmatched"
#: ``method`` label values; any other method is counted as ``OTHER``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


class ServiceMetrics:
    """The service's metrics: one instance per app (``app.state.metrics``).

    ``multiprocess_dir`` (default: ``PROMETHEUS_MULTIPROC_DIR`` from the environment when the
    instance is made) switches to the shared-directory mode described in the module docstring.
    """

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        if multiprocess_dir is not None:
            os.environ[MULTIPROCESS_ENV] = multiprocess_dir
            if values.ValueClass is values.MutexValue:  # prometheus_client imported before
                values.ValueClass = values.MultiProcessValue()
        self.registry = CollectorRegistry()
        registry = self.registry
        #: the request counter's and histogram's children by (route, method, status): looked up
        #: once (``labels()`` validates and locks on every call)
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self.requests = Counter(
            "recordkeeper_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "recordkeeper_http_request_duration_seconds",
            "Time from the request's arrival to the end of its response, by route template.",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.versions_committed = Counter(
            "recordkeeper_versions_committed",
            "Versions committed (made visible); an idempotent repeat of a commit is not counted.",
            registry=registry,
        )
        self.shards_registered = Counter(
            "recordkeeper_shards_registered",
            "Shards newly registered on staged versions (identical re-registrations excluded).",
            registry=registry,
        )
        self.shard_bytes_registered = Counter(
            "recordkeeper_shard_bytes_registered",
            "Stored bytes of the shards newly registered.",
            registry=registry,
        )
        self.verification_failures = Counter(
            "recordkeeper_verification_failures",
            "Shard problems found by clients' verifications and reported to the service.",
            ["reason", "mode"],
            registry=registry,
        )
        self.pool_connections = Gauge(
            "recordkeeper_db_pool_connections",
            "Database connections of the service's pools, by state (summed over live workers).",
            ["state"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.pool_limit = Gauge(
            "recordkeeper_db_pool_limit",
            "Connections the pools may open (pool size + overflow, summed over live workers).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.in_flight = Gauge(
            "recordkeeper_http_requests_in_flight",
            "HTTP requests being answered now (summed over live workers).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.cache_lookups = Counter(
            "recordkeeper_cache_lookups",
            "Look-ups in the service's per-process caches, by cache and result (hit or miss).",
            ["cache", "result"],
            registry=registry,
        )
        if multiprocess_dir is None:
            ProcessCollector(registry=registry)

    @classmethod
    def from_environment(cls) -> ServiceMetrics:
        """Metrics in multiprocess mode if ``PROMETHEUS_MULTIPROC_DIR`` is set."""
        return cls(os.environ.get(MULTIPROCESS_ENV) or None)

    # ------------------------------------------------------------------ recording

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        label = method if method in METHODS else "OTHER"
        key = (route, label, status)  # bounded: templates, known methods, status codes
        children = self._request_children.get(key)
        if children is None:
            children = (
                self.requests.labels(route, label, str(status)),
                self.latency.labels(route, label),
            )
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def request_started(self) -> None:
        self.in_flight.inc()

    def request_ended(self) -> None:
        self.in_flight.dec()

    def watch_cache(self, name: str, cache: Any) -> None:
        """Count ``cache``'s look-ups (an object with an ``on_lookup`` hook) as ``name``."""
        hit = self.cache_lookups.labels(name, "hit")
        miss = self.cache_lookups.labels(name, "miss")
        cache.on_lookup = lambda found: (hit if found else miss).inc()

    def version_committed(self) -> None:
        self.versions_committed.inc()

    def shards_added(self, count: int, size: int) -> None:
        """``count`` shards of ``size`` stored bytes in all were registered."""
        if count:
            self.shards_registered.inc(count)
            self.shard_bytes_registered.inc(size)

    def verification_failed(self, reason: str, mode: str, count: int = 1) -> None:
        self.verification_failures.labels(reason, mode).inc(count)

    def watch_pool(self, engine: Any) -> None:
        """Follow the connection pool of a SQLAlchemy ``engine`` through its events: connections
        checked out (``in_use``) and connections open (``open``, in use or idle).

        A pool that never checks connections out and in (SQLite in memory: one static
        connection) reports nothing.
        """
        pool = engine.pool
        if not hasattr(pool, "size"):
            return
        in_use = self.pool_connections.labels("in_use")
        opened = self.pool_connections.labels("open")
        in_use.set(0)
        opened.set(0)
        overflow = getattr(pool, "_max_overflow", 0)
        self.pool_limit.set(pool.size() + max(0, overflow))
        event.listen(pool, "checkout", lambda *_: in_use.inc())
        event.listen(pool, "checkin", lambda *_: in_use.dec())
        event.listen(pool, "connect", lambda *_: opened.inc())
        event.listen(pool, "close", lambda *_: opened.dec())
        event.listen(pool, "close_detached", lambda *_: opened.dec())

    # ------------------------------------------------------------------ exposition

    def render(self) -> bytes:
        """The text exposition of every metric (of every worker in multiprocess mode)."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)
        ProcessCollector(registry=registry)  # the worker answering this scrape
        return generate_latest(registry)

    def process_exited(self) -> None:
        """Drop this process's live gauges (call when a worker shuts down)."""
        if self.multiprocess_dir is not None:
            multiprocess.mark_process_dead(os.getpid(), self.multiprocess_dir)

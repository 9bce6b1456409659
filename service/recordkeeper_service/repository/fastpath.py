"""The hot read path on PostgreSQL: resolving a reference without leaving the event loop.

Resolving ``coco@latest`` is the request the service answers most.  Through SQLAlchemy in a
worker thread it costs ~0.6 ms of CPU, most of it the thread hand-off and the ORM/Core layers.
Here the *same* query (built by :func:`~.resolve.resolution_statement` and compiled once for
PostgreSQL) runs on a small pool of psycopg ``AsyncConnection`` objects in autocommit mode; the
answer is assembled from the :class:`~.cache.VersionCache` of committed versions.

Anything else — a cache miss, a staged version, an error to explain — returns ``None`` and the
caller takes the ordinary (threaded, SQLAlchemy) path, which also fills the cache.  SQLite
databases never use this module.

**Coalescing.**  Under load many requests ask the same question (``coco@latest``) at once.
While a query for a reference is on the wire, later requests for it do not send another: they
queue one follow-up query, sent as soon as the running one has answered, and share its rows.
The follow-up is sent after every request sharing it arrived, so each still sees every commit
acknowledged before it was received (read-your-writes holds); it merely waits for at most one
earlier query.  At most one query per reference runs at a time in a worker process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy import select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL

from recordkeeper.core.errors import ServiceUnavailable
from recordkeeper.core.refs import Reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import refused_value
from recordkeeper_service.repository.resolve import (
    AnySelect,
    reference_shape,
    resolution_params,
    resolution_statement,
)

__all__ = ["HOT_COLUMNS", "AsyncPostgresReader", "hot_statement"]

log = logging.getLogger(__name__)

#: What the hot read needs of a version: identity, what a reference checks, what can change.
HOT_COLUMNS = (
    m.Version.id,
    m.Version.number,
    m.Version.name,
    m.Version.date,
    m.Version.desc,
    m.Version.state,
    m.Version.content_digest,
    m.Version.duplicate_of_id,
    m.Version.deprecated_at,
    m.Version.deprecated_reason,
    m.Version.gc_claimed_at,
    m.Version.collected_at,
    m.Version.collected_reason,
)

_HOT_STATEMENTS: dict[str, AnySelect] = {}


def hot_statement(ref: Reference) -> AnySelect:
    """The query of :data:`HOT_COLUMNS` resolving ``ref``, built once per reference shape
    (:func:`~.resolve.reference_shape`): what every hot read runs, each compiled for its
    driver."""
    key = reference_shape(ref)
    stmt = _HOT_STATEMENTS.get(key)
    if stmt is None:
        stmt = _HOT_STATEMENTS[key] = resolution_statement(select(*HOT_COLUMNS), ref)
    return stmt


_DIALECT = postgresql.psycopg.dialect()


_shape_key = reference_shape


class AsyncPostgresReader:
    """A small per-event-loop pool of autocommit async connections for the hot query."""

    def __init__(self, url: URL, size: int = 4) -> None:
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._size = size
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._compiled: dict[str, tuple[str, dict[str, Any]]] = {}
        #: Per (statement, parameters): the query on the wire, and the one queued after it.
        self._running: dict[Hashable, asyncio.Task[list[Any]]] = {}
        self._queued: dict[Hashable, asyncio.Task[list[Any]]] = {}

    def _statement(self, ref: Reference) -> tuple[str, dict[str, Any]]:
        key = _shape_key(ref)
        found = self._compiled.get(key)
        if found is None:
            compiled = hot_statement(ref).compile(dialect=_DIALECT)
            found = self._compiled[key] = (str(compiled), dict(compiled.params))
        return found

    def _bind_loop(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._slots is None:
            # A new event loop (a new server or test client): connections of the old one are
            # unusable here; forget them (they close when collected).
            self._loop = loop
            self._idle = []
            self._slots = asyncio.Semaphore(self._size)
            self._running = {}
            self._queued = {}
        return self._slots

    async def fetch_versions(self, ref: Reference) -> list[Any]:
        """Rows of :data:`HOT_COLUMNS` for ``ref`` (coalesced, see the module docstring)."""
        sql, constants = self._statement(ref)
        params = {**constants, **resolution_params(ref)}
        self._bind_loop()
        key = (sql, tuple(sorted(params.items())))
        task = self._queued.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._next_query(key, sql, params))
            task.add_done_callback(_retrieve)
            self._queued[key] = task
        # shielded: a request that goes away does not cancel the query others are waiting for
        return await asyncio.shield(task)

    async def _next_query(self, key: Hashable, sql: str, params: dict[str, Any]) -> list[Any]:
        running = self._running.get(key)
        if running is not None:  # answers requests that arrived before this one was queued
            await asyncio.wait([running])
        me = asyncio.current_task()
        if self._queued.get(key) is me:
            del self._queued[key]  # from now on, new requests queue the next query
        assert me is not None
        self._running[key] = me
        try:
            return await self._query(sql, params)
        finally:
            if self._running.get(key) is me:
                del self._running[key]

    async def _query(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """One query on a pooled connection; one retry on a dead pooled connection."""
        slots = self._bind_loop()
        async with slots:
            for attempt in (1, 2):
                conn = self._idle.pop() if self._idle else None
                try:
                    if conn is None:
                        conn = await psycopg.AsyncConnection.connect(
                            self._conninfo, autocommit=True, row_factory=namedtuple_row
                        )
                    cursor = await conn.execute(sql, params)
                    rows = await cursor.fetchall()
                except psycopg.OperationalError as exc:
                    if conn is not None:
                        await _close_quietly(conn)
                    if attempt == 1:
                        log.info("database connection lost; retrying the read once")
                        continue
                    raise ServiceUnavailable(
                        f"the registry database is unavailable: {str(exc).strip()[:300]}"
                    ) from exc
                except psycopg.DataError as exc:
                    if conn is not None:  # the connection is fine; the value was not
                        self._idle.append(conn)
                    raise refused_value(exc) from exc
                except BaseException:
                    if conn is not None:
                        await _close_quietly(conn)
                    raise
                self._idle.append(conn)
                return rows
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the idle connections (at application shutdown)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await _close_quietly(conn)


def _retrieve(task: asyncio.Task[list[Any]]) -> None:
    # Every waiter may be gone (client disconnects): mark the outcome seen so that asyncio does
    # not log "exception was never retrieved"; the waiters that remain get it raised.
    if not task.cancelled():
        task.exception()


async def _close_quietly(conn: psycopg.AsyncConnection[Any]) -> None:
    try:
        await conn.close()
    except Exception:  # closing a broken connection may fail; nothing to do about it
        log.debug("closing a database connection failed", exc_info=True)

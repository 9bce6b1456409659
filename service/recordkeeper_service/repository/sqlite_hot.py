"""The hot read path on SQLite: the resolve query on a plain ``sqlite3`` connection.

Resolving ``coco@latest`` — above all a client's conditional ``GET`` answered ``304`` — needs
one row of ``versions`` per request, and the reference can move between requests (a commit,
an alias move, a deprecation, retention), so the row is read every time.  Through SQLAlchemy
(pool checkout, ``BEGIN``, the execution context and its events, result processing, rollback)
that one read cost ~0.1 ms of CPU, about a quarter of the whole request; here the *same* query
(built by :func:`~.resolve.resolution_statement` and compiled once per reference shape for
SQLite) runs on a connection of the caller's thread in autocommit mode, so each read is its own
snapshot of the committed database, as :meth:`~recordkeeper_service.db.Database.read` gives.
Column values go through the same SQLAlchemy result processors (dates and times), so a row
here equals the row the SQLAlchemy path reads.

A read that fails for any reason returns ``None`` (the connection is dropped): the caller then
takes the ordinary path, which answers or explains the error exactly as before.  An in-memory
database (one connection shared through SQLAlchemy's pool) has no separate connection to open:
:meth:`SqliteHotReader.for_url` gives ``None`` for it.
"""

from __future__ import annotations

import collections
import logging
import sqlite3
import threading
from typing import Any

from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL

from recordkeeper.core.refs import Reference
from recordkeeper_service.repository.fastpath import HOT_COLUMNS, hot_statement
from recordkeeper_service.repository.resolve import (
    reference_shape,
    resolution_params,
)

__all__ = ["SqliteHotReader"]

log = logging.getLogger(__name__)

_DIALECT = sqlite.pysqlite.dialect()

#: A row of :data:`HOT_COLUMNS` (attribute access, as SQLAlchemy's rows give).
HotRow = collections.namedtuple("HotRow", [column.key for column in HOT_COLUMNS])  # type: ignore[misc]

_PROCESSORS = [
    column.type.dialect_impl(_DIALECT).result_processor(_DIALECT, None) for column in HOT_COLUMNS
]
_CONVERTED = [(i, p) for i, p in enumerate(_PROCESSORS) if p is not None]


class SqliteHotReader:
    """The resolve query on per-thread ``sqlite3`` connections of one database file."""

    def __init__(self, database: str, *, uri: bool = False, timeout: float = 30.0) -> None:
        self._database = database
        self._uri = uri
        self._timeout = timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._compiled: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {}
        #: statements run (tests count them: one per conditional GET)
        self.statements = 0

    @classmethod
    def for_url(cls, url: URL) -> SqliteHotReader | None:
        """A reader for a SQLite ``url``'s database file (None: in memory, or not SQLite)."""
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return None
        uri = str(url.query.get("uri", "")).lower() in ("true", "1")
        if uri and "mode=memory" in str(url.database):
            return None
        return cls(str(url.database), uri=uri)

    def _statement(self, ref: Reference) -> tuple[str, tuple[str, ...], dict[str, Any]]:
        key = reference_shape(ref)
        found = self._compiled.get(key)
        if found is None:
            compiled = hot_statement(ref).compile(
                dialect=_DIALECT, compile_kwargs={"render_postcompile": True}
            )
            found = (str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params))
            self._compiled[key] = found
        return found

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._database,
                timeout=self._timeout,
                isolation_level=None,  # autocommit: every statement reads the latest commit
                check_same_thread=False,  # closed by aclose() from another thread
                uri=self._uri,
            )
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def fetch_versions(self, ref: Reference) -> list[Any] | None:
        """Rows of :data:`HOT_COLUMNS` for ``ref``, or None when the read failed (the caller
        takes the ordinary path).  Errors of the reference itself (``resolution_params``)
        raise as they do there."""
        sql, names, constants = self._statement(ref)
        params = resolution_params(ref)
        values = [params[name] if name in params else constants[name] for name in names]
        try:
            conn = self._connection()
            self.statements += 1
            raw = conn.execute(sql, values).fetchall()
        except sqlite3.Error:
            log.info("the SQLite hot read failed; taking the ordinary path", exc_info=True)
            self._drop()
            return None
        rows = []
        for values_row in raw:
            if _CONVERTED:
                converted = list(values_row)
                for i, process in _CONVERTED:
                    converted[i] = process(converted[i])
                values_row = converted
            rows.append(HotRow._make(values_row))
        return rows

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                if conn in self._all:
                    self._all.remove(conn)
            _close_quietly(conn)

    def close(self) -> None:
        """Close every connection (at application shutdown)."""
        with self._lock:
            conns, self._all = self._all, []
        self._local = threading.local()
        for conn in conns:
            _close_quietly(conn)


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:  # pragma: no cover - closing a broken connection may fail
        log.debug("closing a SQLite connection failed", exc_info=True)

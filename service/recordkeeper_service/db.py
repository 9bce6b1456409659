"""Database engine, sessions and the one transaction-scope helper.

:class:`Database` builds an engine from a URL.  SQLite gets WAL journaling, a busy timeout and
foreign keys; its write transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue on
the database lock instead of failing half-way.  PostgreSQL URLs are routed to psycopg 3.

:meth:`Database.transaction` commits on success, rolls back on error, and translates database
errors into recordkeeper errors with stable codes (a unique-constraint violation on a known
constraint becomes e.g. :class:`~recordkeeper.core.errors.DatasetExists`; an unreachable or locked
database becomes :class:`~recordkeeper.core.errors.ServiceUnavailable`; a statement SQLite
refuses, such as an ``integer overflow`` in ``SUM``, is not an outage and stays an error: 500).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from recordkeeper.core.errors import (
    Conflict,
    DatasetExists,
    InvalidRequest,
    RecordkeeperError,
    ServiceUnavailable,
)

__all__ = ["Database", "normalize_database_url", "refused_value"]

log = logging.getLogger(__name__)

#: Tables the service bulk-loads, whose planner statistics it keeps (:meth:`Database.analyzed`).
ANALYZED_TABLES = frozenset({"shards"})
#: A table is analyzed again once rows changed since its last ANALYZE reach this share of it
#: (autovacuum's default is 10 % plus 50 rows) ...
ANALYZE_GROWTH = 0.1
#: ... and at least this many (a small table is planned well enough without statistics).
ANALYZE_MIN_ROWS = 1000
T = TypeVar("T")

_SQLITE_UNIQUE_RE = re.compile(r"UNIQUE constraint failed: (.+)")

#: Unique constraints whose violation means something to a user.
_CONSTRAINT_ERRORS: dict[str, Callable[[], RecordkeeperError]] = {
    "uq_datasets_name": lambda: DatasetExists("a dataset with that name already exists"),
}


def normalize_database_url(url: str) -> URL:
    """Parse ``url``; plain ``postgresql://``/``postgres://`` URLs use the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


class Database:
    """An engine plus a session factory; the only place that opens transactions."""

    def __init__(self, url: str, *, pool_size: int = 10, echo: bool = False) -> None:
        self.url = normalize_database_url(url)
        self.pool_size = pool_size
        self.engine = _make_engine(self.url, pool_size=pool_size, echo=echo)
        self._sessions = sessionmaker(bind=self.engine, expire_on_commit=False, autoflush=False)
        # Reads of immutable data need no transaction: on PostgreSQL autocommit saves the
        # BEGIN/COMMIT round trips; SQLite reads are in-process and keep a deferred transaction.
        self._reader = (
            self.engine
            if self.is_sqlite
            else self.engine.execution_options(isolation_level="AUTOCOMMIT")
        )
        #: rows this process inserted into each analyzed table since it last analyzed it
        self._changed: dict[str, int] = {}
        #: ... and how many of them make it worth asking PostgreSQL again
        self._next_check: dict[str, int] = {}
        self._changes_lock = threading.Lock()
        self._write_sessions = sessionmaker(
            bind=self.engine.execution_options(rk_write=True),
            expire_on_commit=False,
            autoflush=False,
        )

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Session]:
        """A session in one transaction: commit on success, roll back on any error.

        ``write=False`` marks read-only work (SQLite then takes no write lock up front).
        Database errors leave as recordkeeper errors; recordkeeper errors pass through.
        """
        session = (self._write_sessions if write else self._sessions)()
        try:
            yield session
            session.commit()
        except RecordkeeperError:
            session.rollback()
            raise
        except IntegrityError as exc:
            session.rollback()
            raise _translate_integrity_error(exc) from exc
        except DataError as exc:
            session.rollback()
            raise refused_value(exc) from exc
        except OperationalError as exc:
            session.rollback()
            if not _is_outage(exc):
                raise  # a statement that cannot succeed: a bug (500), not an outage
            raise _unavailable(exc) from exc
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` on a connection for a few independent reads (no snapshot across them).

        Only for data that cannot change under the reader (committed versions); anything that
        must be consistent uses :meth:`transaction`.  If the pooled connection turns out to be
        dead (the database restarted), the pool is refreshed and ``work`` runs once more.
        """
        for attempt in (1, 2):
            try:
                with self._reader.connect() as conn:
                    return work(conn)
            except OperationalError as exc:
                if attempt == 1 and exc.connection_invalidated:
                    log.info("database connection lost; retrying the read once")
                    continue
                if not _is_outage(exc):
                    raise
                raise _unavailable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def analyzed(self, table: str, inserted: int) -> bool:
        """Keep PostgreSQL's planner statistics of ``table`` current after ``inserted`` rows
        went into it (call it once the inserting transaction has committed); whether it ran
        ``ANALYZE``.

        PostgreSQL chooses plans from statistics that only ``ANALYZE`` gathers — autovacuum
        runs it a minute or more after a bulk load, or never where it is switched off (as on
        these machines' server).  Without them it takes a look-up of 500 shard URIs for a
        third of the table and reads every row: about 1 s per question at 300,000 shards
        (registration asks one per 500 shards: a 100,000-shard registration took minutes),
        against 1.3 ms through ``ix_shards_uri`` once analyzed.  So the service analyzes a
        table it bulk-loads itself when it was never analyzed, or when the rows changed since
        reach :data:`ANALYZE_GROWTH` of it — ~0.4 s at 300,000 rows, at most once per 10 % of
        growth.  Changed rows are PostgreSQL's count or, when larger, this process's own
        (PostgreSQL's counters reach other sessions up to a second late, so a registration in
        batches would otherwise never see its own rows).  PostgreSQL is asked only once this
        process has inserted :data:`ANALYZE_MIN_ROWS` rows, and after a "not yet" only once its
        own rows could make the difference: small registrations pay no round trip.  SQLite's
        planner takes an index without statistics: nothing to do there.
        """
        if self.is_sqlite or inserted <= 0:
            return False
        if table not in ANALYZED_TABLES:  # names are never user input; ANALYZE takes no bind
            raise ValueError(f"{table!r} is not a table whose statistics the service keeps")
        with self._changes_lock:
            self._changed[table] = mine = self._changed.get(table, 0) + inserted
            if mine < self._next_check.get(table, ANALYZE_MIN_ROWS):
                return False  # no round trip on the registration's path until rows add up
        with self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT c.reltuples, s.n_mod_since_analyze, "
                    "s.last_analyze IS NULL AND s.last_autoanalyze IS NULL "
                    "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
                    "WHERE c.oid = CAST(:table AS regclass)"
                ),
                {"table": table},
            ).first()
            if row is None:
                return False
            reltuples, counted, never = row
            changed = max(counted or 0, mine)
            due = ANALYZE_MIN_ROWS if never or reltuples < 0 else ANALYZE_GROWTH * reltuples
            if changed < max(due, ANALYZE_MIN_ROWS):
                with self._changes_lock:  # asked again once this process's rows could tip it
                    self._next_check[table] = mine + max(
                        int(max(due, ANALYZE_MIN_ROWS) - changed), ANALYZE_MIN_ROWS
                    )
                return False
            conn.execute(text(f"ANALYZE {table}"))
            conn.commit()
        with self._changes_lock:
            self._changed[table] = max(self._changed.get(table, 0) - mine, 0)
            self._next_check.pop(table, None)
        log.info("analyzed %s after %d new rows (planner statistics)", table, inserted)
        return True

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def _make_engine(url: URL, *, pool_size: int, echo: bool) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _make_sqlite_engine(url, echo=echo)
    # No pool_pre_ping: it costs a round trip per checkout (a third of a resolve).  A pooled
    # connection found dead is invalidated with the whole pool on first use; reads retry once
    # (see Database.read) and transactions answer 503 service_unavailable, safe to retry.
    kwargs: dict[str, Any] = {
        "pool_size": pool_size,
        "max_overflow": pool_size,
        "pool_recycle": 1800,
    }
    return create_engine(url, echo=echo, **kwargs)


def _make_sqlite_engine(url: URL, *, echo: bool) -> Engine:
    in_memory = url.database in (None, "", ":memory:")
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
    if in_memory:
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, echo=echo, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's own handling defers it).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get("rk_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


#: SQLite's generic result code ``SQLITE_ERROR``: the statement itself failed ("integer
#: overflow" in ``SUM``, a missing table), which no retry can fix.  pysqlite raises it as an
#: ``OperationalError`` like the codes that do mean an outage (busy, locked, I/O error, cannot
#: open, disk full, ...).
_SQLITE_ERROR = 1


def _is_outage(exc: OperationalError) -> bool:
    """Whether ``exc`` means the database is unavailable (503, safe to retry).

    PostgreSQL drivers raise ``OperationalError`` for connection problems only (arithmetic
    errors are ``DataError``); on SQLite a plain ``SQLITE_ERROR`` is a data or statement error.
    """
    code = getattr(exc.orig, "sqlite_errorcode", None)
    return not (isinstance(code, int) and code & 0xFF == _SQLITE_ERROR)


def _unavailable(exc: OperationalError) -> ServiceUnavailable:
    log.warning("database unavailable: %s", _first_line(exc))
    return ServiceUnavailable(f"the registry database is unavailable: {_first_line(exc)}")


def refused_value(exc: BaseException) -> InvalidRequest:
    """``422 invalid_request`` for a value the database refused (a ``DataError``; the request
    models refuse what they know of first).  The detail is generic, as for ``503``: the
    database's own message (which names the database and echoes values) is only logged."""
    log.warning("the database refused a value: %s", _first_line(exc))
    return InvalidRequest("the database refused a value of the request")


def _translate_integrity_error(exc: IntegrityError) -> RecordkeeperError:
    name = _constraint_name(exc)
    factory = _CONSTRAINT_ERRORS.get(name or "")
    if factory is not None:
        return factory()
    log.warning("integrity error on %s: %s", name, _first_line(exc))
    return Conflict(
        "the change conflicts with the registry's current state"
        + (f" (constraint {name})" if name else "")
        + "; retry the request"
    )


def _constraint_name(exc: IntegrityError) -> str | None:
    diag = getattr(exc.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return str(name)
    match = _SQLITE_UNIQUE_RE.search(str(exc.orig))
    if match is None:
        return None
    columns = [part.strip() for part in match[1].split(",")]
    table = columns[0].split(".")[0]
    names = "_".join(c.split(".", 1)[1] for c in columns)
    return f"uq_{table}_{names}"


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__

"""Alembic environment of the registry database.

Runs inside the wheel: the service builds the Alembic ``Config`` programmatically
(:mod:`recordkeeper_service.migrate`) and passes an open connection in
``config.attributes["connection"]``; no ``alembic.ini`` is needed.  ``target_metadata`` is the
service's one ``MetaData`` so autogenerate and ``alembic check`` compare against the models.
Revisions themselves never import ORM classes.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

import recordkeeper_service.tables.consumption  # checkpoint consumption on the same Base
import recordkeeper_service.tables.leakage  # leakage policies and results on the same Base
import recordkeeper_service.tables.lineage  # lineage tables on the same Base
import recordkeeper_service.tables.provenance  # provenance tables on the same Base
import recordkeeper_service.tables.record_diffs  # stored record diffs on the same Base
import recordkeeper_service.tables.record_sets  # record identity tables on the same Base
import recordkeeper_service.tables.retention  # retention tables on the same Base
import recordkeeper_service.tables.samples  # sample records on the same Base
import recordkeeper_service.tables.version_splits  # noqa: F401  (split totals, same Base)
from recordkeeper_service.db import Database
from recordkeeper_service.tables import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``--sql``)."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the connection the caller passed, or one opened from the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: set sqlalchemy.url or pass a connection")
    database = Database(url, pool_size=1)
    try:
        with database.engine.connect() as conn:
            _configure(conn)
            conn.commit()
    finally:
        database.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Start-up checks: the service refuses to run on an unsafe or unmigrated setup.

* The database must be reachable and at the migration head (else: run ``recordkeeper db
  upgrade``).
* Token authentication must be usable: binding a non-loopback address (where open access is never
  granted) with no active token would lock everybody out, so it is refused.
* The embedded default database (no ``RECORDKEEPER_DATABASE_URL``) is created and migrated on
  first use by :func:`prepare_embedded_database`, so that ``recordkeeper serve`` works out of the
  box; any explicitly configured database is never migrated implicitly.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.exc import OperationalError

from recordkeeper.core.roots import as_root
from recordkeeper_service import migrate
from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository
from recordkeeper_service.settings import (
    Settings,
    default_database_path,
    default_storage_root,
    is_loopback,
    user_data_dir,
)

__all__ = ["StartupError", "check_startup", "prepare_embedded_database"]

log = logging.getLogger("recordkeeper_service")


class StartupError(RuntimeError):
    """The service must not start; the message says what to do."""


def check_startup(settings: Settings, database: Database) -> migrate.MigrationStatus:
    """Raise :class:`StartupError` unless the database is at head and auth is usable."""
    try:
        status = migrate.check_at_head(database)
    except migrate.DatabaseNotAtHead as exc:
        raise StartupError(str(exc)) from None
    except OperationalError as exc:
        url = database.url.render_as_string(hide_password=True)
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise StartupError(f"cannot reach the registry database {url}: {reason}") from None
    if not settings.open_access:
        active = TokenRepository(database).count_active()
        if active == 0 and not is_loopback(settings.host):
            raise StartupError(
                f"refusing to serve on {settings.host}: requests from other machines need an "
                "API token and none exists. Create one first with "
                "`recordkeeper token create --scope admin --name admin` (same "
                "RECORDKEEPER_DATABASE_URL), or bind 127.0.0.1"
            )
        if active == 0:
            log.warning(
                "RECORDKEEPER_AUTH=required but no API token exists; every request will be "
                "refused until one is created with `recordkeeper token create`"
            )
    return status


def prepare_embedded_database(settings: Settings) -> bool:
    """Create and migrate the embedded SQLite database if it is new; True if it did.

    Does nothing when ``RECORDKEEPER_DATABASE_URL`` is set, or when the embedded database
    already has a schema (an outdated one is then refused by :func:`check_startup`).
    """
    if not settings.uses_embedded_database:
        return False
    path: Path = default_database_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if settings.storage_root == as_root(default_storage_root()):
        (user_data_dir() / "storage").mkdir(exist_ok=True)
    database = Database(settings.effective_database_url, pool_size=1)
    try:
        if migrate.current_revision(database) is not None:
            return False
        log.info("creating the embedded registry database at %s", path)
        migrate.upgrade(database)
        return True
    finally:
        database.dispose()

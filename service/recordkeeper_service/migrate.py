"""Schema migrations: Alembic driven programmatically from the package inside the wheel.

``recordkeeper db upgrade`` calls :func:`upgrade`; the service calls :func:`check_at_head` at
start-up and refuses to run on a database that is not at the head revision.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from recordkeeper_service.db import Database

__all__ = [
    "DatabaseNotAtHead",
    "MigrationStatus",
    "alembic_config",
    "autogenerate",
    "check_at_head",
    "current_revision",
    "head_revision",
    "status",
    "upgrade",
]

UPGRADE_COMMAND = "recordkeeper db upgrade"


class DatabaseNotAtHead(RuntimeError):
    """The database schema is missing or older/newer than this release expects."""


@dataclass(frozen=True)
class MigrationStatus:
    """Where a database stands relative to this release's migrations."""

    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        return self.current == self.head


def script_location() -> str:
    """The directory of the ``recordkeeper_service.migrations`` package (works inside a wheel)."""
    return str(importlib.resources.files("recordkeeper_service.migrations"))


def alembic_config(database: Database | None = None) -> Config:
    """An Alembic ``Config`` built in code; no ``alembic.ini`` needed."""
    config = Config()
    config.set_main_option("script_location", script_location())
    config.set_main_option("file_template", "%%(year)d%%(month).2d%%(day).2d_%%(rev)s_%%(slug)s")
    if database is not None:
        url = database.url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The single head revision of this release (an error if the history has forked)."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"migration history has {len(heads)} heads ({heads}); expected one")
    return heads[0]


def current_revision(database: Database) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with database.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def status(database: Database) -> MigrationStatus:
    """Current and head revision of ``database``."""
    return MigrationStatus(current=current_revision(database), head=head_revision())


def autogenerate(database: Database, message: str) -> str:
    """Write a new revision comparing the models with ``database`` (at head); return its path.

    A development tool (for whoever adds tables): run it against an empty database upgraded to
    head, then review the file.  It is formatted with ruff when ruff is installed.
    """
    import shutil
    import subprocess

    config = alembic_config(database)
    with database.engine.begin() as conn:
        config.attributes["connection"] = conn
        script = command.revision(config, message=message, autogenerate=True)
    scripts = script if isinstance(script, list) else [script]
    paths = [s.path for s in scripts if s is not None]
    ruff = shutil.which("ruff")
    if ruff and paths:
        subprocess.run([ruff, "format", *paths], check=False, capture_output=True)
    head_revision.cache_clear()
    return paths[0] if paths else ""


def _known(revision: str) -> bool:
    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except Exception:  # alembic raises several kinds for unknown revisions
        return False


def upgrade(database: Database, revision: str = "head") -> MigrationStatus:
    """Migrate ``database`` to ``revision`` (default: head) in one transaction per step."""
    config = alembic_config(database)
    with database.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    return status(database)


def check_at_head(database: Database) -> MigrationStatus:
    """Return the status if the database is at head, else raise :class:`DatabaseNotAtHead`."""
    found = status(database)
    url = database.url.render_as_string(hide_password=True)
    if found.current is None:
        raise DatabaseNotAtHead(
            f"the registry database {url} has no recordkeeper schema yet; "
            f"run `{UPGRADE_COMMAND}` (with RECORDKEEPER_DATABASE_URL set to it) first"
        )
    if not found.at_head and not _known(found.current):
        raise DatabaseNotAtHead(
            f"the registry database {url} is at revision {found.current}, which this release "
            "does not know: it was migrated by a newer recordkeeper; upgrade recordkeeper"
        )
    if not found.at_head:
        raise DatabaseNotAtHead(
            f"the registry database {url} is at revision {found.current}, but this release "
            f"needs {found.head}; run `{UPGRADE_COMMAND}` first"
        )
    return found

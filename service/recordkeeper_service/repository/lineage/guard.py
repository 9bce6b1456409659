"""The guard the registry calls before a version disappears: ``version_in_use``.

Deprecating (and any future delete or garbage collection of) a version that trained
checkpoints is refused.  This module depends only on the lineage tables, so the registry's
repository can import it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.orm import Session

from recordkeeper.core.errors import VersionInUse
from recordkeeper.core.lineage import CheckpointRef
from recordkeeper_service import tables as m
from recordkeeper_service.repository.lineage import queries

__all__ = ["IN_USE_LISTED", "ensure_not_in_use", "versions_in_use"]

#: How many checkpoint names a ``version_in_use`` error lists (``count`` has the total).
IN_USE_LISTED = 50


def versions_in_use(session: Session, version_ids: Iterable[int]) -> set[int]:
    """Which of ``version_ids`` trained some checkpoint; garbage collection must skip them."""
    return queries.in_use(session, version_ids)


def ensure_not_in_use(session: Session, version: m.Version, *, force: bool = False) -> list[str]:
    """Refuse to deprecate or delete ``version`` if checkpoints trained on it.

    Raises :class:`VersionInUse` listing (up to 50 of) the checkpoints that consumed it directly,
    with ``count`` the total.  With ``force`` (the route checks the admin scope) nothing is
    raised and the names are returned so the caller can record them in its audit event.
    """
    rows = queries.direct_consumers(session, [version.id])
    if not rows:
        return []
    names = sorted({str(CheckpointRef(r.model, r.checkpoint, r.run)) for r in rows})
    if force:
        return names
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise VersionInUse(
        f"{version.name} trained {len(names)} checkpoint(s) ({shown}); it cannot be deprecated "
        "or deleted. An admin token may force it with force=true",
        checkpoints=names[:IN_USE_LISTED],
        count=len(names),
    )

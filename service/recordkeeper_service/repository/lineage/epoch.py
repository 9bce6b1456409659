"""The lineage epoch: one counter bumped by every change a lineage answer can show.

A registered checkpoint's upstream (its chain, the data of every segment) never changes: a
parent is fixed at registration and re-registering with different lineage is a conflict.  What
an answer shows that *can* change is states:

* a checkpoint marked deleted (``state``, ``deleted_at``, ``deleted_reason`` of the checkpoint
  and of its chain links and segments) — :meth:`LineageRepository.mark_deleted`;
* a version deprecated (``state`` of a data entry) — :meth:`VersionRepository.deprecate`;
* a version's data released for deletion or deleted by retention (``data_state``,
  ``data_deleted_at``, ``data_deleted_reason`` of a data entry) —
  :meth:`RetentionRepository.claim` and :meth:`RetentionRepository.mark_deleted`.

(Nothing else writes what an answer shows: only staged versions are abandoned or renamed at
commit, or released and collected by gc, and staged versions never train checkpoints; datasets,
models and runs are not renamed.)

Each of those calls :func:`bump_epoch` in its own transaction, so "answer computed at epoch E"
stays true until a later epoch commits.  Readers read the epoch *with* the checkpoint's
resolution (:func:`epoch_column`, in the same statement) and tag an answer computed afterwards
with it: a change that commits in between makes the answer newer than its tag, never older.

The row may be missing (a database emptied with ``TRUNCATE``): it then reads as 0 and the next
bump recreates it.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from recordkeeper_service.repository.common import table_of, upsert_for
from recordkeeper_service.tables.lineage import LineageEpoch

__all__ = ["bump_epoch", "epoch_column"]

_epoch = table_of(LineageEpoch)
_ROW = 1


@functools.cache
def epoch_column() -> ColumnElement[Any]:
    """The current epoch as a scalar subquery, to add to the select that resolves a checkpoint."""
    value = select(_epoch.c.value).where(_epoch.c.id == _ROW).scalar_subquery()
    return func.coalesce(value, 0).label("lineage_epoch")


def bump_epoch(session: Session) -> None:
    """Advance the epoch in the current transaction: call it from every write that changes a
    state a lineage answer shows (the row lock it takes is held until the commit)."""
    stmt = (
        upsert_for(session, _epoch)
        .values(id=_ROW, value=1)
        .on_conflict_do_update(index_elements=[_epoch.c.id], set_={"value": _epoch.c.value + 1})
    )
    session.execute(stmt)

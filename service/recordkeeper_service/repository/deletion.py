"""The deletion rule, once: which storage objects may be deleted, and which may be referenced.

An object may be deleted only when

1. no *live* version references it (:func:`live_version_clause`: staged, committed or
   deprecated, and its storage not released for deletion) other than the versions whose storage
   is being released (:func:`referenced_elsewhere`) — derived and in-place versions share
   objects by design, so "under the released prefix" is never enough;
2. it lies inside the allowed roots after resolution (checked by the collector, where the
   storage is: :mod:`recordkeeper.storage_safety` on local disk, the service's roots intersected
   with the collector's own);
3. an admin has authorized it: the storage was *released* to that admin by a claim (gc today,
   retention later), and the collector asks, per batch of objects, which of them it may delete
   (``POST /versions/{name}/gc-objects``, answered from this module).

The other half of the rule keeps released storage released: once a version's storage is
released (:func:`released_version_clause`), no shard may be registered at or under its storage
prefix, nor at one of its objects (:func:`released_prefixes_for`, ``409 storage_released``).
Registration reads the versions it could collide with ``FOR SHARE``; a claim locks a version
``FOR UPDATE`` before releasing it.  On PostgreSQL the two therefore serialize: a registration
that comes second waits, then sees the release (a locking read returns the row's newest
version) and is refused; a claim that comes second waits for the registration to commit, and
the collector's per-batch question then sees the new shard and keeps its object.  On SQLite
every write transaction holds the database write lock, which serializes them the same way.

Commit and ``gc-done`` re-check (:func:`slipped_into`, :func:`slipped_under`): a version
never commits, and storage is never recorded collected, while a live shard was registered
under storage after it was released.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.orm import Session, aliased

from recordkeeper.core.errors import StorageReleased, VersionDataDeleted
from recordkeeper.core.lifecycle import LIVE_STATES
from recordkeeper.core.roots import UriError, enclosing_prefixes
from recordkeeper_service import tables as m

__all__ = [
    "LIVE_STATES",
    "MAX_OBJECTS_PER_QUESTION",
    "ensure_data_stored",
    "ensure_not_released",
    "live_version_clause",
    "referenced_elsewhere",
    "referencing_versions",
    "released_prefix_for",
    "released_prefixes_for",
    "released_version_clause",
    "slipped_into",
    "slipped_under",
]

#: Most object URIs one "may I delete these?" question carries.
MAX_OBJECTS_PER_QUESTION = 1000
_CHUNK = 500


def released_version_clause(version: Any = m.Version) -> ColumnElement[bool]:
    """The version's storage was released for deletion: claimed or collected.

    Released storage stays released: a claim is never undone (it may only be taken over by
    another collector).  Retention releases committed versions through the same columns
    (``gc_claimed_at`` while it deletes, ``collected_at`` once done, ``collected_reason``
    saying which collector), so both collectors and every caller go through this function.
    ``version``: the ``Version`` entity or an alias of it.
    """
    return or_(version.gc_claimed_at.is_not(None), version.collected_at.is_not(None))


def live_version_clause(version: Any = m.Version) -> ColumnElement[bool]:
    """The version is live: staged, committed or deprecated, and its storage not released.

    Objects a live version references are never deleted.  (An abandoned version that nobody
    claimed yet is neither live nor released: its objects may be released by a claim.)
    ``version``: the ``Version`` entity or an alias of it (correlated subqueries).
    """
    return and_(version.state.in_(LIVE_STATES), ~released_version_clause(version))


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def referencing_versions(
    session: Session, uris: Iterable[str], *, releasing: Collection[int]
) -> dict[str, set[str]]:
    """For each of these exact object URIs that a shard of a live version *not* in
    ``releasing`` (version ids) references, the names of those versions."""
    wanted = sorted(set(uris))
    found: dict[str, set[str]] = {}
    for chunk in _chunks(wanted):
        stmt = (
            select(m.Shard.uri, m.Version.name)
            .join(m.Version, m.Version.id == m.Shard.version_id)
            .where(m.Shard.uri.in_(chunk), live_version_clause())
        )
        if releasing:
            stmt = stmt.where(m.Version.id.not_in(list(releasing)))
        for uri, name in session.execute(stmt.distinct()):
            found.setdefault(uri, set()).add(name)
    return found


def referenced_elsewhere(
    session: Session, uris: Iterable[str], *, releasing: Collection[int]
) -> set[str]:
    """Which of these exact object URIs a shard of a live version not in ``releasing``
    references: the collector never deletes those."""
    return set(referencing_versions(session, uris, releasing=releasing))


def released_prefixes_for(
    session: Session, uris: Iterable[str], *, registering: int | None = None
) -> dict[str, str]:
    """For each URI lying at or under a released version's storage prefix, or being an object
    (shard URI) of a released version, and referenced by no live version (other than
    ``registering``, the version about to reference them): that released version's name.
    URIs not found are free.

    An object a live version references was kept by every collector (they ask
    :func:`referenced_elsewhere` before deleting), so another version may reference it too —
    a version derived from one whose files lie under a collected prefix still can.

    Reads the candidate versions ``FOR SHARE`` (see the module docstring): call it inside the
    write transaction that registers the URIs, before inserting them.  The candidates are
    chosen by columns a release never changes (storage prefix, shard URIs) and judged by the
    locked row's newest values, so a release committed while this waited is seen.
    """
    wanted = sorted(set(uris))
    by_prefix = _by_enclosing_prefix(wanted)
    released: dict[str, str] = {}
    columns = (
        m.Version.id,
        m.Version.name,
        m.Version.state,
        m.Version.storage_prefix,
        released_version_clause().label("released"),
    )
    # At or under a released storage prefix.
    for chunk in _chunks(sorted(by_prefix)):
        rows = session.execute(
            select(*columns)
            .where(m.Version.storage_prefix.in_(chunk))
            .order_by(m.Version.id)
            .with_for_update(read=True)
        )
        for row in rows:
            if row.released:
                for uri in by_prefix.get(row.storage_prefix, ()):
                    released.setdefault(uri, row.name)
    # The versions referencing any of the URIs, one row each, locked FOR SHARE (the version
    # rows the join below locks): when none is released and no URI lies under a released
    # prefix, nothing is released and the join's row per (URI, version) is not read —
    # re-publishing a directory of 2,000 shards that five versions reference read 10,000.
    if not by_prefix:
        session.flush()  # what the session's own query above would have done (autoflush)
    connection = session.connection()  # plain rows: no ORM result processing
    candidates_released = False
    for chunk in _chunks(wanted):
        candidates = connection.execute(
            select(m.Version.id, released_version_clause().label("released"))
            .where(m.Version.id.in_(select(m.Shard.version_id).where(m.Shard.uri.in_(chunk))))
            .order_by(m.Version.id)
            .with_for_update(read=True)
        ).all()
        candidates_released = candidates_released or any(row.released for row in candidates)
    if not released and not candidates_released:
        return {}
    # An object of a released version (shards registered in place, anywhere in the roots);
    # and which objects a live version references (kept, so free to reference).
    referenced: set[str] = set()
    for chunk in _chunks(wanted):
        rows = connection.execute(
            select(m.Shard.uri, *columns)
            .join(m.Version, m.Version.id == m.Shard.version_id)
            .where(m.Shard.uri.in_(chunk))
            .order_by(m.Version.id)
            .with_for_update(read=True, of=m.Version)
        )
        for row in rows:
            if row.released:
                released.setdefault(row.uri, row.name)
            elif row.state in LIVE_STATES and row.id != registering:
                referenced.add(row.uri)
    return {uri: name for uri, name in released.items() if uri not in referenced}


def _by_enclosing_prefix(uris: Iterable[str]) -> dict[str, list[str]]:
    """Each directory prefix the URIs lie at or under → those URIs (computed once per parent
    directory: 10,000 shards of one directory cost one parse)."""
    by_parent: dict[str, list[str]] = {}
    for uri in uris:
        by_parent.setdefault(uri.rpartition("/")[0], []).append(uri)
    by_prefix: dict[str, list[str]] = {}
    for members in by_parent.values():
        try:
            parents = enclosing_prefixes(members[0])[:-1]
        except UriError:
            continue  # validation refuses it before anything is stored
        for prefix in parents:
            by_prefix.setdefault(prefix, []).extend(members)
        for uri in members:  # the URI itself as a directory (a prefix equal to it)
            by_prefix.setdefault(uri.rstrip("/") + "/", []).append(uri)
    return by_prefix


def released_prefix_for(session: Session, uri: str) -> str | None:
    """The released version ``uri`` lies at or under (or is an object of), or None."""
    return released_prefixes_for(session, [uri]).get(uri)


def ensure_not_released(
    session: Session, uris: Sequence[str], *, registering: int | None = None
) -> None:
    """Raise ``409 storage_released`` if any of ``uris`` lies in released storage that no live
    version references (see :func:`released_prefixes_for`)."""
    released = released_prefixes_for(session, uris, registering=registering)
    if released:
        uri = next(u for u in uris if u in released)
        version = released[uri]
        raise StorageReleased(
            f"shard uri {uri!r} lies in the storage of {version}, which was released for "
            "deletion; it may be deleted at any moment, so no version may reference it — "
            "write the shard under this version's own storage prefix",
            uri=uri,
            released_by=version,
            shards=len(released),
        )


def slipped_into(
    session: Session, version_id: int, own_prefix: str, *, only: Collection[str] | None = None
) -> list[tuple[str, str]]:
    """Shards of a version registered under another version's storage prefix *after* that
    storage was released: ``(uri, released version)``.

    Registration refuses those (:func:`ensure_not_released`, under a lock the claim conflicts
    with), so this is empty; commit re-checks it anyway, so a broken serialization shows as a
    refusal rather than as a committed version pointing at deleted files.  Only shards outside
    the version's own prefix are looked at (prefixes ``{root}/{dataset}/{name}/`` never nest).
    ``only``: just these URIs (a derived version's added shards: the rows it keeps of its base
    were checked when the base registered them, and the base's storage is not released —
    :func:`ensure_data_stored` under its lock — so the objects stay while it lists them).
    """
    own = func.substr(m.Shard.uri, 1, len(own_prefix)) == own_prefix
    where = [m.Shard.version_id == version_id, ~own]
    if only is not None:  # a derived version: only its added shards were registered by it
        if not only:
            return []
        # looked up by URI ("+ 0": not through the version's index, all its kept rows)
        where = [m.Shard.version_id + 0 == version_id, ~own, m.Shard.uri.in_(sorted(only))]
    rows = session.execute(select(m.Shard.uri, m.Shard.registered_at).where(*where)).all()
    if not rows:
        return []
    by_prefix = _by_enclosing_prefix(uri for uri, _ in rows)
    registered = {uri: at for uri, at in rows}
    found: list[tuple[str, str, datetime.datetime]] = []
    for chunk in _chunks(sorted(by_prefix)):
        released = session.execute(
            select(m.Version.name, m.Version.storage_prefix, m.Version.gc_claimed_at).where(
                m.Version.storage_prefix.in_(chunk), m.Version.gc_claimed_at.is_not(None)
            )
        )
        for name, prefix, claimed_at in released:
            found += [
                (uri, name, claimed_at)
                for uri in by_prefix[prefix]
                if claimed_at is not None and _naive(registered[uri]) >= _naive(claimed_at)
            ]
    if not found:
        return []
    # Kept objects are free to reference: one a live version referenced before the release.
    earliest: dict[str, datetime.datetime] = {}
    for chunk in _chunks(sorted({uri for uri, _, _ in found})):
        others = session.execute(
            select(m.Shard.uri, m.Shard.registered_at)
            .join(m.Version, m.Version.id == m.Shard.version_id)
            .where(m.Shard.uri.in_(chunk), m.Version.id != version_id, live_version_clause())
        )
        for uri, at in others:
            if uri not in earliest or _naive(at) < _naive(earliest[uri]):
                earliest[uri] = at
    return sorted(
        (uri, name)
        for uri, name, claimed_at in found
        if uri not in earliest or _naive(earliest[uri]) >= _naive(claimed_at)
    )


def slipped_under(session: Session, released: m.Version) -> list[tuple[str, str]]:
    """Live shards of other versions registered under ``released``'s storage prefix after it
    was released: ``(version, uri)``.  Empty by the locks; ``gc-done`` re-checks it."""
    if released.gc_claimed_at is None:
        return []
    rows = session.execute(
        select(m.Version.name, m.Shard.uri)
        .join(m.Version, m.Version.id == m.Shard.version_id)
        .where(
            m.Shard.uri.startswith(released.storage_prefix, autoescape=True),
            m.Shard.registered_at >= released.gc_claimed_at,
            m.Version.id != released.id,
            live_version_clause(),
            ~_kept_before(released.gc_claimed_at),
        )
        .order_by(m.Version.name, m.Shard.uri)
        .limit(10)
    )
    return [(name, uri) for name, uri in rows]


def _kept_before(moment: datetime.datetime) -> ColumnElement[bool]:
    """Another live version referenced the shard's URI before ``moment`` (so it was kept)."""
    other, holder = aliased(m.Shard), aliased(m.Version)
    return (
        exists()
        .where(
            other.uri == m.Shard.uri,
            other.version_id != m.Shard.version_id,
            other.registered_at < moment,
            holder.id == other.version_id,
            holder.state.in_(LIVE_STATES),
            holder.gc_claimed_at.is_(None),
            holder.collected_at.is_(None),
        )
        .correlate(m.Shard)
    )


def _naive(value: datetime.datetime) -> datetime.datetime:
    """Comparable timestamps: SQLite hands back naive UTC, PostgreSQL aware ones."""
    return (
        value.replace(tzinfo=None)
        if value.tzinfo is None
        else value.astimezone(datetime.UTC).replace(tzinfo=None)
    )


def ensure_data_stored(row: m.Version) -> None:
    """Refuse a version whose storage was released or deleted (``409 version_data_deleted``):
    nothing new may come to depend on it (an alias, a pin).  Call it on a locked row."""
    if row.collected_at is None and row.gc_claimed_at is None:
        return
    reason = row.collected_reason or ("retention" if row.state != "abandoned" else "gc")
    when = row.collected_at.date().isoformat() if row.collected_at is not None else None
    status = f"data deleted {when} ({reason})" if when else f"data being deleted ({reason})"
    raise VersionDataDeleted(
        f"{row.name}: {status}; its row, digests, schema and lineage are kept, its records are not",
        version=row.name,
        deleted_at=row.collected_at.isoformat() if row.collected_at is not None else None,
        reason=reason,
    )

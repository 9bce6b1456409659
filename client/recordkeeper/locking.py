"""Writing and checking lock files of pinned training configs (:mod:`recordkeeper.pinned`).

:func:`lock_config` (``recordkeeper lock CONFIG``) pins a config's data references into its lock
file, ``train.yaml`` → ``train.lock.yaml``, and never moves a pin silently: entries already
pinned keep their version unless ``update=True``; the answer's
:attr:`~recordkeeper.pinned.PinnedData.changes` say what changed
(:class:`~recordkeeper.pinned.PinChange`).
:func:`check_lock` (``recordkeeper lock --check``) answers whether a lock is still good — not
missing, not stale, no pinned version deprecated, gone or holding other content — without
raising, for CI (:class:`LockStatus`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.core.errors import (
    DigestMismatch,
    InvalidInput,
    NotFound,
    StaleLock,
    VersionDeprecated,
)
from recordkeeper.core.refs import parse_reference
from recordkeeper.pinned import (
    DATA_KEY,
    LOCK_META_KEY,
    PinChange,
    PinnedData,
    PinnedEntry,
    Resolver,
    check_state,
    data_digest,
    data_section,
    lock_meta,
    lock_path,
    parse_entries,
    read_config,
    source_of,
    staleness,
    with_data,
    write_config,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from recordkeeper.values import DatasetVersion

__all__ = ["EntryStatus", "LockStatus", "check_lock", "lock_config"]


# -- locking -------------------------------------------------------------------------------


def _target(source: Path, inplace: bool, output: str | Path | None) -> Path:
    return Path(output) if output else (source if inplace else lock_path(source))


def _previous_pins(target: Path, source: Path, key: str) -> dict[str, PinnedEntry]:
    """The entries already pinned in the lock file ``target`` (none if it is the source)."""
    if target == source or not target.exists():
        return {}
    where = str(target)
    return {e.key: e for e in parse_entries(data_section(read_config(target), key, where), where)}


def lock_config(
    client: Resolver,
    path: str | Path,
    *,
    inplace: bool = False,
    output: str | Path | None = None,
    update: bool = False,
    key: str = DATA_KEY,
) -> tuple[Path, PinnedData]:
    """Pin every data reference of the config at ``path``; return the file written and the
    pinned data, whose :attr:`~PinnedData.changes` say what changed in the lock.

    Pins never move silently: an entry already pinned (in the lock file, or in the config
    itself with ``inplace``) keeps its version — checked against its digest — unless
    ``update`` re-resolves it from the reference it was locked from.  New entries, and entries
    whose reference, role or splits changed in the config, are resolved now.  Deprecated
    versions are refused.  The rest of the config is copied unchanged (YAML comments are not
    kept when rewriting a file) and the lock records :func:`data_digest` of the data section.
    """
    source = Path(path)
    config = read_config(source)
    where = str(source)
    entries = parse_entries(data_section(config, key, where), where)
    target = _target(source, inplace, output)
    previous = _previous_pins(target, source, key)
    locked_entries = []
    changes = []
    versions: dict[str, DatasetVersion] = {}
    for entry in entries:
        was = entry if entry.locked else previous.get(entry.key)
        relocked = was is not None and not entry.locked and was.request() != entry.request()
        if was is not None and not relocked and not update:
            version = client.resolve(was.ref, expect_digest=was.digest, shards=False)
            origin = was.requested
        else:
            origin = entry.requested if was is None or relocked else was.requested
            version = client.resolve(origin, shards=False)
        check_state(version, entry, allow_deprecated=False)
        if version.content_digest is None:
            raise InvalidInput(f"data.{entry.key}: {version.name} has no content digest")
        versions[entry.key] = version
        locked_entries.append(
            PinnedEntry(
                key=entry.key,
                role=entry.role,
                ref=version.name,
                digest=version.content_digest,
                locked_from=origin,
                splits=entry.splits,
            )
        )
        changes.append(_change(client, entry.key, was, version, origin, relocked, update))
    changes.extend(
        PinChange(
            key=k,
            change="removed",
            requested=e.requested,
            old_version=e.ref,
            old_digest=e.digest,
        )
        for k, e in previous.items()
        if k not in versions
    )
    data = {e.key: e.to_config() for e in locked_entries}
    out = with_data(config, key, data)
    out[LOCK_META_KEY] = _lock_meta(source, target, config, locked_entries)
    write_config(target, out)
    return target, PinnedData(
        tuple(locked_entries), versions, path=target, config=config, changes=tuple(changes)
    )


def _lock_meta(
    source: Path, target: Path, config: Mapping[str, Any], entries: Sequence[PinnedEntry]
) -> dict[str, Any]:
    """The lock's record: the config it was written from (relative to the lock) and
    :func:`data_digest`.  Re-locking a lock file keeps the config it names."""
    meta: dict[str, Any] = {}
    if target.resolve() != source.resolve():
        meta["config"] = os.path.relpath(source.resolve(), target.resolve().parent)
    elif isinstance(lock_meta(config).get("config"), str):
        meta["config"] = lock_meta(config)["config"]
    meta["data_digest"] = data_digest(entries)
    return meta


def _change(
    client: Resolver,
    key: str,
    was: PinnedEntry | None,
    version: DatasetVersion,
    origin: str,
    relocked: bool,
    update: bool,
) -> PinChange:
    new = {"new_version": version.name, "new_digest": version.content_digest}
    if was is None:
        return PinChange(key=key, change="added", requested=origin, **new)
    old = {"old_version": was.ref, "old_digest": was.digest}
    if relocked or (update and was.digest != version.content_digest):
        kind: Literal["updated", "relocked"] = "relocked" if relocked else "updated"
        return PinChange(key=key, change=kind, requested=origin, **old, **new)
    available = None
    if not update and not parse_reference(origin).is_pinned:
        now = client.resolve(origin, shards=False)
        available = now.name if now.content_digest != was.digest else None
    return PinChange(
        key=key, change="unchanged", requested=origin, available=available, **old, **new
    )


# -- checking (CI) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryStatus:
    """One entry's state in :func:`check_lock`: ``ok``, or the ``problem`` and its ``code``."""

    key: str
    version: str | None
    problem: str | None = None
    code: str | None = None
    available: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.key,
            "version": self.version,
            "ok": self.ok,
            "problem": self.problem,
            "code": self.code,
            "available": self.available,
        }


@dataclass(frozen=True)
class LockStatus:
    """What :func:`check_lock` found: ``ok`` unless the lock is missing or stale, or a pin's
    version is deprecated, gone or holds other content."""

    config: Path
    lock: Path
    entries: tuple[EntryStatus, ...]
    stale: Mapping[str, str]
    missing: bool = False

    @property
    def ok(self) -> bool:
        return not self.missing and not self.stale and all(e.ok for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": str(self.config),
            "lock": str(self.lock),
            "ok": self.ok,
            "missing": self.missing,
            "stale": dict(self.stale),
            "entries": [e.to_dict() for e in self.entries],
        }


def check_lock(
    client: Resolver,
    path: str | Path,
    *,
    output: str | Path | None = None,
    key: str = DATA_KEY,
) -> LockStatus:
    """Check a config's lock without changing it (``recordkeeper lock --check``, for CI).

    ``path`` is the config (its lock is ``output``, else the file beside it, else the config
    itself when it was locked in place).  Nothing is raised for what is found: the answer lists
    the stale entries and, per pinned entry, a deprecated version, a missing one or different
    content.
    """
    source = Path(path)
    target = Path(output) if output else lock_path(source)
    if not target.exists() and not output and LOCK_META_KEY in read_config(source):
        target = source  # locked in place
    if not target.exists():
        return LockStatus(source, target, (), {}, missing=True)
    lock = read_config(target)
    entries = parse_entries(data_section(lock, key, str(target)), str(target))
    stale = staleness(
        lock,
        entries,
        key,
        source if target != source else source_of(target, lock),
        lock_file=True,  # a lock beside its config, or the config locked in place
    )
    statuses = [_entry_status(client, e) for e in entries]
    return LockStatus(source, target, tuple(statuses), stale)


def _entry_status(client: Resolver, entry: PinnedEntry) -> EntryStatus:
    if not entry.locked:
        return EntryStatus(entry.key, None, "not pinned (no digest)", StaleLock.code)
    try:
        version = client.resolve(entry.ref, expect_digest=entry.digest, shards=False)
    except (NotFound, DigestMismatch) as exc:
        return EntryStatus(entry.key, entry.ref, exc.detail, exc.code)
    if version.state == "deprecated":
        reason = f": {version.deprecated_reason}" if version.deprecated_reason else ""
        return EntryStatus(entry.key, version.name, f"deprecated{reason}", VersionDeprecated.code)
    available = None
    if entry.locked_from and not parse_reference(entry.locked_from).is_pinned:
        now = client.resolve(entry.locked_from, shards=False)
        available = now.name if now.content_digest != entry.digest else None
    return EntryStatus(entry.key, version.name, available=available)

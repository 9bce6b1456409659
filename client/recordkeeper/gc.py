"""Garbage collection of storage left by versions that never became visible.

The service decides what may be deleted.  ``GET /api/v1/gc/candidates`` (scope ``read``) lists
*candidates*: abandoned versions and staged versions idle longer than a threshold (and than the
server's own minimum, so another writer's version in progress is never one), never committed or
deprecated ones and never one a checkpoint references.  A dry run (the default) lists them with
the objects under each prefix and deletes nothing.

With ``dry_run=False``, :func:`collect_garbage` asks the service to *claim* candidates
(``POST /api/v1/gc/claims``, scope ``admin``: a token without it is refused before anything is
abandoned or deleted).  The server abandons a claimed staged version itself (a late writer cannot
commit after its files are gone), records the claim and an audit event, and releases the
version's storage prefix.  Then, for each released version only:

1. refuses a storage prefix that is not ``{root}/{dataset}/{version_name}/`` with ``root`` inside
   the service's allowed roots (nothing outside the prefix the service allocated is touched);
2. deletes every object under the prefix through fsspec and counts objects and bytes;
3. tells the service the storage was collected (``POST /versions/{name}/gc-done``, accepted from
   the claimant only; audit event with the counts).

Counts are what was deleted: a deletion that failed half-way reports the objects that are gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import RecordkeeperError, StorageError
from recordkeeper.core.naming import is_staged_name, parse_staged_name, parse_version_name
from recordkeeper.core.roots import AllowedRoots, UriError, normalize_uri
from recordkeeper.http import quote_segment
from recordkeeper.storage import backend_of, storage_errors, url_to_fs

if TYPE_CHECKING:
    from recordkeeper.registry import Registry

__all__ = [
    "GcCandidate",
    "GcItem",
    "GcReport",
    "check_prefix",
    "collect_garbage",
    "gc_candidates",
    "gc_claim",
]

DEFAULT_STAGED_OLDER_THAN = 86400


@dataclass(frozen=True)
class GcCandidate:
    """A version the service lists for garbage collection."""

    name: str
    dataset: str
    state: str
    created_at: str
    storage_prefix: str
    shard_count: int
    abandoned_at: str | None = None
    collected_at: str | None = None
    claimed_by: str | None = None
    claimed_at: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GcCandidate:
        return cls(
            name=data["name"],
            dataset=data["dataset"],
            state=data["state"],
            created_at=data["created_at"],
            storage_prefix=data["storage_prefix"],
            shard_count=int(data.get("shard_count") or 0),
            abandoned_at=data.get("abandoned_at"),
            collected_at=data.get("collected_at"),
            claimed_by=data.get("claimed_by"),
            claimed_at=data.get("claimed_at"),
        )


@dataclass
class GcItem:
    """What happened (or would happen) to one candidate.

    ``action``: ``would_delete`` (dry run), ``deleted``, ``refused`` (unsafe prefix) or
    ``skipped`` (a storage error; see ``error``).  ``objects``/``bytes`` are what was deleted
    (or would be): a ``skipped`` item may have lost some objects before the error, and a
    ``deleted`` one carries an ``error`` when the service did not record it collected.
    """

    name: str
    dataset: str
    state: str
    storage_prefix: str
    action: str
    objects: int = 0
    bytes: int = 0
    error: str | None = None


@dataclass
class GcReport:
    """The outcome of :func:`collect_garbage`; ``objects``/``bytes`` sum the items (deleted, or
    would be in a dry run)."""

    dry_run: bool
    items: list[GcItem] = field(default_factory=list)

    @property
    def objects(self) -> int:
        return sum(i.objects for i in self.items)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def versions(self) -> int:
        """Versions whose storage was removed (or would be)."""
        return sum(i.action in ("deleted", "would_delete") for i in self.items)

    @property
    def ok(self) -> bool:
        """True when every candidate was deleted (or would be) and recorded collected."""
        return all(i.action in ("deleted", "would_delete") and not i.error for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "objects": self.objects,
            "bytes": self.bytes,
            "versions": self.versions,
            "ok": self.ok,
            "items": [asdict(i) for i in self.items],
        }


def gc_candidates(
    registry: Registry,
    *,
    staged_older_than: int = DEFAULT_STAGED_OLDER_THAN,
    limit: int | None = None,
) -> list[GcCandidate]:
    """Every candidate the service lists (oldest first); nothing is claimed."""
    params = {"staged_older_than": int(staged_older_than)}
    return [
        GcCandidate.from_dict(item) for item in registry.http.paged("/gc/candidates", params, limit)
    ]


def check_prefix(candidate: GcCandidate, allowed_roots: list[str]) -> str:
    """The candidate's prefix if it is ``{root}/{dataset}/{name}/`` inside an allowed root.

    Raises :class:`ValueError` otherwise.
    """
    prefix = candidate.storage_prefix
    name = candidate.name
    parsed = parse_staged_name(name) if is_staged_name(name) else parse_version_name(name)
    if parsed.dataset != candidate.dataset:
        raise ValueError(f"{candidate.name} is not a version of {candidate.dataset}")
    tail = f"/{candidate.dataset}/{candidate.name}/"
    if "://" not in prefix or not prefix.endswith(tail):
        raise ValueError(f"storage prefix {prefix!r} is not {{root}}{tail}")
    try:
        normalize_uri(prefix)
    except UriError as exc:
        raise ValueError(f"storage prefix {prefix!r} is not safe to delete: {exc}") from None
    root = prefix[: -len(tail) + 1]  # keeps the '/' after the root
    allowed = AllowedRoots.of(allowed_roots)
    roots = list(allowed.roots)
    if not roots or not allowed.allows(root):
        raise ValueError(
            f"storage prefix {prefix!r} is outside the service's allowed roots ({', '.join(roots)})"
        )
    return prefix


def gc_claim(
    registry: Registry, *, staged_older_than: int = DEFAULT_STAGED_OLDER_THAN, limit: int = 100
) -> list[GcCandidate]:
    """Ask the service to claim up to ``limit`` candidates for this token (admin scope).

    The answer lists the versions whose storage prefixes the service released to the caller;
    an empty list means nothing (more) to collect.
    """
    body = registry.http.api(
        "POST", "/gc/claims", json={"staged_older_than": int(staged_older_than), "limit": limit}
    )
    return [GcCandidate.from_dict(item) for item in body["data"]]


def _objects(prefix: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str, dict]:
    """The filesystem, the prefix path (with '/') and {path: size} of every object under it."""
    fs, path = url_to_fs(prefix, storage_options)
    base = path.rstrip("/") + "/"
    with storage_errors(prefix):
        with contextlib.suppress(Exception):
            fs.invalidate_cache(base)  # list what is there now, not what a cache remembers
        found = fs.find(base, detail=True) if fs.exists(base.rstrip("/")) else {}
    sizes: dict[str, int] = {}
    for p, info in found.items():
        if info.get("type") == "directory":
            continue
        if not p.startswith(base):  # never outside the prefix, whatever the backend answers
            raise StorageError(f"{p} listed outside {prefix}", uri=prefix, reason="error")
        sizes[p] = int(info.get("size") or 0)
    return fs, base, sizes


def _delete(fs: Any, base: str, paths: list[str], prefix: str) -> None:
    with storage_errors(prefix):
        if paths:
            fs.rm(paths)
        if backend_of(prefix) == "file" and os.path.isdir(base):
            # Only empty directories are left; remove them (and never follow anything else).
            leftovers = [p for p in fs.find(base) if p.startswith(base)]
            if not leftovers:
                shutil.rmtree(base)
        with contextlib.suppress(Exception):
            fs.invalidate_cache(base)


def collect_garbage(
    registry: Registry,
    *,
    staged_older_than: int = DEFAULT_STAGED_OLDER_THAN,
    dry_run: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> GcReport:
    """List (dry run) or delete the storage the service releases (see the module docstring)."""
    options = storage_options if storage_options is not None else registry.storage_options or None
    allowed = list(registry.info().get("allowed_roots") or [])
    report = GcReport(dry_run=dry_run)
    if dry_run:
        for candidate in gc_candidates(registry, staged_older_than=staged_older_than):
            report.items.append(_collect(registry, candidate, allowed, True, options))
        return report
    # The service does not give a caller what it claimed less than a lease ago, so this ends;
    # ``seen`` stops it too if a run outlasts the lease (a refused prefix claimed again).
    seen: set[str] = set()
    while fresh := [
        c for c in gc_claim(registry, staged_older_than=staged_older_than) if c.name not in seen
    ]:
        for candidate in fresh:
            seen.add(candidate.name)
            report.items.append(_collect(registry, candidate, allowed, False, options))
    return report


def _collect(
    registry: Registry,
    candidate: GcCandidate,
    allowed: list[str],
    dry_run: bool,
    options: Mapping[str, Any] | None,
) -> GcItem:
    """Run the steps for one candidate (released to us unless ``dry_run``)."""
    item = GcItem(
        name=candidate.name,
        dataset=candidate.dataset,
        state=candidate.state,
        storage_prefix=candidate.storage_prefix,
        action="would_delete" if dry_run else "deleted",
    )
    try:
        prefix = check_prefix(candidate, allowed)
    except ValueError as exc:
        item.action, item.error = "refused", str(exc)
        return item
    try:
        fs, base, sizes = _objects(prefix, options)
    except StorageError as exc:
        item.action, item.error = "skipped", exc.detail
        return item
    if dry_run:
        item.objects, item.bytes = len(sizes), sum(sizes.values())
        return item
    try:
        _delete(fs, base, sorted(sizes), prefix)
    except StorageError as exc:
        item.action, item.error = "skipped", exc.detail
        try:  # count what is gone: the report never claims more, or less, than happened
            left = set(_objects(prefix, options)[2])
        except StorageError:
            left = set(sizes)
        gone = [p for p in sizes if p not in left]
        item.objects, item.bytes = len(gone), sum(sizes[p] for p in gone)
        return item
    item.objects, item.bytes = len(sizes), sum(sizes.values())
    try:
        registry.http.api(
            "POST",
            f"/versions/{quote_segment(candidate.name)}/gc-done",
            json={"objects": item.objects, "bytes": item.bytes},
            idempotent=True,
        )
    except RecordkeeperError as exc:
        item.error = f"deleted, but not recorded collected: {exc.detail}"
    return item

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
version's storage prefix: from then on no version may register a shard there.  Then, for each
released version only:

1. refuses a storage prefix that is not ``{root}/{dataset}/{version_name}/`` with ``root``
   inside the *deletion roots*: the service's allowed roots intersected with the roots
   configured where the collector runs (``allowed_roots=``, ``recordkeeper gc --root``, else
   ``RECORDKEEPER_ALLOWED_ROOTS`` in its environment).  A service — or a proxy — that reports
   wider roots (``file:///``) widens nothing; with no local roots configured nothing is deleted;
2. lists the objects under the prefix: on local disk by real path, inside the real paths of the
   deletion roots, never entering a symbolic link (:mod:`recordkeeper.local_files`; a link is
   an object of its own, removed as a link); elsewhere through fsspec;
3. asks the service, per batch, which of them it may delete
   (``POST /versions/{name}/gc-objects``): an object another live version references (a shard
   registered in place under the prefix) is *kept*, and reported as kept;
4. deletes the others (locally by descriptor, never following a link) and counts objects and
   bytes, then tells the service the storage was collected (``POST /versions/{name}/gc-done``,
   accepted from the claimant only; audit event with the counts).

Counts are what was deleted: a deletion that failed half-way reports the objects that are gone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper import local_files
from recordkeeper.core.errors import (
    RecordkeeperError,
    StorageError,
    StorageRootNotAllowed,
    UnsafeStoragePath,
)
from recordkeeper.core.naming import is_staged_name, parse_staged_name, parse_version_name
from recordkeeper.core.roots import (
    AllowedRoots,
    UriError,
    configured_roots,
    intersect_roots,
    normalize_uri,
)
from recordkeeper.http import quote_segment
from recordkeeper.storage import profile_of, storage_errors, url_to_fs

if TYPE_CHECKING:
    from recordkeeper.registry import Registry

__all__ = [
    "GcCandidate",
    "GcItem",
    "GcReport",
    "check_prefix",
    "collect_garbage",
    "deletion_roots",
    "gc_candidates",
    "gc_claim",
]

DEFAULT_STAGED_OLDER_THAN = 86400
#: The collector's own roots when none are passed: the service's setting, read where gc runs.
ROOTS_ENV = "RECORDKEEPER_ALLOWED_ROOTS"
#: Object URIs per "which of these may I delete?" question (the service's maximum).
QUESTION_SIZE = 1000


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

    ``action``: ``would_delete`` (dry run), ``deleted``, ``refused`` (unsafe prefix, a link
    leaving the roots) or ``skipped`` (a storage error; see ``error``).  ``objects``/``bytes``
    are what was deleted (or would be): a ``skipped`` item may have lost some objects before
    the error, and a ``deleted`` one carries an ``error`` when the service did not record it
    collected.  ``kept`` counts objects under the prefix the service said another live version
    references: they were not deleted (a dry run asks the same question, ``gc-preview``, and
    counts them as kept, not as would-delete).
    """

    name: str
    dataset: str
    state: str
    storage_prefix: str
    action: str
    objects: int = 0
    bytes: int = 0
    kept: int = 0
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
    def kept(self) -> int:
        """Objects kept because another live version references them."""
        return sum(i.kept for i in self.items)

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
            "kept": self.kept,
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


def deletion_roots(reported: Iterable[str], local: Sequence[str] | None = None) -> tuple[str, ...]:
    """The roots the collector may delete in: the service's ``reported`` roots intersected
    with ``local`` (default: ``RECORDKEEPER_ALLOWED_ROOTS`` where this runs, comma-separated).

    Raises :class:`~recordkeeper.core.errors.StorageRootNotAllowed` when no local roots are
    configured, or one is malformed or admits every location (``file:///``).
    """
    if local is None:
        local = [r.strip() for r in os.environ.get(ROOTS_ENV, "").split(",") if r.strip()]
    if not local:
        raise StorageRootNotAllowed(
            "gc --delete deletes only inside roots configured where it runs, intersected with "
            f"the service's: pass --root (allowed_roots=) or set {ROOTS_ENV}; nothing was "
            "claimed or deleted",
            allowed_roots=[],
        )
    try:
        ours = configured_roots(local, "gc roots")
    except UriError as exc:
        raise StorageRootNotAllowed(str(exc), allowed_roots=list(local)) from None
    return intersect_roots(ours, reported)


def check_prefix(candidate: GcCandidate, allowed_roots: Sequence[str]) -> str:
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
            f"storage prefix {prefix!r} is outside the allowed roots gc deletes in (the "
            f"service's intersected with this collector's: {', '.join(roots) or 'none'})"
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


def _remote_objects(
    prefix: str, storage_options: Mapping[str, Any] | None
) -> tuple[Any, str, dict[str, int]]:
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


class _Storage:
    """The objects under one released prefix, as ``{relative path: size}``, and deleting them:
    on local disk by descriptor inside the real deletion roots (never through a link), else
    through fsspec."""

    def __init__(
        self, prefix: str, roots: Sequence[str], options: Mapping[str, Any] | None
    ) -> None:
        self.prefix = prefix
        self.local = profile_of(prefix).local
        self._roots = local_files.real_roots(roots)
        self._options = options
        self._fs: Any = None
        self._base = ""

    def listing(self) -> dict[str, int]:
        if self.local:
            with storage_errors(self.prefix):
                path = local_files.local_path(self.prefix)
                return {o.relative: o.size for o in local_files.walk_objects(path, self._roots)}
        self._fs, self._base, sizes = _remote_objects(self.prefix, self._options)
        return {p[len(self._base) :]: size for p, size in sizes.items()}

    def delete(self, relatives: list[str]) -> set[str]:
        """Delete these; returns the ones gone.  Raises StorageError on a store failure."""
        if not relatives:
            return set()
        if self.local:
            with storage_errors(self.prefix):
                path = local_files.local_path(self.prefix)
                return set(local_files.delete_objects(path, self._roots, relatives))
        with storage_errors(self.prefix):
            self._fs.rm([self._base + r for r in relatives])
            with contextlib.suppress(Exception):
                self._fs.invalidate_cache(self._base)
        return set(relatives)

    def remove_empty_directories(self) -> None:
        if self.local:
            with storage_errors(self.prefix):
                path = local_files.local_path(self.prefix)
                local_files.remove_empty_directories(path, self._roots)


def collect_garbage(
    registry: Registry,
    *,
    staged_older_than: int = DEFAULT_STAGED_OLDER_THAN,
    dry_run: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    allowed_roots: Sequence[str] | None = None,
) -> GcReport:
    """List (dry run) or delete the storage the service releases (see the module docstring).

    ``allowed_roots``: the roots this collector may delete in (default
    ``RECORDKEEPER_ALLOWED_ROOTS`` here), intersected with the service's; required to delete
    (:class:`~recordkeeper.core.errors.StorageRootNotAllowed` before anything is claimed).
    A dry run uses them when given, else the service's roots (it deletes nothing).
    """
    options = storage_options if storage_options is not None else registry.storage_options or None
    reported = list(registry.info().get("allowed_roots") or [])
    report = GcReport(dry_run=dry_run)
    if dry_run:
        env_roots = os.environ.get(ROOTS_ENV, "").strip()
        roots = (
            deletion_roots(reported, allowed_roots)
            if allowed_roots is not None or env_roots
            else tuple(reported)
        )
        for candidate in gc_candidates(registry, staged_older_than=staged_older_than):
            report.items.append(_collect(registry, candidate, roots, True, options))
        return report
    roots = deletion_roots(reported, allowed_roots)
    # The service does not give a caller what it claimed less than a lease ago, so this ends;
    # ``seen`` stops it too if a run outlasts the lease (a refused prefix claimed again).
    seen: set[str] = set()
    while fresh := [
        c for c in gc_claim(registry, staged_older_than=staged_older_than) if c.name not in seen
    ]:
        for candidate in fresh:
            seen.add(candidate.name)
            report.items.append(_collect(registry, candidate, roots, False, options))
    return report


def _collect(
    registry: Registry,
    candidate: GcCandidate,
    roots: Sequence[str],
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
        prefix = check_prefix(candidate, roots)
    except ValueError as exc:
        item.action, item.error = "refused", str(exc)
        return item
    storage = _Storage(prefix, roots, options)
    try:
        sizes = storage.listing()
    except UnsafeStoragePath as exc:
        item.action, item.error = "refused", exc.detail
        return item
    except StorageError as exc:
        item.action, item.error = "skipped", exc.detail
        return item
    if dry_run:
        # the service's answer for a claimed version, asked without claiming: objects another
        # live version references are kept, not counted as would-delete
        try:
            would: list[str] = []
            for batch in _batches(sorted(sizes), QUESTION_SIZE):
                allowed = _may_delete(registry, candidate.name, prefix, batch, preview=True)
                item.kept += len(batch) - len(allowed)
                would += allowed
        except RecordkeeperError as exc:
            item.action, item.error = "skipped", f"the service did not answer what to keep: {exc}"
            return item
        item.objects, item.bytes = len(would), sum(sizes[p] for p in would)
        return item
    gone: set[str] = set()
    try:
        for batch in _batches(sorted(sizes), QUESTION_SIZE):
            allowed = _may_delete(registry, candidate.name, prefix, batch)
            item.kept += len(batch) - len(allowed)
            gone |= storage.delete(allowed)
    except UnsafeStoragePath as exc:
        item.action, item.error = "refused", exc.detail
    except StorageError as exc:
        item.action, item.error = "skipped", exc.detail
        with contextlib.suppress(StorageError):  # count what is gone: never more, or less
            left = storage.listing()
            gone = {p for p in sizes if p not in left}
    except RecordkeeperError as exc:
        item.action, item.error = "skipped", f"the service did not answer what to keep: {exc}"
    item.objects, item.bytes = len(gone), sum(sizes[p] for p in gone)
    if item.action != "deleted":
        return item
    if not item.kept:
        with contextlib.suppress(StorageError):
            storage.remove_empty_directories()
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


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _may_delete(
    registry: Registry, name: str, prefix: str, relatives: list[str], *, preview: bool = False
) -> list[str]:
    """Those of ``relatives`` (under ``prefix``) the service says no live version references
    (``preview``: asked for a dry run, of a version not claimed)."""
    by_uri = {prefix + relative: relative for relative in relatives}
    answer = registry.http.api(
        "POST",
        f"/versions/{quote_segment(name)}/{'gc-preview' if preview else 'gc-objects'}",
        json={"uris": list(by_uri)},
        idempotent=True,
    )
    return [by_uri[uri] for uri in answer.get("delete") or [] if uri in by_uri]

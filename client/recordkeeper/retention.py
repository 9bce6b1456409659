"""Retention of committed versions: policies, pins, the plan, and applying it.

The service decides (:mod:`recordkeeper.core.retention` holds the rules): ``GET
/retention/plan`` answers what an apply would delete, why every other version is kept and the
objects and bytes it would free; nothing changes.  :func:`apply_retention` deletes, and only
through the service's claims (an ``admin`` token):

1. ``POST /retention/claims`` releases expired versions to this caller (the caller's own
   unfinished claims first: an apply that crashed is finished by the next);
2. for each released version, its shard list is read page by page and, per batch of objects,
   ``POST /retention/deletable`` answers which of them may be deleted (never one a live
   version references);
3. each such object is deleted if it lies inside the deletion roots — the service's allowed
   roots intersected with the collector's own (``allowed_roots=``, ``--root``, else
   ``RECORDKEEPER_ALLOWED_ROOTS`` where apply runs; :func:`recordkeeper.gc.deletion_roots`, the
   same rule as gc) — on local disk by real path and never through a symbolic link (a link is
   removed as itself, its target untouched: :mod:`recordkeeper.local_files`); a missing object
   counts as deleted (a previous run, or someone else, removed it);
4. ``POST /versions/{name}/retention-done`` records the version's data deleted.  A version
   with an object that could not be deleted (a storage error) is not reported done: it stays
   claimed, the report says what was left, and running apply again finishes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper import local_files
from recordkeeper.core.errors import RecordkeeperError, StorageError, UnsafeStoragePath
from recordkeeper.core.retention import DEFAULT_SCOPE, RetentionPolicy
from recordkeeper.core.roots import AllowedRoots, UriError, normalize_uri
from recordkeeper.gc import deletion_roots
from recordkeeper.http import quote_segment
from recordkeeper.storage import profile_of, storage_errors, url_to_fs

if TYPE_CHECKING:
    from recordkeeper.registry import Registry

__all__ = [
    "PlanItem",
    "PolicyInfo",
    "RetentionItem",
    "RetentionPlan",
    "RetentionReport",
    "apply_retention",
    "delete_policy",
    "get_policy",
    "list_pins",
    "list_policies",
    "pin_versions",
    "retention_plan",
    "set_policy",
    "unpin",
]

#: Objects asked about per ``deletable`` request.
BATCH = 1000
#: Versions claimed per request.
CLAIM_BATCH = 20


@dataclass(frozen=True)
class PolicyInfo:
    """The policy in force for a scope (a dataset, or ``*``); ``source``: ``dataset``,
    ``default`` (the service-wide policy) or ``none`` (nothing expires)."""

    scope: str
    source: str
    policy: RetentionPolicy | None
    describe: str
    updated_at: str | None = None
    updated_by: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyInfo:
        body = data.get("policy")
        return cls(
            scope=data["scope"],
            source=data["source"],
            policy=RetentionPolicy.from_json(body) if body is not None else None,
            describe=data.get("describe", ""),
            updated_at=data.get("updated_at"),
            updated_by=data.get("updated_by"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "source": self.source,
            "policy": self.policy.to_json() if self.policy is not None else None,
            "describe": self.describe,
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True)
class PlanItem:
    """One version in a plan: ``action`` is ``keep``, ``delete``, ``needs_force`` (expired,
    but checkpoints trained on it: apply deletes it only with force and a reason) or
    ``resume`` (an earlier apply released it and did not finish).  ``kept_by``: the rules that
    keep it, as ``(rule, detail)``; ``objects``/``bytes``: what deleting it frees (each object
    once); ``shared``: its objects another live version keeps."""

    name: str
    dataset: str
    number: int
    state: str
    action: str
    kept_by: tuple[tuple[str, str], ...] = ()
    trained: tuple[str, ...] = ()
    objects: int = 0
    bytes: int = 0
    shared: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanItem:
        return cls(
            name=data["name"],
            dataset=data["dataset"],
            number=int(data["number"]),
            state=data["state"],
            action=data["action"],
            kept_by=tuple((k["rule"], k["detail"]) for k in data.get("kept_by") or ()),
            trained=tuple(data.get("trained") or ()),
            objects=int(data.get("objects") or 0),
            bytes=int(data.get("bytes") or 0),
            shared=int(data.get("shared") or 0),
        )


@dataclass(frozen=True)
class RetentionPlan:
    """What :func:`apply_retention` would do; nothing was changed to answer it."""

    dataset: str | None
    force: bool
    items: tuple[PlanItem, ...]
    objects: int
    bytes: int
    data_deleted: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionPlan:
        return cls(
            dataset=data.get("dataset"),
            force=bool(data.get("force")),
            items=tuple(PlanItem.from_dict(i) for i in data.get("items") or ()),
            objects=int(data.get("objects") or 0),
            bytes=int(data.get("bytes") or 0),
            data_deleted=int(data.get("data_deleted") or 0),
        )

    @property
    def to_delete(self) -> list[PlanItem]:
        return [i for i in self.items if i.action in ("delete", "resume")]

    @property
    def kept(self) -> list[PlanItem]:
        return [i for i in self.items if i.action == "keep"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "force": self.force,
            "objects": self.objects,
            "bytes": self.bytes,
            "data_deleted": self.data_deleted,
            "items": [
                dict(asdict(i), kept_by=[{"rule": r, "detail": d} for r, d in i.kept_by])
                for i in self.items
            ],
        }


@dataclass
class RetentionItem:
    """What apply did to one released version.  ``action``: ``deleted`` (recorded done) or
    ``incomplete`` (some objects are left: ``failed`` lists them with the error; the version
    stays released to this caller and the next apply finishes it).  ``kept``: its objects a
    live version references (or that lie outside the allowed roots), never deleted."""

    name: str
    dataset: str
    action: str = "deleted"
    resumed: bool = False
    forced: bool = False
    objects: int = 0
    bytes: int = 0
    kept: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None


@dataclass
class RetentionReport:
    """The outcome of :func:`apply_retention`."""

    items: list[RetentionItem] = field(default_factory=list)

    @property
    def objects(self) -> int:
        return sum(i.objects for i in self.items)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def ok(self) -> bool:
        """True when every released version's data was deleted and recorded."""
        return all(i.action == "deleted" and i.error is None for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "versions": sum(i.action == "deleted" for i in self.items),
            "objects": self.objects,
            "bytes": self.bytes,
            "items": [asdict(i) for i in self.items],
        }


# -- policies and pins ---------------------------------------------------------------------


def _scope(dataset: str | None) -> str:
    return quote_segment(dataset if dataset is not None else DEFAULT_SCOPE)


def get_policy(registry: Registry, dataset: str | None = None) -> PolicyInfo:
    """The policy in force for ``dataset`` (its own, else the default), or the default."""
    return PolicyInfo.from_dict(registry.http.api("GET", f"/retention/policies/{_scope(dataset)}"))


def set_policy(
    registry: Registry,
    dataset: str | None = None,
    *,
    keep_last: int | None = None,
    keep_days: int | None = None,
    keep_aliased: bool = True,
    keep_trained: bool = True,
    keep_pinned: bool = True,
) -> PolicyInfo:
    """Set ``dataset``'s retention policy (None: the service-wide default); admin token.

    A version is kept when any rule keeps it: an alias (``latest`` too) names it, a checkpoint
    that is not deleted trained on it, a pin names it, it is among the ``keep_last``
    highest-numbered, or it was committed less than ``keep_days`` days ago.  The rest expire.
    """
    policy = RetentionPolicy.from_json(
        {
            "keep_last": keep_last,
            "keep_days": keep_days,
            "keep_aliased": keep_aliased,
            "keep_trained": keep_trained,
            "keep_pinned": keep_pinned,
        }
    )
    body = registry.http.api(
        "PUT", f"/retention/policies/{_scope(dataset)}", json=policy.to_json(), idempotent=True
    )
    return PolicyInfo.from_dict(body)


def delete_policy(registry: Registry, dataset: str | None) -> None:
    """Remove ``dataset``'s policy (None: the default); admin token."""
    registry.http.api("DELETE", f"/retention/policies/{_scope(dataset)}", idempotent=True)


def pin_versions(registry: Registry, label: str, versions: Sequence[str]) -> list[dict[str, Any]]:
    """Pin ``versions`` (references) under ``label``: kept while the policy keeps pins."""
    body = registry.http.api(
        "POST",
        "/retention/pins",
        json={"label": label, "versions": list(versions)},
        idempotent=True,
    )
    return list(body["data"])


def unpin(registry: Registry, label: str) -> int:
    """Remove every pin called ``label``; how many there were."""
    body = registry.http.api("DELETE", "/retention/pins", params={"label": label}, idempotent=True)
    return int(body["removed"])


def list_policies(registry: Registry) -> list[PolicyInfo]:
    """Every policy set: the service-wide default (``*``) first."""
    return [
        PolicyInfo.from_dict(p) for p in registry.http.api("GET", "/retention/policies")["data"]
    ]


def list_pins(registry: Registry, dataset: str | None = None) -> list[dict[str, Any]]:
    """Registered pins (of ``dataset``): ``label``, ``version``, ``dataset``, who and when."""
    body = registry.http.api("GET", "/retention/pins", params={"dataset": dataset})
    return list(body["data"])


# -- plan and apply ------------------------------------------------------------------------


def retention_plan(
    registry: Registry, dataset: str | None = None, *, force: bool = False
) -> RetentionPlan:
    """What an apply would delete and free, and why every other version is kept."""
    params = {"dataset": dataset, "force": "true" if force else None}
    return RetentionPlan.from_dict(registry.http.api("GET", "/retention/plan", params=params))


def apply_retention(
    registry: Registry,
    dataset: str | None = None,
    *,
    force: bool = False,
    reason: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allowed_roots: Sequence[str] | None = None,
) -> RetentionReport:
    """Delete the data of expired versions through the service's claims (module docstring).

    ``force`` (with ``reason``, recorded in the audit log) also deletes data checkpoints that
    are not deleted trained on.  ``allowed_roots``: where this collector may delete (default
    ``RECORDKEEPER_ALLOWED_ROOTS`` here), intersected with the service's; required
    (:class:`~recordkeeper.core.errors.StorageRootNotAllowed` before anything is claimed).
    """
    options = storage_options if storage_options is not None else registry.storage_options or None
    reported = list(registry.info().get("allowed_roots") or [])
    roots = AllowedRoots.of(deletion_roots(reported, allowed_roots))
    report = RetentionReport()
    seen: list[str] = []
    while True:
        body: dict[str, Any] = {"limit": CLAIM_BATCH, "exclude": seen, "force": force}
        if dataset is not None:
            body["dataset"] = dataset
        if force:
            body["reason"] = reason
        # Replaying a claim is safe: the caller's unfinished claims come back to it.
        claims = registry.http.api("POST", "/retention/claims", json=body, idempotent=True)["data"]
        if not claims:
            return report
        for claim in claims:
            seen.append(claim["name"])
            report.items.append(_finish(registry, claim, roots, options))


def _finish(
    registry: Registry,
    claim: Mapping[str, Any],
    roots: AllowedRoots,
    options: Mapping[str, Any] | None,
) -> RetentionItem:
    item = RetentionItem(
        name=claim["name"],
        dataset=claim["dataset"],
        resumed=bool(claim.get("resumed")),
        forced=bool(claim.get("forced")),
    )
    try:
        for batch in _batches(registry, item.name):
            sizes = dict(batch)
            answer = registry.http.api(
                "POST",
                "/retention/deletable",
                json={"version": item.name, "uris": sorted(sizes)},
                idempotent=True,
            )
            item.kept += len(answer["kept"])
            gone, failed = delete_objects(answer["deletable"], roots, options)
            item.objects += len(gone)
            item.bytes += sum(sizes.get(uri, 0) for uri in gone)
            item.failed += [{"uri": uri, "error": why} for uri, why in failed.items()]
    except RecordkeeperError as exc:
        item.action, item.error = "incomplete", exc.detail
        return item
    if item.failed:
        item.action = "incomplete"
        item.error = f"{len(item.failed)} object(s) not deleted; run apply again to finish"
        return item
    try:
        registry.http.api(
            "POST",
            f"/versions/{quote_segment(item.name)}/retention-done",
            json={"objects": item.objects, "bytes": item.bytes, "kept": item.kept},
            idempotent=True,
        )
    except RecordkeeperError as exc:
        item.action, item.error = "incomplete", f"deleted, but not recorded: {exc.detail}"
    return item


def _batches(registry: Registry, name: str) -> Iterator[list[tuple[str, int]]]:
    batch: dict[str, int] = {}
    for page in registry.shard_pages(name):
        for shard in page:
            batch[shard.uri] = shard.size
            if len(batch) >= BATCH:
                yield list(batch.items())
                batch = {}
    if batch:
        yield list(batch.items())


def delete_objects(
    uris: Sequence[str], roots: AllowedRoots, options: Mapping[str, Any] | None
) -> tuple[list[str], dict[str, str]]:
    """Delete released objects that lie inside ``roots``: ``(deleted, {uri: why not})``.

    A missing object counts as deleted.  Local objects are unlinked by directory descriptor,
    never through a link (:func:`recordkeeper.local_files.delete_objects`); object-store ones
    in one bulk request per batch, then one by one if that fails, so each failure is named.
    """
    deleted: list[str] = []
    failed: dict[str, str] = {}
    local: dict[str, dict[str, str]] = {}
    remote: dict[str, list[tuple[str, str]]] = {}
    for uri in uris:
        try:
            normalized = normalize_uri(uri)
        except UriError as exc:
            failed[uri] = str(exc)
            continue
        if not roots.allows(normalized):
            failed[uri] = f"{uri} is outside the deletion roots"
        elif profile_of(normalized).local:
            directory, _, name = local_files.local_path(normalized).rpartition("/")
            local.setdefault(directory, {})[name] = uri
        else:
            remote.setdefault(profile_of(normalized).name, []).append((uri, normalized))
    real = local_files.real_roots(roots.roots)
    for directory, names in local.items():
        try:
            gone = set(local_files.delete_objects(directory, real, list(names)))
        except FileNotFoundError:
            gone = set(names)  # its directory is gone: so are they
        except (StorageError, UnsafeStoragePath, OSError) as exc:
            failed.update({uri: str(exc) for uri in names.values()})
            continue
        for name, uri in names.items():
            if name in gone:
                deleted.append(uri)
            else:
                failed[uri] = f"{uri} is a directory, or lies behind a link: not deleted"
    for objects in remote.values():
        _delete_remote(objects, options, deleted, failed)
    return deleted, failed


def _delete_remote(
    objects: list[tuple[str, str]],
    options: Mapping[str, Any] | None,
    deleted: list[str],
    failed: dict[str, str],
) -> None:
    fs, _ = url_to_fs(objects[0][1], options)
    paths = [url_to_fs(normalized, options)[1] for _, normalized in objects]
    try:
        with storage_errors(objects[0][0]), contextlib.suppress(FileNotFoundError):
            fs.rm(paths)
        deleted.extend(uri for uri, _ in objects)
        return
    except StorageError:
        pass  # name each failure: one by one
    for (uri, _), path in zip(objects, paths, strict=True):
        try:
            with storage_errors(uri), contextlib.suppress(FileNotFoundError):
                fs.rm_file(path)
            deleted.append(uri)
        except StorageError as exc:
            failed[uri] = exc.detail
    with contextlib.suppress(Exception):
        fs.invalidate_cache()

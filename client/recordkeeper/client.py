"""The recordkeeper :class:`Client`: talks to the registry service and hands out versions.

Configuration lives on the instance: the URL and token default to ``RECORDKEEPER_URL`` /
``RECORDKEEPER_TOKEN`` read when the client is made (not at import time).  The client is a thin
façade: it builds one :class:`recordkeeper.http.HttpCore` (requests, retries, typed errors,
paging) and a :class:`recordkeeper.registry.Registry` on it, and each method delegates in one
line to the module that implements it (registry, writer, publish, lineage, pinned, gc).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from recordkeeper import gc, lineage
from recordkeeper.core.schema import Schema
from recordkeeper.dataset import Dataset
from recordkeeper.diff import VersionDiff
from recordkeeper.gc import GcCandidate, GcReport
from recordkeeper.http import DEFAULT_URL, HttpCore
from recordkeeper.lineage import (
    CheckpointFields,
    CheckpointInfo,
    CheckpointRef,
    Consumers,
    Lineage,
    LineageGraph,
    ModelInfo,
)
from recordkeeper.lineage_queue import FlushResult, RegistrationQueue
from recordkeeper.models import DatasetInfo, DatasetVersion
from recordkeeper.pinned import PinnedData, load_pinned
from recordkeeper.progress import ProgressLike
from recordkeeper.publish import publish
from recordkeeper.registry import (
    MAX_SHARDS_PER_REQUEST,
    DuplicateWarning,
    OnDuplicate,
    Registry,
)
from recordkeeper.writer import VersionWriter

if TYPE_CHECKING:
    import datetime

    import httpx

__all__ = ["DEFAULT_URL", "MAX_SHARDS_PER_REQUEST", "Client", "DuplicateWarning"]


class Client:
    """A connection to one recordkeeper service.

    ``http_client`` may be any :class:`httpx.Client`; FastAPI's ``TestClient(app)`` runs the
    client against an app in-process.  ``storage_options`` are the default fsspec options
    (credentials, endpoint) for versions this client resolves, writes or publishes.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.http = HttpCore.from_env(
            url, token, http_client=http_client, timeout=timeout, retries=retries
        )
        self.registry = Registry(self.http, storage_options)
        self.url = self.http.base_url
        self.token = self.http.token

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    @property
    def storage_options(self) -> dict[str, Any]:
        """Default fsspec options for versions this client resolves, writes or publishes."""
        return self.registry.storage_options

    @storage_options.setter
    def storage_options(self, value: Mapping[str, Any] | None) -> None:
        self.registry.storage_options = dict(value or {})

    def close(self) -> None:
        """Close connections this client opened."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- service ---------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The service's ``/info``: storage root, allowed roots, limits (cached)."""
        return self.registry.info()

    def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        return self.registry.health()

    # -- reading -----------------------------------------------------------------------------

    def datasets(self, prefix: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Every dataset (optionally only names starting with ``prefix``)."""
        return self.registry.datasets(prefix, limit=limit)

    def versions(
        self,
        dataset: str,
        *,
        state: str | None = None,
        since: str | datetime.date | None = None,
        until: str | datetime.date | None = None,
        limit: int | None = None,
    ) -> list[DatasetVersion]:
        """Versions of ``dataset`` newest first, without shards (use :meth:`resolve` for those)."""
        return self.registry.versions(dataset, state=state, since=since, until=until, limit=limit)

    def resolve(
        self, ref: str, *, expect_digest: str | None = None, shards: bool = True
    ) -> DatasetVersion:
        """Resolve a reference (``coco@latest``, ``coco@v3``, a name, a digest) to a version.

        ``expect_digest`` (``sha256:…``) makes resolution fail with
        :class:`~recordkeeper.errors.DigestMismatch` if the content differs from the pin.
        """
        return self.registry.resolve(ref, expect_digest=expect_digest, shards=shards)

    def schema(self, ref: str) -> Schema:
        """The merged schema of a version."""
        return self.registry.schema(ref)

    def diff(self, a: str | DatasetVersion, b: str | DatasetVersion) -> VersionDiff:
        """What changed from version ``a`` to version ``b`` (shards, record counts, schema)."""
        return self.registry.diff(a, b)

    # -- aliases -----------------------------------------------------------------------------

    def set_alias(self, dataset: str, alias: str, ref: str | DatasetVersion) -> dict[str, Any]:
        """Point ``dataset@alias`` at a committed version; returns the alias record."""
        return self.registry.set_alias(dataset, alias, ref)

    def aliases(self, dataset: str) -> list[dict[str, Any]]:
        """Aliases of ``dataset`` (``latest`` included)."""
        return self.registry.aliases(dataset)

    def alias_history(self, dataset: str, alias: str) -> list[dict[str, Any]]:
        """Moves of one alias, newest first."""
        return self.registry.alias_history(dataset, alias)

    def delete_alias(self, dataset: str, alias: str) -> None:
        self.registry.delete_alias(dataset, alias)

    # -- lifecycle -----------------------------------------------------------------------------

    def stage(
        self,
        dataset: str,
        *,
        desc: str | None = None,
        date: str | datetime.date | None = None,
        root: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> DatasetVersion:
        """Stage a new version: the service allocates its number, name and storage prefix."""
        return self.registry.stage(dataset, desc=desc, date=date, root=root, metadata=metadata)

    def register_shards(
        self, version: str | DatasetVersion, shards: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        """Register shard records on a staged version, in batches the service accepts.

        Returns the summed ``registered``/``unchanged`` counts and the final ``shard_count``.
        Registering identical shards again is a no-op, so batches are safe to retry.
        """
        return self.registry.register_shards(version, shards)

    def commit(
        self, version: str | DatasetVersion, *, on_duplicate: OnDuplicate = "error"
    ) -> DatasetVersion:
        """Commit a staged version (idempotent).

        ``on_duplicate``: ``error`` raises :class:`~recordkeeper.errors.DuplicateContent` when a
        committed version has the same content, ``use_existing`` answers that version (and
        abandons the staged one), ``commit`` commits anyway.
        """
        return self.registry.commit(version, on_duplicate=on_duplicate)

    def abandon(self, version: str | DatasetVersion) -> DatasetVersion:
        """Abandon a staged version (idempotent); committed versions cannot be abandoned."""
        return self.registry.abandon(version)

    def deprecate(
        self, ref: str | DatasetVersion, reason: str | None = None, *, force: bool = False
    ) -> DatasetVersion:
        """Deprecate a version: it stays resolvable by name but leaves ``latest``.

        A version that trained checkpoints raises :class:`~recordkeeper.errors.VersionInUse`
        unless ``force`` (admin tokens only).
        """
        return self.registry.deprecate(ref, reason, force=force)

    # -- writing -------------------------------------------------------------------------------

    def writer(
        self,
        dataset: str,
        *,
        root: str | None = None,
        desc: str | None = None,
        compression: str | None = None,
        shard_size: int | str = "256MB",
        storage_options: Mapping[str, Any] | None = None,
        date: str | datetime.date | None = None,
        force_new: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> VersionWriter:
        """A context manager writing a new version (see :mod:`recordkeeper.writer`)."""
        return VersionWriter(
            self.registry,
            dataset,
            root=root,
            desc=desc,
            compression=compression,
            shard_size=shard_size,
            storage_options=(
                storage_options if storage_options is not None else self.storage_options
            ),
            date=date,
            force_new=force_new,
            metadata=metadata,
        )

    def publish(
        self,
        dataset: Dataset,
        *,
        desc: str | None = None,
        copy_to: str | bool | None = None,
        force_new: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        date: str | datetime.date | None = None,
        max_workers: int | None = None,
        progress: bool | ProgressLike | None = None,
    ) -> DatasetVersion:
        """Register existing shards as a new version (see :mod:`recordkeeper.publish`)."""
        return publish(
            self.registry,
            dataset,
            desc=desc,
            copy_to=copy_to,
            force_new=force_new,
            storage_options=storage_options,
            date=date,
            max_workers=max_workers,
            progress=progress,
        )

    # -- lineage (implemented in recordkeeper.lineage / recordkeeper.pinned) -------------------

    def register_checkpoint(
        self, *, model: str, checkpoint: str, **fields: Unpack[CheckpointFields]
    ) -> CheckpointInfo:
        """Record a checkpoint and the data it trained on (see :mod:`recordkeeper.lineage`)."""
        return lineage.register_checkpoint(self.http, model=model, checkpoint=checkpoint, **fields)

    def checkpoint(self, ref: str | CheckpointRef) -> CheckpointInfo:
        """One checkpoint, ``model/ckpt-1234``."""
        return lineage.checkpoint(self.http, ref)

    def checkpoints(self, model: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        """A model's checkpoints."""
        return lineage.checkpoints(self.http, model, limit=limit)

    def models(self, prefix: str | None = None, *, limit: int | None = None) -> list[ModelInfo]:
        """Models with registered checkpoints."""
        return lineage.models(self.http, prefix, limit=limit)

    def lineage(self, ref: str | CheckpointRef) -> Lineage:
        """Which data trained a checkpoint (the union along its parent chain)."""
        return lineage.lineage(self.http, ref)

    def lineage_json(self, ref: str | CheckpointRef) -> dict[str, Any]:
        """The service's lineage answer as JSON (what ``recordkeeper lineage --json`` prints)."""
        return lineage.lineage_json(self.http, ref)

    def consumers(
        self, ref: Any, *, transitive: bool = True, limit: int | None = None
    ) -> Consumers:
        """Which checkpoints used a version."""
        return lineage.consumers(self.http, ref, transitive=transitive, limit=limit)

    def shard_consumers(
        self, uri_or_sha256: str, *, transitive: bool = True, limit: int | None = None
    ) -> Consumers:
        """Which checkpoints used a shard (by URI or sha256)."""
        return lineage.shard_consumers(self.http, uri_or_sha256, transitive=transitive, limit=limit)

    def lineage_graph(self, **kwargs: Any) -> LineageGraph:
        """The lineage graph around a checkpoint or version."""
        return lineage.lineage_graph(self.http, **kwargs)

    def resolve_pinned(self, path: str | Path, **kwargs: Any) -> PinnedData:
        """Resolve a pinned training config (see :mod:`recordkeeper.pinned`)."""
        return load_pinned(path, client=self, **kwargs)

    def flush_checkpoints(self, queue: str | Path | None = None) -> FlushResult:
        """Send checkpoint registrations queued while the service was unreachable."""
        return RegistrationQueue(self, queue).flush()

    # -- garbage collection (implemented in recordkeeper.gc) ----------------------------------

    def gc_candidates(
        self, *, staged_older_than: int = 86400, limit: int | None = None
    ) -> list[GcCandidate]:
        """Abandoned and stale staged versions whose storage may be deleted (oldest first)."""
        return gc.gc_candidates(self.registry, staged_older_than=staged_older_than, limit=limit)

    def collect_garbage(
        self,
        *,
        staged_older_than: int = 86400,
        dry_run: bool = True,
        storage_options: Mapping[str, Any] | None = None,
    ) -> GcReport:
        """Delete the storage of versions that never became visible (dry run by default)."""
        return gc.collect_garbage(
            self.registry,
            staged_older_than=staged_older_than,
            dry_run=dry_run,
            storage_options=storage_options,
        )

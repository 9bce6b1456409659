"""The recordkeeper :class:`Client`: talks to the registry service and hands out versions.

Configuration lives on the instance: the URL and token default to ``RECORDKEEPER_URL`` /
``RECORDKEEPER_TOKEN`` read when the client is made (not at import time).  Every request goes
through :class:`recordkeeper._http.HttpCore` (retries, typed errors).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper._http import HttpCore, quote_segment
from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import InvalidReference
from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.refs import parse_reference, validate_alias_name
from recordkeeper.core.schema import Schema
from recordkeeper.models import DatasetInfo, DatasetVersion

if TYPE_CHECKING:
    import datetime
    from pathlib import Path

    import httpx

    from recordkeeper.core.lineage import CheckpointRef
    from recordkeeper.dataset import Dataset
    from recordkeeper.diff import VersionDiff
    from recordkeeper.gc import GcCandidate, GcReport
    from recordkeeper.lineage import (
        CheckpointInfo,
        Consumers,
        Lineage,
        LineageGraph,
        ModelInfo,
    )
    from recordkeeper.lineage_queue import FlushResult
    from recordkeeper.pinned import PinnedData
    from recordkeeper.progress import ProgressLike
    from recordkeeper.writer import VersionWriter

__all__ = ["DEFAULT_URL", "MAX_SHARDS_PER_REQUEST", "Client", "DuplicateWarning"]

DEFAULT_URL = "http://127.0.0.1:8080"
_API = "/api/v1"
OnDuplicate = Literal["error", "use_existing", "commit"]


class DuplicateWarning(UserWarning):
    """Published content equals an existing version, which was returned instead."""


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
        if url is None:
            url = os.environ.get("RECORDKEEPER_URL")
        if url is None and http_client is not None and str(http_client.base_url):
            url = str(http_client.base_url)
        self.url = (url or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("RECORDKEEPER_TOKEN") or None
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        self._http = HttpCore(
            self.url, self.token, http_client=http_client, timeout=timeout, retries=retries
        )
        self._info: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def close(self) -> None:
        """Close connections this client opened."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._http.request(method, _API + path, **kwargs)

    def _version(self, data: Mapping[str, Any], *, schema: Schema | None = None) -> DatasetVersion:
        return DatasetVersion.from_dict(
            data, client=self, storage_options=self.storage_options or None, schema=schema
        )

    def _paged(self, path: str, params: Mapping[str, Any], limit: int | None) -> Iterator[Any]:
        offset = 0
        page = 1000 if limit is None else min(1000, limit)
        seen = 0
        while True:
            body = self._request("GET", path, params={**params, "limit": page, "offset": offset})
            data = body.get("data", [])
            for item in data:
                yield item
                seen += 1
                if limit is not None and seen >= limit:
                    return
            offset += len(data)
            if not data or offset >= int(body.get("count", 0)):
                return

    # -- service ---------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The service's ``/info``: storage root, allowed roots, limits (cached)."""
        if self._info is None:
            self._info = self._request("GET", "/info")
        return dict(self._info)

    def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        self._http.request("GET", "/healthz")
        return True

    # -- reading -----------------------------------------------------------------------------

    def datasets(self, prefix: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Every dataset (optionally only names starting with ``prefix``)."""
        return [
            DatasetInfo.from_dict(d) for d in self._paged("/datasets", {"prefix": prefix}, limit)
        ]

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
        validate_dataset_name(dataset)
        params = {"state": state, "since": _date_param(since), "until": _date_param(until)}
        return [
            self._version(v)
            for v in self._paged(f"/datasets/{quote_segment(dataset)}/versions", params, limit)
        ]

    def resolve(
        self, ref: str, *, expect_digest: str | None = None, shards: bool = True
    ) -> DatasetVersion:
        """Resolve a reference (``coco@latest``, ``coco@v3``, a name, a digest) to a version.

        ``expect_digest`` (``sha256:…``) makes resolution fail with
        :class:`~recordkeeper.errors.DigestMismatch` if the content differs from the pin.
        """
        _check_ref(ref)
        if expect_digest is not None:
            expect_digest = parse_digest(expect_digest, "expect_digest")
        data = self._request(
            "GET",
            f"/versions/{quote_segment(ref.strip())}",
            params={"shards": "true" if shards else "false", "expect_digest": expect_digest},
        )
        return self._version(data)

    def schema(self, ref: str) -> Schema:
        """The merged schema of a version."""
        _check_ref(ref)
        body = self._request("GET", f"/versions/{quote_segment(ref.strip())}/schema")
        return Schema.from_dict(body["schema"])

    def diff(self, a: str | DatasetVersion, b: str | DatasetVersion) -> VersionDiff:
        """What changed from version ``a`` to version ``b`` (shards, record counts, schema)."""
        from recordkeeper.diff import diff_versions

        va = a if isinstance(a, DatasetVersion) else self.resolve(a)
        vb = b if isinstance(b, DatasetVersion) else self.resolve(b)
        return diff_versions(va, vb)

    # -- aliases -----------------------------------------------------------------------------

    def set_alias(self, dataset: str, alias: str, ref: str | DatasetVersion) -> dict[str, Any]:
        """Point ``dataset@alias`` at a committed version; returns the alias record."""
        validate_dataset_name(dataset)
        validate_alias_name(alias)
        target = ref.name if isinstance(ref, DatasetVersion) else ref
        _check_ref(target)
        result: dict[str, Any] = self._request(
            "PUT",
            f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}",
            json={"version": target},
        )
        return result

    def aliases(self, dataset: str) -> list[dict[str, Any]]:
        """Aliases of ``dataset`` (``latest`` included)."""
        validate_dataset_name(dataset)
        return list(self._paged(f"/datasets/{quote_segment(dataset)}/aliases", {}, None))

    def alias_history(self, dataset: str, alias: str) -> list[dict[str, Any]]:
        """Moves of one alias, newest first."""
        path = f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}/history"
        return list(self._paged(path, {}, None))

    def delete_alias(self, dataset: str, alias: str) -> None:
        self._request(
            "DELETE", f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}"
        )

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
        validate_dataset_name(dataset)
        body = {
            "desc": desc,
            "date": _date_param(date),
            "root": root,
            "metadata": dict(metadata or {}),
        }
        # Not replayable: a retried stage would allocate a second number.
        data = self._request("POST", f"/datasets/{quote_segment(dataset)}/versions", json=body)
        return self._version(data)

    def register_shards(
        self, version: str | DatasetVersion, shards: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        """Register shard records on a staged version, in batches the service accepts.

        Returns the summed ``registered``/``unchanged`` counts and the final ``shard_count``.
        Registering identical shards again is a no-op, so batches are safe to retry.
        """
        name = version.name if isinstance(version, DatasetVersion) else version
        per_request = int(self.info().get("max_shards_per_request") or MAX_SHARDS_PER_REQUEST)
        per_request = max(1, min(per_request, MAX_SHARDS_PER_REQUEST))
        totals = {"registered": 0, "unchanged": 0, "shard_count": 0}
        for start in range(0, len(shards), per_request):
            batch = [dict(s) for s in shards[start : start + per_request]]
            answer = self._request(
                "POST",
                f"/versions/{quote_segment(name)}/shards",
                json={"shards": batch},
                idempotent=True,
            )
            totals["registered"] += int(answer.get("registered", 0))
            totals["unchanged"] += int(answer.get("unchanged", 0))
            totals["shard_count"] = int(answer.get("shard_count", 0))
        return totals

    def commit(
        self, version: str | DatasetVersion, *, on_duplicate: OnDuplicate = "error"
    ) -> DatasetVersion:
        """Commit a staged version (idempotent).

        ``on_duplicate``: ``error`` raises :class:`~recordkeeper.errors.DuplicateContent` when a
        committed version has the same content, ``use_existing`` answers that version (and
        abandons the staged one), ``commit`` commits anyway.
        """
        name = version.name if isinstance(version, DatasetVersion) else version
        data = self._request(
            "POST",
            f"/versions/{quote_segment(name)}/commit",
            json={"on_duplicate": on_duplicate},
            idempotent=True,
        )
        return self._version(data)

    def abandon(self, version: str | DatasetVersion) -> DatasetVersion:
        """Abandon a staged version (idempotent); committed versions cannot be abandoned."""
        name = version.name if isinstance(version, DatasetVersion) else version
        data = self._request("POST", f"/versions/{quote_segment(name)}/abandon", idempotent=True)
        return self._version(data)

    def deprecate(
        self, ref: str | DatasetVersion, reason: str | None = None, *, force: bool = False
    ) -> DatasetVersion:
        """Deprecate a version: it stays resolvable by name but leaves ``latest``.

        A version that trained checkpoints raises :class:`~recordkeeper.errors.VersionInUse`
        unless ``force`` (admin tokens only).
        """
        target = ref.name if isinstance(ref, DatasetVersion) else ref
        _check_ref(target)
        data = self._request(
            "POST",
            f"/versions/{quote_segment(target)}/deprecate",
            json={"reason": reason, "force": force},
            idempotent=True,
        )
        return self._version(data)

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
        from recordkeeper.writer import VersionWriter

        return VersionWriter(
            self,
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
        from recordkeeper.publish import publish

        return publish(
            self,
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

    def register_checkpoint(self, *, model: str, checkpoint: str, **kwargs: Any) -> CheckpointInfo:
        """Record a checkpoint and the data it trained on (see :mod:`recordkeeper.lineage`)."""
        from recordkeeper import lineage

        return lineage.register_checkpoint(self, model=model, checkpoint=checkpoint, **kwargs)

    def checkpoint(self, ref: str | CheckpointRef) -> CheckpointInfo:
        """One checkpoint, ``model/ckpt-1234``."""
        from recordkeeper import lineage

        return lineage.checkpoint(self, ref)

    def checkpoints(self, model: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        """A model's checkpoints."""
        from recordkeeper import lineage

        return lineage.checkpoints(self, model, limit=limit)

    def models(self, prefix: str | None = None, *, limit: int | None = None) -> list[ModelInfo]:
        """Models with registered checkpoints."""
        from recordkeeper import lineage

        return lineage.models(self, prefix, limit=limit)

    def lineage(self, ref: str | CheckpointRef) -> Lineage:
        """Which data trained a checkpoint (the union along its parent chain)."""
        from recordkeeper import lineage

        return lineage.lineage(self, ref)

    def consumers(
        self, ref: Any, *, transitive: bool = True, limit: int | None = None
    ) -> Consumers:
        """Which checkpoints used a version."""
        from recordkeeper import lineage

        return lineage.consumers(self, ref, transitive=transitive, limit=limit)

    def shard_consumers(
        self, uri_or_sha256: str, *, transitive: bool = True, limit: int | None = None
    ) -> Consumers:
        """Which checkpoints used a shard (by URI or sha256)."""
        from recordkeeper import lineage

        return lineage.shard_consumers(self, uri_or_sha256, transitive=transitive, limit=limit)

    def lineage_graph(self, **kwargs: Any) -> LineageGraph:
        """The lineage graph around a checkpoint or version."""
        from recordkeeper import lineage

        return lineage.lineage_graph(self, **kwargs)

    def resolve_pinned(self, path: str | Path, **kwargs: Any) -> PinnedData:
        """Resolve a pinned training config (see :mod:`recordkeeper.pinned`)."""
        from recordkeeper import pinned

        return pinned.load_pinned(path, client=self, **kwargs)

    def flush_checkpoints(self, queue: str | Path | None = None) -> FlushResult:
        """Send checkpoint registrations queued while the service was unreachable."""
        from recordkeeper.lineage_queue import RegistrationQueue

        return RegistrationQueue(self, queue).flush()

    # -- garbage collection (implemented in recordkeeper.gc) ----------------------------------

    def gc_candidates(
        self, *, staged_older_than: int = 86400, limit: int | None = None
    ) -> list[GcCandidate]:
        """Abandoned and stale staged versions whose storage may be deleted (oldest first)."""
        from recordkeeper import gc

        return gc.gc_candidates(self, staged_older_than=staged_older_than, limit=limit)

    def collect_garbage(
        self,
        *,
        staged_older_than: int = 86400,
        dry_run: bool = True,
        storage_options: Mapping[str, Any] | None = None,
    ) -> GcReport:
        """Delete the storage of versions that never became visible (dry run by default)."""
        from recordkeeper import gc

        return gc.collect_garbage(
            self,
            staged_older_than=staged_older_than,
            dry_run=dry_run,
            storage_options=storage_options,
        )

    def _finish(self, version: DatasetVersion, *, force_new: bool) -> DatasetVersion:
        """Commit a staged version, keeping an identical existing one unless ``force_new``."""
        committed = self.commit(version, on_duplicate="commit" if force_new else "use_existing")
        duplicate_of = committed.duplicate_of
        if not committed.splits:
            committed = self.resolve(committed.name)  # the commit answer carries no shards
        if committed.name != version.name or duplicate_of:
            existing = duplicate_of or committed.name
            warnings.warn(
                f"the content is identical to {existing}; keeping that version and abandoning "
                f"{version.name} (pass force_new=True to commit a new version anyway)",
                DuplicateWarning,
                stacklevel=3,
            )
        return committed


def _check_ref(ref: str) -> None:
    if not isinstance(ref, str):
        raise InvalidReference(f"reference must be a string, got {type(ref).__name__}")
    parse_reference(ref)


def _date_param(value: str | datetime.date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return value.strftime("%Y%m%d")

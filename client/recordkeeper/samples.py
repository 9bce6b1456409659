"""Sample records of a version: the first few records of each split, decoded, kept by the
service for the version page (``GET/PUT /versions/{ref}/sample``).

The service never reads shards, so the client that has the records sends them: publishing
(:func:`recordkeeper.publish.publish`), a writer's commit and a derivation's commit keep the
first :data:`~recordkeeper.core.record_sample.SAMPLE_RECORDS` records of each split as they
stream by (:class:`SampleCollector`: no extra pass over the data) and send the sample after
the commit; :func:`record_sample` (``recordkeeper head REF --record-sample``) reads the first
records of each split of a committed version (the first shards only) and attaches one.  Sending
is best effort when publishing: a sample that cannot be stored warns and the version stays
committed.  The document's rule is :mod:`recordkeeper.core.record_sample`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import NotStoredWarning, RecordkeeperError, SampleNotFound
from recordkeeper.core.record_sample import SAMPLE_RECORDS, SAMPLE_WIDTH, build_sample
from recordkeeper.http import quote_segment

if TYPE_CHECKING:
    from recordkeeper.registry import Registry
    from recordkeeper.values import DatasetVersion

__all__ = ["SampleCollector", "get_sample", "record_sample", "sample_committed", "send_sample"]


class SampleCollector:
    """Keeps the first ``per_split`` records of each split that stream by (copies, so the
    caller may reuse its buffers); ``per_split=0`` keeps none."""

    def __init__(self, per_split: int = SAMPLE_RECORDS) -> None:
        self.per_split = max(0, per_split)
        self.records: dict[str, list[bytes]] = {}

    def wants(self, split: str) -> bool:
        """Whether a record of ``split`` would still be kept (callers can skip the copy)."""
        return len(self.records.get(split, ())) < self.per_split

    def add(self, split: str, records: Iterable[bytes | bytearray | memoryview]) -> None:
        """Keep the first of ``records`` (the next records of ``split``, in order) while
        ``split`` has fewer than ``per_split``."""
        kept = self.records.setdefault(split, [])
        for record in records:
            if len(kept) >= self.per_split:
                return
            kept.append(bytes(record))

    def document(self, width: int = SAMPLE_WIDTH) -> dict[str, Any] | None:
        """The sample document, or None when nothing was kept."""
        if not self.per_split or not any(self.records.values()):
            return None
        return build_sample(self.records, per_split=self.per_split, width=width)


def send_sample(
    registry: Registry,
    version: str,
    document: Mapping[str, Any],
    *,
    source: str = "attach",
    best_effort: bool = False,
) -> dict[str, Any] | None:
    """Store ``document`` as the sample of the committed ``version``.  ``best_effort``: a
    failure warns (the publish it follows has succeeded) and answers None."""
    body = {**document, "source": source}
    try:
        answer: dict[str, Any] = registry.http.api(
            "PUT", f"/versions/{quote_segment(version)}/sample", json=body
        )
    except RecordkeeperError as exc:
        if not best_effort:
            raise
        warnings.warn(
            f"{version} is committed, but its sample records were not stored: {exc}",
            NotStoredWarning,
            stacklevel=3,
        )
        return None
    return answer


def record_sample(
    registry: Registry,
    ref: str,
    *,
    records: int = SAMPLE_RECORDS,
    width: int = SAMPLE_WIDTH,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read the first ``records`` records of each split of the committed version ``ref`` (the
    first shards only, CRCs checked) and attach them, decoded, as its sample; answers the
    stored sample (``recordkeeper head REF --record-sample``)."""
    version = registry.resolve(ref)
    heads = {s: version.head(s, records, storage_options=storage_options) for s in version.splits}
    document = build_sample(heads, per_split=records, width=width)
    answer = send_sample(registry, version.name, document, source="attach")
    assert answer is not None
    return answer


def sample_committed(
    registry: Registry,
    version: DatasetVersion,
    *,
    records: int = SAMPLE_RECORDS,
    collected: SampleCollector | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """After a publish, a writer's or a derivation's commit: send the sample of the version
    just committed, best effort (a failure warns; the version stays committed).  The records
    that streamed by (``collected``) when there are some for every split, else the first
    ``records`` records of each split read from its first shard (a few records, not a pass
    over the data).  ``records=0``: no sample."""
    if records <= 0:
        return None
    try:
        if collected is not None and set(collected.records) >= set(version.splits):
            document = collected.document()
        else:
            heads = {
                s: version.head(s, records, storage_options=storage_options) for s in version.splits
            }
            document = build_sample(heads, per_split=records)
    except RecordkeeperError as exc:
        warnings.warn(
            f"{version.name} is committed, but its sample records could not be read: {exc}",
            NotStoredWarning,
            stacklevel=3,
        )
        return None
    if document is None:
        return None
    return send_sample(registry, version.name, document, source="publish", best_effort=True)


def get_sample(registry: Registry, ref: str) -> dict[str, Any] | None:
    """The sample records stored for a version (``version``, ``splits``, ``source``,
    ``recorded_at``, ``recorded_by``), or None when it has none."""
    try:
        answer: dict[str, Any] = registry.http.api("GET", f"/versions/{quote_segment(ref)}/sample")
    except SampleNotFound:
        return None
    return answer

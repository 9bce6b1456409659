"""Sample records of versions: attach a version's sample document, answer it.

The service never reads shards.  The client that published a version sends the first few
records of each split, decoded (:mod:`recordkeeper.core.record_sample`); the repository checks
the document with the core rule (shape, split names, text, numbers, 32 KiB) and that its splits
are the version's, and keeps one row per version.  Samples describe immutable records, so one
may be attached to a committed (or deprecated) version at any time, and attaching again
replaces it (an audit event records it).

A sample is a copy of records, not metadata: when a version's data is deleted (retention), its
sample goes with it (:func:`drop_sample`, in the same transaction), and a version whose data
was released or deleted gets none (``409 version_data_deleted``).  Its row, digests, schema and
lineage stay, as for every version whose data was deleted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from recordkeeper.core.errors import InvalidSample, SampleNotFound, VersionNotFound
from recordkeeper.core.record_sample import validate_sample
from recordkeeper.core.refs import PUBLISHED_STATES, parse_reference
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import iso_timestamp
from recordkeeper_service.repository.common import record_event
from recordkeeper_service.repository.deletion import ensure_data_stored
from recordkeeper_service.repository.resolve import find_version
from recordkeeper_service.tables.samples import VersionSample

__all__ = ["SAMPLE_SOURCES", "SampleRepository", "drop_sample"]

#: How a sample came: sent by the publishing client, or attached after commit.
SAMPLE_SOURCES = ("publish", "attach")


def drop_sample(session: Session, version_id: int) -> bool:
    """Delete the sample of a version whose data is being deleted (its records must not
    outlive their shards in the registry); whether there was one."""
    gone = session.execute(delete(VersionSample).where(VersionSample.version_id == version_id))
    return bool(getattr(gone, "rowcount", 0))


def _to_json(row: VersionSample, version: m.Version) -> dict[str, Any]:
    return {
        "version": version.name,
        "splits": row.document["splits"],
        "source": row.source,
        "recorded_at": iso_timestamp(row.recorded_at),
        "recorded_by": row.recorded_by,
    }


class SampleRepository:
    """Sample rows; one transaction per call."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def attach(self, ref_text: str, document: Any, *, source: str, actor: str) -> dict[str, Any]:
        """Store ``document`` as the sample of the committed version ``ref_text`` names."""
        ref = parse_reference(ref_text)
        if source not in SAMPLE_SOURCES:
            raise InvalidSample(f"source must be one of {', '.join(SAMPLE_SOURCES)}")
        checked = validate_sample(document)
        with self._db.transaction() as session:
            version = find_version(session, ref, for_update=True)
            if version.state not in PUBLISHED_STATES:
                raise VersionNotFound(
                    f"{version.name} is {version.state}: only committed versions get a sample"
                )
            ensure_data_stored(version)  # no copy of records whose data is (being) deleted
            splits = set(
                session.scalars(
                    select(m.Shard.split).where(m.Shard.version_id == version.id).distinct()
                )
            )
            unknown = sorted({s["split"] for s in checked["splits"]} - splits)
            if unknown:
                raise InvalidSample(
                    f"{version.name} has no split {', '.join(unknown)}; its splits: "
                    f"{', '.join(sorted(splits)) or 'none'}"
                )
            row = session.get(VersionSample, version.id)
            if row is None:
                row = VersionSample(version_id=version.id)
                session.add(row)
            row.document = checked
            row.source = source
            row.recorded_by = actor
            row.recorded_at = m.utcnow()
            session.flush()
            record_event(
                session,
                actor,
                "version.sample",
                dataset=ref.dataset,
                version=version.name,
                source=source,
                records=sum(len(s["records"]) for s in checked["splits"]),
            )
            return _to_json(row, version)

    def of_version(self, ref_text: str) -> dict[str, Any]:
        """The sample of a version; :class:`SampleNotFound` when it has none."""
        ref = parse_reference(ref_text)
        with self._db.transaction(write=False) as session:
            version = find_version(session, ref)
            row = session.get(VersionSample, version.id)
            if row is None:
                raise SampleNotFound(
                    f"{version.name} has no sample records; `recordkeeper head {version.name} "
                    "--record-sample` records one",
                    version=version.name,
                )
            return _to_json(row, version)

"""``PublishExisting``: publish TFRecord files that already exist, scanned by parallel workers.

::

    versions = pipeline | rk.beam.PublishExisting("gs://bucket/coco/raw", name="coco")
    versions = pipeline | rk.beam.PublishExisting(rk.Dataset.from_tfds(".../mnist/3.0.1"),
                                                   copy_to=True)

The source is a :class:`recordkeeper.Dataset` (``from_files``, ``from_directory``,
``from_tfds``) or a directory URI (``Dataset.from_directory``).  When the transform is applied
the files are listed, checked against the service's allowed roots (unless copied) and a version
is staged (:func:`recordkeeper.distributed.plan_publish`).  Each worker then reads one file
once (:meth:`~recordkeeper.distributed.PublishPlan.scan`, the code ``client.publish`` runs):
hashes, record CRCs, record count, schema, and the copy to ``{prefix}{split}-NNNNN-of-NNNNN…``
when ``copy_to`` is given (a retried scan rewrites the same name).  Published in place, a
file that changed while it was read is refused.  After a barrier one DoFn registers every shard
and commits, once (:meth:`~recordkeeper.distributed.PublishPlan.commit`).  A failed pipeline
leaves the version staged (collected by ``recordkeeper gc``;
``client.abandon(transform.staged.name)`` at once).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from recordkeeper.beam._service import ServiceConfig, ServiceDoFn, version_output
from recordkeeper.client import Client
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.distributed import PublishPlan, plan_publish
from recordkeeper.provenance import build_provenance
from recordkeeper.values import DatasetVersion

__all__ = ["PublishExisting"]


class _ScanFile(beam.DoFn):
    """One of the plan's files → its REST registration
    (:meth:`recordkeeper.distributed.PublishPlan.scan`)."""

    def __init__(self, plan: PublishPlan) -> None:
        self._plan = plan

    def process(self, element: tuple[ShardFile, str | None]) -> Iterator[dict[str, Any]]:
        yield self._plan.scan(element)


class _Commit(ServiceDoFn):
    """The barrier's one list of registrations → the committed version's JSON, once
    (:meth:`recordkeeper.distributed.PublishPlan.commit`)."""

    def __init__(self, plan: PublishPlan, config: ServiceConfig, force_new: bool) -> None:
        super().__init__(config)
        self._plan = plan
        self._force_new = force_new

    def process(self, registrations: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        version = self._plan.commit(self.worker_client(), registrations, force_new=self._force_new)
        yield version_output(version)


class PublishExisting(beam.PTransform):
    """Publish existing shards as a new version (in place, or copied under ``copy_to``).

    ``source``: a :class:`~recordkeeper.Dataset` or a directory URI; ``name`` names the dataset
    for a URI (default: the directory's name).  ``copy_to=True`` copies under the service's
    storage root.  ``storage_options`` (default: the dataset's, then the client's) serve the
    source and the copies.  ``parents``, ``sources`` (raw inputs by URI), ``params``, ``code``
    and ``note`` record the version's provenance (see
    :func:`recordkeeper.provenance.build_provenance`).  Output: a PCollection of one, the
    committed version's JSON.
    """

    def __init__(
        self,
        source: Dataset | str | os.PathLike[str],
        *,
        name: str | None = None,
        desc: str | None = None,
        copy_to: str | bool | None = None,
        force_new: bool = False,
        date: str | datetime.date | None = None,
        client: Client | None = None,
        storage_options: Mapping[str, Any] | None = None,
        send_token: bool = True,
        parents: Sequence[Any] | Mapping[str, str] | None = None,
        sources: Sequence[Any] | None = None,
        params: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        code: Any = "auto",
        note: str | None = None,
        hash_sources: bool = False,
    ) -> None:
        super().__init__()
        self.parents = parents
        self.sources = sources
        self.params = params
        self.code = code
        self.note = note
        self.hash_sources = hash_sources
        self.source = source
        self.name = name
        self.desc = desc
        self.copy_to = copy_to
        self.force_new = force_new
        self.date = date
        self._client = client
        self._storage_options = storage_options
        self._send_token = send_token
        self.staged: DatasetVersion | None = None
        #: the publish's plan (:mod:`recordkeeper.distributed`) once the transform is applied
        self.plan: PublishPlan | None = None

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        client = self._client if self._client is not None else Client()
        dataset = self.source
        if not isinstance(dataset, Dataset):
            options = self._storage_options
            dataset = Dataset.from_directory(
                dataset,
                self.name,
                storage_options=options if options is not None else client.storage_options,
            )
        options = (
            self._storage_options
            if self._storage_options is not None
            else dataset.storage_options
            if dataset.storage_options is not None
            else client.storage_options
        )
        if self.plan is None:
            self.plan = plan_publish(
                client,
                dataset,
                desc=self.desc,
                copy_to=self.copy_to,
                date=self.date,
                storage_options=options,
                provenance=build_provenance(
                    dataset=dataset.name,
                    parents=self.parents,
                    sources=self.sources,
                    params=self.params,
                    code=self.code,
                    note=self.note,
                    storage_options=options,
                    hash_sources=self.hash_sources,
                ),
            )
            self.staged = self.plan.staged_version
        config = ServiceConfig.of(client, self.plan.storage_options, send_token=self._send_token)
        return (
            pbegin
            | "Files" >> beam.Create(list(self.plan.files))
            | "Spread" >> beam.Reshuffle()
            | "ScanFile" >> beam.ParDo(_ScanFile(self.plan))
            | "AllScanned" >> beam.combiners.ToList()
            | "CommitOnce" >> beam.ParDo(_Commit(self.plan, config, self.force_new))
        )

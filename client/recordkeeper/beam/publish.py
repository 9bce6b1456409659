"""``PublishExisting``: publish TFRecord files that already exist, scanned by parallel workers.

::

    versions = pipeline | rk.beam.PublishExisting("gs://bucket/coco/raw", name="coco")
    versions = pipeline | rk.beam.PublishExisting(rk.Dataset.from_tfds(".../mnist/3.0.1"),
                                                   copy_to=True)

The source is a :class:`recordkeeper.Dataset` (``from_files``, ``from_directory``,
``from_tfds``) or a directory URI (``Dataset.from_directory``).  When the transform is applied
the files are listed, checked against the service's allowed roots (unless copied) and a version
is staged.  Each worker then reads one file once with :func:`recordkeeper.publish.scan_file` —
the code ``client.publish`` runs: hashes, record CRCs, record count, schema, and the copy to
``{prefix}{split}-NNNNN-of-NNNNN…`` when ``copy_to`` is given (a retried scan rewrites the same
name).  Published in place, a file that changed while it was read is refused.  After a barrier
one DoFn registers every shard and commits, once.  A failed pipeline leaves the version staged
(collected by ``recordkeeper gc``; ``client.abandon(transform.staged.name)`` at once).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from recordkeeper.beam._commit import check_stored, commit_version, remove_quietly, version_output
from recordkeeper.beam._service import ServiceConfig, ServiceDoFn
from recordkeeper.client import Client
from recordkeeper.core.errors import InvalidShard
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.models import DatasetVersion
from recordkeeper.provenance import build_provenance
from recordkeeper.publish import copy_target, detect_file_compression, scan_file
from recordkeeper.shard_names import final_shard_uri

__all__ = ["PublishExisting"]


class _ScanFile(beam.DoFn):
    """``(ShardFile, copy prefix or None)`` → the shard's REST registration."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)

    def process(self, element: tuple[ShardFile, str | None]) -> Iterator[dict[str, Any]]:
        shard, prefix = element
        dest = None
        if prefix is not None:
            if shard.compression is None:  # the copy's name needs it: read the first bytes
                shard = dataclasses.replace(
                    shard, compression=detect_file_compression(shard.uri, self._options)
                )
            dest = final_shard_uri(
                prefix,
                shard.split,
                shard.index,
                shard.count,
                compression=shard.compression or "none",
                format=shard.format or "tfrecord",
            )
        yield scan_file(shard, self._options, dest=dest, dest_options=self._options)


class _Commit(ServiceDoFn):
    def __init__(self, staged: str, copies: bool, config: ServiceConfig, force_new: bool) -> None:
        super().__init__(config)
        self._staged = staged
        self._copies = copies
        self._force_new = force_new

    def process(self, registrations: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        options = dict(self._config.storage_options)
        ordered = sorted(registrations, key=lambda r: (r["split"], r["index"]))
        if self._copies:
            check_stored(ordered, options)
        version = commit_version(
            self.worker_client(), self._staged, ordered, force_new=self._force_new
        )
        if self._copies and not version.was_staged_as(self._staged):  # the copies are orphans
            remove_quietly([r["uri"] for r in ordered], options)
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
    ) -> None:
        super().__init__()
        self.parents = parents
        self.sources = sources
        self.params = params
        self.code = code
        self.note = note
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
        config = ServiceConfig.of(client, options, send_token=self._send_token)
        shards = dataset.shards
        if not shards:
            raise InvalidShard(f"dataset {dataset.name!r} has no shards")
        copy_to = copy_target(client.info(), [s.uri for s in shards], self.copy_to)
        if self.staged is None:
            document = build_provenance(
                dataset=dataset.name,
                parents=self.parents,
                sources=self.sources,
                params=self.params,
                code=self.code,
                note=self.note,
                storage_options=options,
            )
            self.staged = client.stage(
                dataset.name, desc=self.desc, date=self.date, root=copy_to, provenance=document
            )
        prefix = self.staged.storage_prefix if copy_to is not None else None
        work = [(shard, prefix) for shard in shards]
        return (
            pbegin
            | "Files" >> beam.Create(work)
            | "Spread" >> beam.Reshuffle()
            | "ScanFile" >> beam.ParDo(_ScanFile(config.storage_options))
            | "AllScanned" >> beam.combiners.ToList()
            | "CommitOnce"
            >> beam.ParDo(_Commit(self.staged.name, copy_to is not None, config, self.force_new))
        )

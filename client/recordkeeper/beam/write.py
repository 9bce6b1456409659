"""``WriteVersionedTFRecords``: a Beam job writes a new version, committed exactly once.

::

    versions = (
        examples
        | rk.beam.WriteVersionedTFRecords("coco", desc="add_person", split="train",
                                          compression="gzip", client=client)
    )                                   # a PCollection of one: the committed version's JSON

The Beam steps of :mod:`recordkeeper.distributed`'s protocol (stage, write shard keys on
workers, commit once; see that module for the rules each step keeps):

1. **Stage once**, when the transform is applied (on the machine that builds the pipeline):
   :func:`~recordkeeper.distributed.plan_write` reserves the version's number; its name and
   storage prefix are ``transform.staged`` (a pipeline that fails, never runs, or writes a
   duplicate leaves that number as a gap, docs/naming.md).
2. **Key**: records are gathered in batches of about 1 MiB (a quarter of ``shard_size`` if
   smaller) and every batch gets a shard key ``(split, k)``, ``k < num_shards``, round-robin
   from a random start per bundle (records are not serialized or hashed here).  If that bundle
   is retried, the runner discards its first attempt's output, so each record reaches exactly
   one key.  (Elements are expected in the global window, as for any batch write.)
3. **Group** by key (the runner's shuffle: each key's records are now fixed, whatever retries).
4. **Write** each key's records: :meth:`~recordkeeper.distributed.WritePlan.write_shard`, to
   temporary names derived from the key alone, so a retried bundle overwrites what a failed
   attempt left: no duplicate, no half shard.
5. **Barrier**: all descriptions are gathered into one list (``CombineGlobally``), so
6. **Commit** runs once, after every write:
   :meth:`~recordkeeper.distributed.WritePlan.commit` names, fast-verifies, registers and
   commits, and deletes what other attempts left.

A failed pipeline never reaches the commit: the version stays *staged*, invisible to
resolution, and its prefix (temporary shards included) is collected by ``recordkeeper gc``
(abandon it at once with ``client.abandon(transform.staged.name)``).
"""

from __future__ import annotations

import datetime
import os
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from recordkeeper import formats
from recordkeeper.beam._service import ServiceConfig, ServiceDoFn, version_output
from recordkeeper.beam.read import ReadVersion
from recordkeeper.client import Client
from recordkeeper.core.errors import InvalidRequest, InvalidShard
from recordkeeper.core.splits import validate_split_name
from recordkeeper.distributed import WritePlan, WrittenShard, plan_write
from recordkeeper.provenance import build_provenance
from recordkeeper.values import DatasetVersion
from recordkeeper.writer import RECORD_INDEX_DEFAULT, parse_size

__all__ = ["DEFAULT_NUM_SHARDS", "WriteVersionedTFRecords", "WrittenShard"]

DEFAULT_NUM_SHARDS = 16
_BATCH_BYTES = 2**20  # records travel through the shuffle in lists of about this many bytes


class _AssignShardKey(beam.DoFn):
    """``record`` → ``((split, k), [records])``: batches of about ``batch_bytes``, round-robin
    over ``num_shards`` keys (batches keep the shuffle's per-element cost low)."""

    def __init__(self, split: str | None, num_shards: int, batch_bytes: int) -> None:
        self._split = split
        self._num_shards = num_shards
        self._batch_bytes = batch_bytes
        self._next = 0
        self._batches: dict[str, tuple[list[Any], int]] = {}

    def start_bundle(self) -> None:
        self._next = random.randrange(self._num_shards)
        self._batches = {}

    def process(self, element: Any) -> Iterator[tuple[tuple[str, int], list[Any]]]:
        if self._split is None:
            split, record = _split_pair(element)
        else:
            split, record = self._split, element
        batch, size = self._batches.get(split) or ([], 0)
        batch.append(record)  # objects stay objects: serialized by the worker writing them
        size += len(record) if type(record) is bytes else 1024
        if size < self._batch_bytes:
            self._batches[split] = (batch, size)
            return
        self._batches.pop(split, None)
        yield self._keyed(split, batch)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for split, (batch, _) in sorted(self._batches.items()):
            yield WindowedValue(self._keyed(split, batch), MIN_TIMESTAMP, (GlobalWindow(),))
        self._batches = {}

    def _keyed(self, split: str, batch: list[Any]) -> tuple[tuple[str, int], list[Any]]:
        key = self._next
        self._next = (key + 1) % self._num_shards
        return (split, key), batch


def _split_pair(element: Any) -> tuple[str, Any]:
    if not (isinstance(element, tuple) and len(element) == 2 and isinstance(element[0], str)):
        raise InvalidRequest(
            "with split=None every element must be a (split, record) pair, got "
            f"{type(element).__name__}"
        )
    validate_split_name(element[0])
    return element[0], element[1]


class _WriteShards(beam.DoFn):
    """``((split, k), batches)`` → the :class:`WrittenShard` parts of key ``k``
    (:meth:`recordkeeper.distributed.WritePlan.write_shard`)."""

    def __init__(self, plan: WritePlan) -> None:
        self._plan = plan

    def process(
        self, element: tuple[tuple[str, int], Iterable[list[Any]]]
    ) -> Iterator[WrittenShard]:
        (split, key), batches = element
        yield from self._plan.write_shard(
            split, key, (record for batch in batches for record in batch)
        )


class _CommitVersion(ServiceDoFn):
    """The barrier's one list of :class:`WrittenShard` → the committed version's JSON, once
    (:meth:`recordkeeper.distributed.WritePlan.commit`)."""

    def __init__(self, plan: WritePlan, config: ServiceConfig, force_new: bool) -> None:
        super().__init__(config)
        self._plan = plan
        self._force_new = force_new

    def process(self, written: list[WrittenShard]) -> Iterator[dict[str, Any]]:
        if not written:
            raise InvalidShard(
                f"nothing was written to {self._plan.staged}: the input PCollection is empty"
            )
        version = self._plan.commit(self.worker_client(), written, force_new=self._force_new)
        yield version_output(version)


def _registered(sources: Sequence[Any]) -> list[ReadVersion | DatasetVersion]:
    return [s for s in sources if isinstance(s, ReadVersion | DatasetVersion)]


def _raw(sources: Sequence[Any]) -> list[Any]:
    return [s for s in sources if not isinstance(s, ReadVersion | DatasetVersion)]


def _parent_list(parents: Sequence[Any] | Mapping[str, str] | None) -> list[Any]:
    if parents is None:
        return []
    if isinstance(parents, Mapping):
        return list(parents.items())
    if isinstance(parents, str):
        return [parents]
    return list(parents)


def _source_parents(sources: Sequence[Any]) -> list[tuple[str, str]]:
    """The registered versions the job read, as parents with the role ``source``."""
    out = []
    for source in _registered(sources):
        version = source.version if isinstance(source, ReadVersion) else source
        if version is not None:
            out.append((version.name, "source"))
    return out


def _with_sources(
    metadata: Mapping[str, Any] | None, sources: Sequence[ReadVersion | DatasetVersion]
) -> dict[str, Any]:
    """``metadata`` plus ``sources``: the pinned versions (and splits) the job read."""
    out = dict(metadata or {})
    entries = []
    for source in _registered(sources):
        version = source.version if isinstance(source, ReadVersion) else source
        if version is None:
            raise InvalidRequest(
                "a ReadVersion given as a source must be applied to the pipeline before the write"
            )
        entry = {"version": version.name, "content_digest": version.content_digest}
        if isinstance(source, ReadVersion):
            entry["split"] = source.split_name
        entries.append(entry)
    if entries:
        out["sources"] = entries
    return out


class WriteVersionedTFRecords(beam.PTransform):
    """Write a PCollection of records as a new version of ``dataset``; see the module docs.

    Elements are serialized records (``bytes``) or messages with ``SerializeToString``
    (``tf.train.Example``), all in ``split``; with ``split=None`` elements are
    ``(split, record)`` pairs.  ``num_shards`` is the number of shard keys per split (the write
    parallelism; a key holding more than ``shard_size`` bytes becomes several shards).
    ``client`` (default: ``rk.Client()`` from the environment) stages the version here;
    workers reach the service with its URL and, unless ``send_token=False``, its token, and
    the store with ``storage_options`` (default: the client's).

    ``sources`` records what the job read: each :class:`ReadVersion` (applied earlier in the
    pipeline) or :class:`DatasetVersion` becomes a parent with the role ``source`` and an entry
    ``{"version", "content_digest", "split"}`` of the new version's ``metadata["sources"]``;
    a URI (a raw input outside the registry) becomes a provenance source with its listing
    identity.  ``parents``, ``params``, ``code`` and ``note`` record the rest of the version's
    provenance (:func:`recordkeeper.provenance.build_provenance`; git is captured where the
    pipeline is built, not on the workers).

    ``record_index`` (default on, as for ``client.writer``): each worker hashes every record's
    identity as it writes it and stores each shard's record index beside it; the commit
    registers the version's record identity (docs/record-identity.md), so record diffs,
    leakage checks and ``which-checkpoints`` work on it without ``recordkeeper index``.

    The output is a PCollection of one element: the committed version's JSON summary
    (``DatasetVersion.to_dict()``).  ``staged`` is the staged version once the transform has
    been applied.
    """

    def __init__(
        self,
        dataset: str,
        *,
        desc: str | None = None,
        root: str | None = None,
        split: str | None = "train",
        shard_size: int | str = "256MB",
        compression: str | None = None,
        num_shards: int = DEFAULT_NUM_SHARDS,
        client: Client | None = None,
        storage_options: Mapping[str, Any] | None = None,
        send_token: bool = True,
        date: str | datetime.date | None = None,
        force_new: bool = False,
        metadata: Mapping[str, Any] | None = None,
        sources: Sequence[Any] = (),
        parents: Sequence[Any] | Mapping[str, str] | None = None,
        params: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        code: Any = "auto",
        note: str | None = None,
        hash_sources: bool = False,
        record_index: bool = RECORD_INDEX_DEFAULT,
    ) -> None:
        super().__init__()
        if split is not None:
            validate_split_name(split)
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise InvalidRequest(f"num_shards must be a positive integer, got {num_shards!r}")
        self.dataset = dataset
        self.desc = desc
        self.root = root
        self.split = split
        self.shard_size = parse_size(shard_size)
        self.compression = formats.get("tfrecord").check_compression(compression)
        self.num_shards = num_shards
        self.date = date
        self.force_new = force_new
        self.metadata = metadata
        self.sources = tuple(sources)
        self.parents = parents
        self.params = params
        self.code = code
        self.note = note
        self.hash_sources = hash_sources
        self.record_index = record_index
        self._client = client
        self._storage_options = storage_options
        self._send_token = send_token
        self.staged: DatasetVersion | None = None
        #: the write's plan (:mod:`recordkeeper.distributed`) once the transform is applied
        self.plan: WritePlan | None = None

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        client = self._client if self._client is not None else Client()
        config = ServiceConfig.of(client, self._storage_options, send_token=self._send_token)
        if self.plan is None:  # applied twice (not recommended): one staged version
            self.plan = plan_write(
                client,
                self.dataset,
                desc=self.desc,
                root=self.root,
                compression=self.compression,
                shard_size=self.shard_size,
                storage_options=config.storage_options,
                date=self.date,
                metadata=_with_sources(self.metadata, _registered(self.sources)),
                provenance=build_provenance(
                    dataset=self.dataset,
                    parents=_parent_list(self.parents) + _source_parents(self.sources),
                    sources=_raw(self.sources),
                    params=self.params,
                    code=self.code,
                    note=self.note,
                    storage_options=config.storage_options,
                    hash_sources=self.hash_sources,
                ),
                record_index=self.record_index,
            )
            self.staged = self.plan.staged_version
        batch_bytes = max(1, min(_BATCH_BYTES, self.shard_size // 4))
        return (
            records
            | "AssignShardKey"
            >> beam.ParDo(_AssignShardKey(self.split, self.num_shards, batch_bytes))
            | "GroupByShard" >> beam.GroupByKey()
            | "WriteShards" >> beam.ParDo(_WriteShards(self.plan))
            | "AllShardsWritten" >> beam.combiners.ToList()
            | "CommitOnce" >> beam.ParDo(_CommitVersion(self.plan, config, self.force_new))
        )

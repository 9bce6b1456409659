"""``ReadVersion``: the records of a pinned version as a PCollection.

::

    read = rk.beam.ReadVersion("coco@prod", "train", client=client)
    records = pipeline | read          # bytes, one element per record
    read.version.name, read.version.content_digest   # what the job read, pinned

The reference is resolved once, when the transform is applied: every worker reads that exact
version (an alias moved during the job changes nothing).  Before any record is read the split's
shards are verified as ``version.tf_dataset()`` does (``verify="fast"``: storage identity and
server-side checksums; ``"deep"``: re-hash every shard; ``None``: skip).  Workers then read one
shard each, check every record's CRC and the shard's registered record count.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import apache_beam as beam

from recordkeeper import formats
from recordkeeper.beam._service import ServiceConfig
from recordkeeper.client import Client
from recordkeeper.core.errors import CorruptShard
from recordkeeper.storage import open_read, storage_errors
from recordkeeper.values import DatasetVersion, Shard

__all__ = ["ReadVersion", "read_shard"]


def read_shard(shard: Mapping[str, Any], storage_options: Mapping[str, Any]) -> Iterator[bytes]:
    """The records of one registered shard (``Shard.to_dict()`` form), CRCs checked.

    Raises :class:`~recordkeeper.errors.CorruptShard` when the shard holds another number of
    records than registered.
    """
    registered = Shard.from_dict(shard)
    count = 0
    with open_read(registered.uri, storage_options) as fh, storage_errors(registered.uri):
        for record in formats.get(registered.format).iter_records(fh, registered.compression):
            count += 1
            yield bytes(record)
    if count != registered.record_count:
        raise CorruptShard(
            f"{registered.uri} holds {count} records, {registered.record_count} were registered",
            uri=registered.uri,
        )


class _ReadShard(beam.DoFn):
    def __init__(self, config: ServiceConfig) -> None:
        self._options = dict(config.storage_options)

    def process(self, shard: Mapping[str, Any]) -> Iterator[bytes]:
        yield from read_shard(shard, self._options)


class ReadVersion(beam.PTransform):
    """Read the serialized records of ``split`` of the version ``ref`` resolves to.

    ``expect_digest`` makes resolution fail unless the content digest matches (a pin from
    ``recordkeeper lock``).  ``version`` is the resolved :class:`DatasetVersion` once the
    transform has been applied: record its ``name`` and ``content_digest`` with the job's
    output (or pass it as ``data=`` to ``client.register_checkpoint`` for a model trained on
    it).
    """

    def __init__(
        self,
        ref: str | DatasetVersion,
        split: str = "train",
        *,
        verify: Literal["fast", "deep"] | None = "fast",
        expect_digest: str | None = None,
        client: Client | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if verify not in (None, "fast", "deep"):
            raise ValueError(f"verify must be 'fast', 'deep' or None, got {verify!r}")
        self.ref = ref
        self.split_name = split
        self.verify = verify
        self.expect_digest = expect_digest
        self._client = client
        self._storage_options = storage_options
        self.version: DatasetVersion | None = ref if isinstance(ref, DatasetVersion) else None

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        client = self._client if self._client is not None else Client()
        config = ServiceConfig.of(client, self._storage_options)
        if self.version is None:
            assert isinstance(self.ref, str)
            self.version = client.resolve(self.ref, expect_digest=self.expect_digest)
        version = self.version
        shards = version.split(self.split_name).shards  # KeyError naming the splits
        if self.verify is not None:
            version.verify(
                deep=self.verify == "deep",
                splits=[self.split_name],
                storage_options=config.storage_options,
            ).raise_for_problems()
        return (
            pbegin
            | "Shards" >> beam.Create([s.to_dict() for s in shards])
            | "Spread" >> beam.Reshuffle()
            | "ReadShard" >> beam.ParDo(_ReadShard(config))
        )

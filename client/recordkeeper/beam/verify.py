"""``VerifyVersion``: verify a version's shards in parallel workers.

::

    reports = pipeline | rk.beam.VerifyVersion("coco@v3", deep=True, fail=True)

The version is resolved when the transform is applied; its shards fan out to workers, each
checked by :func:`recordkeeper.verify.verify_shards` (the code ``version.verify()`` runs:
deep = re-read, re-hash, every record CRC; fast = storage identity and server-side checksums).
The per-shard results are gathered into one report, emitted as ``VerifyReport.to_dict()``; with
``fail=True`` a report with problems fails the pipeline
(:class:`~recordkeeper.errors.CorruptShard` naming the bad shards).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from recordkeeper.beam._service import ServiceConfig
from recordkeeper.client import Client
from recordkeeper.values import DatasetVersion, Shard, ShardProblem, VerifyReport
from recordkeeper.verify import verify_shards

__all__ = ["VerifyVersion"]

# one shard's outcome, in picklable parts: (shard JSON, [(reason, detail, offset)], bytes, s)
_Checked = tuple[dict[str, Any], list[tuple[Any, str, int | None]], int, float]


class _CheckShard(beam.DoFn):
    def __init__(self, deep: bool, config: ServiceConfig) -> None:
        self._deep = deep
        self._options = dict(config.storage_options)

    def process(self, shard: Mapping[str, Any]) -> Iterator[_Checked]:
        report = verify_shards(
            [Shard.from_dict(shard)], deep=self._deep, storage_options=self._options, max_workers=1
        )
        problems = [(p.reason, p.detail, p.offset) for p in report.problems]
        yield dict(shard), problems, report.bytes_read, report.seconds


class _Summarise(beam.DoFn):
    def __init__(self, version: str, deep: bool, fail: bool) -> None:
        self._version = version
        self._deep = deep
        self._fail = fail

    def process(self, checked: Sequence[_Checked]) -> Iterator[dict[str, Any]]:
        ordered = sorted(checked, key=lambda c: (c[0]["split"], c[0]["index"]))
        report = VerifyReport(
            version=self._version,
            deep=self._deep,
            checked=len(ordered),
            problems=tuple(
                ShardProblem(Shard.from_dict(shard), reason, detail, offset)
                for shard, problems, _, _ in ordered
                for reason, detail, offset in problems
            ),
            bytes_read=sum(c[2] for c in ordered),
            seconds=sum(c[3] for c in ordered),
        )
        if self._fail:
            report.raise_for_problems()
        yield report.to_dict()


class VerifyVersion(beam.PTransform):
    """Verify every shard of ``ref`` (or only ``splits``) in workers; emits one report.

    ``seconds`` in the report is the sum of the workers' time, not the wall time.
    """

    def __init__(
        self,
        ref: str | DatasetVersion,
        *,
        deep: bool = True,
        splits: Sequence[str] | None = None,
        fail: bool = False,
        client: Client | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.ref = ref
        self.deep = deep
        self.splits = splits
        self.fail = fail
        self._client = client
        self._storage_options = storage_options
        self.version: DatasetVersion | None = ref if isinstance(ref, DatasetVersion) else None

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        client = self._client if self._client is not None else Client()
        config = ServiceConfig.of(client, self._storage_options)
        if self.version is None:
            assert isinstance(self.ref, str)
            self.version = client.resolve(self.ref)
        version = self.version
        if self.splits is None:
            shards: list[Shard] = version.shards
        else:
            shards = [s for name in self.splits for s in version.split(name).shards]
        return (
            pbegin
            | "Shards" >> beam.Create([s.to_dict() for s in shards])
            | "Spread" >> beam.Reshuffle()
            | "CheckShard" >> beam.ParDo(_CheckShard(self.deep, config))
            | "AllChecked" >> beam.combiners.ToList()
            | "Report" >> beam.ParDo(_Summarise(version.name, self.deep, self.fail))
        )

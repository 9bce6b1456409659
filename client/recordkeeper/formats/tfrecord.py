"""TFRecord through the format seam: :mod:`recordkeeper.tfrecord` is the engine."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from recordkeeper import tfrecord
from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.shards import COMPRESSIONS
from recordkeeper.formats import RecordFormat, ShardWriter
from recordkeeper.record_ids import RecordIds
from recordkeeper.streaming import BinarySink, BinarySource, ShardStats

__all__ = ["TFRecordFormat"]

_SUFFIXES = {"none": ".tfrecord", "gzip": ".tfrecord.gz", "zlib": ".tfrecord.zlib"}


class TFRecordFormat(RecordFormat):
    """``uint64 length | masked crc32c | data | masked crc32c`` per record; GZIP/ZLIB compress
    the whole stream.  The canonical framing of every format's ``records_sha256``."""

    name: ClassVar[str] = "tfrecord"
    description: ClassVar[str] = "TFRecord"
    suffix: ClassVar[str] = ".tfrecord"
    compressions: ClassVar[tuple[str, ...]] = COMPRESSIONS
    writable: ClassVar[bool] = True

    def file_suffix(self, compression: str) -> str:
        return _SUFFIXES[compression]

    def check_compression(self, compression: str | None) -> str:
        return tfrecord.normalize_compression(compression)

    def detect(self, head: bytes, *, tail: bytes = b"", size: int | None = None) -> str | None:
        return tfrecord.detect_compression(head)

    def check_options(self, options: Mapping[str, Any] | None) -> None:
        extra = set(options or {}) - {"compression_level"}
        if extra:
            raise InvalidInput(
                f"TFRecord shards take no format options but compression_level, "
                f"not {', '.join(sorted(extra))}"
            )

    def open_writer(
        self,
        sink: BinarySink,
        compression: str | None = None,
        *,
        infer_schema: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> ShardWriter:
        self.check_options(options)
        level = (options or {}).get("compression_level")
        kwargs = {} if level is None else {"compression_level": int(level)}
        return tfrecord.TFRecordWriter(
            sink, compression=compression, infer_schema=infer_schema, **kwargs
        )

    def scan(
        self,
        source: BinarySource,
        compression: str | None = None,
        *,
        infer_schema: bool = True,
        size: int | None = None,
        stored_crc32c: bool = True,
        hash_in_background: bool = True,
        record_ids: RecordIds | None = None,
    ) -> ShardStats:
        return tfrecord.scan_shard(
            source,
            compression,
            infer_schema=infer_schema,
            size=size,
            stored_crc32c=stored_crc32c,
            hash_in_background=hash_in_background,
            record_ids=record_ids,
        )

    def scan_whole(
        self, data: bytes, compression: str | None = None, *, record_ids: RecordIds | None = None
    ) -> ShardStats:
        return tfrecord.scan_whole(data, compression, record_ids=record_ids)

    def iter_records(
        self, source: BinarySource, compression: str | None = None, *, size: int | None = None
    ) -> Iterator[bytes]:
        return tfrecord.iter_records(source, compression, size=size)

"""Record formats behind one seam: TFRecord, ArrayRecord and Riegeli/records.

Modelled on TensorFlow Datasets' ``file_adapters.py``: one class per format with the few
operations the rest of the library needs, and one registry from the format's name (the value
stored in a shard record's ``format`` field) to its adapter.  Callers ask the registry, never
``if format == ...``::

    fmt = formats.get(shard.format)            # a RecordFormat
    stats = fmt.scan(fileobj, shard.compression, infer_schema=False)
    found = formats.detect(first_bytes)        # ("array_record", "none"), ... or None

What an adapter provides (:class:`RecordFormat`):

* ``detect``: is this file mine, from its first (and last) bytes, and with which compression;
* ``open_writer``: frame and write records to a sink, hashing as the bytes stream
  (``writable``);
* ``scan``: every record checked, :class:`~recordkeeper.streaming.ShardStats` (stored bytes'
  sha256/CRC32C/size, ``records_sha256`` in the canonical framing, count, schema), corruption as
  :class:`~recordkeeper.errors.CorruptShard` with the first bad offset; with ``record_ids``
  every record's identity too (:class:`~recordkeeper.record_ids.RecordIds`);
* ``iter_records``: the records in order, checked (what tf.data and Beam read);
* ``open_random_access``: record ``i`` without reading the others (``random_access``).

``records_sha256`` is defined over the records in TFRecord framing in every format (see
:func:`recordkeeper.streaming.canonical_framing`), so the same records have the same digest and a
version the same content digest whatever format its shards are stored in.

Adding a format: a module with a :class:`RecordFormat` subclass, and one line in ``_LAZY`` (or
:func:`register` at run time).  Adapters are imported on first use: ``import recordkeeper``
stays light.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from recordkeeper.core.errors import InvalidInput, UnsupportedFormat
from recordkeeper.record_ids import RecordIds
from recordkeeper.streaming import BinarySink, BinarySource, ShardStats

__all__ = [
    "FORMATS",
    "RandomAccess",
    "RecordFormat",
    "ShardWriter",
    "detect",
    "format_names",
    "get",
    "register",
]


class ShardWriter(Protocol):
    """What :meth:`RecordFormat.open_writer` returns."""

    @property
    def record_count(self) -> int: ...

    def write(self, record: bytes) -> None: ...

    def write_many(self, records: Sequence[Any]) -> None: ...

    def _write_batch(self, batch: list[bytes], nbytes: int) -> None: ...

    def close(self) -> ShardStats: ...


class RandomAccess(Protocol):
    """Record ``i`` of a shard without reading the others (``len()`` records)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> bytes: ...

    def read(self, indices: Sequence[int]) -> list[bytes]: ...

    def close(self) -> None: ...


class RecordFormat:
    """One record format: the operations the rest of recordkeeper needs from it.

    Subclasses set the class attributes and override what they support; the defaults refuse
    with :class:`~recordkeeper.errors.UnsupportedFormat` naming the format.
    """

    #: the name stored in shard records (``format`` field) and accepted as ``format=``
    name: ClassVar[str]
    #: in words, for messages
    description: ClassVar[str]
    #: the suffix of the files recordkeeper writes (before a compression suffix)
    suffix: ClassVar[str]
    #: stream compressions the format takes (TFRecord: the whole file; others compress chunks)
    compressions: ClassVar[tuple[str, ...]] = ("none",)
    writable: ClassVar[bool] = False
    random_access: ClassVar[bool] = False

    def file_suffix(self, compression: str) -> str:
        """The suffix of a written shard (``.tfrecord.gz``, ``.array_record``)."""
        return self.suffix

    def check_compression(self, compression: str | None) -> str:
        """``compression`` in its normal spelling, or :class:`InvalidInput`."""
        value = (compression or "none").lower()
        if value not in self.compressions:
            raise InvalidInput(
                f"compression {compression!r} does not apply to {self.name} shards (they "
                f"take {', '.join(self.compressions)}; {self.name} compresses inside the file: "
                "see the writer's format options)"
            )
        return value

    def check_options(self, options: Mapping[str, Any] | None) -> None:
        """Refuse writer options the format does not take (:class:`InvalidInput`)."""
        if options:
            raise InvalidInput(
                f"{self.description} shards take no format options, not {', '.join(options)}"
            )

    def detect(self, head: bytes, *, tail: bytes = b"", size: int | None = None) -> str | None:
        """The compression if the file's first bytes (``head``, up to 64 KiB; ``tail``: its
        last 64 KiB when known) look like this format, else None."""
        return None

    def open_writer(
        self,
        sink: BinarySink,
        compression: str | None = None,
        *,
        infer_schema: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> ShardWriter:
        raise UnsupportedFormat(f"recordkeeper cannot write {self.description} shards")

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
        raise UnsupportedFormat(f"recordkeeper cannot read {self.description} shards")

    def scan_whole(
        self, data: bytes, compression: str | None = None, *, record_ids: RecordIds | None = None
    ) -> ShardStats:
        """:meth:`scan` of a shard held whole in memory (a small shard read in one piece);
        a format may do it in fewer steps, with the same stats and errors."""
        return self.scan(io.BytesIO(data), compression, size=len(data), record_ids=record_ids)

    def iter_records(
        self, source: BinarySource, compression: str | None = None, *, size: int | None = None
    ) -> Iterator[bytes]:
        raise UnsupportedFormat(f"recordkeeper cannot read {self.description} shards")

    def open_random_access(
        self, uri: str, storage_options: Mapping[str, Any] | None = None
    ) -> RandomAccess:
        raise UnsupportedFormat(
            f"{self.description} shards have no index: records are read in order only "
            "(tf_dataset, iteration), not by position",
            format=self.name,
        )


# name -> "module:Class", imported on first use (fsspec's registry does the same)
_LAZY: dict[str, str] = {
    "tfrecord": "recordkeeper.formats.tfrecord:TFRecordFormat",
    "array_record": "recordkeeper.formats.array_record:ArrayRecordFormat",
    "riegeli": "recordkeeper.formats.riegeli:RiegeliFormat",
}
#: Loaded adapters by name (see :func:`get`).
FORMATS: dict[str, RecordFormat] = {}
#: The order in which :func:`detect` asks the formats (exact signatures before weaker checks).
_DETECT_ORDER = ("array_record", "riegeli", "tfrecord")


def format_names() -> tuple[str, ...]:
    """Every registered format's name."""
    return tuple(dict.fromkeys([*_LAZY, *FORMATS]))


def register(fmt: RecordFormat) -> None:
    """Add (or replace) a format at run time."""
    FORMATS[fmt.name] = fmt


def get(name: str | None) -> RecordFormat:
    """The adapter of the format ``name`` (``None``: ``tfrecord``, what shards registered
    before formats existed are); :class:`InvalidInput` for an unknown one."""
    name = name or "tfrecord"
    found = FORMATS.get(name)
    if found is not None:
        return found
    target = _LAZY.get(name)
    if target is None:
        raise InvalidInput(
            f"unknown record format {name!r}: recordkeeper knows {', '.join(format_names())}"
        )
    module, _, attr = target.partition(":")
    adapter: RecordFormat = getattr(importlib.import_module(module), attr)()
    FORMATS[name] = adapter
    return adapter


def detect(head: bytes, *, tail: bytes = b"", size: int | None = None) -> tuple[str, str] | None:
    """``(format, compression)`` of a file from its first bytes (and last, when known), or
    None when no registered format claims it.

    Riegeli and ArrayRecord share their first bytes (an ArrayRecord file is a Riegeli file
    with an index at its end): without the tail a Riegeli-family file is ``riegeli``, and
    scanning it tells the two apart (the stats' ``format``).
    """
    order = [*_DETECT_ORDER, *(n for n in format_names() if n not in _DETECT_ORDER)]
    for name in order:
        compression = get(name).detect(head, tail=tail, size=size)
        if compression is not None:
            return name, compression
    return None

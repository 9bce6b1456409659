"""Riegeli/records files through the format seam: read, verify and publish (no writer).

The ``riegeli`` Python package is not on the registries these machines reach; files are read
from the published format by :mod:`recordkeeper.riegeli` (simple chunks with none, Brotli, Zstd
or Snappy compression; transposed chunks refused with
:class:`~recordkeeper.errors.UnsupportedFormat`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from recordkeeper.core.riegeli import FILE_SIGNATURE
from recordkeeper.formats import RecordFormat
from recordkeeper.record_ids import RecordIds
from recordkeeper.riegeli import RiegeliReader, scan_riegeli
from recordkeeper.streaming import BinarySource, ShardStats

__all__ = ["RiegeliFormat", "looks_like_riegeli"]

#: A head sharing this many of the signature's 64 bytes is a Riegeli file whose signature is
#: damaged (the reader then names the damage), not another format.
_SIGNATURE_MATCH = 48


def looks_like_riegeli(head: bytes) -> bool:
    """Whether a file's first bytes are (or nearly are) the Riegeli file signature."""
    size = len(FILE_SIGNATURE)
    if len(head) < size:
        return False
    # the bytes that differ are the non-zero bytes of the XOR (counted in C, not byte by byte:
    # every small shard published is asked this)
    differ = int.from_bytes(head[:size], "big") ^ _SIGNATURE_INT
    same = differ.to_bytes(size, "big").count(0)
    return same >= _SIGNATURE_MATCH


_SIGNATURE_INT = int.from_bytes(FILE_SIGNATURE, "big")


class RiegeliFormat(RecordFormat):
    """Riegeli/records: 64 KiB blocks, chunks with HighwayHash-64 checksums."""

    name: ClassVar[str] = "riegeli"
    description: ClassVar[str] = "Riegeli"
    suffix: ClassVar[str] = ".riegeli"

    def detect(self, head: bytes, *, tail: bytes = b"", size: int | None = None) -> str | None:
        return "none" if looks_like_riegeli(head) else None

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
        self.check_compression(compression)
        # (the CRC32C of the stored bytes is cheap: always computed)
        return scan_riegeli(
            source,
            infer_schema=infer_schema,
            hash_in_background=hash_in_background,
            record_ids=record_ids,
        ).stats

    def iter_records(
        self, source: BinarySource, compression: str | None = None, *, size: int | None = None
    ) -> Iterator[bytes]:
        self.check_compression(compression)
        return iter(RiegeliReader(source))

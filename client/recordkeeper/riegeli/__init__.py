"""Riegeli/records and ArrayRecord files, read from the published file format.

Riegeli (github.com/google/riegeli) stores records in chunks inside 64 KiB blocks, with
HighwayHash-64 checksums of every block header, chunk header and chunk's data; ArrayRecord
(github.com/google/array_record) is a Riegeli file with an index of its chunks at the end.
This package reads both without the ``riegeli`` or ``array_record`` packages:

* :class:`RiegeliReader` / :func:`iter_records`: the records, every checksum checked;
* :func:`scan_riegeli`: stats for verification and publish (``records_sha256`` over the records
  in TFRecord framing, so equal records give equal digests in either format).

Supported: simple chunks compressed with none, Brotli, Zstd (``zstandard``) or Snappy
(``cramjam``; Brotli also through ``cramjam``), padding, signature and metadata chunks, the
ArrayRecord footer and postscript.  Not supported: transposed chunks (detected, refused with
:class:`~recordkeeper.errors.UnsupportedFormat`); writing.
"""

from __future__ import annotations

from recordkeeper.riegeli.highwayhash import RIEGELI_KEY, highwayhash64
from recordkeeper.riegeli.reader import REASONS, RiegeliInfo, RiegeliReader, iter_records
from recordkeeper.riegeli.scan import RiegeliScan, canonical_framing, scan_riegeli

__all__ = [
    "REASONS",
    "RIEGELI_KEY",
    "RiegeliInfo",
    "RiegeliReader",
    "RiegeliScan",
    "canonical_framing",
    "highwayhash64",
    "iter_records",
    "scan_riegeli",
]

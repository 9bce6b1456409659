"""What a file looks like: :func:`recordkeeper.core.file_kinds.sniff` applied to a file.

For messages about files recordkeeper cannot read: "a Parquet file", "a Riegeli file with
transposed chunks", instead of "not a TFRecord file".
"""

from __future__ import annotations

import io
from typing import Any

from recordkeeper.core.file_kinds import HEAD_SIZE, TAIL_SIZE, FileKind, sniff
from recordkeeper.streaming import masked_crc32c

__all__ = ["FileKind", "describe_bytes", "describe_file"]


def describe_bytes(head: bytes, *, tail: bytes = b"", size: int | None = None) -> FileKind:
    """:func:`~recordkeeper.core.file_kinds.sniff` with the TFRecord check switched on."""
    return sniff(head, tail=tail, size=size, masked_crc32c=masked_crc32c)


def describe_file(fileobj: Any, size: int | None = None) -> FileKind:
    """Name the format of an open binary file from its first 64 KiB and, for a seekable file
    whose size is a multiple of 64 KiB, its last 64 KiB (which tell ArrayRecord from other
    Riegeli files).  Reads from the current position; a seekable file is left where the
    head's read ended."""
    head = fileobj.read(HEAD_SIZE) or b""
    tail = b""
    seekable = getattr(fileobj, "seekable", None)
    if callable(seekable) and seekable():
        after_head = fileobj.tell()
        if size is None:
            size = fileobj.seek(0, io.SEEK_END)
        if size >= 2 * TAIL_SIZE and size % TAIL_SIZE == 0:
            fileobj.seek(size - TAIL_SIZE)
            tail = fileobj.read(TAIL_SIZE) or b""
        fileobj.seek(after_head)
    return describe_bytes(bytes(head), tail=bytes(tail), size=size)

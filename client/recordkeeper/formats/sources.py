"""A version's split as a random-access data source (Grain's ``RandomAccessDataSource``).

``VersionSource`` has ``__len__`` and ``__getitem__(i)`` over the split's records in order
(shard by shard), which is the protocol Grain's ``MapDataset.source`` and ``DataLoader`` take;
it needs no Grain import.  Each shard is opened on first use through its format's
``open_random_access`` (ArrayRecord: the footer index, then one chunk per record, every hash
checked) and kept open; the source pickles without its open files, so Grain's worker
processes each open their own.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

from recordkeeper import formats
from recordkeeper.core.errors import UnsupportedFormat

__all__ = ["VersionSource"]


class VersionSource:
    """Records of one split, by position: ``source[i]`` is the split's record ``i``."""

    def __init__(
        self,
        name: str,
        split: str,
        shards: Sequence[tuple[str, str, int]],
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        """``shards``: ``(uri, format, record_count)`` of the split's shards in index order."""
        for uri, fmt, _ in shards:
            if not formats.get(fmt).random_access:
                raise UnsupportedFormat(
                    f"{name} {split}: {uri} is a {formats.get(fmt).description} shard, which "
                    "has no index: a random-access source needs ArrayRecord shards (read this "
                    "split in order with tf_dataset, or convert it)",
                    format=fmt,
                )
        self._name = name
        self._split = split
        self._shards = list(shards)
        self._options = dict(storage_options or {})
        self._starts = [0, *accumulate(count for _, _, count in self._shards)]
        self._open: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> bytes:
        n = len(self)
        if not isinstance(index, int):
            index = int(index)  # numpy integers from samplers
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"{self._name} {self._split}: record {index} of {n}")
        k = bisect.bisect_right(self._starts, index) - 1
        with self._lock:  # a reader keeps one file position and its last chunk
            reader = self._open.get(k)
            if reader is None:
                uri, fmt, _ = self._shards[k]
                reader = self._open[k] = formats.get(fmt).open_random_access(uri, self._options)
            return bytes(reader[index - self._starts[k]])

    def close(self) -> None:
        with self._lock:
            for reader in self._open.values():
                reader.close()
            self._open.clear()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_open"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VersionSource({self._name!r}, {self._split!r}, {len(self)} records)"

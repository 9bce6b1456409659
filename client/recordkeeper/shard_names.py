"""The final names of a version's shards, planned once for every way shards are stored — the
streaming writer, the Beam write, publish's copies and Beam's publish:
``{prefix}/{split}-NNNNN-of-NNNNN{suffix}``, the suffix the record format's
(``.tfrecord``, ``.tfrecord.gz``, ``.array_record``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from recordkeeper import formats
from recordkeeper.core.splits import shard_file_name
from recordkeeper.storage import join_uri

__all__ = ["final_shard_uri", "number_within_splits", "shard_suffix", "split_counts"]

T = TypeVar("T")


def shard_suffix(compression: str, format: str = "tfrecord") -> str:
    """A stored shard's suffix: ``.tfrecord[.gz|.zlib]``, ``.array_record`` (the format's)."""
    return formats.get(format).file_suffix(compression)


def final_shard_uri(
    prefix: str, split: str, index: int, count: int, *, compression: str, format: str = "tfrecord"
) -> str:
    """Where shard ``index`` of ``count`` of ``split`` lives under the version's ``prefix``."""
    return join_uri(prefix, shard_file_name(split, index, count, shard_suffix(compression, format)))


def split_counts(items: Iterable[T], split_of: Callable[[T], str]) -> dict[str, int]:
    """How many of ``items`` each split has."""
    counts: dict[str, int] = {}
    for item in items:
        split = split_of(item)
        counts[split] = counts.get(split, 0) + 1
    return counts


def number_within_splits(
    items: Sequence[T], split_of: Callable[[T], str]
) -> list[tuple[T, int, int]]:
    """``(item, index, count)`` for ``items`` in their order: ``index`` counts from 0 within the
    item's split, ``count`` is that split's total."""
    counts = split_counts(items, split_of)
    seen: dict[str, int] = {}
    numbered = []
    for item in items:
        split = split_of(item)
        index = seen.get(split, 0)
        seen[split] = index + 1
        numbered.append((item, index, counts[split]))
    return numbered

"""The split name grammar: ``train``, ``validation``, ``test_hard``.

One grammar for every place a split is named: shard registration (client and service), data
entries of a checkpoint's lineage, and the versioned layout's file names
(``train-00003-of-00016.tfrecord``).  Split names are like dataset names: lowercase letters,
digits, ``_`` and ``-``, starting with a letter, at most :data:`MAX_SPLIT_NAME_LENGTH` characters.
"""

from __future__ import annotations

import re

from recordkeeper.core.errors import InvalidShard

__all__ = ["MAX_SPLIT_NAME_LENGTH", "is_split_name", "shard_file_name", "validate_split_name"]

MAX_SPLIT_NAME_LENGTH = 64
_SPLIT_RE = re.compile(rf"[a-z][a-z0-9_-]{{0,{MAX_SPLIT_NAME_LENGTH - 1}}}")


def is_split_name(value: object) -> bool:
    """True if ``value`` is a valid split name."""
    return isinstance(value, str) and _SPLIT_RE.fullmatch(value) is not None


def validate_split_name(split: object) -> str:
    """Return ``split`` if it is a valid split name, else raise :class:`InvalidShard`."""
    if not isinstance(split, str) or not _SPLIT_RE.fullmatch(split):
        raise InvalidShard(
            f"split name {split!r} is invalid: lowercase letters, digits, '_' and '-', "
            "starting with a letter"
        )
    return split


def shard_file_name(split: str, index: int, count: int, suffix: str = ".tfrecord") -> str:
    """The versioned layout's file name: ``train-00003-of-00016.tfrecord``."""
    return f"{split}-{index:05d}-of-{count:05d}{suffix}"

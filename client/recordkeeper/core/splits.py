"""The split name grammar (``train``, ``validation``, ``test_hard``) and the one rule that names
the split of an existing file.

One grammar for every place a split is named: shard registration (client and service), data
entries of a checkpoint's lineage, and the versioned layout's file names
(``train-00003-of-00016.tfrecord``).  Split names are like dataset names: lowercase letters,
digits, ``_`` and ``-``, starting with a letter, at most :data:`MAX_SPLIT_NAME_LENGTH` characters.

One rule names the split of an existing TFRecord file, whether it is published alone or found in
a directory (:func:`split_from_path`): the last split word (:data:`SPLIT_WORDS`) of the file name
without its record and compression suffixes, else a split word among the directories of its
path, else the file's stem made a split name, else ``train``:

>>> split_from_path("validation.tfrecord")
'validation'
>>> split_from_path("examples")
'examples'
>>> split_from_path("train/part-00000.tfrecord.gz")
'train'
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from recordkeeper.core.errors import InvalidShard

__all__ = [
    "COMPRESSION_EXTENSIONS",
    "DEFAULT_SPLIT",
    "MAX_SPLIT_NAME_LENGTH",
    "RECORD_EXTENSIONS",
    "SPLIT_WORDS",
    "ShardedName",
    "is_split_name",
    "parse_sharded_name",
    "shard_file_name",
    "split_from_path",
    "strip_record_suffixes",
    "validate_split_name",
]

MAX_SPLIT_NAME_LENGTH = 64
_SPLIT_RE = re.compile(rf"[a-z][a-z0-9_-]{{0,{MAX_SPLIT_NAME_LENGTH - 1}}}")

#: The split of a file whose name says nothing usable (``part.0.tfrecord``).
DEFAULT_SPLIT = "train"
#: Words that name a split when they appear in a file or directory name (kept as written:
#: ``val.tfrecord`` is split ``val``).
SPLIT_WORDS = frozenset(
    {
        "train",
        "training",
        "validation",
        "valid",
        "val",
        "dev",
        "eval",
        "evaluation",
        "test",
        "testing",
        "holdout",
    }
)
#: File suffixes of TFRecord files (lowercase).
RECORD_EXTENSIONS = frozenset(
    {".tfrecord", ".tfrecords", ".tfrec", ".tfr", ".record", ".records"}
    # the other formats of recordkeeper.formats (told apart by their bytes, not their names)
    | {".array_record", ".arrayrecord", ".riegeli"}
)
#: Compression suffixes (lowercase) → compression.
COMPRESSION_EXTENSIONS = {".gz": "gzip", ".gzip": "gzip", ".zlib": "zlib", ".zz": "zlib"}

_SHARDED_RE = re.compile(
    r"^(?P<stem>.*?)[-_.]?(?P<index>\d+)-of-(?P<count>\d+)(?P<rest>(?:\.[A-Za-z0-9]+)*)$"
)
_SUFFIX_RE = re.compile(r"\.[A-Za-z0-9]+")


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


def _is_record_suffix(suffix: str) -> bool:
    lower = suffix.lower()
    return lower in RECORD_EXTENSIONS or lower in COMPRESSION_EXTENSIONS


def strip_record_suffixes(base: str) -> tuple[str, str | None]:
    """Split a file name into its stem and its record/compression suffixes.

    ``train.tfrecord.gz`` → (``train``, ``.tfrecord.gz``); a name without any dot → (name, ``""``)
    (``write_small_dataset(output_path="examples")`` writes such a file); a name with another
    extension (``notes.txt``) → (name, None): not a TFRecord file.
    """
    stem = base
    removed = ""
    while True:
        root, ext = posixpath.splitext(stem)
        if ext and _is_record_suffix(ext):
            stem, removed = root, ext + removed
            continue
        break
    if removed:
        return stem, removed
    if "." not in base:
        return base, ""
    return base, None


@dataclass(frozen=True)
class ShardedName:
    """A sharded file name: ``coco-train.tfrecord-00003-of-00016`` → stem, 3, 16."""

    stem: str
    index: int
    count: int


def parse_sharded_name(base: str) -> ShardedName | None:
    """The shard position a file name states (``…-00003-of-00016[.tfrecord[.gz]]``), or None.

    Only names whose trailing suffixes are record or compression suffixes count.
    """
    match = _SHARDED_RE.match(base)
    if match is None or not all(_is_record_suffix(s) for s in _SUFFIX_RE.findall(match["rest"])):
        return None
    return ShardedName(match["stem"], int(match["index"]), int(match["count"]))


def split_from_path(path: str) -> str:
    """The split a TFRecord file's path names (see the module doc); ``path`` is relative to what
    is published: a file published alone is its own name, a file in a published directory its
    path below that directory.  Sharded names (``train.tfrecord-00000-of-00004``) name their
    split by the part before the shard position.
    """
    directories, base = posixpath.split(path.strip("/"))
    sharded = parse_sharded_name(base)
    stem = sharded.stem if sharded is not None else base
    stem, _ = strip_record_suffixes(stem)
    tokens = [t for t in re.split(r"[-_.]", stem.lower()) if t]
    for token in reversed(tokens):
        if token in SPLIT_WORDS:
            return token
    for part in reversed(directories.lower().split("/")):
        if part in SPLIT_WORDS:
            return part
    slug = "_".join(tokens)
    return slug if is_split_name(slug) else DEFAULT_SPLIT

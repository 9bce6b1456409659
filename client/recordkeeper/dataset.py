"""Describing TFRecord shards that already exist, so they can be published as a version.

:class:`Dataset` is a plain description — name, splits, shard files in order — built from an
explicit list (:meth:`Dataset.from_files`), a directory listing (:meth:`Dataset.from_directory`)
or a TFDS build directory (:meth:`Dataset.from_tfds`).  Nothing is read here except listings
and ``dataset_info.json``; :func:`recordkeeper.publish.publish` hashes and validates the bytes.

File names :meth:`Dataset.from_directory` recognises:

=========================================  ===========================================
name                                       split, shard
=========================================  ===========================================
``coco-train.tfrecord-00003-of-00016``     TFDS style: ``train``, 3 of 16
``train-00003-of-00016.tfrecord.gz``       versioned layout: ``train``, 3 of 16 (gzip)
``train.tfrecord-00003-of-00016``          ``write_small_dataset``/sharded writers
``train.tfrecord``, ``data/train_v2.tfrec`` one shard; split from a split word in the name
``examples`` (no extension)                one shard of split ``examples``
=========================================  ===========================================

The split is the last split word in the name (``train``, ``validation``, ``val``, ``dev``,
``eval``, ``test`` …), else a split word among its directories, else the file's stem: one rule,
:func:`recordkeeper.core.splits.split_from_path`, for a directory's files and for a file
published alone (:meth:`Dataset.from_file`).  Several unsharded files of one split become its
shards in natural name order.  Compression comes from the suffix (``.gz`` → gzip,
``.zlib``/``.zz`` → zlib) or is detected from the bytes at publish time (``write_small_dataset``
with ``tfrecords_gzip`` writes GZIP without a ``.gz`` suffix).  Hidden files and everything
under a hidden directory (a name starting with ``.`` or ``_``: ``.git/``, ``.recordkeeper/``,
``_temporary/``) are skipped, as are known non-record files (``dataset_info.json``,
``README``, images, …).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from recordkeeper.core.errors import InvalidName, InvalidShard
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.splits import (
    COMPRESSION_EXTENSIONS,
    parse_sharded_name,
    split_from_path,
    strip_record_suffixes,
    validate_split_name,
)
from recordkeeper.storage import join_uri, list_files, open_read, to_uri

__all__ = ["COMPRESSION_SUFFIXES", "Dataset", "ShardFile", "compression_suffix"]

COMPRESSION_SUFFIXES = {"none": ".tfrecord", "gzip": ".tfrecord.gz", "zlib": ".tfrecord.zlib"}
_IGNORED_NAMES = {"_SUCCESS", "dataset_info.json", "features.json", "README", "LICENSE"}
_IGNORED_EXT = {
    ".json",
    ".txt",
    ".md",
    ".pbtxt",
    ".crc",
    ".index",
    ".yaml",
    ".yml",
    ".csv",
    ".py",
    ".lock",
    ".log",
    ".tmp",
    ".partial",
    ".rkidx",  # record indexes (recordkeeper.record_sets), never shards
}
_IGNORED_SUFFIXES = tuple(sorted(_IGNORED_EXT))  # one str.endswith call


def compression_suffix(compression: str) -> str:
    """The versioned layout's suffix: ``.tfrecord``, ``.tfrecord.gz`` or ``.tfrecord.zlib``."""
    return COMPRESSION_SUFFIXES[compression]


@dataclass(frozen=True)
class ShardFile:
    """One existing file and its place in the dataset.

    ``compression`` is ``None`` when it is to be detected from the bytes;
    ``expected_records`` is set when a manifest (``dataset_info.json``) states the count.
    """

    split: str
    index: int
    count: int
    uri: str
    compression: str | None = None
    expected_records: int | None = None
    #: the record format (``tfrecord``, ``array_record``, ``riegeli``); None: detected
    format: str | None = None

    @property
    def name(self) -> str:
        return f"{self.split}-{self.index:05d}-of-{self.count:05d}"


@dataclass(frozen=True)
class Dataset:
    """Existing shards to publish: ``name`` and ``splits`` → shard files in index order."""

    name: str
    splits: Mapping[str, tuple[ShardFile, ...]]
    storage_options: Mapping[str, Any] | None = None
    source: str | None = None
    _notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def shards(self) -> list[ShardFile]:
        return [s for split in sorted(self.splits) for s in self.splits[split]]

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}: {len(v)} shards" for k, v in sorted(self.splits.items()))
        return f"Dataset({self.name!r}, {{{parts}}}, source={self.source!r})"

    # -- constructors ---------------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        name: str,
        files: Mapping[str, Sequence[str | os.PathLike[str]]] | Sequence[str | os.PathLike[str]],
        *,
        storage_options: Mapping[str, Any] | None = None,
        compression: str | None = None,
    ) -> Dataset:
        """Shards given explicitly: ``{"train": [...], "validation": [...]}`` in index order.

        A plain list means one split, ``train``.  Local paths become ``file://`` URIs.
        """
        validate_dataset_name(name)
        if isinstance(files, (str, os.PathLike)):
            raise InvalidShard("files must be a list of paths or a mapping split -> list of paths")
        mapping = files if isinstance(files, Mapping) else {"train": files}
        splits: dict[str, tuple[ShardFile, ...]] = {}
        for split, paths in mapping.items():
            validate_split_name(split)
            if isinstance(paths, (str, os.PathLike)):
                paths = [paths]
            if not paths:
                raise InvalidShard(f"split {split!r} has no files")
            uris = [to_uri(p) for p in paths]
            splits[split] = tuple(
                ShardFile(
                    split,
                    i,
                    len(uris),
                    uri,
                    compression or _compression_from_name(uri),
                )
                for i, uri in enumerate(uris)
            )
        if not splits:
            raise InvalidShard("a dataset needs at least one split with files")
        return cls(name, MappingProxyType(splits), storage_options, source=None)

    @classmethod
    def from_file(
        cls,
        path_or_url: str | os.PathLike[str],
        name: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """One file published alone: its split is named by the same rule as in a directory
        (``data/validation.tfrecord`` → ``validation``, ``examples`` → ``examples``)."""
        validate_dataset_name(name)
        uri = to_uri(path_or_url)
        base = uri.rstrip("/").rsplit("/", 1)[-1]
        splits, _ = _classify(uri, [(uri, base)], explicit=True)
        for split in splits:
            validate_split_name(split)
        return cls(name, MappingProxyType(splits), storage_options, source=None)

    @classmethod
    def from_directory(
        cls,
        path_or_url: str | os.PathLike[str],
        name: str | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Every TFRecord file under a directory (local, ``s3://``, ``gs://``), see module doc."""
        root = to_uri(path_or_url).rstrip("/")
        name = name or _name_from_path(root)
        validate_dataset_name(name)
        uris = list_files(root, storage_options)
        below, cut = root + "/", len(root) + 1
        candidates = [(u, u[cut:] if u.startswith(below) else u) for u in uris]
        splits, skipped = _classify(root, candidates)
        if not splits:
            shown = ", ".join(skipped[:5]) or "nothing"
            raise InvalidShard(
                f"{root}: no TFRecord files found (looked for *.tfrecord[.gz], "
                f"*-NNNNN-of-NNNNN; skipped: {shown})"
            )
        for split in splits:
            validate_split_name(split)
        notes = tuple(f"skipped {s}" for s in skipped)
        return cls(
            name,
            MappingProxyType(dict(sorted(splits.items()))),
            storage_options,
            source=root,
            _notes=notes,
        )

    @classmethod
    def from_tfds(
        cls,
        build_dir: str | os.PathLike[str],
        name: str | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """A TFDS build directory (``…/mnist/3.0.1``) described by its ``dataset_info.json``.

        Splits, shard file names (``filepathTemplate``) and per-shard record counts
        (``shardLengths``) come from the JSON; every file must exist, and publishing checks
        every shard's record count against it.
        """
        root = to_uri(build_dir).rstrip("/")
        info_uri = join_uri(root, "dataset_info.json")
        with open_read(info_uri, storage_options) as fh:
            try:
                info = json.loads(fh.read())
            except ValueError as exc:
                raise InvalidShard(f"{info_uri} is not valid JSON: {exc}") from None
        tfds_name = str(info.get("name", ""))
        if name is None:
            name = tfds_name.replace(".", "_").lower()
            try:
                validate_dataset_name(name)
            except InvalidName as exc:
                raise InvalidName(f"{exc.detail}; pass name= to Dataset.from_tfds") from None
        validate_dataset_name(name)
        file_format = info.get("fileFormat") or "tfrecord"
        if file_format not in ("tfrecord", "TFRECORD", 1, "1"):
            raise InvalidShard(f"{info_uri}: file format {file_format!r} is not TFRecord")
        file_format = "tfrecord"
        existing = set(list_files(root, storage_options))
        splits: dict[str, tuple[ShardFile, ...]] = {}
        for split_info in info.get("splits", []):
            split = split_info["name"]
            lengths = [int(n) for n in split_info.get("shardLengths", [])]
            if not lengths:
                raise InvalidShard(f"{info_uri}: split {split!r} lists no shardLengths")
            template = split_info.get("filepathTemplate") or (
                "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
            )
            count = len(lengths)
            files = []
            for index, length in enumerate(lengths):
                file_name = (
                    template.replace("{DATASET}", tfds_name)
                    .replace("{SPLIT}", split)
                    .replace("{FILEFORMAT}", file_format)
                    .replace("{SHARD_X_OF_Y}", f"{index:05d}-of-{count:05d}")
                    .replace("{SHARD_INDEX}", f"{index:05d}")
                    .replace("{NUM_SHARDS}", f"{count:05d}")
                )
                uri = join_uri(root, file_name)
                if uri not in existing:
                    raise InvalidShard(
                        f"{info_uri} lists {split} shard {index} as {file_name}, which does not "
                        f"exist in {root}"
                    )
                files.append(
                    ShardFile(split, index, count, uri, _compression_from_name(uri), length)
                )
            validate_split_name(split)
            splits[split] = tuple(files)
        if not splits:
            raise InvalidShard(f"{info_uri} lists no splits")
        return cls(
            name, MappingProxyType(dict(sorted(splits.items()))), storage_options, source=root
        )


def _classify(
    root: str, candidates: Sequence[tuple[str, str]], *, explicit: bool = False
) -> tuple[dict[str, tuple[ShardFile, ...]], list[str]]:
    """Group ``(uri, path below root)`` candidates into splits by the one naming rule
    (:func:`recordkeeper.core.splits.split_from_path`); returns the splits and the skipped
    paths.  ``explicit`` candidates were named by the user and are never skipped."""
    sharded: dict[str, dict[int, tuple[int, str]]] = {}
    single: dict[str, list[str]] = {}
    skipped: list[str] = []
    for uri, rel in candidates:
        *directories, base = rel.split("/")
        if not explicit and (_ignored(base) or any(_hidden(d) for d in directories)):
            skipped.append(rel)
            continue
        sharded_name = parse_sharded_name(base)
        if sharded_name is not None:
            split = split_from_path(rel)
            index, count = sharded_name.index, sharded_name.count
            slots = sharded.setdefault(split, {})
            if index in slots:
                raise InvalidShard(
                    f"{root}: two files claim {split} shard {index}: {slots[index][1]} and {uri}"
                )
            slots[index] = (count, uri)
            continue
        if strip_record_suffixes(base)[1] is None and not explicit:
            skipped.append(rel)
            continue
        single.setdefault(split_from_path(rel), []).append(uri)
    splits: dict[str, tuple[ShardFile, ...]] = {}
    for split, slots in sharded.items():
        if split in single:
            raise InvalidShard(
                f"{root}: split {split!r} mixes sharded files (…-of-NNNNN) with unsharded "
                f"ones ({', '.join(single[split])}); use Dataset.from_files to say which"
            )
        counts = {c for c, _ in slots.values()}
        if len(counts) != 1:
            raise InvalidShard(
                f"{root}: split {split!r} has shards claiming different totals {sorted(counts)}"
            )
        count = counts.pop()
        missing = sorted(set(range(count)) - set(slots))
        extra = sorted(i for i in slots if i >= count)
        if missing or extra:
            raise InvalidShard(
                f"{root}: split {split!r} should have {count} shards (…-of-{count:05d}) but "
                f"{'misses indices ' + _ranges(missing) if missing else ''}"
                f"{'has out-of-range indices ' + _ranges(extra) if extra else ''}"
            )
        splits[split] = tuple(
            ShardFile(split, i, count, slots[i][1], _compression_from_name(slots[i][1]))
            for i in range(count)
        )
    for split, files in single.items():
        files.sort(key=_natural_key)
        splits[split] = tuple(
            ShardFile(split, i, len(files), u, _compression_from_name(u))
            for i, u in enumerate(files)
        )
    return splits, skipped


def _compression_from_name(uri: str) -> str | None:
    lower = uri.lower()
    for ext, comp in COMPRESSION_EXTENSIONS.items():
        if lower.endswith(ext) or f"{ext}-" in lower.rsplit("/", 1)[-1]:
            return comp
    return None


def _hidden(name: str) -> bool:
    """A hidden file or directory (``.git``, ``.recordkeeper``, ``_temporary``): never data."""
    return name.startswith((".", "_"))


def _ignored(base: str) -> bool:
    if _hidden(base) or base in _IGNORED_NAMES:
        return True
    return base.lower().endswith(_IGNORED_SUFFIXES)


def _natural_key(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _name_from_path(root: str) -> str:
    base = root.rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^a-z0-9_-]+", "_", base.lower()).strip("_-")
    try:
        return validate_dataset_name(slug)
    except InvalidName:
        raise InvalidName(
            f"cannot derive a dataset name from {root!r}; pass name= (e.g. name='coco')"
        ) from None


def _ranges(values: Sequence[int]) -> str:
    shown = ", ".join(str(v) for v in values[:20])
    return shown + (f" … ({len(values)} in all)" if len(values) > 20 else "")

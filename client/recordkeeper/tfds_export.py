"""Export a version as a TensorFlow Datasets (TFDS) dataset directory.

The reverse of :meth:`recordkeeper.Dataset.from_tfds`.  :func:`export_tfds` writes::

    DATA_DIR/<tfds_name>/<X.Y.Z>/                  the builder directory
        dataset_info.json                          name, version, splits with shard lengths
        features.json                              the features, from the version's schema
        metadata.json                              {"recordkeeper": version, digests, shards}
        <tfds_name>-<split>.tfrecord-00000-of-00004  one file per registered shard, in order

which ``tfds.builder_from_directory(builder_dir)`` and ``tfds.load(tfds_name,
data_dir=DATA_DIR)`` read (the metadata files are written by TFDS itself, so they are in the
form the installed TFDS reads).  Splits, shard order and shard lengths are the registry's; the
records are the registered bytes, checked on the way: the sha256 of every file written is
compared with the registered one (``sha256`` of the stored bytes, or ``records_sha256`` for a
shard that was decompressed), and a mismatch raises :class:`~recordkeeper.errors.CorruptShard`
with nothing left at the builder directory.  As in deep verification, damage is confirmed by
reading the shard again: a clean second read means the first was damaged in transit (logged),
two reads that disagree raise :class:`~recordkeeper.errors.StorageError` (reason
``transport``).

**Shards.**  TFDS names its files ``<name>-<split>.tfrecord-NNNNN-of-MMMMM`` in the builder
directory and reads them uncompressed, so every shard gets a file there:

* ``link``: a local uncompressed shard becomes a hard link when the export is on the same
  filesystem (no bytes copied; the link is read once to check its sha256).  Hard links share
  the file: the export stays valid as long as the published shard is not rewritten in place
  (which recordkeeper never does);
* ``copy``: other uncompressed shards (another filesystem, ``s3://``, ``gs://``) are copied;
* ``decompress``: GZIP and ZLIB shards are written uncompressed (their ``records_sha256`` is
  the sha256 of exactly that stream).

``link=False`` always copies; ``link=True`` raises :class:`~recordkeeper.errors.StorageError`
(reason ``link``) instead of falling back to a copy.  The work happens in a hidden staging
directory next to the builder directory, renamed into place at the end.  A builder directory
that already holds this export (same version, same content digest) is left as it is
(``existing=True``); any other existing directory raises
:class:`~recordkeeper.errors.UnsafeStoragePath` (reason ``exists``).

**Features.**  Only ``tf.train.Example`` records map (:func:`tfds_features`), feature by
feature, as :func:`recordkeeper.schema_export.feature_spec` does:

======================================================  =======================================
schema                                                  ``tfds.features.Tensor``
======================================================  =======================================
in every record, 1 value                                ``shape=()``
in every record, ``n`` values each (``n > 1``)          ``shape=(n,)``
anything else (missing from some records, or counts     ``shape=(None,)``: a variable-length
that vary, or empty lists)                              list, empty where a record lacks it
======================================================  =======================================

with dtypes ``int64`` → ``int64``, ``float`` → ``float32``, ``bytes`` → ``string``.  What
cannot be mapped raises :class:`~recordkeeper.errors.UnsupportedFormat` (code
``unsupported_format``, ``extra["format"] == "tfds"``) whose ``extra["reason"]`` is stable:

* ``opaque_records``: the records are not ``tf.train.Example`` protos;
* ``sequence_example``: ``tf.train.SequenceExample`` records (TFDS keeps sequences in Example
  features; parsing a SequenceExample as an Example would silently drop its feature lists);
* ``supervised_keys``: a supervised key names no feature;
* ``feature_override``: a TFDS feature given in ``features=`` (``Image``, ``ClassLabel`` …)
  does not fit the records (another list type, another number of values, no such feature).

**Names and versions.**  The TFDS name is the dataset's with ``-`` turned into ``_`` (TFDS
names are ``[a-zA-Z][a-zA-Z0-9_]*``), or ``name=``.  TFDS wants a semantic version: version
``vN`` of a dataset is exported as ``N.0.0`` (``coco@v3`` → ``3.0.0``, so ``tfds.load`` picks
the newest exported version, as recordkeeper's ``latest`` would), or ``tfds_version="X.Y.Z"``.
A staged version (no number yet, shards still arriving) is refused
(:class:`~recordkeeper.errors.VersionIncomplete`).  When TFDS itself has a dataset of that name
(``mnist``), ``tfds.load("mnist", data_dir=...)`` uses TFDS's own builder: load
``"mnist:3.0.0"`` or the builder directory instead (the export's ``notes`` say so).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import orjson

from recordkeeper._parallel import parallel_map
from recordkeeper.core.errors import (
    CorruptShard,
    InvalidInput,
    InvalidName,
    InvalidVersionName,
    StorageError,
    UnsafeStoragePath,
    UnsupportedFormat,
    VersionIncomplete,
)
from recordkeeper.core.refs import PUBLISHED_STATES
from recordkeeper.core.schema import Schema
from recordkeeper.local_files import local_path
from recordkeeper.progress import byte_progress
from recordkeeper.storage import open_read, profile_of, to_uri
from recordkeeper.values import DatasetVersion, Shard, TfdsExport, TfdsExportedShard

__all__ = [
    "FILE_TEMPLATE",
    "TfdsFeature",
    "check_override",
    "export_tfds",
    "tfds_features",
    "tfds_file_name",
    "tfds_name_of",
    "tfds_version_of",
]

log = logging.getLogger("recordkeeper")

#: TFDS's default ``filepathTemplate``, the one every export uses.
FILE_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_TFDS_NAME_RE = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")
_SEMVER_RE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_CHUNK = 4 * 2**20
_DTYPES = {"int64": "int64", "float": "float32", "bytes": "string"}
_METADATA_FILE = "metadata.json"
#: errno values of a hard link that cannot be made where a copy can (another filesystem, a
#: filesystem without hard links, a file at its link limit)
_COPY_INSTEAD = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP})
_FORMAT = "rk-tfds-export-1"


@dataclass(frozen=True)
class TfdsFeature:
    """A feature as TFDS will describe it: ``dtype`` (``int64``, ``float32``, ``string``) and
    ``shape`` (``()``, ``(n,)`` or ``(None,)`` for a variable-length list)."""

    name: str
    dtype: Literal["int64", "float32", "string"]
    shape: tuple[int | None, ...]
    #: the ``tfds.features`` class: ``Tensor``, or the one given in ``features=``
    feature: str = "Tensor"

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "feature": self.feature}


def _unmappable(detail: str, reason: str, **extra: Any) -> UnsupportedFormat:
    return UnsupportedFormat(detail, format="tfds", reason=reason, **extra)


def tfds_features(schema: Schema) -> tuple[TfdsFeature, ...]:
    """The TFDS feature of every feature of ``schema`` (the rules are in the module doc).

    Raises :class:`~recordkeeper.errors.UnsupportedFormat` (``extra["reason"]``:
    ``opaque_records``, ``sequence_example``) for records TFDS cannot describe.
    """
    if schema.record_type == "opaque":
        raise _unmappable(
            "these records are not tf.train.Example protos: TFDS features cannot describe "
            "them (export needs Example records)",
            "opaque_records",
        )
    if schema.record_type == "sequence_example":
        lists = sorted(f.name for f in schema.features if f.scope == "feature_lists")
        raise _unmappable(
            "these records are tf.train.SequenceExample protos (feature lists "
            f"{', '.join(lists[:5]) or '-'}): TFDS keeps sequences in tf.train.Example "
            "features, and reading these as Examples would drop the feature lists",
            "sequence_example",
            features=lists,
        )
    out = []
    for feature in schema.features:
        fixed = feature.min_count == feature.max_count >= 1
        shape: tuple[int | None, ...]
        if fixed and feature.present_count == schema.record_count:
            shape = () if feature.min_count == 1 else (feature.min_count,)
        else:
            shape = (None,)
        out.append(TfdsFeature(feature.name, _DTYPES[feature.kind], shape))  # type: ignore[arg-type]
    return tuple(out)


def _serialized_kind(np_dtype: Any) -> str | None:
    """``int64``, ``float`` or ``bytes``: the Example list a TFDS dtype is stored in."""
    import numpy as np

    kind = np.dtype(np_dtype).kind
    return {"i": "int64", "u": "int64", "b": "int64", "f": "float"}.get(
        kind, "bytes" if kind in "OSU" else None
    )


def check_override(schema: Schema, name: str, connector: Any) -> TfdsFeature:
    """The feature ``name`` described by the TFDS feature ``connector`` (``ClassLabel``,
    ``Image``, ``Text``, a ``Tensor`` …), if the records can be read as it: one Example feature
    of the same list type, with the number of values its shape needs in every record.

    Raises :class:`~recordkeeper.errors.UnsupportedFormat` (reason ``feature_override``).
    """
    try:
        feature = next(f for f in schema.features if f.name == name)
    except StopIteration:
        known = ", ".join(sorted(f.name for f in schema.features)) or "none"
        raise _unmappable(
            f"features= names {name!r}, which the records do not have (features: {known})",
            "feature_override",
            feature=name,
        ) from None
    what = type(connector).__name__
    serialized = getattr(connector, "get_serialized_info", None)
    if not callable(serialized):
        raise _unmappable(
            f"features={{{name!r}: {what}}}: not a TFDS feature (tfds.features.Image(), "
            "tfds.features.ClassLabel(...), ...)",
            "feature_override",
            feature=name,
        )
    info = serialized()
    shape = getattr(info, "shape", None)
    np_dtype = getattr(info, "np_dtype", None)
    kind = _serialized_kind(np_dtype) if shape is not None and np_dtype is not None else None
    if shape is None or kind is None:
        raise _unmappable(
            f"features={{{name!r}: {what}}}: a {what} is stored as several Example features "
            "(or an unknown type), not as the one feature the records have",
            "feature_override",
            feature=name,
        )
    if kind != feature.kind:
        raise _unmappable(
            f"features={{{name!r}: {what}}}: a {what} is stored as {kind} values, the records "
            f"carry {name!r} as {feature.kind} values",
            "feature_override",
            feature=name,
        )
    dims = tuple(shape)
    if None not in dims:
        needed = 1
        for d in dims:
            needed *= int(d)
        every = feature.present_count == schema.record_count
        if not (every and feature.min_count == feature.max_count == needed):
            counts = (
                f"{feature.min_count}"
                if feature.min_count == feature.max_count
                else f"{feature.min_count} to {feature.max_count}"
            )
            where = (
                "every record"
                if every
                else f"{feature.present_count} of {schema.record_count} records"
            )
            raise _unmappable(
                f"features={{{name!r}: {what}}}: a {what} of shape {dims} needs {needed} "
                f"value(s) in every record; {name!r} has {counts} in {where}",
                "feature_override",
                feature=name,
            )
    dtype = {"int64": "int64", "float": "float32", "bytes": "string"}[kind]
    return TfdsFeature(name, dtype, dims, what)  # type: ignore[arg-type]


def tfds_name_of(dataset: str, name: str | None = None) -> str:
    """The TFDS name: ``name`` if given (checked), else the dataset's with ``-`` → ``_``."""
    candidate = name if name is not None else dataset.replace("-", "_")
    if not isinstance(candidate, str) or not _TFDS_NAME_RE.fullmatch(candidate):
        raise InvalidName(
            f"{candidate!r} is not a TFDS dataset name: a letter, then letters, digits and "
            "'_'" + ("" if name is not None else "; pass name=")
        )
    return candidate


def tfds_version_of(version: DatasetVersion, tfds_version: str | None = None) -> str:
    """``N.0.0`` for version number ``N`` (``coco@v3`` → ``3.0.0``), or ``tfds_version``
    (checked: ``X.Y.Z``, as TFDS requires)."""
    if tfds_version is not None:
        if not isinstance(tfds_version, str) or not _SEMVER_RE.fullmatch(tfds_version):
            raise InvalidVersionName(
                f"TFDS versions are X.Y.Z (semantic versions), got {tfds_version!r}"
            )
        return tfds_version
    if version.number is None:
        raise VersionIncomplete(
            f"{version.name} has no version number yet ({version.state}); export a committed "
            "version, or pass tfds_version="
        )
    return f"{version.number}.0.0"


def tfds_file_name(tfds_name: str, split: str, index: int, count: int) -> str:
    """``<name>-<split>.tfrecord-00003-of-00016``: TFDS's name for a shard
    (:data:`FILE_TEMPLATE`)."""
    return f"{tfds_name}-{split}.tfrecord-{index:05d}-of-{count:05d}"


# -- copying shards, checked -------------------------------------------------------------------


class _Inflater:
    """Decompresses a GZIP (every member) or ZLIB stream piece by piece."""

    def __init__(self, compression: str) -> None:
        self._wbits = 31 if compression == "gzip" else 15
        self._gzip = compression == "gzip"
        self._obj = zlib.decompressobj(self._wbits)

    def feed(self, data: bytes) -> bytes:
        out = [self._obj.decompress(data)]
        while self._gzip and self._obj.eof and self._obj.unused_data:
            rest = self._obj.unused_data
            self._obj = zlib.decompressobj(self._wbits)
            out.append(self._obj.decompress(rest))
        return b"".join(out)

    def finish(self) -> bytes:
        tail = self._obj.flush()
        if not self._obj.eof:
            raise zlib.error("the compressed stream ends early")
        return tail


def _mismatch(shard: Shard, reason: str, detail: str) -> CorruptShard:
    return CorruptShard(
        f"{shard.name} ({shard.uri}): {detail}; nothing was exported",
        uri=shard.uri,
        shard=shard.name,
        split=shard.split,
        reason=reason,
    )


def _hash_file(path: str, advance: Callable[[int], None]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            advance(len(chunk))
    return digest.hexdigest(), size


def _try_link(shard: Shard, target: str, link: bool | None) -> bool:
    """Hard-link a local uncompressed shard to ``target``; False when a copy must do."""
    if link is False or shard.compression != "none" or not profile_of(shard.uri).local:
        if link is True:
            raise StorageError(
                f"{shard.uri} cannot be hard-linked ({shard.compression} compression, "
                f"{profile_of(shard.uri).name} storage): TFDS needs an uncompressed local file",
                uri=shard.uri,
                reason="link",
            )
        return False
    try:
        os.link(local_path(shard.uri), target)
    except FileNotFoundError:
        raise StorageError(
            f"{shard.uri}: object not found", uri=shard.uri, reason="missing"
        ) from None
    except OSError as exc:
        if link is True or exc.errno not in _COPY_INSTEAD:
            raise StorageError(
                f"cannot hard-link {shard.uri} to {target}: {exc.strerror}",
                uri=shard.uri,
                reason="link",
            ) from None
        return False
    return True


def _export_shard(
    shard: Shard,
    target: str,
    link: bool | None,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None],
) -> TfdsExportedShard:
    """Write one shard at ``target`` and check what was written against the registration."""
    if _try_link(shard, target, link):
        sha256, size = _hash_file(target, advance)
        if size != shard.size:
            raise _mismatch(shard, "size_changed", f"size is {size} bytes, registered {shard.size}")
        if sha256 != shard.sha256:
            raise _mismatch(
                shard, "checksum_mismatch", f"sha256 is {sha256}, registered {shard.sha256}"
            )
        return TfdsExportedShard(
            shard.split, shard.index, shard.uri, target, "link", size, shard.record_count
        )
    stored = hashlib.sha256()
    written = hashlib.sha256()
    stored_size = written_size = 0
    inflater = None if shard.compression == "none" else _Inflater(shard.compression)
    with (
        open_read(shard.uri, storage_options, size=shard.size) as source,
        open(target, "xb") as out,
    ):
        try:
            while chunk := source.read(_CHUNK):
                stored.update(chunk)
                stored_size += len(chunk)
                advance(len(chunk))
                data = chunk if inflater is None else inflater.feed(chunk)
                if data:
                    out.write(data)
                    written.update(data)
                    written_size += len(data)
            if inflater is not None:
                tail = inflater.finish()
                out.write(tail)
                written.update(tail)
                written_size += len(tail)
        except zlib.error as exc:
            raise _mismatch(
                shard,
                "corrupt",
                f"the {shard.compression} stream does not decompress after {stored_size} "
                f"stored bytes ({exc})",
            ) from None
    if stored_size != shard.size:
        raise _mismatch(
            shard, "size_changed", f"size is {stored_size} bytes, registered {shard.size}"
        )
    if stored.hexdigest() != shard.sha256:
        raise _mismatch(
            shard,
            "checksum_mismatch",
            f"sha256 of the stored bytes is {stored.hexdigest()}, registered {shard.sha256}",
        )
    if inflater is not None and written.hexdigest() != shard.records_sha256:
        raise _mismatch(
            shard,
            "records_changed",
            f"sha256 of the decompressed records is {written.hexdigest()}, registered "
            f"{shard.records_sha256}",
        )
    method: Literal["copy", "decompress"] = "copy" if inflater is None else "decompress"
    return TfdsExportedShard(
        shard.split, shard.index, shard.uri, target, method, written_size, shard.record_count
    )


def _export_checked(
    shard: Shard,
    target: str,
    link: bool | None,
    storage_options: Mapping[str, Any] | None,
    advance: Callable[[int], None],
) -> TfdsExportedShard:
    """:func:`_export_shard`, with damage confirmed by a second read (as deep verification
    does): a byte flipped on the way looks exactly like a damaged shard."""
    try:
        return _export_shard(shard, target, link, storage_options, advance)
    except CorruptShard as first:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        try:
            exported = _export_shard(shard, target, link, storage_options, lambda n: None)
        except CorruptShard as again:
            if again.detail == first.detail:
                raise again from None
            raise StorageError(
                f"{shard.uri}: two reads gave different bytes ({first.detail}; then "
                f"{again.detail}): the answers are being damaged in transit, nothing was "
                "exported",
                uri=shard.uri,
                reason="transport",
            ) from None
        log.warning("%s: one read found %s, the next none: damaged in transit", shard.uri, first)
        return exported


# -- the export --------------------------------------------------------------------------------


def _local_data_dir(data_dir: str) -> str:
    uri = to_uri(os.path.expanduser(data_dir))
    if not profile_of(uri).local:
        raise InvalidInput(
            f"export_tfds writes a local directory, not {data_dir!r}: export locally, then copy "
            "the builder directory to object storage if TFDS should read it from there"
        )
    return os.path.abspath(local_path(uri))


def _existing_export(builder_dir: str, version: DatasetVersion) -> dict[str, Any] | None:
    """The recordkeeper metadata of an export of ``version`` at ``builder_dir``, if it holds
    one; raises :class:`UnsafeStoragePath` when something else is there."""
    if not os.path.lexists(builder_dir):
        return None
    if (
        os.path.isdir(builder_dir)
        and not os.path.islink(builder_dir)
        and not os.listdir(builder_dir)
    ):
        return None  # an empty directory: the export's rename replaces it
    try:
        with open(os.path.join(builder_dir, _METADATA_FILE), "rb") as fh:
            body = orjson.loads(fh.read()).get("recordkeeper") or {}
    except (OSError, ValueError, AttributeError):
        body = {}
    if (
        isinstance(body, dict)
        and body.get("format") == _FORMAT
        and body.get("version") == version.name
        and body.get("content_digest") == version.content_digest
        and os.path.isfile(os.path.join(builder_dir, "dataset_info.json"))
    ):
        return body
    what = (
        f"an export of {body.get('version')} ({body.get('content_digest')})"
        if isinstance(body, dict) and body.get("version")
        else "something recordkeeper did not export"
    )
    raise UnsafeStoragePath(
        f"{builder_dir} already exists and holds {what}; remove it, or export with another "
        "tfds_version= or data_dir",
        path=builder_dir,
        reason="exists",
    )


def _import_tfds() -> Any:
    try:
        import tensorflow_datasets as tfds
    except ImportError as exc:
        raise ImportError(
            f"export_tfds needs tensorflow-datasets ({exc}): pip install 'recordkeeper[tfds]'"
        ) from None
    return tfds


def _features_dict(tfds: Any, features: Sequence[TfdsFeature], overrides: Mapping[str, Any]) -> Any:
    import numpy as np

    dtypes = {"int64": np.int64, "float32": np.float32, "string": np.object_}
    return tfds.features.FeaturesDict(
        {
            f.name: overrides.get(f.name)
            or tfds.features.Tensor(shape=f.shape, dtype=dtypes[f.dtype])
            for f in features
        }
    )


def _tfds_collides(tfds: Any, name: str) -> bool:
    """Whether TFDS has a dataset builder of its own called ``name``."""
    try:
        tfds.builder_cls(name)
    except Exception:  # DatasetNotFoundError, or any failure importing its module
        return False
    return True


def _write_info(
    tfds: Any,
    staging: str,
    builder_dir: str,
    version: DatasetVersion,
    tfds_name: str,
    tfds_version: str,
    features: Sequence[TfdsFeature],
    shard_lengths: Mapping[str, list[int]],
    split_bytes: Mapping[str, int],
    supervised_keys: tuple[str, str] | None,
    metadata: Mapping[str, Any],
    overrides: Mapping[str, Any],
) -> None:
    """``dataset_info.json``, ``features.json`` and ``metadata.json``, written by TFDS."""
    split_infos = [
        tfds.core.SplitInfo(
            name=split,
            shard_lengths=lengths,
            num_bytes=split_bytes[split],
            filename_template=tfds.core.ShardedFileTemplate(
                data_dir=builder_dir,
                dataset_name=tfds_name,
                split=split,
                filetype_suffix="tfrecord",
                template=FILE_TEMPLATE,
            ),
        )
        for split, lengths in sorted(shard_lengths.items())
    ]
    notes = f"recordkeeper version {version.name}" + (f" ({version.desc})" if version.desc else "")
    identity = tfds.core.DatasetIdentity(
        name=tfds_name,
        version=tfds_version,
        data_dir=builder_dir,
        module_name="recordkeeper.tfds_export",
        release_notes={tfds_version: notes},
    )
    info = tfds.core.DatasetInfo(
        builder=identity,
        description=(
            f"{version.name}: version {version.number} of the recordkeeper dataset "
            f"{version.dataset!r}, content digest {version.content_digest}"
        ),
        features=_features_dict(tfds, features, overrides),
        supervised_keys=supervised_keys,
        metadata=tfds.core.MetadataDict(recordkeeper=dict(metadata)),
        split_dict=tfds.core.SplitDict(split_infos),
    )
    info.set_file_format("tfrecord")
    info.write_to_directory(staging)


def export_tfds(
    version: DatasetVersion,
    data_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    tfds_version: str | None = None,
    link: bool | None = None,
    supervised_keys: tuple[str, str] | None = None,
    features: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
) -> TfdsExport:
    """Write ``version`` as a TFDS dataset under the local directory ``data_dir``.

    See the module docstring for the layout, the feature mapping, the version number and how
    shards are linked or copied and checked.  ``supervised_keys=("image", "label")`` is passed
    to TFDS (``as_supervised=True``).  ``features={"image": tfds.features.Image(), "label":
    tfds.features.ClassLabel(names=[...])}`` describes those features with the given TFDS
    features instead of ``Tensor`` (:func:`check_override` checks the records fit each one).
    ``progress``: a bytes/s bar on a terminal (``None``), always, or never.
    """
    started = time.perf_counter()
    version.ensure_readable()
    if version.state not in PUBLISHED_STATES:
        raise VersionIncomplete(
            f"{version.name} is {version.state}: only committed (or deprecated) versions are "
            "exported (a staged version may still change)",
            version=version.name,
            state=version.state,
        )
    tfds_name = tfds_name_of(version.dataset, name)
    number = tfds_version_of(version, tfds_version)
    if version.shard_count and not version.splits:
        raise InvalidInput(f"{version.name} was listed without its shards: resolve it first")
    overrides = dict(features or {})
    schema = version.schema
    mapped = [
        check_override(schema, f.name, overrides[f.name]) if f.name in overrides else f
        for f in tfds_features(schema)
    ]
    for extra_name in sorted(set(overrides) - {f.name for f in mapped}):
        check_override(schema, extra_name, overrides[extra_name])  # raises: not a feature
    if supervised_keys is not None:
        known = {f.name for f in mapped}
        missing = [k for k in supervised_keys if k not in known]
        if len(supervised_keys) != 2 or missing:
            raise _unmappable(
                f"supervised_keys must name two features of {version.name}; "
                f"{', '.join(map(repr, missing)) or repr(supervised_keys)} is not one "
                f"(features: {', '.join(sorted(known))})",
                "supervised_keys",
            )
    root = _local_data_dir(os.fspath(data_dir))
    builder_dir = os.path.join(root, tfds_name, number)
    result = TfdsExport(
        version=version.name,
        content_digest=version.content_digest,
        tfds_name=tfds_name,
        tfds_version=number,
        data_dir=root,
        builder_dir=builder_dir,
        splits=MappingProxyType(
            {k: tuple(s.record_count for s in v.shards) for k, v in version.splits.items()}
        ),
        features=MappingProxyType({f.name: f.to_dict() for f in mapped}),
    )
    notes = []
    if version.state == "deprecated":
        notes.append(f"{version.name} is deprecated: {version.deprecated_reason or 'no reason'}")
    if _existing_export(builder_dir, version) is not None:
        notes.append(f"{builder_dir} already holds this export: left as it is")
        return _finish(result, notes, started, existing=True)
    tfds = _import_tfds()
    if _tfds_collides(tfds, tfds_name):
        notes.append(
            f"TFDS has a dataset of its own called {tfds_name!r}: tfds.load({tfds_name!r}, "
            f"data_dir=...) loads TFDS's builder; load {tfds_name}:{number} or "
            "tfds.builder_from_directory(builder_dir), or export with name="
        )
    parent = os.path.join(root, tfds_name)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{number}.partial-", dir=parent)
    try:
        shards = [s for split in sorted(version.splits) for s in version.splits[split].shards]
        jobs = [
            (shard, os.path.join(staging, tfds_file_name(tfds_name, *_position(shard))))
            for shard in shards
        ]
        total = sum(s.size for s in shards)
        workers = max(1, min(max_workers or 8, len(jobs)))
        with byte_progress(f"export {version.name}", total, progress) as advance:

            def run(shard: Shard, target: str) -> TfdsExportedShard:
                return _export_checked(shard, target, link, storage_options, advance)

            exported = parallel_map(run, jobs, workers=workers, processes=False)
        lengths: dict[str, list[int]] = {}
        split_bytes: dict[str, int] = {}
        for shard in exported:
            lengths.setdefault(shard.split, []).append(shard.record_count)
            split_bytes[shard.split] = split_bytes.get(shard.split, 0) + shard.size
        metadata = {
            "format": _FORMAT,
            "version": version.name,
            "ref": version.ref,
            "dataset": version.dataset,
            "number": version.number,
            "content_digest": version.content_digest,
            "schema_digest": version.schema_digest,
            "exported_at": datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z"),
            "shards": {
                os.path.basename(e.path): {
                    "source": s.uri,
                    "sha256": s.sha256 if e.method != "decompress" else None,
                    "records_sha256": s.records_sha256,
                    "record_count": s.record_count,
                }
                for s, e in zip(shards, exported, strict=True)
            },
        }
        _write_info(
            tfds,
            staging,
            builder_dir,
            version,
            tfds_name,
            number,
            mapped,
            lengths,
            split_bytes,
            supervised_keys,
            metadata,
            overrides,
        )
        try:
            os.rename(staging, builder_dir)
        except OSError:
            if _existing_export(builder_dir, version) is None:  # raises for another's
                raise
            notes.append(f"{builder_dir} was exported meanwhile by another process")
            shutil.rmtree(staging, ignore_errors=True)
            return _finish(result, notes, started, existing=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    final = tuple(
        TfdsExportedShard(
            e.split,
            e.index,
            e.source,
            os.path.join(builder_dir, os.path.basename(e.path)),
            e.method,
            e.size,
            e.record_count,
        )
        for e in exported
    )
    read = sum(s.size for s in shards)
    return _finish(result, notes, started, shards=final, bytes_read=read)


def _position(shard: Shard) -> tuple[str, int, int]:
    return shard.split, shard.index, shard.count


def _finish(
    result: TfdsExport,
    notes: list[str],
    started: float,
    *,
    existing: bool = False,
    shards: tuple[TfdsExportedShard, ...] = (),
    bytes_read: int = 0,
) -> TfdsExport:
    from dataclasses import replace

    return replace(
        result,
        shards=shards,
        existing=existing,
        bytes_read=bytes_read,
        seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )

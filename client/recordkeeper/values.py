"""Value objects the client hands out: :class:`DatasetVersion`, :class:`Split`, :class:`Shard`.

A :class:`DatasetVersion` is immutable and keeps both the reference the user wrote
(``ref="coco@latest"``) and the immutable version it resolved to (``name``, ``content_digest``),
like a resolved revision in huggingface_hub.  Methods that need the outside world
(``schema`` when not included, ``verify``, ``tf_dataset``) go through the
:class:`VersionServices` that made it (the client's registry) and the storage options it was
given; this module imports none of them.  :class:`VerifyReport` and :class:`ShardProblem`, what
``verify`` answers, are value objects too and live here, as is :class:`TfdsExport`, what
``export_tfds`` answers.
"""

from __future__ import annotations

import datetime
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypedDict, Unpack

from recordkeeper.core.errors import (
    CorruptShard,
    DeprecatedVersionWarning,
    SplitNotFound,
    VersionDataDeleted,
)
from recordkeeper.core.retention import data_status
from recordkeeper.core.schema import Schema
from recordkeeper.core.shard_columns import ShardColumns
from recordkeeper.core.shards import ShardRecord
from recordkeeper.core.verification import Reason
from recordkeeper.listing import Listing
from recordkeeper.provenance import Provenance

__all__ = [
    "DatasetInfo",
    "DatasetVersion",
    "DeprecatedVersionWarning",
    "FetchedSplits",
    "Reason",
    "Shard",
    "ShardProblem",
    "Split",
    "TfDatasetOptions",
    "TfdsExport",
    "TfdsExportOptions",
    "TfdsExportedShard",
    "VerifyOptions",
    "VerifyReport",
    "VersionServices",
    "first_records",
]


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


class FetchedSplits(Mapping[str, "Split"]):
    """A version's splits, fetched the first time they are used (read-only, like the
    ``MappingProxyType`` of a resolved version).

    What :meth:`Client.derive <recordkeeper.derive.Derivation>` answers: the service has just
    committed the version and answered its name, digest and counts; its shards (100,000 for a
    large base) are fetched in pages only when something reads them (``v.splits``,
    ``v.shards``, ``v.tf_dataset(...)``), once, by ``fetch``.  A failure of that fetch is raised
    where the splits are read, and the next read asks again.
    """

    __slots__ = ("_fetch", "_lock", "_splits")

    def __init__(self, fetch: Callable[[], Mapping[str, Split]]) -> None:
        self._fetch: Callable[[], Mapping[str, Split]] | None = fetch
        self._lock = threading.Lock()
        self._splits: Mapping[str, Split] | None = None

    @property
    def fetched(self) -> bool:
        """Whether the splits were fetched already."""
        return self._splits is not None

    def _held(self) -> Mapping[str, Split]:
        splits = self._splits
        if splits is None:
            with self._lock:
                if self._splits is None:
                    assert self._fetch is not None
                    self._splits = MappingProxyType(dict(self._fetch()))
                    self._fetch = None
                splits = self._splits
        return splits

    def __getitem__(self, key: str) -> Split:
        return self._held()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._held())

    def __len__(self) -> int:
        return len(self._held())

    def __repr__(self) -> str:
        return (
            f"FetchedSplits({dict(self._splits)!r})"
            if self._splits is not None
            else ("FetchedSplits(<not fetched yet>)")
        )


def first_records(
    uri: str,
    format: str,
    compression: str,
    size: int,
    n: int,
    storage_options: Mapping[str, Any] | None,
) -> list[bytes]:
    """The first ``n`` records of one record file (CRCs checked; only what they take is read):
    what :meth:`DatasetVersion.head` reads of each shard, and a derivation of its added files."""
    from recordkeeper import formats
    from recordkeeper.storage import open_read, storage_errors

    out: list[bytes] = []
    if n <= 0:
        return out
    with open_read(uri, storage_options, size=size) as fh, storage_errors(uri):
        for record in formats.get(format).iter_records(fh, compression, size=size):
            out.append(bytes(record))
            if len(out) >= n:
                break
    return out


@dataclass(frozen=True, slots=True)
class Shard(ShardRecord):
    """One registered TFRecord file of a version (the core's shard record).

    ``size``, ``sha256`` and ``crc32c`` describe the stored bytes; ``records_sha256`` and
    ``record_count`` the uncompressed framed records (stable across compression);
    ``storage_identity`` is what the object store said at registration time (an empty mapping
    when it said nothing).
    """

    def __post_init__(self) -> None:
        if not isinstance(self.storage_identity, MappingProxyType):
            object.__setattr__(self, "storage_identity", _frozen(self.storage_identity))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Shard:
        return cls.from_json(data)

    def to_dict(self) -> dict[str, Any]:
        """The REST ``Shard`` input form (without ``schema``)."""
        out = self.to_wire()
        del out["schema"]
        return out


@dataclass(frozen=True)
class Split:
    """The shards of one split, in index order.

    ``shards`` is a read-only sequence of :class:`Shard`: a tuple, or (for versions resolved
    through the compact form) a :class:`~recordkeeper.core.shard_columns.ShardColumns` that
    builds each :class:`Shard` the first time it is read.
    """

    name: str
    shards: Sequence[Shard]
    record_count: int
    size: int

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    @property
    def uris(self) -> list[str]:
        if isinstance(self.shards, ShardColumns):
            return self.shards.uris()  # without building the shards
        return [s.uri for s in self.shards]

    @classmethod
    def from_columns(cls, name: str, shards: ShardColumns[Shard]) -> Split:
        """A split over compact-form columns (record count and size summed from them)."""
        return cls(
            name=name,
            shards=shards,
            record_count=sum(shards.column("record_count")),
            size=sum(shards.column("size")),
        )


@dataclass(frozen=True)
class ShardProblem:
    """What is wrong with one shard."""

    shard: Shard
    reason: Reason
    detail: str
    offset: int | None = None  # of the bad record in the uncompressed record stream
    compressed_offset: int | None = None  # of the stored byte where decompression failed

    @property
    def uri(self) -> str:
        return self.shard.uri

    def __str__(self) -> str:
        return f"{self.shard.name} ({self.shard.uri}): {self.reason}: {self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "shard": self.shard.name,
            "split": self.shard.split,
            "index": self.shard.index,
            "uri": self.shard.uri,
            "reason": self.reason,
            "detail": self.detail,
            "offset": self.offset,
            "compressed_offset": self.compressed_offset,
        }


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :meth:`DatasetVersion.verify`: ``ok`` or ``problems`` per shard."""

    version: str
    deep: bool
    checked: int
    problems: tuple[ShardProblem, ...]
    bytes_read: int = 0
    seconds: float = 0.0
    #: what this verification could not tell (e.g. a fast verify on a backend whose objects
    #: carry no version, time or checksum: only a deep verify finds a same-size rewrite)
    notes: tuple[str, ...] = ()
    #: deep verify with ``record_index``: shards whose stored record index matched the
    #: records (``matched``), had none and got one (``written``), or had one that did not
    #: match and got the right one (``rewritten``); and ``registered``: 1 when the
    #: version's record identity was registered after the check
    record_index: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def raise_for_problems(self) -> None:
        """Raise :class:`~recordkeeper.errors.CorruptShard` listing every problem, if any."""
        if self.problems:
            lines = "; ".join(str(p) for p in self.problems[:10])
            more = f" (+{len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
            kind = "deep" if self.deep else "fast"
            raise CorruptShard(
                f"{self.version}: {kind} verification found {len(self.problems)} bad shard(s): "
                f"{lines}{more}",
                version=self.version,
                problems=[p.to_dict() for p in self.problems],
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "mode": "deep" if self.deep else "fast",
            "ok": self.ok,
            "checked": self.checked,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "problems": [p.to_dict() for p in self.problems],
            "notes": list(self.notes),
            **({"record_index": dict(self.record_index)} if self.record_index else {}),
        }


class VerifyOptions(TypedDict):
    """The options of :meth:`DatasetVersion.verify`, as it hands them to its services."""

    deep: bool
    splits: Sequence[str] | None
    storage_options: Mapping[str, Any] | None
    max_workers: int | None
    progress: bool | None
    record_index: bool


class TfDatasetOptions(TypedDict):
    """The options of :meth:`DatasetVersion.tf_dataset`, as it hands them to its services."""

    verify: Literal["fast", "deep"] | None
    num_parallel_reads: int | None
    shuffle_files: bool
    seed: int | None
    storage_options: Mapping[str, Any] | None
    #: ``True``, ``False`` or a :class:`recordkeeper.shard_cache.ShardCache`
    cache: Any


class TfdsExportOptions(TypedDict):
    """The options of :meth:`DatasetVersion.export_tfds`, as it hands them to its services."""

    name: str | None
    tfds_version: str | None
    link: bool | None
    supervised_keys: tuple[str, str] | None
    features: Mapping[str, Any] | None
    storage_options: Mapping[str, Any] | None
    max_workers: int | None
    progress: bool | None


@dataclass(frozen=True)
class TfdsExportedShard:
    """One registered shard as a file of a TFDS export.

    ``method`` is ``link`` (a hard link to the local shard), ``copy`` (its bytes copied) or
    ``decompress`` (a GZIP/ZLIB shard written uncompressed: TFDS reads plain TFRecord files);
    ``size`` is the size of the file written, ``record_count`` its records.
    """

    split: str
    index: int
    source: str
    path: str
    method: Literal["link", "copy", "decompress"]
    size: int
    record_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "index": self.index,
            "source": self.source,
            "path": self.path,
            "method": self.method,
            "size": self.size,
            "record_count": self.record_count,
        }


@dataclass(frozen=True)
class TfdsExport:
    """What :meth:`DatasetVersion.export_tfds` made: a TFDS dataset directory.

    ``builder_dir`` (``DATA_DIR/<tfds_name>/<tfds_version>``) is what
    ``tfds.builder_from_directory`` reads, ``data_dir`` what ``tfds.load(tfds_name,
    data_dir=...)`` takes.  ``features`` maps each feature to its TFDS form (``dtype``,
    ``shape`` with ``None`` for a variable length).  ``existing`` is True when the directory
    already held this export (same version, same content digest): nothing was read or written.
    ``notes`` says what a reader should know (a name TFDS itself uses, a deprecated version).
    """

    version: str
    content_digest: str | None
    tfds_name: str
    tfds_version: str
    data_dir: str
    builder_dir: str
    splits: Mapping[str, tuple[int, ...]]
    features: Mapping[str, Mapping[str, Any]]
    shards: tuple[TfdsExportedShard, ...] = ()
    existing: bool = False
    bytes_read: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def load_name(self) -> str:
        """``name:X.Y.Z``, what ``tfds.load(..., data_dir=data_dir)`` loads exactly this with."""
        return f"{self.tfds_name}:{self.tfds_version}"

    def to_dict(self) -> dict[str, Any]:
        methods: dict[str, int] = {}
        for shard in self.shards:
            methods[shard.method] = methods.get(shard.method, 0) + 1
        return {
            "version": self.version,
            "content_digest": self.content_digest,
            "tfds_name": self.tfds_name,
            "tfds_version": self.tfds_version,
            "load_name": self.load_name,
            "data_dir": self.data_dir,
            "builder_dir": self.builder_dir,
            "existing": self.existing,
            "splits": {k: list(v) for k, v in sorted(self.splits.items())},
            "features": {k: dict(v) for k, v in sorted(self.features.items())},
            "methods": methods,
            "bytes_read": self.bytes_read,
            "seconds": round(self.seconds, 3),
            "shards": [s.to_dict() for s in self.shards],
            "notes": list(self.notes),
        }


class VersionServices(Protocol):
    """What a :class:`DatasetVersion` needs from whoever made it.

    :class:`recordkeeper.registry.Registry` implements it (fetching the schema from the service,
    :func:`recordkeeper.verify.verify_version`, :func:`recordkeeper.tf.data.tf_dataset`); the
    version only holds a reference, so this module depends on none of them.  The options are
    stated once, by the version's public methods, and passed through as they are.
    """

    def schema(self, ref: str) -> Schema: ...

    def verify_version(
        self, version: DatasetVersion, **options: Unpack[VerifyOptions]
    ) -> VerifyReport: ...

    def tf_dataset(
        self, version: DatasetVersion, split: str, **options: Unpack[TfDatasetOptions]
    ) -> Any: ...

    def export_tfds(
        self, version: DatasetVersion, data_dir: str, **options: Unpack[TfdsExportOptions]
    ) -> TfdsExport: ...


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset as listed by the service."""

    name: str
    description: str | None
    version_count: int
    latest: str | None
    created_at: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetInfo:
        return cls(
            name=data["name"],
            description=data.get("description"),
            version_count=int(data.get("version_count", 0)),
            latest=data.get("latest"),
            created_at=data.get("created_at"),
        )


@dataclass(frozen=True)
class DatasetVersion:
    """One immutable version of a dataset, as resolved from a reference.

    ``ref`` is what the caller asked for (``coco@latest``), ``name`` what it resolved to
    (``coco_20231015_v3_add_person``).  ``splits`` is empty when the version was listed
    without shards (:meth:`Client.versions`); :meth:`Client.resolve` always includes them.
    ``number`` is None while the version is staged (its ``name`` is then its ``staged_name``,
    ``coco_20231015_staged4``): numbers are given at commit.
    """

    ref: str
    name: str
    dataset: str
    number: int | None
    date: datetime.date
    desc: str | None
    state: str
    content_digest: str | None
    schema_digest: str | None
    storage_prefix: str
    record_count: int
    shard_count: int
    size: int
    splits: Mapping[str, Split] = field(default_factory=lambda: _frozen(None))
    convention: str = "rk1"
    created_at: str | None = None
    committed_at: str | None = None
    created_by: str | None = None
    deprecated_reason: str | None = None
    duplicate_of: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=lambda: _frozen(None))
    staged_name: str | None = None
    #: ``stored``, ``deleting`` (released for deletion) or ``deleted``: a version whose data
    #: retention (or gc) deleted keeps its row, digests, schema and lineage, but its records
    #: cannot be read (:meth:`ensure_readable`).
    data_state: str = "stored"
    data_deleted_at: str | None = None
    data_deleted_reason: str | None = None
    #: Where the version came from: parents, sources, producer, params, command, environment,
    #: note (:class:`~recordkeeper.provenance.Provenance`; empty when none was recorded).
    provenance: Provenance = field(default_factory=Provenance, compare=False)
    _client: VersionServices | None = field(default=None, repr=False, compare=False)
    _storage_options: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    _schema_cache: list[Schema] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        client: VersionServices | None = None,
        storage_options: Mapping[str, Any] | None = None,
        schema: Schema | None = None,
        splits: Mapping[str, Split] | None = None,
    ) -> DatasetVersion:
        """Build from the service's ``Version`` JSON (``client``: see :class:`VersionServices`).

        ``splits``, if given, are the version's splits (fetched separately, e.g. in pages, or
        when first read: :class:`FetchedSplits`) and take the place of the JSON's.
        """
        fetched = splits if isinstance(splits, FetchedSplits) else None
        built: dict[str, Split] = {} if fetched is not None else dict(splits or {})
        for split_name, split in ({} if splits is not None else data.get("splits") or {}).items():
            shards = tuple(
                sorted((Shard.from_dict(s) for s in split.get("shards", [])), key=lambda s: s.index)
            )
            built[split_name] = Split(
                name=split_name,
                shards=shards,
                record_count=int(split.get("record_count", sum(s.record_count for s in shards))),
                size=int(split.get("size", sum(s.size for s in shards))),
            )
        raw_date = data.get("date")
        date = (
            datetime.date.fromisoformat(raw_date)
            if isinstance(raw_date, str) and "-" in raw_date
            else datetime.datetime.strptime(str(raw_date), "%Y%m%d").date()
        )
        return cls(
            ref=data.get("ref") or data["name"],
            name=data["name"],
            dataset=data["dataset"],
            number=int(data["number"]) if data.get("number") is not None else None,
            date=date,
            desc=data.get("desc"),
            state=data.get("state", "committed"),
            content_digest=data.get("content_digest"),
            schema_digest=data.get("schema_digest"),
            storage_prefix=data.get("storage_prefix", ""),
            record_count=int(data.get("record_count") or 0),
            shard_count=int(data.get("shard_count") or 0),
            size=int(data.get("size") or 0),
            splits=fetched if fetched is not None else MappingProxyType(built),
            convention=data.get("convention", "rk1"),
            created_at=data.get("created_at"),
            committed_at=data.get("committed_at"),
            created_by=data.get("created_by"),
            deprecated_reason=data.get("deprecated_reason"),
            duplicate_of=data.get("duplicate_of"),
            metadata=_frozen(data.get("metadata")),
            staged_name=data.get("staged_name"),
            data_state=data.get("data_state") or "stored",
            data_deleted_at=data.get("data_deleted_at"),
            data_deleted_reason=data.get("data_deleted_reason"),
            provenance=Provenance.from_dict(
                data.get("provenance"), storage_options=storage_options
            ),
            _client=client,
            _storage_options=storage_options,
            _schema_cache=[schema] if schema is not None else [],
        )

    # -- content -------------------------------------------------------------------------

    @property
    def shards(self) -> Listing[Shard]:
        """Every shard of every split (splits in name order, shards in index order); a
        :class:`~recordkeeper.listing.Listing` (``.to_pandas()``)."""
        return Listing(s for name in sorted(self.splits) for s in self.splits[name].shards)

    def files(self, split: str) -> list[str]:
        """The shard URIs of ``split`` in index order (``KeyError`` naming the splits if absent)."""
        return self.split(split).uris

    def record(
        self, split: str, index: int, *, storage_options: Mapping[str, Any] | None = None
    ) -> bytes:
        """Record ``index`` of ``split`` (counting across its shards in order), read by position.

        For formats with an index (ArrayRecord): the shard's footer and the one chunk holding
        the record are read, every checksum of them checked; nothing else of the split.  Other
        formats raise :class:`~recordkeeper.errors.UnsupportedFormat` (read them in order with
        :meth:`tf_dataset`).  Each call opens the shard again: for many records in a row, use
        ``recordkeeper.formats.get(shard.format).open_random_access(shard.uri)``.
        """
        from recordkeeper import formats

        self.ensure_readable()
        start = 0
        for shard in self.split(split).shards:
            if index < start + shard.record_count:
                options = storage_options if storage_options is not None else self.storage_options
                reader = formats.get(shard.format).open_random_access(shard.uri, options)
                try:
                    return reader[index - start]
                finally:
                    reader.close()
            start += shard.record_count
        raise IndexError(f"{self.name} {split}: record {index} is out of range ({start} records)")

    def data_source(self, split: str, *, storage_options: Mapping[str, Any] | None = None) -> Any:
        """The split as a random-access data source (``len()``, ``source[i]`` → bytes): what
        Grain takes (``grain.MapDataset.source(v.data_source("train"))``, ``grain.DataLoader``).

        Needs shards with an index (ArrayRecord); others raise
        :class:`~recordkeeper.errors.UnsupportedFormat`.  See
        :class:`recordkeeper.formats.sources.VersionSource`.
        """
        from recordkeeper.formats.sources import VersionSource

        self.ensure_readable()
        options = storage_options if storage_options is not None else self.storage_options
        shards = [(s.uri, s.format, s.record_count) for s in self.split(split).shards]
        return VersionSource(self.name, split, shards, options)

    def head(
        self, split: str, n: int = 5, *, storage_options: Mapping[str, Any] | None = None
    ) -> list[bytes]:
        """The first ``n`` records of ``split``, read in order from its first shards (CRCs
        checked; only as much of the shards as those records take is read).  Decode Examples
        with :func:`recordkeeper.core.example_decode.decode_example`; ``recordkeeper head``
        shows them."""
        self.ensure_readable()
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        options = storage_options if storage_options is not None else self.storage_options
        records: list[bytes] = []
        for shard in self.split(split).shards:
            if len(records) >= n:
                break
            if not shard.record_count:
                continue
            records += first_records(
                shard.uri, shard.format, shard.compression, shard.size, n - len(records), options
            )
        return records

    def split(self, split: str) -> Split:
        """One split (:class:`~recordkeeper.errors.SplitNotFound`, a ``KeyError``, naming the
        splits if absent: ``split_not_found`` with exit status 3 in the CLI)."""
        try:
            return self.splits[split]
        except KeyError:
            known = ", ".join(sorted(self.splits)) or "none (listed without shards)"
            raise SplitNotFound(
                f"{self.name} has no split {split!r}; splits: {known}", split=split
            ) from None

    @property
    def schema(self) -> Schema:
        """The merged schema of the version (fetched from the service on first use)."""
        if not self._schema_cache:
            if self._client is None:
                raise RuntimeError(f"{self.name}: schema not included and no client to fetch it")
            self._schema_cache.append(self._client.schema(self.name))
        return self._schema_cache[0]

    def feature_spec(self, *, ragged: bool = False) -> dict[str, Any]:
        """A feature spec for ``tf.io.parse_example`` built from the schema (imports TensorFlow).

        ``FixedLenFeature`` where every record has the same value count, ``VarLenFeature``
        (``RaggedFeature`` with ``ragged=True``) otherwise; see
        :func:`recordkeeper.schema_export.feature_spec`.
        """
        from recordkeeper.schema_export import feature_spec

        spec: dict[str, Any] = feature_spec(self.schema, ragged=ragged)
        return spec

    @property
    def storage_options(self) -> Mapping[str, Any]:
        return self._storage_options or {}

    def with_storage_options(self, storage_options: Mapping[str, Any] | None) -> DatasetVersion:
        """A copy that reads storage with ``storage_options`` (credentials, endpoint)."""
        from dataclasses import replace

        return replace(self, _storage_options=storage_options, _schema_cache=self._schema_cache)

    # -- actions -------------------------------------------------------------------------

    @property
    def data_deleted(self) -> bool:
        """Whether the version's data was deleted (or is being deleted) by retention or gc."""
        return self.data_state != "stored"

    def data_status(self) -> str:
        """``stored``, or ``data deleted 2026-12-01 (retention)`` / ``data being deleted
        (retention)``: how the CLI and the UI show it."""
        return data_status(self.data_state, self.data_deleted_at, self.data_deleted_reason)

    def warn_if_deprecated(self, use: str, *, stacklevel: int = 2) -> None:
        """Warn (:class:`DeprecatedVersionWarning`, with the reason) when this version is
        deprecated: ``use`` says what is being done with it ("resolved", "read")."""
        if self.state != "deprecated":
            return
        reason = f": {self.deprecated_reason}" if self.deprecated_reason else ""
        warnings.warn(
            DeprecatedVersionWarning(
                f"{self.name} is deprecated{reason}; {use} anyway (a lock or load_pinned would "
                "refuse it)"
            ),
            stacklevel=stacklevel + 1,
        )

    def ensure_readable(self) -> None:
        """Raise :class:`~recordkeeper.errors.VersionDataDeleted` (saying why and when) if the
        version's data was deleted: its records cannot be read or verified."""
        if self.data_deleted:
            raise VersionDataDeleted(
                f"{self.name}: {self.data_status()}; its row, digests, schema and lineage are "
                "kept, its records cannot be read",
                version=self.name,
                deleted_at=self.data_deleted_at,
                reason=self.data_deleted_reason,
            )

    def verify(
        self,
        deep: bool = False,
        *,
        splits: Sequence[str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        max_workers: int | None = None,
        progress: bool | None = None,
        record_index: bool = False,
    ) -> VerifyReport:
        """Check the stored shards against the registration (see docs/client.md#verification).

        Fast (default): compare each object's current storage identity with the registered
        one, no download.  ``deep=True``: re-read every shard, re-hash, check every record's
        CRC and report the first bad offset.  ``record_index=True`` (deep only): also each
        record's identity, in the same scan; each shard's stored record index is checked
        against them (written when missing, rewritten when wrong) and, when every shard is
        good, the version's record identity registered (docs/record-identity.md).
        """
        self.ensure_readable()
        return self._services("verify").verify_version(
            self,
            deep=deep,
            splits=splits,
            storage_options=(
                storage_options if storage_options is not None else self._storage_options
            ),
            max_workers=max_workers,
            progress=progress,
            record_index=record_index,
        )

    def tf_dataset(
        self,
        split: str,
        *,
        verify: Literal["fast", "deep"] | None = "fast",
        num_parallel_reads: int | None = None,
        shuffle_files: bool = False,
        seed: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        cache: Any = False,
    ) -> Any:
        """A ``tf.data.Dataset`` of the serialized records of ``split`` (imports TensorFlow).

        ``cache=True`` (or a :class:`~recordkeeper.shard_cache.ShardCache`) reads remote shards
        through the local shard cache.  See :func:`recordkeeper.tf.data.tf_dataset`.  A
        deprecated version is read with a :class:`DeprecatedVersionWarning`.
        """
        self.ensure_readable()
        self.warn_if_deprecated("read", stacklevel=2)
        return self._services("tf_dataset").tf_dataset(
            self,
            split,
            verify=verify,
            num_parallel_reads=num_parallel_reads,
            shuffle_files=shuffle_files,
            seed=seed,
            storage_options=(
                storage_options if storage_options is not None else self._storage_options
            ),
            cache=cache,
        )

    def export_tfds(
        self,
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
        """Write this version as a TFDS dataset under ``data_dir`` (needs the ``tfds`` extra).

        ``tfds.builder_from_directory(export.builder_dir)`` and ``tfds.load(export.tfds_name,
        data_dir=data_dir)`` read it; ``features={"label": tfds.features.ClassLabel(...)}``
        describes features with TFDS features of your choice.  See
        :func:`recordkeeper.tfds_export.export_tfds` for the feature mapping, the version
        number (``v3`` → ``3.0.0``), linking and verification.
        """
        self.ensure_readable()
        return self._services("export_tfds").export_tfds(
            self,
            os.fspath(data_dir),
            name=name,
            tfds_version=tfds_version,
            link=link,
            supervised_keys=supervised_keys,
            features=features,
            storage_options=(
                storage_options if storage_options is not None else self._storage_options
            ),
            max_workers=max_workers,
            progress=progress,
        )

    def to_hf_dataset(self, split: str, *, streaming: bool = False) -> Any:
        """``split`` as a Hugging Face ``datasets.Dataset`` (``IterableDataset`` when
        ``streaming``), read from the verified shards and decoded without TensorFlow (extra
        ``hf``; :mod:`recordkeeper.integrations.hf`)."""
        from recordkeeper.integrations.hf import to_hf_dataset

        return to_hf_dataset(self, split, streaming=streaming)

    def _repr_html_(self) -> str:
        """Notebook display (:mod:`recordkeeper.integrations.html`; every value escaped)."""
        from recordkeeper.integrations.html import version_html

        return version_html(self)

    def was_staged_as(self, staged_name: str) -> bool:
        """Whether this is the version that was staged as ``staged_name``.

        Committing renames a version (``coco_20231015_staged4`` becomes ``coco_20231015_v3``),
        so the name alone does not tell; the staged name does (and, for versions staged before
        numbers moved to commit, the name, which the commit kept).  False when the commit
        answered another version: identical content existed and was kept, so what was written
        for ``staged_name`` is an orphan.
        """
        return staged_name in (self.name, self.staged_name)

    def _services(self, action: str) -> VersionServices:
        if self._client is None:
            raise RuntimeError(f"{self.name}: {action} needs the client that made this version")
        return self._client

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``recordkeeper resolve --json`` prints)."""
        return {
            "ref": self.ref,
            "name": self.name,
            "dataset": self.dataset,
            "number": self.number,
            "staged_name": self.staged_name,
            "data_state": self.data_state,
            "data_deleted_at": self.data_deleted_at,
            "data_deleted_reason": self.data_deleted_reason,
            "date": self.date.isoformat(),
            "desc": self.desc,
            "state": self.state,
            "content_digest": self.content_digest,
            "schema_digest": self.schema_digest,
            "storage_prefix": self.storage_prefix,
            "record_count": self.record_count,
            "shard_count": self.shard_count,
            "size": self.size,
            "provenance": self.provenance.to_dict(),
            "splits": {
                name: {
                    "record_count": split.record_count,
                    "size": split.size,
                    "shard_count": split.shard_count,
                    "shards": [s.to_dict() for s in split.shards],
                }
                for name, split in sorted(self.splits.items())
            },
        }

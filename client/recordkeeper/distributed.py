"""Distributed writes for any engine: plan on the driver, shards on workers, one commit.

The protocol a Spark, Ray, Dask, ``multiprocessing`` or Beam job follows to write (or publish)
a version with many workers, without a Beam dependency (the Beam transforms of
:mod:`recordkeeper.beam` are thin wrappers over it).  Writing new records::

    from recordkeeper import distributed

    plan = distributed.plan_write(client, "coco", desc="add_person", compression="gzip")
    # on the workers: the plan pickles (no client, no connection, no token inside)
    written = plan.write_shard("train", key, records)   # -> list[WrittenShard], picklable
    # on the driver, after every worker finished (the engine's barrier: collect, gather, join)
    version = plan.commit(client, [w for part in results for w in part])

Publishing files that already exist::

    plan = distributed.plan_publish(client, rk.Dataset.from_directory(raw), copy_to=True)
    registrations = pool.map(plan.scan, plan.files)     # one file per task, on the workers
    version = plan.commit(client, registrations)

The rules each step keeps, whatever the engine:

1. **Plan once, on the driver.**  :func:`plan_write` stages the version with its number
   reserved, so the shards go under the name it is committed as (``…/coco_20261130_v3/``).
   :func:`plan_publish` lists the files, checks them against the allowed roots (unless
   copied), stages, and gives each file its final name (:mod:`recordkeeper.shard_names`).
2. **Workers write and hash.**  :meth:`WritePlan.write_shard` writes one *shard key*'s records
   with the code ``client.writer`` uses (framing, sha256, crc32c, records_sha256, count and
   schema computed while the bytes stream; with ``record_index``, the default, each record's
   identity too, the part's record index stored beside it) to temporary names derived from
   the key alone, ``_incomplete/{split}-{key:05d}-{part:03d}…`` (a key holding more than
   ``shard_size`` rolls over to the next part).  The engine decides which records a key
   gets; the records of one key must be fixed (an engine's shuffle/group output), so a task
   that runs again — a retry after a failure — writes the same names with the same bytes and
   overwrites what the failed attempt left.  It returns :class:`WrittenShard` values
   (picklable).  Keep speculative execution off: an attempt the engine kills while another's
   result is kept can leave a half-written file under the kept attempt's name (the commit
   then refuses it: its size or checksum differs).
   :meth:`PublishPlan.scan` reads one existing file once (hashes, CRCs, count, schema, the
   copy when copying; with ``record_index``, the default, each record's identity, the index
   stored beside the shard) and returns its registration (a JSON-able ``dict``).
3. **A barrier**: the driver gathers every worker's result.  Use the results of the attempts
   the engine kept (each key once); a key reported twice keeps one of its equal results.
4. **Commit once, on the driver** (:meth:`WritePlan.commit`, :meth:`PublishPlan.commit`):
   shards are numbered per split in key order and moved to their final names
   ``{split}-00003-of-00016…``, fast-verified against the store's own checksums (S3
   ``ChecksumSHA256``, GCS CRC32C: bytes from another attempt cannot be registered under this
   attempt's digests), registered, and the version committed; each part's record index goes
   beside its shard's final name and the version's record identity is registered from them
   (docs/record-identity.md), as the writer does; leftovers under ``_incomplete/`` are
   deleted.  Identical content keeps the existing version (its answer is that version,
   which :meth:`~recordkeeper.values.DatasetVersion.was_staged_as` tells apart) and the new
   copies are deleted, unless ``force_new``.  **Idempotent**: a commit that is retried (the
   driver died after it, the engine re-ran the step) answers the version the first attempt
   committed.

A job that fails before the commit leaves the version *staged*, invisible to resolution; its
prefix is collected by ``recordkeeper gc`` (``plan.abandon(client)`` abandons it at once).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from recordkeeper import local_files
from recordkeeper.core.errors import (
    InvalidRequest,
    InvalidShard,
    StorageError,
    VersionImmutable,
    VersionNotStaged,
)
from recordkeeper.core.record_identity import DEFAULT_WIDTH
from recordkeeper.core.record_sample import SAMPLE_RECORDS
from recordkeeper.core.roots import storage_root_of
from recordkeeper.core.splits import validate_split_name
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.leakage import commit_check
from recordkeeper.publish import copy_target, detect_file_compression, scan_file
from recordkeeper.record_ids import INDEX_DIR, RecordIds, index_uri, write_index, write_indexes
from recordkeeper.record_sets import index_streams
from recordkeeper.samples import sample_committed
from recordkeeper.shard_names import final_shard_uri, number_within_splits
from recordkeeper.storage import join_uri, list_files, open_read, profile_of, remove
from recordkeeper.streaming import record_bytes
from recordkeeper.values import DatasetVersion, Shard
from recordkeeper.verify import verify_shards
from recordkeeper.writer import (
    RECORD_INDEX_DEFAULT,
    finalize_shard,
    open_shard,
    parse_size,
    shard_is_full,
    temp_shard_name,
)

if TYPE_CHECKING:
    from recordkeeper.client import Client
    from recordkeeper.streaming import ShardStats

__all__ = [
    "PublishPlan",
    "WritePlan",
    "WrittenShard",
    "check_stored",
    "commit_registrations",
    "plan_publish",
    "plan_write",
    "register_stored_identity",
    "remove_quietly",
]

#: marks a scan's registration whose record index the worker stored (removed before it is sent)
_INDEXED = "_record_index_stored"

_MAX_PENDING_UPLOADS = 4  # finished parts still uploading per key (~16 MiB each), as the writer


@dataclass(frozen=True)
class WrittenShard:
    """One shard a worker wrote under its temporary name, with what the writer computed
    (picklable: a worker returns these to the driver)."""

    split: str
    key: int
    part: int
    temp_uri: str
    stats: ShardStats
    #: whether the part's record index was stored beside ``temp_uri`` (``record_index``)
    record_index: bool = False


@dataclass(frozen=True)
class WritePlan:
    """A staged version being written by workers; made by :func:`plan_write`.

    Picklable, and holds no credentials: workers reach the store with ``storage_options``
    (give them what they need there) and never the service; only :meth:`commit` does, with
    the driver's client.
    """

    dataset: str
    staged: str  #: the staged version's name (its committed name: the number is reserved)
    prefix: str  #: where its shards are stored
    compression: str
    shard_size: int
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    format: str = "tfrecord"
    format_options: Mapping[str, Any] | None = None
    #: the staged version, on the driver that planned (``None`` once pickled to a worker)
    staged_version: DatasetVersion | None = field(default=None, compare=False, repr=False)
    #: each record's identity hashed as it is written, the record identity registered at
    #: commit (docs/record-identity.md), as ``client.writer(record_index=True)`` does
    record_index: bool = RECORD_INDEX_DEFAULT
    #: records of each split sent as the version's sample after commit (0: none), as
    #: ``client.writer(sample_records=...)`` does
    sample_records: int = SAMPLE_RECORDS

    def __getstate__(self) -> dict[str, Any]:
        return _without_version(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore(self, state)

    def write_shard(self, split: str, key: int, records: Iterable[Any]) -> list[WrittenShard]:
        """Write the records of shard key ``key`` of ``split`` (on a worker).

        ``records`` are serialized records (``bytes``) or messages with ``SerializeToString``.
        Returns the parts written (one per ``shard_size``; none for no records), each uploaded
        completely before this returns.  Writing the same key again overwrites the same names.
        """
        validate_split_name(split)
        if isinstance(key, bool) or not isinstance(key, int) or key < 0:
            raise InvalidRequest(f"a shard key is a non-negative integer, got {key!r}")
        options = dict(self.storage_options)
        root = storage_root_of(self.prefix)
        done: list[tuple[Any, WrittenShard]] = []
        part = 0
        current: tuple[Any, Any, str] | None = None  # pipe, shard writer, temp uri
        framed = 0
        ids: _PartIds | None = None
        try:
            for record in records:
                if current is None:
                    uri = join_uri(
                        self.prefix,
                        temp_shard_name(
                            split, f"{key:05d}-{part:03d}", self.compression, self.format
                        ),
                    )
                    _discard_earlier_attempt(uri, root)
                    pipe, writer = open_shard(
                        uri,
                        self.compression,
                        options,
                        root=root,
                        format=self.format,
                        format_options=self.format_options,
                    )
                    current = (pipe, writer, uri)
                    framed = 0
                    ids = _PartIds() if self.record_index else None
                data = record if type(record) is bytes else record_bytes(record)
                current[1].write(data)
                if ids is not None:
                    ids.add(data)
                framed += len(data) + 16
                if shard_is_full(self.compression, framed, current[0].size, self.shard_size):
                    done.append(_close(current, split, key, part, ids, options))
                    current, ids = None, None
                    part += 1
                    uploading = [pipe for pipe, _ in done if pipe.uploading]
                    if len(uploading) >= _MAX_PENDING_UPLOADS:  # bounds memory, as the writer
                        uploading[0].join()
            if current is not None:
                done.append(_close(current, split, key, part, ids, options))
                current, ids = None, None
            for pipe, _ in done:
                pipe.join()
        except BaseException:
            if ids is not None:
                ids.abandon()
            if current is not None:
                current[0].abort()
            for pipe, _ in done:
                pipe.abort()
            raise
        return [shard for _, shard in done]

    def commit(
        self, client: Client, written: Iterable[WrittenShard], *, force_new: bool = False
    ) -> DatasetVersion:
        """Name, verify, register and commit every written shard, once (on the driver).

        ``written``: every worker's :class:`WrittenShard` values, gathered after all writes
        finished.  Returns the committed version — the existing one when identical content
        was committed before (unless ``force_new``), the shards written for this plan then
        deleted.  Retried after a commit that went through, it answers that version.
        """
        options = dict(self.storage_options)
        ordered = sorted(_one_per_part(written), key=lambda s: (s.split, s.key, s.part))
        if not ordered:
            raise InvalidShard(f"nothing was written to {self.staged}: no worker wrote a record")
        places = [
            (
                shard,
                i,
                count,
                final_shard_uri(
                    self.prefix,
                    shard.split,
                    i,
                    count,
                    compression=self.compression,
                    format=self.format,
                ),
            )
            for shard, i, count in number_within_splits(ordered, lambda s: s.split)
        ]

        def finalize(place: tuple[WrittenShard, int, int, str]) -> dict[str, Any]:
            shard, i, count, final = place
            registration = finalize_shard(
                shard.temp_uri,
                final,
                shard.stats,
                split=shard.split,
                index=i,
                count=count,
                storage_options=options,
                root=storage_root_of(self.prefix),
            )
            if shard.record_index:
                _place_index(shard.temp_uri, final, options)
            return registration

        try:
            with ThreadPoolExecutor(max_workers=min(16, len(places))) as pool:
                registrations = list(pool.map(finalize, places))
        except StorageError:
            # A retried commit whose first attempt kept an identical version deleted the
            # moved shards: its answer is that version.  Anything else is this error.
            done = _already_committed(client, self.dataset, self.staged, force_new)
            if done is None:
                raise
            return done
        stored = [Shard.from_dict(r) for r in registrations]
        check = commit_check(
            client.http,
            self.dataset,
            self.staged,
            (lambda: index_streams(stored, "bytes", DEFAULT_WIDTH, options))
            if all(shard.record_index for shard, *_ in places)
            else None,
        )
        version = commit_registrations(
            client,
            self.staged,
            registrations,
            force_new=force_new,
            storage_options=options,
            leakage=check,
        )
        self._remove_leftovers(options)
        if not version.was_staged_as(self.staged):  # identical content was kept: orphans
            remove_quietly([place[-1] for place in places], options)
            remove_quietly([index_uri(place[-1]) for place in places], options)
        else:
            if all(shard.record_index for shard, *_ in places):
                register_stored_identity(client, version, options)
            sample_committed(
                client.registry, version, records=self.sample_records, storage_options=options
            )
        return version

    def abandon(self, client: Client) -> DatasetVersion:
        """Abandon the staged version (a job given up): gc collects what it wrote."""
        return client.abandon(self.staged)

    def _remove_leftovers(self, options: Mapping[str, Any]) -> None:
        """Parts of other attempts under ``_incomplete/`` (the finalized ones moved away)."""
        try:
            leftovers = list_files(join_uri(self.prefix, "_incomplete"), options)
        except StorageError:
            return  # nothing left (object stores have no empty directories)
        remove_quietly(leftovers, options)
        if profile_of(self.prefix).local:  # the directories the parts' indexes were under
            temp = local_files.local_path(join_uri(self.prefix, "_incomplete"))
            for sub in (INDEX_DIR, os.path.dirname(INDEX_DIR)):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(temp, sub))


def _without_version(plan: Any) -> dict[str, Any]:
    """A plan's pickled state: everything but the staged version (it holds the client)."""
    state = dict(vars(plan))
    state["staged_version"] = None
    return state


def _restore(plan: Any, state: dict[str, Any]) -> None:
    for name, value in state.items():
        object.__setattr__(plan, name, value)  # frozen: set as dataclasses' __init__ does


def _discard_earlier_attempt(uri: str, root: str | None) -> None:
    """Remove what another attempt of this key left at ``uri`` on local disk (object stores
    overwrite; local shards are created exclusively).  Unlinked without following a link
    and only inside ``root``, the version's storage root."""
    if root is None or not profile_of(uri).local:
        return
    directory, name = os.path.split(local_files.local_path(uri))
    with contextlib.suppress(FileNotFoundError):
        local_files.delete_objects(directory, local_files.real_roots([root]), [name])


class _PartIds:
    """One part's record identities, hashed in batches of about 1 MiB on a helper thread
    (:class:`~recordkeeper.record_ids.RecordIds`) while the part's writer frames the next."""

    _BATCH = 2**20

    def __init__(self) -> None:
        self.ids = RecordIds(background=True)
        self._batch: list[bytes] = []
        self._size = 0

    def add(self, record: bytes) -> None:
        self._batch.append(record)
        self._size += len(record) + 64
        if self._size >= self._BATCH:
            self.ids.add(self._batch)
            self._batch, self._size = [], 0

    def finish(self, records_sha256: str) -> bytes:
        if self._batch:
            self.ids.add(self._batch)
            self._batch = []
        return self.ids.finish(records_sha256)

    def abandon(self) -> None:
        self.ids.abandon()


def _close(
    current: tuple[Any, Any, str],
    split: str,
    key: int,
    part: int,
    ids: _PartIds | None,
    options: Mapping[str, Any],
) -> tuple[Any, WrittenShard]:
    pipe, writer, uri = current
    stats = writer.close()
    pipe.finish()  # the upload completes in the background; joined before write_shard returns
    if ids is not None:  # beside the temporary shard; moved beside the final one at commit
        write_index(uri, ids.finish(stats.records_sha256), options)
    return pipe, WrittenShard(split, key, part, uri, stats, record_index=ids is not None)


def _place_index(temp_uri: str, final_uri: str, options: Mapping[str, Any]) -> None:
    """A part's record index, from beside its temporary shard to beside its final name.

    Idempotent as :func:`~recordkeeper.writer.finalize_shard`: a retried commit finds the
    index already placed (the temporary one is deleted with the leftovers)."""
    try:
        with open_read(index_uri(temp_uri), options) as fh:
            data = fh.read()
    except StorageError as exc:
        if exc.extra.get("reason") != "missing":
            raise
        return
    write_index(final_uri, data, options)


def register_stored_identity(
    client: Client, version: DatasetVersion, options: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """Register a committed version's record identity from its shards' stored indexes
    (:func:`recordkeeper.record_sets.split_digests`: a streaming merge, no shard read); best
    effort (:func:`recordkeeper.record_sets.register_committed`)."""
    from recordkeeper.record_sets import register_committed, split_digests

    digests = split_digests(version, storage_options=dict(options or {}))
    return register_committed(client.http, version, digests, storage_options=options)


def _one_per_part(written: Iterable[WrittenShard]) -> list[WrittenShard]:
    """Each ``(split, key, part)`` once: two attempts of one key wrote the same bytes to the
    same name, so either description serves (the store's checksum is checked at commit)."""
    seen: dict[tuple[str, int, int], WrittenShard] = {}
    for shard in written:
        if not isinstance(shard, WrittenShard):
            raise InvalidRequest(
                f"commit takes the WrittenShard values write_shard returned, got "
                f"{type(shard).__name__}"
            )
        seen.setdefault((shard.split, shard.key, shard.part), shard)
    return list(seen.values())


def plan_write(
    client: Client,
    dataset: str,
    *,
    desc: str | None = None,
    root: str | None = None,
    compression: str | None = None,
    shard_size: int | str = "256MB",
    format: str = "tfrecord",
    format_options: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    date: str | datetime.date | None = None,
    metadata: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    record_index: bool = RECORD_INDEX_DEFAULT,
    sample_records: int = SAMPLE_RECORDS,
) -> WritePlan:
    """Stage a new version of ``dataset`` for workers to write (on the driver).

    ``compression``, ``shard_size``, ``format``, ``format_options``, ``record_index`` and
    ``sample_records`` are the writer's (:meth:`recordkeeper.Client.writer`);
    ``storage_options`` (default: the client's) are what the workers use to reach the store.
    ``provenance`` is a document made by :func:`recordkeeper.provenance.build_provenance`
    (parents, sources, params, code).
    """
    from recordkeeper import formats

    fmt = formats.get(format)
    if not fmt.writable:
        raise InvalidRequest(f"recordkeeper cannot write {fmt.description} shards")
    checked = fmt.check_compression(compression)
    fmt.check_options(format_options)
    size = parse_size(shard_size)
    options = storage_options if storage_options is not None else client.storage_options
    staged = client.stage(
        dataset,
        desc=desc,
        date=date,
        root=root,
        metadata=metadata,
        reserve=True,  # the shards go under the committed name (docs/naming.md)
        provenance=provenance,
    )
    return WritePlan(
        dataset=dataset,
        staged=staged.name,
        prefix=staged.storage_prefix,
        compression=checked,
        shard_size=size,
        storage_options=dict(options or {}),
        format=format,
        format_options=dict(format_options) if format_options is not None else None,
        staged_version=staged,
        record_index=record_index,
        sample_records=sample_records,
    )


@dataclass(frozen=True)
class PublishPlan:
    """A staged version whose existing files workers scan; made by :func:`plan_publish`.

    ``files`` are the work items: one :class:`~recordkeeper.dataset.ShardFile` each, its
    ``dest`` the final name of its copy (``None`` when published in place).  Picklable.
    """

    dataset: str
    staged: str
    files: tuple[tuple[ShardFile, str | None], ...]
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    #: the staged version, on the driver that planned (``None`` once pickled to a worker)
    staged_version: DatasetVersion | None = field(default=None, compare=False, repr=False)
    #: each record's identity computed by the worker's scan, its index stored beside the
    #: shard and the record identity registered at commit, as ``client.publish`` does
    record_index: bool = RECORD_INDEX_DEFAULT
    #: records of each split sent as the version's sample after commit (0: none)
    sample_records: int = SAMPLE_RECORDS

    def __getstate__(self) -> dict[str, Any]:
        return _without_version(self)

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore(self, state)

    @property
    def copies(self) -> bool:
        """Whether the files are copied (else registered where they are)."""
        return any(dest is not None for _, dest in self.files)

    def scan(self, item: tuple[ShardFile, str | None]) -> dict[str, Any]:
        """Read one file of :attr:`files` once (on a worker): its registration.

        Hashes, record CRCs, record count and schema, with the copy to ``dest`` written in
        the same pass (a retried scan rewrites the same name).  In place, a file that changed
        while it was read is refused.  With :attr:`record_index`, the records' identities are
        computed by the same pass and their index is stored beside the shard (the same bytes
        for the same records: a retried scan writes it again; where it cannot be written, the
        version is committed without record identity).
        """
        shard, dest = item
        options = dict(self.storage_options)
        ids = RecordIds() if self.record_index else None
        registration = scan_file(shard, options, dest=dest, dest_options=options, record_ids=ids)
        if ids is not None:
            index = ids.finish(str(registration["records_sha256"]))
            # best effort, as after client.publish: a file published in place may lie where
            # nothing can be written (the commit then goes without record identity)
            with contextlib.suppress(StorageError):
                write_indexes({str(registration["uri"]): index}, options)
                registration[_INDEXED] = True
        return registration

    def commit(
        self,
        client: Client,
        registrations: Iterable[Mapping[str, Any]],
        *,
        force_new: bool = False,
    ) -> DatasetVersion:
        """Register every scanned file and commit, once (on the driver); idempotent.

        When every file's record index was stored by its scan, the dataset's leakage policy
        gets its check (:func:`recordkeeper.leakage.commit_check`) and the committed version
        its record identity; then its sample, as ``client.publish`` does.
        """
        options = dict(self.storage_options)
        ordered = sorted(
            {(r["split"], r["index"]): dict(r) for r in registrations}.values(),
            key=lambda r: (r["split"], r["index"]),
        )
        marks = [bool(r.pop(_INDEXED, False)) for r in ordered]  # never sent to the service
        indexed = bool(marks) and all(marks)
        stored = [Shard.from_dict(r) for r in ordered] if indexed else []
        check = commit_check(
            client.http,
            self.dataset,
            self.staged,
            (lambda: index_streams(stored, "bytes", DEFAULT_WIDTH, options)) if indexed else None,
        )
        version = commit_registrations(
            client,
            self.staged,
            ordered,
            force_new=force_new,
            storage_options=options,
            check=self.copies,
            leakage=check,
        )
        if not version.was_staged_as(self.staged):
            if self.copies:  # the copies are orphans
                remove_quietly([r["uri"] for r in ordered], options)
                remove_quietly([index_uri(r["uri"]) for r in ordered], options)
            return version
        if indexed:
            register_stored_identity(client, version, options)
        sample_committed(
            client.registry, version, records=self.sample_records, storage_options=options
        )
        return version

    def abandon(self, client: Client) -> DatasetVersion:
        """Abandon the staged version (a job given up)."""
        return client.abandon(self.staged)


def plan_publish(
    client: Client,
    dataset: Dataset,
    *,
    desc: str | None = None,
    copy_to: str | bool | None = None,
    date: str | datetime.date | None = None,
    storage_options: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    record_index: bool = RECORD_INDEX_DEFAULT,
    sample_records: int = SAMPLE_RECORDS,
) -> PublishPlan:
    """List ``dataset``'s files, check them and stage a version for workers to scan.

    In place (``copy_to=None``) every file must lie in the service's allowed roots
    (:class:`~recordkeeper.errors.StorageRootNotAllowed` before anything is staged);
    ``copy_to=True`` copies under the service's storage root, a URI under that root.
    ``storage_options`` (default: the dataset's, then the client's) serve files and copies.
    ``record_index`` and ``sample_records`` are :func:`recordkeeper.publish.publish`'s.
    """
    options = (
        storage_options
        if storage_options is not None
        else dataset.storage_options
        if dataset.storage_options is not None
        else client.storage_options
    )
    options = dict(options or {})
    shards = dataset.shards
    if not shards:
        raise InvalidShard(f"dataset {dataset.name!r} has no shards")
    target = copy_target(client.info(), [s.uri for s in shards], copy_to)
    staged = client.stage(dataset.name, desc=desc, date=date, root=target, provenance=provenance)
    files: list[tuple[ShardFile, str | None]] = []
    for shard in shards:
        dest = None
        if target is not None:
            if shard.compression is None:  # the copy's name needs it: read the first bytes
                shard = dataclasses.replace(
                    shard, compression=detect_file_compression(shard.uri, options)
                )
            dest = final_shard_uri(
                staged.storage_prefix,
                shard.split,
                shard.index,
                shard.count,
                compression=shard.compression or "none",
                format=shard.format or "tfrecord",
            )
        files.append((shard, dest))
    return PublishPlan(
        dataset=dataset.name,
        staged=staged.name,
        files=tuple(files),
        storage_options=options,
        staged_version=staged,
        record_index=record_index,
        sample_records=sample_records,
    )


def check_stored(
    registrations: Sequence[Mapping[str, Any]], storage_options: Mapping[str, Any] | None
) -> None:
    """Fast-verify ``registrations`` against the store before they are registered.

    The store's own checksum (S3 ChecksumSHA256 recomputed by the server-side copy, GCS CRC32C)
    must equal the digest the worker computed: bytes from another attempt of the same shard
    (two attempts racing on one name) cannot be registered under this attempt's digests.
    Raises :class:`~recordkeeper.errors.CorruptShard` naming the shards that differ.
    """
    shards = [Shard.from_dict(r) for r in registrations]
    verify_shards(shards, storage_options=storage_options).raise_for_problems()


def commit_registrations(
    client: Client,
    staged: str,
    registrations: Sequence[Mapping[str, Any]],
    *,
    force_new: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    check: bool = True,
    leakage: Mapping[str, Any] | None = None,
) -> DatasetVersion:
    """Register ``registrations`` on ``staged`` and commit it, idempotently; the committed
    version (with its shards).  ``leakage``: the check of the staged splits the dataset's
    leakage policy judges (:func:`recordkeeper.leakage.commit_check`).

    ``check`` first fast-verifies them against the store (:func:`check_stored`).  A version
    an earlier attempt committed refuses new shards (``version_not_staged``) and answers the
    commit with itself; identical content keeps the existing version unless ``force_new``
    (the answer is then that version, not one that
    :meth:`~recordkeeper.values.DatasetVersion.was_staged_as` ``staged``).
    """
    if check:
        check_stored(registrations, storage_options)
    # VersionNotStaged: an earlier attempt committed already; the commit answers it
    with contextlib.suppress(VersionNotStaged, VersionImmutable):
        client.register_shards(staged, list(registrations))
    committed = client.commit(
        staged, on_duplicate="commit" if force_new else "use_existing", leakage=leakage
    )
    if not committed.splits:
        committed = client.resolve(committed.name)
    return committed


def _already_committed(
    client: Client, dataset: str, staged: str, force_new: bool
) -> DatasetVersion | None:
    """The answer of an earlier commit of ``staged``, or None while it is still staged.

    Asked only on a failure: committing a version still staged here could commit what an
    interrupted attempt registered only in part.
    """
    if any(v.name == staged for v in client.versions(dataset, state="staged")):
        return None
    try:
        committed = client.commit(staged, on_duplicate="commit" if force_new else "use_existing")
    except VersionNotStaged:
        return None  # abandoned for another reason
    return committed if committed.splits else client.resolve(committed.name)


def remove_quietly(uris: Iterable[str], storage_options: Mapping[str, Any] | None) -> None:
    """Delete objects, ignoring failures (leftovers of a staged prefix are gc's to collect)."""
    for uri in uris:
        with contextlib.suppress(StorageError, OSError):
            remove(uri, storage_options)

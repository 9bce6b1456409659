"""Writing a new version record by record: ``client.writer(...)``.

::

    with client.writer("coco", root="s3://ml-data/datasets", compression="gzip") as w:
        for example in examples:
            w.write(example, split="train")        # bytes or tf.train.Example
    w.version.name                                 # coco_20261129_v4

How it works:

* The first write stages a version with its number *reserved*
  (:meth:`~recordkeeper.registry.Registry.stage` ``reserve=True``): the service answers its
  committed name and the storage prefix named by it, ``{root}/{dataset}/coco_20261129_v4/``, so
  the shards are stored under the name the version will have.  The content is unknown until
  the writer closes, so the number is taken before the duplicate check: a writer whose content
  turns out to equal a committed version (the existing version is kept, see below), or that
  is abandoned, leaves its number as a **gap** (v4 kept by nobody, the next version is v5),
  and numbers follow the order writers started, not the order they committed.  The other
  choice — shards under a staged name, copied to the committed name at commit — keeps every
  number but costs a second server-side copy of every byte on object stores (they have no
  rename) and a commit that is no longer one step; see docs/naming.md.
* Each split has one open shard.  Records are framed (and compressed) by
  :class:`recordkeeper.tfrecord.TFRecordWriter`, which computes sha256, crc32c,
  records_sha256, the record count and the schema while the bytes stream — never by a second
  read.  ``write()`` only collects records; the TFRecordWriter frames them (in C) a batch of
  ~1 MiB at a time.  For object stores the framed bytes go through a bounded queue to a
  background upload thread per shard, so the producer is not blocked by the network (the queue
  bounds memory: ~16 MiB per shard); local files are written by the hashing thread itself.
* A shard is closed when its stored size reaches ``shard_size`` and the next one begins
  (exactly for uncompressed shards; for gzip/zlib only once the compressor has emitted that
  much, so compressed shards may run up to about a MiB over).
* **Naming.** The final layout is ``{split}-00003-of-00016.tfrecord[.gz]``, but the count is
  unknown until the writer closes.  Shards are therefore written as
  ``{prefix}_incomplete/{split}-00003.tfrecord[.gz]`` and moved to their final name on close:
  a rename on local disk, a server-side copy + delete on S3 (``copy_object``, which also asks
  for a full-object SHA256 checksum) and GCS (``rewrite``).  No shard bytes travel through the
  client twice.  Storage identity is recorded after the move.
* On a normal exit the shards are registered and the version committed.  If the content equals
  an existing version, that version is kept (:class:`~recordkeeper.client.DuplicateWarning`),
  the new copies are deleted, and ``w.version`` is the existing version — unless
  ``force_new=True``.
* On an exception the staged version is abandoned, what was written is deleted (as far as the
  store allows), and the exception propagates.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import queue
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import InvalidRequest, InvalidShard, StorageError, VersionImmutable
from recordkeeper.core.record_sample import SAMPLE_RECORDS
from recordkeeper.core.roots import storage_root_of
from recordkeeper.core.shards import ShardRecord
from recordkeeper.core.splits import validate_split_name
from recordkeeper.leakage import Sources, commit_check, memory_sources
from recordkeeper.progress import ProgressLike, byte_progress
from recordkeeper.provenance import build_provenance
from recordkeeper.record_ids import RecordIds, split_digest
from recordkeeper.record_sets import index_uri, register_committed, write_index
from recordkeeper.samples import SampleCollector, sample_committed
from recordkeeper.shard_names import final_shard_uri, shard_suffix, split_counts
from recordkeeper.storage import (
    discard_upload,
    join_uri,
    open_read,
    open_write,
    profile_of,
    remove,
    rename,
    stat_object,
    storage_errors,
    to_uri,
    url_to_fs,
)
from recordkeeper.values import DatasetVersion

if TYPE_CHECKING:
    from recordkeeper.formats import ShardWriter
    from recordkeeper.registry import Registry
    from recordkeeper.streaming import ShardStats

__all__ = [
    "VersionWriter",
    "convert",
    "finalize_shard",
    "open_shard",
    "parse_size",
    "shard_is_full",
    "temp_shard_name",
]

_DIRECT = 2**20  # blocks at least this big go to the upload thread as they are
_BATCH_BYTES = 2**20  # framed bytes collected per split before the TFRecordWriter sees them
_QUEUE_DEPTH = 16  # blocks in flight per shard (~16 MiB)
_MAX_PENDING_UPLOADS = 4
#: ``record_index`` of :class:`VersionWriter` unless given (docs/record-identity.md: measured)
RECORD_INDEX_DEFAULT = True
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}


def parse_size(value: int | str) -> int:
    """``"256MB"`` → 256_000_000, ``"64MiB"`` → 67_108_864, ints unchanged."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _SIZE_RE.fullmatch(str(value))
        if not match or match[2].lower() not in _UNITS:
            raise InvalidRequest(f"shard_size {value!r} is not a size like '256MB' or '64MiB'")
        size = int(float(match[1]) * _UNITS[match[2].lower()])
    if size < 1:
        raise InvalidRequest(f"shard_size must be positive, got {value!r}")
    return size


class _UploadPipe:
    """A write-only file object whose bytes a background thread streams to storage."""

    copies_writes = True  # write() queues a copy: the TFRecordWriter may reuse its buffers

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None) -> None:
        self.uri = uri
        self._options = storage_options
        self._queue: queue.Queue[bytes | bool | None] = queue.Queue(maxsize=_QUEUE_DEPTH)
        self._buffer = bytearray()
        self._error: BaseException | None = None
        self._aborted = False
        self.size = 0
        self._thread = threading.Thread(target=self._run, name=f"rk-upload {uri}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sink = None
        ended = False  # the producer's end marker was taken: nothing more will be put
        try:
            sink = open_write(self.uri, self._options)
            while True:
                item = self._queue.get()
                if item is None:
                    ended = True
                    with storage_errors(self.uri):
                        sink.close()  # small shards upload here: this can be refused
                    return
                if item is False:  # abort
                    raise _Aborted
                assert isinstance(item, bytes)
                with storage_errors(self.uri):
                    sink.write(item)
        except BaseException as exc:
            if not isinstance(exc, _Aborted):
                self._error = exc
            if sink is not None:
                discard_upload(sink)
            if isinstance(exc, _Aborted) or ended:
                return
            # Keep draining so a producer blocked on put() wakes up.
            while True:
                item = self._queue.get()
                if item is None or item is False:
                    return

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    # file-object protocol used by TFRecordWriter
    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._raise_if_failed()
        n = len(data)
        self.size += n
        if not self._buffer and n >= _DIRECT:
            self._queue.put(bytes(data))  # big blocks (the writer's ~1 MiB batches): no copy
            return n
        self._buffer += data
        if len(self._buffer) >= _DIRECT:
            self._queue.put(bytes(self._buffer))
            self._buffer.clear()
        return n

    def flush(self) -> None:
        """Buffered until a chunk is full; the upload happens in the background."""

    def writable(self) -> bool:
        return True

    def finish(self) -> None:
        """Hand the last bytes to the upload thread (returns without waiting)."""
        if self._buffer:
            self._queue.put(bytes(self._buffer))
            self._buffer.clear()
        self._queue.put(None)

    def join(self) -> None:
        """Wait for the upload to complete; re-raise its failure."""
        self._thread.join()
        self._raise_if_failed()

    @property
    def uploading(self) -> bool:
        """True while the background upload is still running."""
        return self._thread.is_alive()

    def abort(self) -> None:
        if self._thread.is_alive():
            self._buffer.clear()
            with contextlib.suppress(Exception):
                self._queue.put(False, timeout=60)
            self._thread.join(timeout=60)


class _Aborted(Exception):
    pass


class _LocalSink:
    """:class:`_UploadPipe`'s interface for a local file, written directly by the
    TFRecordWriter's hashing thread: a write to the page cache costs less than handing the
    bytes to one more thread.  Written through its descriptor in pieces
    (:func:`recordkeeper.tfrecord.write_fd`); nothing is buffered in the file object."""

    copies_writes = True  # write() copies into the page cache: the TFRecordWriter reuses buffers

    def __init__(self, uri: str, root: str | None = None) -> None:
        self.uri = uri
        self.size = 0
        with storage_errors(uri):
            self._file = open_write(uri, None, root=root)
            self._fd = self._file.fileno()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        from recordkeeper.streaming import write_fd  # loaded with the shard writer already

        with storage_errors(self.uri):
            write_fd(self._fd, data)
        n = memoryview(data).nbytes
        self.size += n
        return n

    def flush(self) -> None:
        """Nothing to do: the file is flushed when it is closed."""

    def writable(self) -> bool:
        return True

    def finish(self) -> None:
        """Close the file (the TFRecordWriter has written everything)."""
        with storage_errors(self.uri):
            self._file.close()

    def join(self) -> None:
        """Nothing runs in the background."""

    uploading = False

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._file.close()


@dataclass
class _Shard:
    split: str
    index: int
    temp_uri: str
    pipe: _UploadPipe | _LocalSink
    framed_bytes: int = 0  # framed bytes handed to the TFRecordWriter
    stats: Any = None
    final_uri: str | None = None
    ids: RecordIds | None = None  # the records' identities, hashed as batches are handed over
    ids_inline: bool = False  # ... by the shard's format writer as it frames them
    record_index: bytes | None = None  # the shard's record index, once closed


def shard_is_full(compression: str, framed_bytes: int, stored_bytes: int, shard_size: int) -> bool:
    """Whether a shard has reached ``shard_size`` and the next record starts a new one.

    Uncompressed, the framed size is the stored size (exact).  Compressed, only the bytes the
    compressor has emitted so far count, so gzip/zlib shards close a little late.
    """
    if framed_bytes < shard_size:
        return False
    return compression == "none" or stored_bytes >= shard_size


def temp_shard_name(split: str, key: int | str, compression: str, format: str = "tfrecord") -> str:
    """Where a shard is written before its final name is known: ``_incomplete/{split}-{key}``."""
    key_text = f"{key:05d}" if isinstance(key, int) else key
    return f"_incomplete/{split}-{key_text}{shard_suffix(compression, format)}"


def open_shard(
    uri: str,
    compression: str,
    storage_options: Mapping[str, Any] | None,
    *,
    root: str | None = None,
    format: str = "tfrecord",
    format_options: Mapping[str, Any] | None = None,
) -> tuple[_UploadPipe | _LocalSink, ShardWriter]:
    """Start one shard at ``uri``: a framing, hashing, schema-inferring writer over an upload.

    ``format`` picks the record format's writer (:func:`recordkeeper.formats.get`), with its
    ``format_options``.  Write records to the returned writer; its
    ``close()`` gives the shard's stats, then ``pipe.finish()`` and ``pipe.join()`` end the
    upload (``pipe.abort()`` discards it); local files are written directly — created
    exclusively inside ``root`` (the version's storage root), never through a link: a link or
    file planted at ``uri`` raises :class:`~recordkeeper.core.errors.UnsafeStoragePath`.
    """
    from recordkeeper import formats  # not at import: rk stays light

    fmt = formats.get(format)
    if not fmt.writable:
        raise InvalidRequest(f"recordkeeper cannot write {fmt.description} shards")
    # a local file needs no upload thread
    pipe: _UploadPipe | _LocalSink = (
        _LocalSink(uri, root) if profile_of(uri).local else _UploadPipe(uri, storage_options)
    )
    try:
        return pipe, fmt.open_writer(pipe, compression, options=format_options)
    except BaseException:
        pipe.abort()
        raise


def finalize_shard(
    temp_uri: str,
    final_uri: str,
    stats: ShardStats,
    *,
    split: str,
    index: int,
    count: int,
    storage_options: Mapping[str, Any] | None,
    root: str | None = None,
) -> dict[str, Any]:
    """Move a written shard to its final name and return its REST registration.

    The storage identity is read after the move, and the stored size must equal what was
    written.  Idempotent: when ``temp_uri`` is gone and ``final_uri`` holds ``stats.size``
    bytes (a retried finalisation), the move is skipped.  ``root``: on local disk the move stays
    inside the version's storage root and refuses a planted final name (see :func:`open_shard`).
    """
    try:
        rename(temp_uri, final_uri, storage_options, root=root)
    except StorageError as exc:
        if exc.extra.get("reason") != "missing":
            raise
    stat = stat_object(final_uri, storage_options)
    if stat.size != stats.size:
        raise StorageError(
            f"{final_uri}: stored {stat.size} bytes but {stats.size} were written",
            uri=final_uri,
            reason="error",
        )
    record = ShardRecord(
        split=split,
        index=index,
        count=count,
        uri=final_uri,
        compression=stats.compression,
        size=stats.size,
        sha256=stats.sha256,
        crc32c=stats.crc32c,
        records_sha256=stats.records_sha256,
        record_count=stats.record_count,
        format=stats.format,
        storage_identity=stat.identity,
    )
    schema = stats.schema.to_dict() if stats.schema is not None else None
    return record.to_wire(schema=schema)


class _OpenShard:
    """A split's shard being written, and the records collected for it since the last batch.

    ``write()`` only appends to ``batch`` and counts down ``room`` (framed bytes until the
    batch is handed over: at most ``_BATCH_BYTES``, and never past the shard's size limit), so
    the per-record work is a few operations and the TFRecordWriter gets one call per batch.
    ``given`` is what ``room`` was when the batch began: the batch holds ``given - room``
    framed bytes.
    """

    __slots__ = ("batch", "given", "room", "shard", "tfw")

    def __init__(self, shard: _Shard, tfw: Any, room: int) -> None:
        self.shard = shard
        self.tfw = tfw
        self.batch: list[bytes] = []
        self.room = self.given = room

    def hand_over(self) -> int:
        """Give the batch to the TFRecordWriter; returns its framed size."""
        batch, self.batch = self.batch, []
        framed = self.given - self.room
        self.shard.framed_bytes += framed
        if self.shard.ids is not None and not self.shard.ids_inline:  # on a helper thread
            self.shard.ids.add(batch)
        self.tfw._write_batch(batch, framed - 16 * len(batch))
        return framed


class VersionWriter:
    """A context manager writing a new version, made by :meth:`Client.writer`.

    ``storage_options`` default to the client's; see the module docstring for the rest.
    """

    def __init__(
        self,
        registry: Registry,
        dataset: str,
        *,
        root: str | None = None,
        desc: str | None = None,
        compression: str | None = None,
        shard_size: int | str = "256MB",
        storage_options: Mapping[str, Any] | None = None,
        date: str | datetime.date | None = None,
        force_new: bool = False,
        metadata: Mapping[str, Any] | None = None,
        parents: Iterable[Any] | Mapping[str, str] | None = None,
        sources: Iterable[Any] | None = None,
        params: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        code: Any = "auto",
        note: str | None = None,
        hash_sources: bool = False,
        provenance: Mapping[str, Any] | None = None,
        format: str = "tfrecord",
        format_options: Mapping[str, Any] | None = None,
        record_index: bool = RECORD_INDEX_DEFAULT,
        sample_records: int = SAMPLE_RECORDS,
    ) -> None:
        """Provenance (docs/provenance.md): ``parents`` (``"coco@v2"``, ``"coco@v2:labels"``,
        versions), ``sources`` (URIs, listed now; ``hash_sources``: read whole, for a sha256
        identity), ``params`` (a mapping or a YAML/JSON file),
        ``code`` (``"auto"``: git around the entry script; a path; None: not recorded),
        ``note``; or a whole ``provenance`` document
        (:func:`recordkeeper.provenance.build_provenance`).  Checked before anything is
        written.  ``format`` is the record format of the shards (:mod:`recordkeeper.formats`),
        ``format_options`` its options.  ``record_index``: each record's identity is hashed
        as it is written, each shard's record index stored beside it and the version's
        record identity registered at commit (docs/record-identity.md), as
        ``recordkeeper index`` would afterwards.  ``sample_records``: the first records of
        each split, as written, are sent decoded as the version's sample after commit
        (:mod:`recordkeeper.samples`; 0: none)."""
        from recordkeeper import formats

        self._registry = registry
        self.format = format
        self.format_options = format_options
        fmt = formats.get(format)
        if not fmt.writable:
            raise InvalidRequest(
                f"recordkeeper cannot write {fmt.description} shards (it reads, verifies and "
                "publishes them)"
            )
        options = storage_options if storage_options is not None else registry.storage_options
        self.provenance = (
            dict(provenance)
            if provenance is not None
            else build_provenance(
                dataset=dataset,
                parents=parents,
                sources=sources,
                params=params,
                code=code,
                note=note,
                storage_options=options,
                hash_sources=hash_sources,
            )
        )
        self.dataset = dataset
        self.root = root
        self.desc = desc
        self.compression = fmt.check_compression(compression)
        fmt.check_options(format_options)  # now, not at the first record
        self.shard_size = parse_size(shard_size)
        self.storage_options = (
            storage_options if storage_options is not None else registry.storage_options
        )
        self.date = date
        self.force_new = force_new
        self.metadata = metadata
        self.staged: DatasetVersion | None = None
        self._version: DatasetVersion | None = None
        self._open: dict[str, _OpenShard] = {}
        self._done: list[_Shard] = []
        self._next_index: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._closed_records = 0  # records in shards already closed
        self.record_index = record_index
        self.sample_records = sample_records
        self._sample = SampleCollector(sample_records)  # the first records of each split
        #: the record identity registered at commit (``record_index``), the service's answer
        self.record_set: dict[str, Any] | None = None
        #: Set by :class:`recordkeeper.derive.Derivation`: the version is staged as a change
        #: of this base, and the writer only writes (the derivation registers and commits).
        self._base: str | None = None

    # -- public -----------------------------------------------------------------------------

    @property
    def version(self) -> DatasetVersion:
        """The committed version (available after the ``with`` block exits normally)."""
        if self._version is None:
            raise RuntimeError("the version is committed when the writer's with-block exits")
        return self._version

    @property
    def storage_prefix(self) -> str:
        return self._stage().storage_prefix

    def __enter__(self) -> VersionWriter:
        self._stage()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write(self, record: Any, split: str = "train") -> None:
        """Append one record (serialized ``bytes`` or a message with ``SerializeToString``)."""
        data = record
        if type(record) is not bytes:
            from recordkeeper.streaming import record_bytes  # not at import: rk stays light

            data = record_bytes(record)
        lock = self._lock
        lock.acquire()  # not `with`: two bound methods and a call through a tuple less
        try:
            try:
                current = self._open.get(split)
            except TypeError:  # an unhashable split (a list): refused as any bad split name
                validate_split_name(split)
                raise
            if current is None:
                current = self._start_shard(split)  # raises once the writer is closed
            current.batch.append(data)
            current.room -= len(data) + 16
            if current.room <= 0:
                self._hand_over(split, current)
        finally:
            lock.release()

    def end_shard(self, split: str = "train") -> None:
        """Close ``split``'s open shard now: the next record of the split starts a new one
        (to keep given shard boundaries, as :func:`convert` does).  Nothing open: no-op."""
        with self._lock:
            if split in self._open:
                self._close_shard(split)

    @property
    def record_count(self) -> int:
        """Records written so far."""
        with self._lock:
            return self._closed_records + sum(
                o.tfw.record_count + len(o.batch) for o in self._open.values()
            )

    def _hand_over(self, split: str, current: _OpenShard) -> None:
        """Give the collected records to the shard's TFRecordWriter; close the shard when it
        has reached ``shard_size``."""
        if self._sample.wants(split):  # once per batch, not per record
            self._sample.add(split, current.batch)
        current.hand_over()
        shard = current.shard
        # Uncompressed, the framed size is the stored size: the batch ends exactly at the
        # record reaching shard_size.  Compressed, only the bytes the compressor has emitted
        # are known (never more than the framed bytes, so that check comes first): the shard
        # closes a little late (batches of ~1 MiB), so shard_size is approximate for gzip/zlib.
        if shard_is_full(self.compression, shard.framed_bytes, shard.pipe.size, self.shard_size):
            self._close_shard(split)
            return
        current.room = current.given = min(
            _BATCH_BYTES, max(1, self.shard_size - shard.framed_bytes)
        )

    def finish_shards(self) -> list[dict[str, Any]]:
        """Close every shard and move it to its final name: their registrations (not sent).

        What :meth:`close` does before registering and committing; a derivation
        (:mod:`recordkeeper.derive`) registers them with its other changes."""
        with self._lock:
            for split in list(self._open):
                self._close_shard(split)
            self._closed = True
        for shard in self._done:
            shard.pipe.join()
        if not self._done:
            return []
        return self._finalise_names()

    def close(self) -> DatasetVersion:
        """Finish every shard, register them and commit; returns the committed version."""
        if self._version is not None:
            return self._version
        try:
            registrations = self.finish_shards()
            if not registrations:
                raise InvalidShard(
                    f"nothing was written to {self._stage().name}; write() at least one record"
                )
            staged = self._stage()
            self._registry.register_shards(staged, registrations)
            check = commit_check(
                self._registry.http, self.dataset, staged.name, self._leakage_sources()
            )
            version = self._registry.finish(staged, force_new=self.force_new, leakage=check)
        except BaseException:
            self.abort()
            raise
        # The version reads storage the way it was written (the registry's options otherwise).
        # Held before anything else runs: from here on the written objects are the committed
        # version's, and abort() — after a record identity or sample that failed below — keeps
        # them.
        self._version = version.with_storage_options(self.storage_options or None)
        if not version.was_staged_as(staged.name):  # an identical version was kept
            self._delete_written()
        else:
            if self.record_index:
                self.record_set = self._register_record_set(version)
            sample_committed(
                self._registry, version, records=self.sample_records, collected=self._sample
            )
        return self._version

    def abort(self) -> None:
        """Abandon the staged version and delete what was written (best effort).  Once the
        version is committed this does nothing: its objects are the version's (a cleanup path
        calling ``abort()`` after a successful ``close()`` must not delete them)."""
        self._closed = True
        if self._version is not None:
            return
        for current in self._open.values():
            current.shard.pipe.abort()
            if current.shard.ids is not None:
                current.shard.ids.abandon()
            self._done.append(current.shard)
        self._open.clear()
        for shard in self._done:
            shard.pipe.abort()
            if shard.ids is not None:
                shard.ids.abandon()
        self._delete_written()
        if self.staged is not None:
            with contextlib.suppress(Exception):
                self._registry.abandon(self.staged)

    # -- internals --------------------------------------------------------------------------

    def _stage(self) -> DatasetVersion:
        if self.staged is None:
            self.staged = self._registry.stage(
                self.dataset,
                desc=self.desc,
                date=self.date,
                root=self.root,
                metadata=self.metadata,
                reserve=True,  # the prefix carries the committed name (module docstring)
                provenance=self.provenance,
                base=self._base,
            )
            url_to_fs(self.staged.storage_prefix, self.storage_options)
        return self.staged

    def _start_shard(self, split: str) -> _OpenShard:
        if self._closed:
            if self._version is not None:
                raise VersionImmutable(
                    f"write: {self._version.name} is committed; a committed version never "
                    "changes: write a new version, or derive one from it",
                    state=self._version.state,
                )
            raise InvalidRequest("write: this writer was aborted; start a new one")
        validate_split_name(split)
        prefix = self._stage().storage_prefix
        index = self._next_index.get(split, 0)
        self._next_index[split] = index + 1
        while len([s for s in self._done if s.pipe.uploading]) >= _MAX_PENDING_UPLOADS:
            next(s for s in self._done if s.pipe.uploading).pipe.join()
        temp_uri = join_uri(prefix, temp_shard_name(split, index, self.compression, self.format))
        pipe, tfw = open_shard(
            temp_uri,
            self.compression,
            self.storage_options,
            root=storage_root_of(prefix),
            format=self.format,
            format_options=self.format_options,
        )
        shard = _Shard(split, index, temp_uri, pipe)
        if self.record_index:
            # hashed where the TFRecord writer frames each record (in C, in the cache), else
            # on a helper thread while this one hands the batch over
            hashes = getattr(tfw, "hash_records_into", None)
            shard.ids = RecordIds()
            shard.ids_inline = callable(hashes) and hashes(shard.ids) is True
            if not shard.ids_inline:
                shard.ids = RecordIds(background=True)
        current = self._open[split] = _OpenShard(shard, tfw, min(_BATCH_BYTES, self.shard_size))
        return current

    def _close_shard(self, split: str) -> None:
        current = self._open.pop(split)
        shard, tfw = current.shard, current.tfw
        if current.batch:
            if self._sample.wants(split):
                self._sample.add(split, current.batch)
            current.hand_over()
        shard.stats = tfw.close()
        if shard.ids is not None:
            shard.record_index = shard.ids.finish(shard.stats.records_sha256)
            shard.ids = None
        self._closed_records += shard.stats.record_count
        shard.pipe.finish()
        self._done.append(shard)

    def _finalise_names(self) -> list[dict[str, Any]]:
        prefix = self._stage().storage_prefix
        counts = split_counts(self._done, lambda s: s.split)
        registrations = []
        for shard in sorted(self._done, key=lambda s: (s.split, s.index)):
            count = counts[shard.split]
            final = final_shard_uri(
                prefix,
                shard.split,
                shard.index,
                count,
                compression=self.compression,
                format=self.format,
            )
            shard.final_uri = final
            registrations.append(
                finalize_shard(
                    shard.temp_uri,
                    final,
                    shard.stats,
                    split=shard.split,
                    index=shard.index,
                    count=count,
                    storage_options=self.storage_options,
                    root=storage_root_of(prefix),
                )
            )
            if shard.record_index is not None:  # beside the shard, where readers look
                write_index(final, shard.record_index, self.storage_options)
        self._remove_temp_dir()
        return registrations

    def _indexes_by_split(self) -> dict[str, list[bytes]]:
        """The record index of each shard written, by split (built while writing)."""
        by_split: dict[str, list[bytes]] = {}
        for shard in self._done:
            if shard.record_index is not None:
                by_split.setdefault(shard.split, []).append(shard.record_index)
        return by_split

    def _leakage_sources(self) -> Callable[[], Sources] | None:
        """What the leakage check before commit reads (:func:`recordkeeper.leakage.
        commit_check`): the indexes held in memory; None without record identity."""
        if not self.record_index or any(s.record_index is None for s in self._done):
            return None
        return lambda: memory_sources(self._indexes_by_split())

    def _register_record_set(self, version: DatasetVersion) -> dict[str, Any] | None:
        """The split set digests from the indexes built while writing, registered (None: the
        registry refused them, with a warning)."""
        by_split = self._indexes_by_split()
        digests = {split: split_digest(indexes) for split, indexes in by_split.items()}
        return register_committed(
            self._registry.http, version, digests, storage_options=self.storage_options or None
        )

    def _remove_temp_dir(self) -> None:
        """Local disk keeps empty directories; object stores have none to remove."""
        if self.staged is None or not profile_of(self.staged.storage_prefix).local:
            return
        path = to_uri(join_uri(self.staged.storage_prefix, "_incomplete"))[len("file://") :]
        with contextlib.suppress(OSError):
            os.rmdir(path)

    def _delete_written(self) -> None:
        for shard in self._done:
            index = index_uri(shard.final_uri) if shard.final_uri else None
            for uri in (shard.temp_uri, shard.final_uri, index):
                if uri:
                    with contextlib.suppress(Exception):
                        remove(uri, self.storage_options)
        self._remove_temp_dir()


def convert(
    registry: Registry,
    ref: str | DatasetVersion,
    *,
    to: str,
    format_options: Mapping[str, Any] | None = None,
    desc: str | None = None,
    root: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    compression: str | None = None,
    progress: bool | ProgressLike | None = None,
    code: Any = "auto",
) -> DatasetVersion:
    """A new version holding ``ref``'s records in the record format ``to``, shard for shard.

    Every shard is read with its own format's reader (records checked) and written as one
    shard of the new format, so splits, shard boundaries and record order are kept and the
    new version has the same content digest (``records_sha256`` is format-neutral).  It is
    committed even though its content equals ``ref``'s (that is the point), with
    ``metadata={"converted_from": <ref's name>, "format": to}`` and ``ref`` as its provenance
    parent (role ``base``).  ``progress``: a bytes/s bar over the stored bytes read, shard by
    shard (None: on a terminal), or a ``ProgressLike``; ``code`` as for the writer.
    """
    from recordkeeper import formats

    source = ref if isinstance(ref, DatasetVersion) else registry.resolve(ref)
    source.ensure_readable()
    read_options = storage_options if storage_options is not None else source.storage_options
    writer = VersionWriter(
        registry,
        source.dataset,
        root=root,
        desc=desc or f"{to}",
        compression=compression,
        shard_size=2**62,  # shards end where the source's end
        storage_options=storage_options,
        force_new=True,
        metadata={"converted_from": source.name, "format": to},
        parents=[(source.name, "base")],
        code=code,
        format=to,
        format_options=format_options,
    )
    total = sum(s.size for s in source.shards)
    with writer, byte_progress(f"convert {source.name}", total, progress) as advance:
        for split in sorted(source.splits):
            for shard in source.splits[split].shards:
                fmt = formats.get(shard.format)
                with open_read(shard.uri, read_options) as fh, storage_errors(shard.uri):
                    for record in fmt.iter_records(fh, shard.compression):
                        writer.write(bytes(record), split=split)
                writer.end_shard(split)
                advance(shard.size)
    version = writer.version
    if version.content_digest != source.content_digest:  # pragma: no cover - a bug if seen
        raise InvalidShard(
            f"converting {source.name} to {to} changed its content digest "
            f"({source.content_digest} -> {version.content_digest})"
        )
    return version

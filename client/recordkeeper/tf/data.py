"""``tf.data`` pipelines over a version's shards, on TensorFlow 2.21 without tensorflow-io.

Records come shard after shard (index order, or shuffled shard order), whatever the path:

* ``file://`` shards (and ``gs://`` on real GCS) are read by TensorFlow's own
  ``tf.data.TFRecordDataset``, the fastest path: local ones by one ``TFRecordDataset`` over the
  file names (nothing per record between it and the caller).
* ``s3://`` left TensorFlow core in 2.6 and tensorflow-io no longer loads on TF ≥ 2.18, and
  TF's GCS client does not speak to emulators (``STORAGE_EMULATOR_HOST``); those shards — and any
  other fsspec backend — are read through fsspec: the shard format's ``iter_records``
  (:mod:`recordkeeper.formats`; for TFRecord it checks every record's CRC) in batches, several
  shards read ahead at once by Python threads with bounded buffers
  (:mod:`recordkeeper.tf.read_ahead`), the batches taken shard after shard by one ``tf.data``
  generator per epoch and split into records once.
* ``cache=True``: remote TFRecord shards are fetched into the local shard cache
  (:mod:`recordkeeper.shard_cache`: downloaded whole once, hashed as they arrive and admitted
  only if their sha256 matches) a few shards ahead of ``TFRecordDataset``, which reads the
  local copies.  (Streaming the records while the bytes fill the cache was tried in session 9
  and made the first epoch slower: docs/performance.md.)
* ArrayRecord and Riegeli shards (TensorFlow has no reader for them) always take the fsspec
  path: recordkeeper's Riegeli reader decodes each chunk (checking its HighwayHash checksums)
  in Python and C, in a ``tf.data`` generator.  It costs a Python generator step per batch of
  up to 256 records and the GIL while a chunk is decoded: expect a fraction of
  ``TFRecordDataset``'s rate on local files (see docs/client.md, "Record formats").

Either way the elements are serialized records (``tf.string`` scalars), ready for
``tf.io.parse_example(batch, version.feature_spec())``.

The returned dataset is a plain ``tf.data.Dataset`` (public APIs only: usable by Keras
``model.fit`` and every ``tf.data`` transformation).  Its errors are TensorFlow's: a corrupt
shard read through fsspec raises ``tf.errors.UnknownError`` whose message is recordkeeper's
(naming the version, split, shard and offsets); TensorFlow's own reader raises
``DataLossError`` ("corrupted record at 165406", no file named).  Inside
:func:`typed_errors` — around a Python loop, ``model.fit`` or anything that iterates — either
becomes :class:`~recordkeeper.errors.CorruptShard` naming the version, split, shard and offsets
(``offset`` in the record stream, ``compressed_offset`` for a GZIP/ZLIB stream that does not
decompress): from the engine's own error for shards read through fsspec, and by a deep check
of the split's shards when TensorFlow's reader failed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.core.errors import CorruptShard, StorageError
from recordkeeper.storage import open_read, profile_of, storage_errors

if TYPE_CHECKING:
    from recordkeeper.shard_cache import ShardCache
    from recordkeeper.values import DatasetVersion, Shard

__all__ = ["read_shard_batches", "tf_dataset", "typed_errors"]

_BATCH = 256
#: an interleave block longer than any shard: blocks are whole shards (file after file)
_WHOLE = 2**62
#: what each shard read ahead may hold waiting: batches of 256 records (32k records) ...
_AHEAD_BATCHES = 128
#: ... or records (TensorFlow's own reader)
_AHEAD_RECORDS = 32768
#: shards fetched into the cache at once: few, so that the first ones are ready early (the
#: reader starts on a shard once it is whole) while the next ones download
_CACHE_AHEAD = 2
#: batches a pipeline keeps ready after the read-ahead (TensorFlow's prefetch)
_PREFETCH = 8
_TF_COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


def read_shard_batches(
    uri: str,
    compression: str,
    storage_options: Mapping[str, Any] | None = None,
    stop: Callable[[], bool] | None = None,
    format: str = "tfrecord",
    size: int | None = None,
) -> Iterator[list[bytes]]:
    """Yield the records of one shard in lists of up to 256, read through fsspec.

    Damage found in a read is confirmed before it is blamed on the shard (as deep
    verification does): the object is read again and the records already yielded skipped.
    The same damage again raises :class:`~recordkeeper.errors.CorruptShard`; reads that keep
    disagreeing raise :class:`~recordkeeper.errors.StorageError` with reason ``transport``.
    ``stop()``, once true, ends the reading between batches (its iteration has failed).
    """
    from recordkeeper import formats
    from recordkeeper.verify import REREADS

    iter_records = formats.get(format).iter_records

    yielded = 0  # records handed out so far: a re-read skips them
    seen: CorruptShard | None = None
    for _ in range(REREADS + 1):
        skip = yielded
        try:
            with open_read(uri, storage_options, size=size) as fh, storage_errors(uri):
                batch: list[bytes] = []  # (fh is seekable: claimed lengths are bounded)
                for record in iter_records(fh, compression):
                    if skip:
                        skip -= 1
                        continue
                    batch.append(bytes(record))
                    if len(batch) >= _BATCH:
                        if stop is not None and stop():
                            return
                        yielded += len(batch)
                        yield batch
                        batch = []
                if batch:
                    yield batch
                return
        except CorruptShard as exc:
            if seen is not None and _same_damage(seen, exc):
                raise
            seen = exc
    assert seen is not None
    raise StorageError(
        f"{uri}: {REREADS + 1} reads of the object gave different bytes (last: {seen.detail}); "
        "the answers are being damaged in transit, the stored shard was not judged",
        uri=uri,
        reason="transport",
    )


def _same_damage(a: CorruptShard, b: CorruptShard) -> bool:
    return (a.detail, a.extra.get("offset"), a.extra.get("compressed_offset")) == (
        b.detail,
        b.extra.get("offset"),
        b.extra.get("compressed_offset"),
    )


def _native(uri: str, options: Mapping[str, Any]) -> str | None:
    """The path TensorFlow can open itself, or ``None`` when fsspec must read it (the
    profile's :meth:`~recordkeeper.backends.StorageProfile.native_path`)."""
    return profile_of(uri).native_path(uri, options)


def tf_dataset(
    version: DatasetVersion,
    split: str,
    *,
    verify: Literal["fast", "deep"] | None = "fast",
    num_parallel_reads: int | None = None,
    shuffle_files: bool = False,
    seed: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    cache: bool | ShardCache = False,
) -> Any:
    """A ``tf.data.Dataset`` of the serialized records of ``version``'s ``split``.

    Records come shard after shard, in index order (or in an order of the shards shuffled each
    epoch with ``shuffle_files``; records within a shard keep their order), the same whether
    the shards are read from local disk, through fsspec or from the shard cache.
    ``num_parallel_reads`` shards (default: up to 8 for remote shards; local ones are read one
    after the other, as ``tf.data.TFRecordDataset(files)`` does) are read ahead in parallel.

    ``verify`` checks the split's shards first (``"fast"``: storage identity, ``"deep"``:
    re-hash everything, ``None``: skip) and raises
    :class:`~recordkeeper.errors.CorruptShard` naming the bad shards.

    ``cache=True`` (or a :class:`~recordkeeper.shard_cache.ShardCache`) keeps remote shards in
    the local shard cache: each is downloaded once, hashed as it arrives and admitted only if
    its size and sha256 match the registered ones, then read from local disk by TensorFlow's
    own reader (this epoch and the next, this process and others).  A shard whose stored bytes
    are not the registered ones is never admitted and none of its records is read:
    :class:`~recordkeeper.errors.CorruptShard` (reason ``sha256`` or ``size``; TensorFlow's
    ``UnknownError`` outside :func:`typed_errors`) names it.  With the cache, ``verify``
    applies to cache entries as :meth:`ShardCache.lookup` says and to the storage identity of
    shards not cached yet.
    """
    import tensorflow as tf

    version.ensure_readable()  # VersionDataDeleted: retention deleted its data
    shards = version.splits[split].shards if split in version.splits else None
    if shards is None:
        version.files(split)  # raises SplitNotFound (a KeyError) naming the splits
        raise AssertionError("unreachable")
    options = storage_options if storage_options is not None else version.storage_options
    if verify not in (None, "fast", "deep"):
        raise ValueError(f"verify must be 'fast', 'deep' or None, got {verify!r}")
    shards = list(shards)
    uris = [s.uri for s in shards]
    compressions = [s.compression for s in shards]
    record_formats = [s.format for s in shards]
    opts = dict(options or {})
    natives = [_native(u, opts) for u in uris]
    local = [profile_of(u).local for u in uris]
    tfrecords = all(f == "tfrecord" for f in record_formats)
    shard_cache = _shard_cache(cache) if tfrecords and not all(local) else None
    if verify is not None:
        if shard_cache is None:
            version.verify(
                deep=verify == "deep", splits=[split], storage_options=options
            ).raise_for_problems()
        else:  # cache entries are checked when used; the others' storage identity now
            from recordkeeper.verify import verify_shards

            absent = [s for s in shards if not shard_cache.path(s.sha256).exists()]
            if absent:
                verify_shards(
                    absent, deep=False, storage_options=options, progress=False
                ).raise_for_problems()
    errors = _ShardErrors(version.name, split, shards, options)
    ahead = num_parallel_reads or min(len(uris), 8)

    if shard_cache is not None:
        dataset = _cached(
            tf,
            version,
            split,
            shards,
            shard_cache,
            opts,
            verify,
            errors,
            ahead,
            shuffle_files,
            seed,
        )
    elif tfrecords and all(n is not None for n in natives):
        paths = [n for n in natives if n is not None]
        tf_comps = [_TF_COMPRESSION[c] for c in compressions]
        files = tf.data.Dataset.from_tensor_slices((paths, tf_comps))
        if shuffle_files:
            files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
        sequential = num_parallel_reads is None and all(local)
        one = tf_comps[0] if len(set(tf_comps)) == 1 else None
        dataset = _read_files(tf, files, one, 1 if sequential else ahead)
    else:
        dataset = _streamed(tf, shards, opts, errors, ahead, shuffle_files, seed)
    return _remember(dataset, errors)


def _shard_cache(cache: bool | ShardCache) -> ShardCache | None:
    from recordkeeper.shard_cache import ShardCache

    if isinstance(cache, ShardCache):
        return cache
    if cache is True:
        return ShardCache()
    if cache is False or cache is None:
        return None
    raise TypeError(f"cache must be a bool or a ShardCache, got {type(cache).__name__}")


def _read_files(tf: Any, files: Any, compression: str | None, ahead: int) -> Any:
    """The records of a dataset of ``(path, TF compression type)`` pairs, file after file.

    One file at a time (``ahead == 1``) and one TF ``compression`` (None: they differ): a
    single ``TFRecordDataset`` over the file names, nothing per record between it and the
    caller (the fastest pipeline on local disk).  Otherwise ``ahead`` files are opened and
    read in parallel (an interleave whose blocks are whole files: the order stays file after
    file).
    """
    if ahead <= 1 and compression is not None:
        return tf.data.TFRecordDataset(
            files.map(lambda path, comp: path), compression_type=compression
        )
    return _whole_files(
        files,
        lambda path, comp: tf.data.TFRecordDataset(path, compression_type=comp),
        ahead,
        _AHEAD_RECORDS,
    )


def _whole_files(files: Any, open_file: Callable[..., Any], ahead: int, buffered: int) -> Any:
    """``open_file`` of every element of ``files``, file after file, ``ahead`` files read in
    parallel with up to ``buffered`` elements each waiting: an interleave whose blocks are
    whole files (``Dataset.interleave`` sizes its buffers by the block length, unbounded here,
    so the dataset is made with the buffer given)."""
    import tensorflow as tf

    if ahead <= 1:
        return files.flat_map(open_file)
    # the public transformation that takes a per-file buffer (tf.data.experimental, deprecated
    # in favour of Dataset.interleave, which has no such argument)
    return files.apply(
        tf.data.experimental.parallel_interleave(
            open_file,
            cycle_length=ahead,
            block_length=_WHOLE,
            sloppy=False,
            buffer_output_elements=buffered,
            prefetch_input_elements=0,
        )
    )


def _cached(
    tf: Any,
    version: DatasetVersion,
    split: str,
    shards: Sequence[Shard],
    shard_cache: ShardCache,
    options: Mapping[str, Any],
    verify: Literal["fast", "deep"] | None,
    errors: _ShardErrors,
    ahead: int,
    shuffle_files: bool,
    seed: int | None,
) -> Any:
    """Shards from the shard cache: a few shards are fetched into it at once (downloaded whole
    into ``tmp/`` while hashed and admitted only if their sha256 matches —
    :class:`~recordkeeper.shard_cache.CacheFill` — if not there yet, checked if there) ahead
    of TensorFlow's own reader, which reads each local copy once it is admitted.  A shard whose
    stored bytes are not the registered ones raises
    :class:`~recordkeeper.errors.CorruptShard` before any of its records is read.  The
    split's entries are leased (kept from eviction) while the dataset lives."""
    shard_cache.check_fits(shards)
    shard_cache.remember(version, [split])
    lease = shard_cache.lease(s.sha256 for s in shards)

    def fetch(index: Any) -> bytes:
        shard = shards[int(index)]
        try:
            path, _ = shard_cache.fetch(shard, options, verify=verify)
        except CorruptShard as exc:
            raise errors.found_in(shard.uri, exc) from None
        except StorageError as exc:
            errors.remember(exc)
            raise
        return os.fsencode(path)

    comps = [_TF_COMPRESSION[s.compression] for s in shards]
    indexes = tf.data.Dataset.from_tensor_slices((list(range(len(shards))), comps))
    if shuffle_files:
        indexes = indexes.shuffle(len(shards), seed=seed, reshuffle_each_iteration=True)
    files = indexes.map(
        lambda i, comp: (tf.py_function(fetch, [i], tf.string), comp),
        num_parallel_calls=max(min(ahead, _CACHE_AHEAD), 1),
        deterministic=True,
    )
    dataset = _read_files(tf, files, comps[0] if len(set(comps)) == 1 else None, 1)
    dataset._recordkeeper_lease = lease  # released when the pipeline is garbage
    return dataset


def _shuffled(tf: Any, n: int, shuffle_files: bool, seed: int | None) -> Any:
    """The indexes of ``n`` shards, in index order or shuffled each epoch."""
    indexes = tf.data.Dataset.range(n)
    if shuffle_files:
        indexes = indexes.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    return indexes


def _orders(tf: Any, n: int, shuffle_files: bool, seed: int | None) -> Any:
    """One element per epoch: the order of the ``n`` shards (shuffled each epoch if asked)."""
    return _shuffled(tf, n, shuffle_files, seed).batch(n)


def _read_ahead(
    tf: Any,
    open_shard: Callable[[int, Callable[[], bool]], Iterator[list[bytes]]],
    errors: _ShardErrors,
    ahead: int,
) -> Callable[[Any], Any]:
    """A function of an epoch's shard order giving that epoch's records: one ``tf.data``
    generator over :func:`~recordkeeper.tf.read_ahead.read_ahead` (``ahead`` shards read at
    once by Python threads, batches taken shard after shard), split into records once."""
    from recordkeeper.tf.read_ahead import read_ahead

    def counted(index: int, stop: Callable[[], bool]) -> Iterator[list[bytes]]:
        shard = errors.shards[index]
        failures = errors.failures

        def ended() -> bool:  # an error ended the iteration this reader belongs to
            return stop() or errors.failures != failures or errors.settling

        batches = open_shard(index, ended)
        try:
            while not ended():  # a reader started while an error settles reads nothing
                with errors.reading():  # counted while it may wait on the store
                    batch = next(batches, None)
                if batch is None:
                    return
                yield batch
        except CorruptShard as exc:
            raise errors.found_in(shard.uri, exc) from None
        except StorageError as exc:
            errors.remember(exc)
            raise
        finally:
            batches.close()  # type: ignore[attr-defined]

    def generate(order: Any) -> Iterator[list[bytes]]:
        try:
            yield from read_ahead(list(order), counted, ahead, _AHEAD_BATCHES)
        except StorageError:
            errors.failed()
            raise

    def epoch(order: Any) -> Any:
        return (
            tf.data.Dataset.from_generator(
                generate, args=(order,), output_signature=tf.TensorSpec((None,), tf.string)
            )
            .prefetch(_PREFETCH)
            .unbatch()
        )

    return epoch


def _streamed(
    tf: Any,
    shards: Sequence[Shard],
    opts: dict[str, Any],
    errors: _ShardErrors,
    ahead: int,
    shuffle_files: bool,
    seed: int | None,
) -> Any:
    """Shards read through fsspec: ``ahead`` shards read at once (:func:`_read_ahead`), their
    batches taken shard after shard and split into records once."""

    def open_shard(index: int, stop: Callable[[], bool]) -> Iterator[list[bytes]]:
        shard = shards[index]
        return read_shard_batches(
            shard.uri, shard.compression, opts, stop, shard.format, size=shard.size
        )

    return _orders(tf, len(shards), shuffle_files, seed).flat_map(
        _read_ahead(tf, open_shard, errors, ahead)
    )


class _ShardErrors:
    """The corrupt shards met while reading one split, as :class:`CorruptShard` naming them."""

    def __init__(
        self,
        version: str,
        split: str,
        shards: Sequence[Shard],
        options: Mapping[str, Any] | None,
    ) -> None:
        self.version = version
        self.split = split
        self.shards = list(shards)
        self.options = options
        #: the fsspec readers' errors (in this process), found again in TensorFlow's message
        self.found: list[StorageError] = []
        #: errors that reached an iterator: a reader started before the last one stops (its
        #: iteration is over) at its next batch instead of reading on in TensorFlow's threads
        self.failures = 0
        self._reading = 0  # readers inside a read (TensorFlow's threads), see reading()
        self.settling = False  # an error is on its way to the caller: readers stop
        self._idle = threading.Condition()
        self.dataset_id = 0  # id() of the dataset tf_dataset returned

    def _shard_error(self, shard: Shard, what: str, **extra: Any) -> CorruptShard:
        """A :class:`CorruptShard` naming ``shard`` of this split: ``what`` follows its name."""
        return CorruptShard(
            f"{self.version}: shard {shard.name} of split {self.split!r} {what}",
            version=self.version,
            split=self.split,
            shard=shard.name,
            uri=shard.uri,
            **extra,
        )

    def named(self, shard: Shard, detail: str, offset: Any, compressed_offset: Any) -> CorruptShard:
        where = f"offset {offset}" if offset is not None else "an unknown offset"
        if compressed_offset is not None:
            where += f" (compressed offset {compressed_offset})"
        return self._shard_error(
            shard,
            f"is corrupt at {where}: {detail} ({shard.uri})",
            offset=offset,
            compressed_offset=compressed_offset,
        )

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Count a reader in a read (it may wait on the filesystem's event loop)."""
        with self._idle:
            self._reading += 1
        try:
            yield
        finally:
            with self._idle:
                self._reading -= 1
                self._idle.notify_all()

    def settle(self) -> None:
        """Before an error reaches the caller: let the readers still in a read finish (they
        stop at their next batch, bounded by the retry policy), then collect the garbage here.

        A failed pipeline left readers waiting on fsspec's event loop inside TensorFlow's
        threads; when the garbage collector later ran on the loop's own thread, the finalizer
        of the pipeline's resources waited for those readers, which waited for the loop: every
        later S3 call of the process hung (issue 21).  Finalized here, nothing waits on the loop.
        """
        from recordkeeper.storage import LOOP_TIMEOUT

        self.settling = True
        try:
            with self._idle:
                self._idle.wait_for(lambda: self._reading == 0, timeout=LOOP_TIMEOUT)
            gc.collect()
        finally:
            self.settling = False

    def remember(self, error: StorageError) -> None:
        """Keep an fsspec reader's error for :func:`typed_errors` (the last few: errors
        nobody translated are not kept for ever)."""
        self.found.append(error)
        del self.found[:-8]

    def failed(self) -> None:
        """In the reader that failed, before its error goes to TensorFlow: the readers started
        before stop at their next batch, those in a read finish it first (bounded by the retry
        policy) and readers started meanwhile read nothing — so no reader of the failed
        iteration is waiting on fsspec's loop when its pipeline is collected (issue 21), even
        when the caller iterates outside :func:`typed_errors` (which also collects it)."""
        from recordkeeper.storage import LOOP_TIMEOUT

        self.failures += 1
        self.settling = True
        try:
            with self._idle:
                self._idle.wait_for(lambda: self._reading == 0, timeout=LOOP_TIMEOUT)
        finally:
            self.settling = False

    def found_in(self, uri: str, exc: CorruptShard) -> CorruptShard:
        """The engine's error while reading ``uri``, naming its shard; remembered."""
        shard = next(s for s in self.shards if s.uri == uri)
        reason = exc.extra.get("reason")
        if reason in ("sha256", "size"):  # read whole with good CRCs, not the registered bytes
            error = self._shard_error(
                shard, f"is not the registered shard: {exc.detail}", reason=reason
            )
        else:
            error = self.named(
                shard, exc.detail, exc.extra.get("offset"), exc.extra.get("compressed_offset")
            )
        self.remember(error)
        return error

    def translate_native(self, exc: Exception) -> CorruptShard | None:
        """The corrupt shard of this split behind TensorFlow's own reader's ``exc`` (found by
        a deep check), or None."""
        import tensorflow as tf

        if not isinstance(exc, tf.errors.DataLossError | tf.errors.UnknownError):
            return None
        # TensorFlow's own reader names no file: read the split's shards to find the bad one.
        from recordkeeper.verify import verify_shards

        report = verify_shards(self.shards, deep=True, storage_options=self.options, progress=False)
        for problem in report.problems:
            if problem.reason == "corrupt":
                return self.named(
                    problem.shard, problem.detail, problem.offset, problem.compressed_offset
                )
        return None


#: the error translators of the datasets tf_dataset made that are alive, by id; a dataset's
#: entry goes with it (and a dataset made from it keeps it alive)
_LIVE: dict[int, _ShardErrors] = {}


def _remember(dataset: Any, errors: _ShardErrors) -> Any:
    """``dataset`` as it is, its errors known to :func:`typed_errors` while it lives."""
    key = id(errors)
    _LIVE[key] = errors
    weakref.finalize(dataset, _LIVE.pop, key, None)
    errors.dataset_id = id(dataset)
    return dataset


class typed_errors(contextlib.ContextDecorator):
    """Raise :class:`~recordkeeper.errors.CorruptShard` (or the fsspec reader's
    :class:`~recordkeeper.errors.StorageError`) for the TensorFlow error a corrupt shard of a
    :func:`tf_dataset` caused inside the block::

        dataset = version.tf_dataset("train").map(parse).batch(32)
        with rk.tf.typed_errors():
            for batch in dataset: ...          # or model.fit(dataset, ...)

    The error names the version, split, shard, ``uri``, ``offset`` and ``compressed_offset``
    and is raised ``from`` TensorFlow's.  ``datasets`` (the ones :func:`tf_dataset` returned)
    limit the search to their splits; by default every such dataset still alive is a
    candidate.  Shards read through fsspec report their own error; when TensorFlow's reader
    failed (``DataLossError``, no file named) the candidate splits are checked deeply to name
    the bad shard.  TensorFlow errors that are not a shard's go through unchanged.  Also a
    decorator.
    """

    def __init__(self, *datasets: Any) -> None:
        self._only = {id(d) for d in datasets}
        unknown = [
            d for d in datasets if not any(e.dataset_id == id(d) for e in list(_LIVE.values()))
        ]
        if unknown:
            raise TypeError(
                "typed_errors takes the datasets tf_dataset returned (before .map(), .batch(), "
                "...), or none for all of them"
            )

    def __enter__(self) -> typed_errors:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or not isinstance(exc, Exception):
            return
        import tensorflow as tf

        if not isinstance(exc, tf.errors.OpError):
            return
        error = translate(exc, self._candidates())
        if error is not None:
            raise error from exc

    def _candidates(self) -> list[_ShardErrors]:
        live = list(_LIVE.values())[::-1]  # the newest first
        return [e for e in live if not self._only or e.dataset_id in self._only]


def translate(exc: Exception, candidates: Sequence[_ShardErrors]) -> StorageError | None:
    """The recordkeeper error behind TensorFlow's ``exc`` among ``candidates``, or None."""
    for errors in candidates:
        errors.failures += 1
        errors.settle()
    message = str(getattr(exc, "message", exc))
    for errors in candidates:  # an fsspec reader's own error: TensorFlow's message carries it
        for error in errors.found:
            if error.detail in message:
                errors.found.remove(error)
                return error
    for errors in candidates:
        corrupt = errors.translate_native(exc)
        if corrupt is not None:
            return corrupt
    return None

"""``tf.data`` pipelines over a version's shards, on TensorFlow 2.21 without tensorflow-io.

Records come shard after shard (index order, or shuffled shard order), whatever the path:

* ``file://`` shards (and ``gs://`` on real GCS) are read by TensorFlow's own
  ``tf.data.TFRecordDataset``, the fastest path: local ones by one ``TFRecordDataset`` over the
  file names (nothing per record between it and the caller).
* ``s3://`` left TensorFlow core in 2.6 and tensorflow-io no longer loads on TF ≥ 2.18, and
  TF's GCS client does not speak to emulators (``STORAGE_EMULATOR_HOST``); those shards — and any
  other fsspec backend — are read through fsspec inside the pipeline: one generator per shard
  using the shard format's ``iter_records`` (:mod:`recordkeeper.formats`; for TFRecord it
  checks every record's CRC) yielding batches, several shards read in parallel with bounded
  buffers and taken whole in turn, the batches split into records once.
* ``cache=True``: remote TFRecord shards are fetched into the local shard cache
  (:mod:`recordkeeper.shard_cache`: downloaded once, verified against their sha256) a few shards
  ahead of ``TFRecordDataset``, which reads the local copies.
* ArrayRecord and Riegeli shards (TensorFlow has no reader for them) always take the fsspec
  path: recordkeeper's Riegeli reader decodes each chunk (checking its HighwayHash checksums)
  in Python and C, in a ``tf.data`` generator.  It costs a Python generator step per batch of
  up to 256 records and the GIL while a chunk is decoded: expect a fraction of
  ``TFRecordDataset``'s rate on local files (see docs/client.md, "Record formats").

Either way the elements are serialized records (``tf.string`` scalars), ready for
``tf.io.parse_example(batch, version.feature_spec())``.

A corrupt shard met while iterating raises :class:`~recordkeeper.errors.CorruptShard` naming
the version, split, shard and offsets (``offset`` in the record stream, ``compressed_offset``
for a GZIP/ZLIB stream that does not decompress) — not TensorFlow's ``DataLossError`` (which
names no file) or ``UnknownError`` (wrapping the engine's error).  Python iteration of the
returned dataset and of every dataset made from it (``.map()``, ``.batch()``, …) translates
the error: from the engine's own error for shards read through fsspec, and by a deep check of
the split's shards when TensorFlow's reader failed.  Code that iterates inside a
``tf.function`` (Keras ``fit``) sees TensorFlow's error.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.core.errors import CorruptShard, StorageError
from recordkeeper.storage import open_read, profile_of, storage_errors

if TYPE_CHECKING:
    from recordkeeper.models import DatasetVersion, Shard
    from recordkeeper.shard_cache import ShardCache

__all__ = ["read_shard_batches", "tf_dataset"]

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
    the local shard cache: each is downloaded once, verified against its registered sha256, and
    read from local disk by TensorFlow's own reader from then on (this epoch and the next, this
    process and others).  With the cache, ``verify`` applies to cache entries as
    :meth:`ShardCache.lookup` says and to the storage identity of shards not cached yet.
    """
    import tensorflow as tf

    version.ensure_readable()  # VersionDataDeleted: retention deleted its data
    shards = version.splits[split].shards if split in version.splits else None
    if shards is None:
        version.files(split)  # raises KeyError naming the splits
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
        dataset = _streamed(
            tf, uris, compressions, record_formats, opts, errors, ahead, shuffle_files, seed
        )
    return _with_typed_errors(dataset, errors.translate)


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
    from tensorflow.python.data.ops import interleave_op

    if ahead <= 1:
        return files.flat_map(open_file)
    return interleave_op._ParallelInterleaveDataset(
        files,
        open_file,
        cycle_length=ahead,
        block_length=_WHOLE,
        num_parallel_calls=ahead,
        buffer_output_elements=buffered,
        prefetch_input_elements=0,
        deterministic=True,
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
    """Shards from the shard cache: ``ahead`` shards are fetched into it (downloaded and
    verified if not there yet, checked if there) ahead of TensorFlow's own reader, which reads
    the local copies.  The split's entries are leased (kept from eviction) while the dataset
    lives."""
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
            errors.found.append(exc)
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


def _streamed(
    tf: Any,
    uris: Sequence[str],
    compressions: Sequence[str],
    record_formats: Sequence[str],
    opts: dict[str, Any],
    errors: _ShardErrors,
    ahead: int,
    shuffle_files: bool,
    seed: int | None,
) -> Any:
    """Shards read through fsspec: a generator per shard yielding batches of records, ``ahead``
    shards read in parallel, batches taken shard after shard and split into records once."""
    sizes = dict(zip(uris, (s.size for s in errors.shards), strict=True))

    def generate(uri: Any, compression: Any, record_format: Any) -> Iterator[list[bytes]]:
        text_uri = uri.decode() if isinstance(uri, bytes) else str(uri)
        text_comp = compression.decode() if isinstance(compression, bytes) else str(compression)
        text_format = (
            record_format.decode() if isinstance(record_format, bytes) else str(record_format)
        )
        failures = errors.failures

        def stop() -> bool:  # an error ended the iteration this reader belongs to
            return errors.failures != failures or errors.settling

        batches = read_shard_batches(
            text_uri, text_comp, opts, stop, text_format, size=sizes.get(text_uri)
        )
        try:
            while not errors.settling:  # a reader started while an error settles reads nothing
                with errors.reading():  # counted while it may wait on the store
                    batch = next(batches, None)
                if batch is None:
                    return
                yield batch
        except CorruptShard as exc:
            raise errors.found_in(text_uri, exc) from None
        except StorageError as exc:
            errors.found.append(exc)
            raise

    def read_one(uri: Any, compression: Any, record_format: Any) -> Any:
        return tf.data.Dataset.from_generator(
            generate,
            args=(uri, compression, record_format),
            output_signature=tf.TensorSpec(shape=(None,), dtype=tf.string),
        )

    files = tf.data.Dataset.from_tensor_slices(
        (list(uris), list(compressions), list(record_formats))
    )
    if shuffle_files:
        files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
    return _whole_files(files, read_one, ahead, _AHEAD_BATCHES).unbatch()


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
        self.found: list[StorageError] = []  # from the fsspec readers, in this process
        #: errors that reached an iterator: a reader started before the last one stops (its
        #: iteration is over) at its next batch instead of reading on in TensorFlow's threads
        self.failures = 0
        self._reading = 0  # readers inside a read (TensorFlow's threads), see reading()
        self.settling = False  # an error is on its way to the caller: readers stop
        self._idle = threading.Condition()

    def named(self, shard: Shard, detail: str, offset: Any, compressed_offset: Any) -> CorruptShard:
        where = f"offset {offset}" if offset is not None else "an unknown offset"
        if compressed_offset is not None:
            where += f" (compressed offset {compressed_offset})"
        return CorruptShard(
            f"{self.version}: shard {shard.name} of split {self.split!r} is corrupt at {where}: "
            f"{detail} ({shard.uri})",
            version=self.version,
            split=self.split,
            shard=shard.name,
            uri=shard.uri,
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

    def found_in(self, uri: str, exc: CorruptShard) -> CorruptShard:
        """The engine's error while reading ``uri``, naming its shard; remembered."""
        shard = next(s for s in self.shards if s.uri == uri)
        error = self.named(
            shard, exc.detail, exc.extra.get("offset"), exc.extra.get("compressed_offset")
        )
        self.found.append(error)
        return error

    def translate(self, exc: Exception) -> StorageError | None:
        """The :class:`CorruptShard` (or other :class:`StorageError` of an fsspec reader)
        behind TensorFlow's ``exc``, or None if it is not one."""
        import tensorflow as tf

        self.failures += 1
        self.settle()
        if self.found:  # the first error of this iteration; a later one starts afresh
            error = self.found[0]
            self.found.clear()
            return error
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


_Translate = Callable[[Exception], StorageError | None]
_TYPED: dict[str, type] = {}


def _with_typed_errors(dataset: Any, translate: _Translate) -> Any:
    """``dataset``, whose Python iteration (and that of datasets made from it) raises
    :class:`CorruptShard` where TensorFlow would raise its own error for a corrupt shard."""
    cls = _TYPED.get("dataset") or _typed_dataset_class()
    return cls(dataset, translate)


def _typed_dataset_class() -> type:
    """An identity ``tf.data.Dataset`` translating errors (built once TensorFlow is loaded)."""
    import tensorflow as tf
    from tensorflow.python.data.ops import dataset_ops, iterator_ops

    class TypedErrors(iterator_ops.OwnedIterator):
        """An iterator raising the translation of TensorFlow's errors.  A real
        ``OwnedIterator``, so Keras and ``tf.function`` take it as TensorFlow's own (inside a
        traced function it is TensorFlow's: there the error stays TensorFlow's)."""

        def __init__(self, dataset: Any, translate: _Translate) -> None:
            self._translate = translate
            super().__init__(dataset=dataset)

        def __next__(self) -> Any:
            try:
                return super().__next__()
            except tf.errors.OpError as exc:
                error = self._translate(exc)
                if error is None:
                    raise
                raise error from exc

    class TypedErrorsDataset(dataset_ops.UnaryUnchangedStructureDataset):
        """The same elements as ``input_dataset``; see :func:`_with_typed_errors`."""

        def __init__(self, input_dataset: Any, translate: _Translate) -> None:
            self._translate = translate
            super().__init__(input_dataset, input_dataset._variant_tensor)

        def __iter__(self) -> Any:
            if tf.executing_eagerly() or tf.inside_function():
                return TypedErrors(self, self._translate)
            return super().__iter__()  # graph mode: TensorFlow says why it cannot

    def keeps_translating(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = method(self, *args, **kwargs)
            if isinstance(result, tf.data.Dataset) and not isinstance(result, TypedErrorsDataset):
                return TypedErrorsDataset(result, self._translate)
            return result

        wrapper.__name__ = name
        wrapper.__doc__ = method.__doc__
        return wrapper

    for name, attr in vars(dataset_ops.DatasetV2).items():
        if name.startswith("_") or not inspect.isfunction(attr):
            continue  # private, static, class methods and properties stay as they are
        setattr(TypedErrorsDataset, name, keeps_translating(name, attr))
    _TYPED["dataset"] = TypedErrorsDataset
    return TypedErrorsDataset

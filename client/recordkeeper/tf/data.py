"""``tf.data`` pipelines over a version's shards, on TensorFlow 2.21 without tensorflow-io.

* ``file://`` shards (and ``gs://`` on real GCS) are read by TensorFlow's own
  ``tf.data.TFRecordDataset``, the fastest path.
* ``s3://`` left TensorFlow core in 2.6 and tensorflow-io no longer loads on TF ≥ 2.18, and
  TF's GCS client does not speak to emulators (``STORAGE_EMULATOR_HOST``); those shards — and any
  other fsspec backend — are read through fsspec inside the pipeline: one generator per shard
  using the shard format's ``iter_records`` (:mod:`recordkeeper.formats`; for TFRecord it
  checks every record's CRC), shards interleaved in parallel with ``num_parallel_calls=AUTOTUNE``
  and a deterministic order.
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
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.core.errors import CorruptShard, StorageError
from recordkeeper.storage import open_read, profile_of, storage_errors

if TYPE_CHECKING:
    from recordkeeper.models import DatasetVersion, Shard

__all__ = ["read_shard_batches", "tf_dataset"]

_BATCH = 256
_TF_COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


def read_shard_batches(
    uri: str,
    compression: str,
    storage_options: Mapping[str, Any] | None = None,
    stop: Callable[[], bool] | None = None,
    format: str = "tfrecord",
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
            with open_read(uri, storage_options) as fh, storage_errors(uri):
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
) -> Any:
    """A ``tf.data.Dataset`` of the serialized records of ``version``'s ``split``.

    ``verify`` checks the split's shards first (``"fast"``: storage identity, ``"deep"``:
    re-hash everything, ``None``: skip) and raises
    :class:`~recordkeeper.errors.CorruptShard` naming the bad shards.  ``shuffle_files``
    shuffles the shard order each epoch (records within a shard keep their order).
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
    if verify is not None:
        version.verify(
            deep=verify == "deep", splits=[split], storage_options=options
        ).raise_for_problems()
    uris = [s.uri for s in shards]
    compressions = [s.compression for s in shards]
    record_formats = [s.format for s in shards]
    cycle = num_parallel_reads or min(len(uris), 8)
    natives = [_native(u, dict(options or {})) for u in uris]
    errors = _ShardErrors(version.name, split, shards, options)
    tfrecords = all(f == "tfrecord" for f in record_formats)
    if tfrecords and all(n is not None for n in natives) and len(set(compressions)) == 1:
        files = tf.data.Dataset.from_tensor_slices([n for n in natives if n is not None])
        if shuffle_files:
            files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
        comp = _TF_COMPRESSION[compressions[0]]
        dataset = files.interleave(
            lambda path: tf.data.TFRecordDataset(path, compression_type=comp),
            cycle_length=cycle,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return _with_typed_errors(dataset, errors.translate)

    opts = dict(options or {})

    def generate(uri: Any, compression: Any, record_format: Any) -> Iterator[list[bytes]]:
        text_uri = uri.decode() if isinstance(uri, bytes) else str(uri)
        text_comp = compression.decode() if isinstance(compression, bytes) else str(compression)
        text_format = (
            record_format.decode() if isinstance(record_format, bytes) else str(record_format)
        )
        failures = errors.failures

        def stop() -> bool:  # an error ended the iteration this reader belongs to
            return errors.failures != failures or errors.settling

        batches = read_shard_batches(text_uri, text_comp, opts, stop, text_format)
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
        batches = tf.data.Dataset.from_generator(
            generate,
            args=(uri, compression, record_format),
            output_signature=tf.TensorSpec(shape=(None,), dtype=tf.string),
        )
        return batches.unbatch()

    files = tf.data.Dataset.from_tensor_slices((uris, compressions, record_formats))
    if shuffle_files:
        files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
    dataset = files.interleave(
        read_one,
        cycle_length=cycle,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return _with_typed_errors(dataset, errors.translate)


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

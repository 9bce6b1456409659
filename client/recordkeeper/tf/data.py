"""``tf.data`` pipelines over a version's shards, on TensorFlow 2.21 without tensorflow-io.

* ``file://`` shards (and ``gs://`` on real GCS) are read by TensorFlow's own
  ``tf.data.TFRecordDataset``, the fastest path.
* ``s3://`` left TensorFlow core in 2.6 and tensorflow-io no longer loads on TF ≥ 2.18, and
  TF's GCS client does not speak to emulators (``STORAGE_EMULATOR_HOST``); those shards — and any
  other fsspec backend — are read through fsspec inside the pipeline: one generator per shard
  using :func:`recordkeeper.tfrecord.iter_records` (which checks every record's CRC), shards
  interleaved in parallel with ``num_parallel_calls=AUTOTUNE`` and a deterministic order.

Either way the elements are serialized records (``tf.string`` scalars), ready for
``tf.io.parse_example(batch, version.feature_spec())``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.storage import backend_of, open_read

if TYPE_CHECKING:
    from recordkeeper.models import DatasetVersion

__all__ = ["read_shard_batches", "tf_dataset"]

_BATCH = 256
_TF_COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}


def read_shard_batches(
    uri: str, compression: str, storage_options: Mapping[str, Any] | None = None
) -> Iterator[list[bytes]]:
    """Yield the records of one shard in lists of up to 256, read through fsspec."""
    from recordkeeper.tfrecord import iter_records

    with open_read(uri, storage_options) as fh:
        batch: list[bytes] = []
        for record in iter_records(fh, compression):
            batch.append(bytes(record))
            if len(batch) >= _BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


def _native(uri: str, options: Mapping[str, Any]) -> str | None:
    """The path TensorFlow can open itself, or ``None`` when fsspec must read it."""
    backend = backend_of(uri)
    if backend == "file":
        return uri[len("file://") :] if uri.startswith("file://") else uri
    emulated = os.environ.get("STORAGE_EMULATOR_HOST") or options.get("endpoint_url")
    if backend == "gcs" and not emulated and not options.get("token"):
        return uri  # real GCS with ambient credentials: TensorFlow's own client
    return None


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
    cycle = num_parallel_reads or min(len(uris), 8)
    natives = [_native(u, dict(options or {})) for u in uris]
    if all(n is not None for n in natives) and len(set(compressions)) == 1:
        files = tf.data.Dataset.from_tensor_slices([n for n in natives if n is not None])
        if shuffle_files:
            files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
        comp = _TF_COMPRESSION[compressions[0]]
        return files.interleave(
            lambda path: tf.data.TFRecordDataset(path, compression_type=comp),
            cycle_length=cycle,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )

    opts = dict(options or {})

    def generate(uri: Any, compression: Any) -> Iterator[list[bytes]]:
        text_uri = uri.decode() if isinstance(uri, bytes) else str(uri)
        text_comp = compression.decode() if isinstance(compression, bytes) else str(compression)
        yield from read_shard_batches(text_uri, text_comp, opts)

    def read_one(uri: Any, compression: Any) -> Any:
        batches = tf.data.Dataset.from_generator(
            generate,
            args=(uri, compression),
            output_signature=tf.TensorSpec(shape=(None,), dtype=tf.string),
        )
        return batches.unbatch()

    files = tf.data.Dataset.from_tensor_slices((uris, compressions))
    if shuffle_files:
        files = files.shuffle(len(uris), seed=seed, reshuffle_each_iteration=True)
    return files.interleave(
        read_one,
        cycle_length=cycle,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )

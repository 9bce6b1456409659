"""Read-time corruption through ``tf_dataset`` is typed and named (issue 9, point 6).

Real TensorFlow, a real service over a socket, shards on local disk.  A shard is published
intact and damaged afterwards; ``verify=None`` lets the pipeline meet the damage.  The dataset
is a plain ``tf.data.Dataset`` (public APIs only, issue 23 item 6): its errors are TensorFlow's,
and ``rk.tf.typed_errors()`` makes them ``CorruptShard`` naming the shard.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
import recordkeeper.tf
from tests.client._records import frame, sample_examples
from tests.integration.conftest import LiveService

RECORDS = [sample_examples(40, i * 40) for i in range(3)]


def gzip_with_a_bad_block(records: list[bytes], good: int) -> tuple[bytes, int]:
    """A gzip stream of ``records`` whose deflate data breaks after the first ``good`` ones;
    and the compressed offset of the break."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = compressor.compress(frame(records[:good])) + compressor.flush(zlib.Z_FULL_FLUSH)
    rest = compressor.compress(frame(records[good:])) + compressor.flush()
    return first + b"\xff" * 8 + rest, len(first)


def publish(service: LiveService, raw: Path, layout: dict[str, bytes]) -> rk.DatasetVersion:
    raw.mkdir(parents=True)
    for name, data in layout.items():
        (raw / name).write_bytes(data)
    client = service.client()
    return client.publish(rk.Dataset.from_directory(raw, name="damaged"), progress=False)


def read_all(dataset: Any) -> list[bytes]:
    import recordkeeper.tf

    with recordkeeper.tf.typed_errors():
        return [t.numpy() for t in dataset]


def test_a_corrupt_record_in_tensorflows_own_reader_names_the_shard(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    layout = {f"train-{i:05d}-of-00003.tfrecord": frame(RECORDS[i]) for i in range(3)}
    v = publish(live_service, data_dir / "raw", layout)
    victim = data_dir / "raw" / "train-00001-of-00003.tfrecord"
    data = bytearray(victim.read_bytes())
    bad = 25
    offset = len(frame(RECORDS[1][:bad]))
    data[offset + 20] ^= 0x01  # inside the data of record 25
    victim.write_bytes(bytes(data))

    with pytest.raises(rk.CorruptShard) as err:
        read_all(v.tf_dataset("train", verify=None, num_parallel_reads=1))
    assert err.value.extra["shard"] == "train-00001-of-00003"
    assert err.value.extra["offset"] == offset
    assert "train-00001-of-00003" in err.value.detail and f"offset {offset}" in err.value.detail
    # datasets made from it translate too
    pipeline = v.tf_dataset("train", verify=None).map(tensorflow.strings.length).batch(7)
    with pytest.raises(rk.CorruptShard) as again:
        read_all(pipeline)
    assert again.value.extra["shard"] == "train-00001-of-00003"
    # deep verification reports the same offset
    (problem,) = v.verify(deep=True).problems
    assert (problem.shard.name, problem.reason, problem.offset) == (
        "train-00001-of-00003",
        "corrupt",
        offset,
    )


def test_a_corrupt_gzip_shard_names_both_offsets(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    layout = {
        f"train-{i:05d}-of-00003.tfrecord.gz": zlib.compress(frame(RECORDS[i]), wbits=31)
        for i in range(3)
    }
    v = publish(live_service, data_dir / "raw", layout)
    broken, compressed_offset = gzip_with_a_bad_block(RECORDS[2], 30)
    (data_dir / "raw" / "train-00002-of-00003.tfrecord.gz").write_bytes(broken)
    offset = len(frame(RECORDS[2][:30]))

    with pytest.raises(rk.CorruptShard) as err:
        read_all(v.tf_dataset("train", verify=None, num_parallel_reads=1))
    extra = err.value.extra
    assert extra["shard"] == "train-00002-of-00003"
    assert (extra["offset"], extra["compressed_offset"]) == (offset, compressed_offset)
    assert f"compressed offset {compressed_offset}" in err.value.detail
    (problem,) = v.verify(deep=True).problems
    assert (problem.offset, problem.compressed_offset) == (offset, compressed_offset)
    assert problem.offset != 0  # not "uncompressed offset 0" any more


def test_a_mixed_compression_split_raises_corrupt_shard_not_unknown_error(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    layout = {
        "train-00000-of-00003.tfrecord": frame(RECORDS[0]),
        "train-00001-of-00003.tfrecord.gz": zlib.compress(frame(RECORDS[1]), wbits=31),
        "train-00002-of-00003.tfrecord.zz": zlib.compress(frame(RECORDS[2])),
    }
    v = publish(live_service, data_dir / "raw", layout)
    assert {s.compression for s in v.splits["train"].shards} == {"none", "gzip", "zlib"}
    broken, compressed_offset = gzip_with_a_bad_block(RECORDS[1], 12)
    (data_dir / "raw" / "train-00001-of-00003.tfrecord.gz").write_bytes(broken)

    got: list[bytes] = []
    dataset = v.tf_dataset("train", verify=None, num_parallel_reads=1)
    with pytest.raises(rk.CorruptShard) as err, rk.tf.typed_errors(dataset):
        for tensor in dataset:
            got.append(tensor.numpy())
    assert not isinstance(err.value, tensorflow.errors.OpError)
    assert isinstance(err.value.__cause__, tensorflow.errors.OpError)
    extra = err.value.extra
    assert extra["shard"] == "train-00001-of-00003"
    assert (extra["offset"], extra["compressed_offset"]) == (
        len(frame(RECORDS[1][:12])),
        compressed_offset,
    )
    assert got[: len(RECORDS[0])] == RECORDS[0]  # the shard before it was read through


def test_an_intact_split_reads_as_before(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    layout = {f"train-{i:05d}-of-00003.tfrecord": frame(RECORDS[i]) for i in range(3)}
    v = publish(live_service, data_dir / "raw", layout)
    dataset = v.tf_dataset("train", verify="deep", num_parallel_reads=1)
    assert isinstance(dataset, tensorflow.data.Dataset)
    assert read_all(dataset) == [r for shard in RECORDS for r in shard]
    batches = read_all(dataset.batch(16).map(tensorflow.strings.length))
    assert sum(len(b) for b in batches) == 120


@pytest.mark.parametrize("compressions", [("", "", ""), ("", ".gz", "")])
def test_keras_fit_trains_on_the_typed_dataset(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType, compressions: tuple[str, ...]
) -> None:
    """Keras takes the dataset's iterator as TensorFlow's own: ``fit`` sees every batch, on
    TensorFlow's reader (one compression) and on the fsspec reader (mixed)."""
    import gzip

    tf = tensorflow
    layout = {
        f"train-{i:05d}-of-00003.tfrecord{suffix}": (
            gzip.compress(frame(RECORDS[i])) if suffix else frame(RECORDS[i])
        )
        for i, suffix in enumerate(compressions)
    }
    v = publish(live_service, data_dir / "raw", layout)
    lengths = v.tf_dataset("train").map(lambda r: (tf.cast(tf.strings.length(r), tf.float32),))
    pairs = lengths.map(lambda x: (tf.reshape(x, [1]), tf.reshape(x, [1]))).batch(8)
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    seen: list[int] = []
    count = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: seen.append(1))
    history = model.fit(pairs, epochs=2, verbose=0, callbacks=[count])
    assert len(history.history["loss"]) == 2
    records = sum(len(shard) for shard in RECORDS)
    assert len(seen) >= 2 * (records // 8)  # every full batch of both epochs was trained on


def test_outside_typed_errors_the_errors_are_tensorflows_and_name_the_shard_where_they_can(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    """Without the context manager: TensorFlow's own reader raises its ``DataLossError`` (a
    split mixing compressions too: each file is read with its own); inside it, the deep check
    names the shard and both offsets."""
    layout = {
        "train-00000-of-00002.tfrecord": frame(RECORDS[0]),
        "train-00001-of-00002.tfrecord.gz": zlib.compress(frame(RECORDS[1]), wbits=31),
    }
    v = publish(live_service, data_dir / "raw", layout)
    broken, compressed_offset = gzip_with_a_bad_block(RECORDS[1], 12)
    (data_dir / "raw" / "train-00001-of-00002.tfrecord.gz").write_bytes(broken)
    mixed = v.tf_dataset("train", verify=None, num_parallel_reads=1)
    with pytest.raises(tensorflow.errors.DataLossError):
        list(mixed)
    with pytest.raises(rk.CorruptShard) as named, rk.tf.typed_errors(mixed):
        list(mixed)
    assert named.value.extra["shard"] == "train-00001-of-00002"
    assert named.value.extra["compressed_offset"] == compressed_offset

    plain = {f"train-{i:05d}-of-00002.tfrecord": frame(RECORDS[i + 1]) for i in range(2)}
    w = publish(live_service, data_dir / "raw2", plain)
    victim = data_dir / "raw2" / "train-00001-of-00002.tfrecord"
    data = bytearray(victim.read_bytes())
    data[len(frame(RECORDS[2][:5])) + 20] ^= 0x01
    victim.write_bytes(bytes(data))
    dataset = w.tf_dataset("train", verify=None)
    with pytest.raises(tensorflow.errors.DataLossError):
        list(dataset)
    with pytest.raises(TypeError):
        rk.tf.typed_errors(dataset.batch(2))  # only the datasets tf_dataset returned
    with pytest.raises(rk.CorruptShard) as typed, rk.tf.typed_errors(dataset):
        list(dataset.batch(4))
    assert typed.value.extra["shard"] == "train-00001-of-00002"


def test_keras_fit_inside_typed_errors_names_the_corrupt_shard(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    """Inside ``typed_errors`` even Keras ``fit`` (which iterates in a ``tf.function``) ends
    with ``CorruptShard``."""
    tf = tensorflow
    layout = {f"train-{i:05d}-of-00003.tfrecord": frame(RECORDS[i]) for i in range(3)}
    v = publish(live_service, data_dir / "raw", layout)
    victim = data_dir / "raw" / "train-00002-of-00003.tfrecord"
    data = bytearray(victim.read_bytes())
    data[len(frame(RECORDS[2][:10])) + 20] ^= 0x01
    victim.write_bytes(bytes(data))
    lengths = v.tf_dataset("train", verify=None).map(
        lambda r: (tf.cast(tf.strings.length(r), tf.float32),)
    )
    pairs = lengths.map(lambda x: (tf.reshape(x, [1]), tf.reshape(x, [1]))).batch(8)
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(rk.CorruptShard) as err, rk.tf.typed_errors():
        model.fit(pairs, epochs=1, verbose=0)
    assert err.value.extra["shard"] == "train-00002-of-00003"

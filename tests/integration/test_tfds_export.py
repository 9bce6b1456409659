"""Exporting a version as a TFDS dataset, read back with the real ``tensorflow-datasets``.

A version is written (local store, S3 on SeaweedFS, GCS on fake-gcs-server), exported with
``v.export_tfds`` / ``recordkeeper export-tfds``, and read with ``tfds.builder_from_directory`` and
``tfds.load(name, data_dir=...)``: every record must come back with the registry's splits,
shard order and shard lengths, and the exported files must be the registered records byte for
byte.  The export is then published again with ``Dataset.from_tfds`` (the reverse import):
same content digest.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.errors import UnsupportedFormat
from tests.client._records import example_bytes
from tests.integration.conftest import LiveService
from tests.servers.plugin import skip_or_fail

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def tfds(tensorflow: ModuleType) -> ModuleType:
    try:
        import tensorflow_datasets
    except ImportError as exc:
        skip_or_fail(f"tensorflow-datasets UNAVAILABLE: {exc}")
    return tensorflow_datasets


def record(i: int) -> bytes:
    """An Example with every mapping: a scalar, a fixed list, a variable list, an optional
    feature, bytes, and a name with a slash."""
    features: dict[str, Any] = {
        "label": [i % 10],
        "embedding": [i / 4.0, -1.5, 2.0],
        "tokens": [b"t%d" % k for k in range(i % 4)],
        "image": [b"img-%d" % i],
        "meta/id": [1000 + i],
    }
    if i % 3 == 0:
        features["weight"] = [0.5 * i]
    if not features["tokens"]:
        del features["tokens"]  # absent, not an empty list
    return example_bytes(features)


def expected(i: int) -> dict[str, Any]:
    return {
        "label": i % 10,
        "embedding": [i / 4.0, -1.5, 2.0],
        "tokens": [b"t%d" % k for k in range(i % 4)],
        "image": b"img-%d" % i,
        "meta/id": 1000 + i,
        "weight": [0.5 * i] if i % 3 == 0 else [],
    }


def as_python(example: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in example.items():
        value = value.numpy() if hasattr(value, "numpy") else value
        out[key] = value.tolist() if hasattr(value, "tolist") else value
    return out


def write_version(
    client: rk.Client, name: str, tests: int = 15, **writer: Any
) -> rk.DatasetVersion:
    with client.writer(name, shard_size="2kB", **writer) as w:
        for i in range(60):
            w.write(record(i), split="train")
        for i in range(100, 100 + tests):
            w.write(record(i), split="test")
    return client.resolve(f"{name}@latest")


def check_readable(tfds: ModuleType, version: rk.DatasetVersion, export: Any) -> None:
    """Both TFDS entry points read the export: splits, shard lengths, every record."""
    builder = tfds.builder_from_directory(export.builder_dir)
    info = builder.info
    assert info.name == export.tfds_name and str(info.version) == export.tfds_version
    for split in version.splits.values():
        registered = [s.record_count for s in split.shards]
        assert list(info.splits[split.name].shard_lengths) == registered
        assert info.splits[split.name].num_examples == split.record_count
    assert info.metadata["recordkeeper"]["content_digest"] == version.content_digest
    features = info.features
    assert features["label"].shape == () and features["embedding"].shape == (3,)
    assert features["tokens"].shape == (None,) and features["weight"].shape == (None,)
    # TFDS interleaves its files: compare in record order (meta/id)
    got = sorted((as_python(x) for x in builder.as_dataset(split="train")), key=_id)
    assert got == [_close(expected(i)) for i in range(60)]
    loaded = tfds.load(export.tfds_name, data_dir=export.data_dir, split="test")
    assert sorted((as_python(x) for x in loaded), key=_id) == [
        _close(expected(i)) for i in range(100, 115)
    ]
    # the files are the registered records, byte for byte, in shard order
    import tensorflow as tf

    for split in version.splits.values():
        files = sorted(p for p in os.listdir(export.builder_dir) if f"-{split.name}.tfrecord-" in p)
        assert files == [
            f"{export.tfds_name}-{split.name}.tfrecord-{i:05d}-of-{split.shard_count:05d}"
            for i in range(split.shard_count)
        ]
        raw = [
            t.numpy()
            for t in tf.data.TFRecordDataset([os.path.join(export.builder_dir, f) for f in files])
        ]
        assert raw == [t.numpy() for t in version.tf_dataset(split.name, num_parallel_reads=1)]


def _id(example: dict[str, Any]) -> int:
    return int(example["meta/id"])


def _close(values: dict[str, Any]) -> dict[str, Any]:
    """The float32 values TFDS answers for the Python floats written."""
    import numpy as np

    out = dict(values)
    out["embedding"] = np.float32(values["embedding"]).tolist()
    out["weight"] = np.float32(values["weight"]).tolist()
    return out


def test_export_local_links_and_reads_back(
    live_service: LiveService, tmp_path: Path, tfds: ModuleType
) -> None:
    client = live_service.client()
    v = write_version(client, "tfds-demo")
    assert v.splits["train"].shard_count > 2
    out = tmp_path / "tensorflow_datasets"
    export = v.export_tfds(out, progress=False)
    assert (export.tfds_name, export.tfds_version) == ("tfds_demo", f"{v.number}.0.0")
    assert export.builder_dir == str(out / "tfds_demo" / f"{v.number}.0.0")
    assert {s.method for s in export.shards} == {"link"}  # same filesystem: hard links
    first = export.shards[0]
    assert os.stat(first.path).st_ino == os.stat(v.shards[0].uri[len("file://") :]).st_ino
    assert export.features["tokens"] == {"dtype": "string", "shape": [None], "feature": "Tensor"}
    assert export.features["embedding"] == {"dtype": "float32", "shape": [3], "feature": "Tensor"}
    check_readable(tfds, v, export)
    assert not [p for p in os.listdir(out / "tfds_demo") if p.startswith(".")]  # no staging left

    # again: the directory already holds this export, nothing is read
    again = v.export_tfds(out, progress=False)
    assert again.existing and again.bytes_read == 0 and again.builder_dir == export.builder_dir
    # another version at the same TFDS version is refused, the first export untouched
    v2 = write_version(client, "tfds-demo", tests=16)
    with pytest.raises(rk.UnsafeStoragePath, match="already exists") as info:
        v2.export_tfds(out, tfds_version=export.tfds_version, progress=False)
    assert info.value.extra["reason"] == "exists"
    newer = v2.export_tfds(out, link=False, progress=False)
    assert {s.method for s in newer.shards} == {"copy"}
    assert tfds.builder("tfds_demo", data_dir=str(out)).info.version == newer.tfds_version


def test_round_trip_through_the_tfds_import(
    live_service: LiveService, data_dir: Path, tfds: ModuleType
) -> None:
    """Gzip shards are written uncompressed (TFDS reads plain TFRecord); publishing the export
    in place (data_dir is an allowed root) with Dataset.from_tfds gives the same content
    digest."""
    client = live_service.client()
    v = write_version(client, "roundtrip", compression="gzip")
    export = v.export_tfds(data_dir / "tfds", name="rt", tfds_version="1.2.3", progress=False)
    assert export.load_name == "rt:1.2.3"
    assert {s.method for s in export.shards} == {"decompress"}
    check_readable(tfds, v, export)
    ds = rk.Dataset.from_tfds(export.builder_dir, name="roundtrip")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = client.publish(ds, progress=False)
    assert again.name == v.name  # identical content: the existing version
    assert any(issubclass(w.category, rk.DuplicateWarning) for w in caught)
    copy = client.publish(ds, force_new=True, progress=False)
    assert copy.content_digest == v.content_digest and copy.name != v.name


def test_what_cannot_be_mapped_says_why(
    live_service: LiveService, tmp_path: Path, tfds: ModuleType
) -> None:
    client = live_service.client()
    with client.writer("opaque") as w:
        w.write(b"not an example proto \xff\xff")
    v = client.resolve("opaque@latest")
    with pytest.raises(UnsupportedFormat) as info:
        v.export_tfds(tmp_path / "tfds", progress=False)
    assert info.value.code == "unsupported_format"
    assert info.value.extra == {"format": "tfds", "reason": "opaque_records"}

    import tensorflow as tf

    seq = tf.train.SequenceExample()
    seq.context.feature["id"].int64_list.value.append(1)
    seq.feature_lists.feature_list["frames"].feature.add().float_list.value.extend([1.0, 2.0])
    with client.writer("sequences") as w:
        w.write(seq.SerializeToString())
    v = client.resolve("sequences@latest")
    with pytest.raises(UnsupportedFormat, match="SequenceExample") as info:
        v.export_tfds(tmp_path / "tfds", progress=False)
    assert info.value.extra["reason"] == "sequence_example"
    assert info.value.extra["features"] == ["frames"]

    v = write_version(client, "keys")
    with pytest.raises(UnsupportedFormat, match="supervised_keys") as info:
        v.export_tfds(tmp_path / "tfds", supervised_keys=("image", "lable"), progress=False)
    assert info.value.extra["reason"] == "supervised_keys"
    with pytest.raises(rk.InvalidVersionName, match=r"X\.Y\.Z"):
        v.export_tfds(tmp_path / "tfds", tfds_version="3", progress=False)
    with pytest.raises(rk.InvalidName, match="TFDS dataset name"):
        v.export_tfds(tmp_path / "tfds", name="my-data", progress=False)
    assert not (tmp_path / "tfds").exists()  # refused before anything was written
    export = v.export_tfds(tmp_path / "tfds", supervised_keys=("image", "label"), progress=False)
    pair = next(
        iter(tfds.load("keys", data_dir=str(tmp_path / "tfds"), split="train", as_supervised=True))
    )
    assert pair[0].numpy() == b"img-0" and pair[1].numpy() == 0
    assert export.builder_dir.endswith(f"keys/{v.number}.0.0")


def test_tfds_features_of_your_choice(
    live_service: LiveService, tmp_path: Path, tfds: ModuleType
) -> None:
    """features= describes a feature with a TFDS feature (an Image decoded from PNG bytes, a
    ClassLabel with names), once the records are checked to fit it."""
    import numpy as np
    import tensorflow as tf

    client = live_service.client()
    pixels = [
        tf.constant([[[i, 0, 0], [0, i, 0]], [[0, 0, i], [i, i, i]]], tf.uint8) for i in range(12)
    ]
    with client.writer("pets") as w:
        for i, image in enumerate(pixels):
            png = tf.io.encode_png(image).numpy()
            w.write(example_bytes({"image": [png], "label": [i % 3], "box": [0.1, 0.2, 0.3, 0.4]}))
    v = client.resolve("pets@latest")
    names = ["cat", "dog", "fish"]
    export = v.export_tfds(
        tmp_path / "tfds",
        features={
            "image": tfds.features.Image(shape=(2, 2, 3)),
            "label": tfds.features.ClassLabel(names=names),
        },
        supervised_keys=("image", "label"),
        progress=False,
    )
    assert export.features["image"] == {"dtype": "string", "shape": [], "feature": "Image"}
    assert export.features["label"]["feature"] == "ClassLabel"
    builder = tfds.builder_from_directory(export.builder_dir)
    assert builder.info.features["label"].names == names
    got = sorted(
        ((x["label"].numpy(), x["image"].numpy().tolist()) for x in builder.as_dataset("train")),
        key=lambda pair: pair[1][0][0][0],
    )
    assert got == [(i % 3, pixels[i].numpy().tolist()) for i in range(12)]
    image, _ = next(iter(builder.as_dataset("train", as_supervised=True)))
    assert image.shape == (2, 2, 3) and image.dtype == tf.uint8

    for bad, why in [
        ({"box": tfds.features.Tensor(shape=(2,), dtype=np.float32)}, r"needs 2 value\(s\)"),
        (
            {"label": tfds.features.Image()},
            "stored as bytes values, the records carry 'label' as int64",
        ),
        ({"bbox": tfds.features.Image()}, "do not have"),
    ]:
        with pytest.raises(UnsupportedFormat, match=why) as info:
            v.export_tfds(tmp_path / "other", features=bad, progress=False)
        assert info.value.extra["reason"] == "feature_override"
    assert not (tmp_path / "other").exists()


def test_a_damaged_shard_is_not_exported(
    live_service: LiveService, tmp_path: Path, tfds: ModuleType
) -> None:
    client = live_service.client()
    v = write_version(client, "damaged")
    victim = v.splits["train"].shards[1]
    path = Path(victim.uri[len("file://") :])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, other bytes
    path.write_bytes(bytes(data))
    out = tmp_path / "tfds"
    for link in (None, False):
        with pytest.raises(rk.CorruptShard, match=victim.name) as info:
            v.export_tfds(out, link=link, progress=False)
        assert info.value.extra["reason"] == "checksum_mismatch"
        assert info.value.extra["uri"] == victim.uri
        assert os.listdir(out / "damaged") == []  # no builder dir, no staging dir left


def test_name_tfds_already_uses_is_noted(
    live_service: LiveService, tmp_path: Path, tfds: ModuleType
) -> None:
    client = live_service.client()
    v = write_version(client, "mnist")
    export = v.export_tfds(tmp_path / "tfds", progress=False)
    assert any("TFDS has a dataset of its own" in n for n in export.notes)
    loaded = tfds.load(export.load_name, data_dir=export.data_dir, split="test")
    assert len(list(loaded)) == 15


def test_cli_export_tfds(live_service: LiveService, tmp_path: Path, tfds: ModuleType) -> None:
    client = live_service.client()
    v = write_version(client, "clitfds")
    runner = CliRunner()
    out = tmp_path / "tfds"
    base = ["--url", live_service.url]
    r = runner.invoke(app, [*base, "export-tfds", "clitfds@latest", str(out), "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert body["version"] == v.name and body["load_name"] == f"clitfds:{v.number}.0.0"
    assert body["methods"] == {"link": v.shard_count}
    assert body["splits"]["test"] == [s.record_count for s in v.splits["test"].shards]
    r = runner.invoke(app, [*base, "export-tfds", "clitfds@latest", str(out)])
    assert r.exit_code == 0 and "already exported" in r.stdout
    r = runner.invoke(
        app, [*base, "export-tfds", "clitfds@latest", str(out), "--name", "x-y", "--json"]
    )
    assert r.exit_code == 1
    assert json.loads(r.stderr)["code"] == "invalid_dataset_name"
    r = runner.invoke(app, [*base, "export-tfds", "clitfds@v99", str(out)])
    assert r.exit_code == 3 and "[version_not_found]" in r.stderr
    r = runner.invoke(
        app,
        [
            *base,
            "export-tfds",
            "clitfds@latest",
            str(out),
            "--name",
            "sup",
            "--copy",
            "--supervised",
            "image,label",
            "--tfds-version",
            "0.1.0",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert body["methods"] == {"copy": v.shard_count} and body["load_name"] == "sup:0.1.0"
    assert tfds.builder_from_directory(body["builder_dir"]).info.supervised_keys == (
        "image",
        "label",
    )
    r = runner.invoke(app, [*base, "export-tfds", "clitfds@latest", str(out), "--supervised", "x"])
    assert r.exit_code == 2  # usage


@pytest.mark.s3
def test_export_from_s3(
    live_service_factory: Callable[..., LiveService],
    s3_server: Any,
    s3_bucket: str,
    tmp_path: Path,
    tfds: ModuleType,
) -> None:
    """Shards on S3 are copied to the local export (checked on the way) and read back."""
    opts = dict(s3_server.storage_options)
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    client = service.client(storage_options=opts)
    v = write_version(client, "s3tfds")
    assert v.shards[0].uri.startswith("s3://")
    export = v.export_tfds(tmp_path / "tfds", progress=False)
    assert {s.method for s in export.shards} == {"copy"}
    assert export.bytes_read == v.size
    check_readable(tfds, v, export)
    with pytest.raises(rk.StorageError, match="hard-linked") as info:
        v.export_tfds(tmp_path / "other", link=True, progress=False)
    assert info.value.extra["reason"] == "link"


@pytest.mark.gcs
def test_export_from_gcs(
    live_service_factory: Callable[..., LiveService],
    gcs_server: Any,
    gcs_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tfds: ModuleType,
) -> None:
    """GZIP shards on GCS are decompressed into the local export (checked against their
    records_sha256) and read back."""
    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    opts = dict(gcs_server.storage_options)
    service = live_service_factory(
        storage_root=f"{gcs_bucket}/datasets", allowed_roots=[gcs_bucket]
    )
    client = service.client(storage_options=opts)
    v = write_version(client, "gcstfds", compression="gzip")
    assert v.shards[0].uri.startswith("gs://") and v.shards[0].compression == "gzip"
    export = v.export_tfds(tmp_path / "tfds", progress=False)
    assert {s.method for s in export.shards} == {"decompress"}
    check_readable(tfds, v, export)

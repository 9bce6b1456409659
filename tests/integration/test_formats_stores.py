"""ArrayRecord and Riegeli shards on local disk, S3 (SeaweedFS) and GCS (fake-gcs-server),
against the service over a real socket: the writer (format="array_record"), publish in place of
files the array-record wheel wrote, deep verify of a damaged object, v.record(split, i) by
position, and tf.data (with TensorFlow)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
from tests.client._riegeli_files import build, simple
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService

array_record_module = pytest.importorskip("array_record.python.array_record_module")


def wheel_bytes(records: list[bytes], options: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.array_record"
        writer = array_record_module.ArrayRecordWriter(str(path), options)
        for record in records:
            writer.write(record)
        writer.close()
        return path.read_bytes()


@pytest.fixture(
    params=[
        "local",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gcs", marks=pytest.mark.gcs),
    ]
)
def store(
    request: pytest.FixtureRequest,
    live_service_factory: Callable[..., LiveService],
    tmp_path: Path,
) -> tuple[LiveService, str, dict[str, Any]]:
    """(service, a root shards may live under, storage options) for each store."""
    if request.param == "local":
        data = tmp_path / "data"
        data.mkdir()
        store_root = (tmp_path / "store").as_uri()
        (tmp_path / "store").mkdir()
        service = live_service_factory(
            storage_root=store_root, allowed_roots=[store_root, data.as_uri()]
        )
        return service, data.as_uri(), {}
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket")
        opts = dict(server.storage_options)
    else:
        server = request.getfixturevalue("gcs_server")
        monkeypatch = request.getfixturevalue("monkeypatch")
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        bucket = request.getfixturevalue("gcs_bucket")
        opts = dict(server.storage_options)
    service = live_service_factory(storage_root=f"{bucket}/datasets", allowed_roots=[bucket])
    return service, bucket, opts


def test_array_record_write_publish_verify_and_random_access(
    store: tuple[LiveService, str, dict[str, Any]],
) -> None:
    service, root, opts = store
    client = service.client(storage_options=opts)
    records = sc.sample_examples(200)
    with client.writer(
        "ar",
        root=f"{root}/datasets",
        shard_size="3KB",
        format="array_record",
        format_options={"group_size": 4},
    ) as w:
        for record in records:
            w.write(record)
    v = client.resolve("ar@latest")
    assert {s.format for s in v.shards} == {"array_record"} and len(v.shards) > 2
    assert v.verify(deep=True).ok and v.verify().ok
    assert [v.record("train", i) for i in (0, 57, 199)] == [records[0], records[57], records[-1]]
    # the same records as TFRecord: the same content digest
    with client.writer("tf", root=f"{root}/datasets", shard_size="3KB") as w:
        for record in records:
            w.write(record)
    assert w.version.content_digest == v.content_digest

    # files written elsewhere by the wheel, published in place
    raw = f"{root}/raw"
    parts = [records[:120], records[120:]]
    for i, part in enumerate(parts):
        sc.put_bytes(
            f"{raw}/train-{i:05d}-of-00002.array_record", wheel_bytes(part, "group_size:16"), opts
        )
    sc.put_bytes(f"{raw}/validation.riegeli", build([simple(records[:5], "brotli")]).data, opts)
    published = client.publish(
        rk.Dataset.from_directory(raw, name="pub", storage_options=opts), progress=False
    )
    assert published.splits["train"].record_count == 200
    assert [s.format for s in published.shards] == ["array_record", "array_record", "riegeli"]
    assert published.verify(deep=True).ok
    assert published.record("train", 130) == records[130]

    # damage one object: deep verify names it and the first bad offset
    uri = published.splits["train"].shards[1].uri
    data = bytearray(sc.get_bytes(uri, opts))
    data[64 + 2] ^= 1  # the first chunk's header hash
    sc.put_bytes(uri, bytes(data), opts)
    (problem,) = published.verify(deep=True).problems
    assert (problem.reason, problem.offset) == ("corrupt", 64)


@pytest.mark.tf
def test_tf_dataset_reads_array_record_and_riegeli(
    store: tuple[LiveService, str, dict[str, Any]], tensorflow: ModuleType
) -> None:
    service, root, opts = store
    client = service.client(storage_options=opts)
    records = sc.sample_examples(150)
    with client.writer("ar", root=f"{root}/datasets", shard_size="6KB", format="array_record") as w:
        for record in records:
            w.write(record)
    v = w.version
    serial = [t.numpy() for t in v.tf_dataset("train", verify="deep", num_parallel_reads=1)]
    assert serial == records
    batch = next(iter(v.tf_dataset("train", verify=None).batch(32)))
    parsed = tensorflow.io.parse_example(batch, v.feature_spec())
    assert parsed["label"].shape[0] == 32
    sc.put_bytes(f"{root}/rg/train.riegeli", build([simple(records[:9], "zstd")]).data, opts)
    rg = client.publish(
        rk.Dataset.from_directory(f"{root}/rg", name="rg", storage_options=opts), progress=False
    )
    assert [t.numpy() for t in rg.tf_dataset("train")] == records[:9]

"""The client end to end on local disk (file://) against the service over a real socket."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import recordkeeper as rk
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService


@pytest.fixture
def root(data_dir: Path) -> str:
    return data_dir.as_uri()


def test_publish_resolve_verify(live_service: LiveService, root: str) -> None:
    sc.publish_resolve_verify(live_service, root, {})


def test_writer_and_diff(live_service: LiveService, root: str) -> None:
    sc.writer_and_diff(live_service, root, {})


def test_copies_under_committed_names(live_service: LiveService, root: str) -> None:
    sc.copies_under_committed_names(live_service, root, {})


def test_writer_failure_cleans_up(live_service: LiveService, root: str) -> None:
    sc.writer_failure_cleans_up(live_service, root, {})


def test_bit_flip_keeping_size_and_mtime_found_only_by_deep(
    live_service: LiveService, root: str
) -> None:
    def overwrite_keeping_mtime(uri: str, data: bytes) -> None:
        path = uri[len("file://") :]
        st = os.stat(path)
        with open(path, "r+b") as fh:
            fh.write(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    sc.corruption_is_reported(live_service, root, {}, keep_mtime=overwrite_keeping_mtime)


def test_cli(live_service: LiveService, root: str) -> None:
    sc.cli_roundtrip(live_service, root, {})


def test_tf_dataset_reads_and_parses(
    live_service: LiveService, root: str, tensorflow: ModuleType
) -> None:
    sc.tf_dataset_parses(live_service, root, {}, tensorflow)


def test_tf_written_directory_publishes(
    live_service: LiveService, data_dir: Path, tensorflow: ModuleType
) -> None:
    """Files written by tf.io.TFRecordWriter (all three compressions) publish and read back."""
    tf = tensorflow
    records = {}
    layout = [
        ("", "train-00000-of-00003.tfrecord"),
        ("GZIP", "train-00001-of-00003.tfrecord"),
        ("ZLIB", "train-00002-of-00003.tfrecord"),
    ]
    for comp, name in layout:
        examples = [
            tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[i, i + 1])),
                        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"n%d" % i])),
                    }
                )
            ).SerializeToString()
            for i in range(20)
        ]
        with tf.io.TFRecordWriter(str(data_dir / name), options=comp or None) as writer:
            for ex in examples:
                writer.write(ex)
        records[name] = examples
    client = live_service.client()
    v = client.publish(rk.Dataset.from_directory(data_dir, name="tfw"), progress=False)
    assert [s.compression for s in v.splits["train"].shards] == ["none", "gzip", "zlib"]
    got = [t.numpy() for t in v.tf_dataset("train", verify="deep", num_parallel_reads=1)]
    assert got == [r for name in sorted(records) for r in records[name]]
    spec = v.feature_spec()
    parsed = tf.io.parse_example(next(iter(v.tf_dataset("train", verify=None).batch(60))), spec)
    assert parsed["x"].shape == (60, 2)


def test_wrong_service_url_is_clear(data_dir: Path) -> None:
    client = rk.Client("http://127.0.0.1:9", retries=0)
    with pytest.raises(rk.ServiceUnavailable, match=r"127\.0\.0\.1:9"):
        client.resolve("coco@latest")


def test_missing_directory_and_outside_roots(live_service: LiveService, tmp_path: Path) -> None:
    client = live_service.client()
    with pytest.raises(rk.StorageError, match="not found"):
        rk.Dataset.from_directory(tmp_path / "nope", name="x")
    outside = tmp_path / "outside"
    sc.put_bytes((outside / "train.tfrecord").as_uri(), sc.frame(sc.sample_examples(2)), {})
    with pytest.raises(rk.StorageRootNotAllowed):
        client.publish(rk.Dataset.from_directory(outside, name="x"), progress=False)


def test_postgres_backed_service(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str, tmp_path: Path
) -> None:
    store = tmp_path / "pgstore"
    store.mkdir()
    service = live_service_factory(storage_root=store.as_uri(), database_url=postgres_database_url)
    with service.client().writer("pg") as w:
        for rec in sc.sample_examples(10):
            w.write(rec)
    assert service.client().resolve("pg@latest").verify(deep=True).ok


def test_cli_publish_copy_into_the_service_storage_root(
    live_service: LiveService, tmp_path: Path
) -> None:
    """A directory outside the allowed roots: refused in place, published with --copy."""
    import json

    from typer.testing import CliRunner

    from recordkeeper.cli import app
    from tests.client._records import sample_examples, write_tfrecord

    outside = tmp_path / "my-data"
    write_tfrecord(outside / "train-00000-of-00001.tfrecord", sample_examples(5))
    runner = CliRunner()
    base = ["--url", live_service.url, "publish", str(outside), "--name", "copied"]
    refused = runner.invoke(app, base)
    assert refused.exit_code == 6  # refused
    assert "storage_root_not_allowed" in refused.output and "--copy" in refused.output
    done = runner.invoke(app, [*base, "--copy", "--json"])
    assert done.exit_code == 0, done.output
    published = json.loads(done.stdout)
    assert published["storage_prefix"].startswith(live_service.storage_root.rstrip("/") + "/")
    assert published["storage_prefix"].endswith(f"/copied/{published['name']}/")  # v1's name
    assert published["record_count"] == 5
    typo = runner.invoke(app, [*base[:4], "--name", "copyed", "--copy"])  # text mode
    assert typo.exit_code == 0, typo.output
    assert "published copyed_" in typo.output
    assert "the first version of dataset 'copyed'" in typo.output
    again = runner.invoke(app, [*base, "--copy", "--force-new"])
    assert "published copied_" in again.output and "first version" not in again.output
    missing = runner.invoke(app, [*base[:3], str(tmp_path / "nope"), "--name", "x", "--copy"])
    assert missing.exit_code == 3, missing.output  # not found (docs/cli.md)
    assert "no such file or directory" in missing.output and "[file_not_found]" in missing.output

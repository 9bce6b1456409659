"""``tf_dataset(cache=True)`` fills the cache from S3 as it reads (SeaweedFS S3).

The first epoch downloads each shard from S3 once, a few ahead of the reader: its bytes go to a
file in the cache's ``tmp/``, hashed as they arrive; the file is admitted (renamed into
``blobs/``) only when the shard's sha256 matches, and TensorFlow reads the admitted copy.  These
tests fail if that breaks: the records must be the same as the uncached path's, the cache must
hold verified objects afterwards, wrong bytes on S3 must never be admitted, none of their records
read, and must surface as a typed error, an epoch stopped early must leave no partial object, and
two processes filling one cache at once must not corrupt it.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper.shard_cache import ShardCache
from recordkeeper.tfrecord import TFRecordWriter
from tests.integration.conftest import LiveService
from tests.integration.test_shard_cache import _publish, _records, opts, s3_service

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["opts", "s3_service"]  # fixtures, imported


def _verified(cache: ShardCache, version: rk.DatasetVersion) -> set[str]:
    """The shards of ``version`` the cache holds, each checked to hash to its sha256."""
    held = set()
    for shard in version.splits["train"].shards:
        blob = cache.path(shard.sha256)
        if blob.exists():
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == shard.sha256
            held.add(shard.sha256)
    return held


def _tmp_empty(directory: Path) -> bool:
    """Whether ``tmp/`` is empty, waiting a while for readers that are stopping (their files
    go when their threads end; no duration is asserted)."""
    deadline = time.monotonic() + 30
    while list((directory / "tmp").iterdir()) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    return not list((directory / "tmp").iterdir())


def test_first_epoch_gives_the_same_records_and_fills_the_cache(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "sfill", [0, 1, 2, 3, 4])
    expected = [bytes(r) for r in v.tf_dataset("train").as_numpy_iterator()]
    assert expected == [r for s in range(5) for r in _records(s)]
    cache = ShardCache(tmp_path / "cache")
    ds = v.tf_dataset("train", cache=cache, num_parallel_reads=2)
    assert [bytes(r) for r in ds.as_numpy_iterator()] == expected  # read while filling
    assert _verified(cache, v) == {s.sha256 for s in v.splits["train"].shards}
    assert _tmp_empty(tmp_path / "cache")
    # shuffled shard order: whole shards, every record once, from the cache now
    shuffled = v.tf_dataset("train", cache=cache, shuffle_files=True, seed=3)
    got = [bytes(r) for r in shuffled.as_numpy_iterator()]
    assert sorted(got) == sorted(expected)


def test_half_cached_split_fetches_the_rest(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "shalf", [0, 1, 2, 3])
    shards = v.splits["train"].shards
    cache = ShardCache(tmp_path / "cache")
    cache.fetch(shards[1], opts)  # one shard cached, the others not
    ds = v.tf_dataset("train", cache=cache)
    assert [bytes(r) for r in ds.as_numpy_iterator()] == [r for s in range(4) for r in _records(s)]
    assert _verified(cache, v) == {s.sha256 for s in shards}


def test_wrong_bytes_on_s3_are_never_admitted_and_raise_a_typed_error(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "swrong", [0, 1])
    shard = v.splits["train"].shards[1]
    bucket, key = shard.uri.removeprefix("s3://").split("/", 1)
    # other records, well framed (every CRC good), the same size: only the sha256 tells
    buf = io.BytesIO()
    with TFRecordWriter(buf) as w:
        for r in _records(1):
            w.write(r.replace(b"shard 1", b"shard 9"))
    assert len(buf.getvalue()) == shard.size
    s3_server.boto3_client().put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    cache = ShardCache(tmp_path / "cache")
    dataset = v.tf_dataset("train", cache=cache, verify=None)
    got: list[bytes] = []
    with pytest.raises(rk.CorruptShard) as caught, rk.tf.typed_errors(dataset):
        for r in dataset.as_numpy_iterator():
            got.append(bytes(r))
    assert got == _records(0)  # none of the wrong object's records reached the pipeline
    assert caught.value.extra["shard"] == shard.name
    assert caught.value.extra["uri"] == shard.uri
    assert caught.value.extra["reason"] == "sha256"
    assert "not the registered shard" in str(caught.value)
    assert not cache.path(shard.sha256).exists()  # never admitted
    assert _verified(cache, v) == {v.splits["train"].shards[0].sha256}
    assert _tmp_empty(tmp_path / "cache")
    # a flipped byte (a bad CRC, found mid-shard): typed too, not admitted
    body = bytearray(buf.getvalue())
    body[-10] ^= 0xFF
    s3_server.boto3_client().put_object(Bucket=bucket, Key=key, Body=bytes(body))
    dataset = v.tf_dataset("train", cache=cache, verify=None)
    with pytest.raises(rk.CorruptShard) as caught, rk.tf.typed_errors(dataset):
        list(dataset.as_numpy_iterator())
    assert caught.value.extra["shard"] == shard.name
    assert not cache.path(shard.sha256).exists()
    assert _tmp_empty(tmp_path / "cache")


def test_an_epoch_stopped_early_leaves_no_partial_object(
    s3_service: LiveService,
    s3_server: Any,
    s3_bucket: str,
    opts: dict,
    tmp_path: Path,
) -> None:
    name = "searly"
    client = s3_server.boto3_client()
    bucket = s3_bucket.removeprefix("s3://")
    for i in range(3):  # 4,000 records a shard: many batches, most not read when stopped
        buf = io.BytesIO()
        with TFRecordWriter(buf) as w:
            for r in range(4000):
                w.write(b"early %d %d " % (i, r) * 10)
        key = f"raw/{name}/train-{i:05d}-of-00003.tfrecord"
        client.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    v = s3_service.client(storage_options=opts).publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw/{name}", name=name, storage_options=opts),
        progress=False,
    )
    cache = ShardCache(tmp_path / "cache")
    ds = v.tf_dataset("train", cache=cache, num_parallel_reads=2)
    it = iter(ds)
    first = [bytes(next(it).numpy()) for _ in range(10)]
    assert first[0] == b"early 0 0 " * 10
    del it
    gc.collect()
    assert _tmp_empty(tmp_path / "cache")  # the stopped downloads' files are gone
    _verified(cache, v)  # nothing partial: each blob there (downloaded ahead) hashes right
    full = [bytes(r) for r in ds.as_numpy_iterator()]  # the next epoch reads and fills all
    assert len(full) == 12000 and full[:10] == first
    assert _verified(cache, v) == {s.sha256 for s in v.splits["train"].shards}


def test_two_processes_fill_one_cache_at_once(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "sconc", [0, 1, 2, 3, 4, 5])
    cache_dir = tmp_path / "cache"
    script = textwrap.dedent(
        f"""
        import hashlib, json, os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import recordkeeper as rk
        from recordkeeper.shard_cache import ShardCache
        client = rk.Client({s3_service.url!r}, storage_options={opts!r})
        v = client.resolve({v.name!r})
        ds = v.tf_dataset("train", cache=ShardCache({str(cache_dir)!r}))
        got = [bytes(r) for r in ds.as_numpy_iterator()]
        print(json.dumps([len(got), hashlib.sha256(b"".join(got)).hexdigest()]))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "client"), str(ROOT)])}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
        for _ in range(2)
    ]
    expected = [r for s in range(6) for r in _records(s)]
    want = [len(expected), hashlib.sha256(b"".join(expected)).hexdigest()]
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        assert json.loads(out.splitlines()[-1]) == want
    cache = ShardCache(cache_dir)
    assert _verified(cache, v) == {s.sha256 for s in v.splits["train"].shards}
    assert len(cache.entries()) == 6
    assert not list((cache_dir / "tmp").iterdir())
    assert not list((cache_dir / "leases").glob("*.lease"))

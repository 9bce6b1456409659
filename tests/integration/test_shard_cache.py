"""The local shard cache over real S3 (SeaweedFS) and real TensorFlow.

``recordkeeper pull`` / :meth:`ShardCache.pull` and ``tf_dataset(cache=True)`` keep verified
shards by sha256: versions sharing shards share entries, the bound evicts least recently used
entries, a damaged entry is found and fetched again, concurrent processes pulling the same
shards download each once and leave a consistent cache, and a cached epoch reads no S3 at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper.shard_cache import ShardCache
from tests.integration.conftest import LiveService

pytestmark = pytest.mark.s3

ROOT = Path(__file__).resolve().parents[2]


def _records(shard: int, n: int = 300) -> list[bytes]:
    return [b"shard %d record %d " % (shard, i) * 20 for i in range(n)]


def _put_shards(s3_server: Any, bucket: str, prefix: str, shards: list[int]) -> None:
    from recordkeeper.tfrecord import TFRecordWriter

    client = s3_server.boto3_client()
    import io

    for i, shard in enumerate(shards):
        buf = io.BytesIO()
        with TFRecordWriter(buf) as w:
            for r in _records(shard):
                w.write(r)
        key = f"{prefix}/train-{i:05d}-of-{len(shards):05d}.tfrecord"
        client.put_object(
            Bucket=bucket.removeprefix("s3://"),
            Key=key,
            Body=buf.getvalue(),
            ChecksumAlgorithm="SHA256",
        )


@pytest.fixture
def s3_service(live_service_factory: Callable[..., LiveService], s3_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])


@pytest.fixture
def opts(s3_server: Any) -> dict[str, Any]:
    return dict(s3_server.storage_options)


def _publish(
    service: LiveService, s3_server: Any, bucket: str, opts: dict, name: str, shards: list[int]
) -> rk.DatasetVersion:
    _put_shards(s3_server, bucket, f"raw/{name}", shards)
    client = service.client(storage_options=opts)
    return client.publish(
        rk.Dataset.from_directory(f"{bucket}/raw/{name}", name=name, storage_options=opts),
        progress=False,
    )


def test_pull_verifies_shares_and_lists(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    a = _publish(s3_service, s3_server, s3_bucket, opts, "alpha", [0, 1, 2])
    b = _publish(s3_service, s3_server, s3_bucket, opts, "beta", [1, 2, 3])  # shares 1 and 2
    cache = ShardCache(tmp_path / "cache")
    first = cache.pull(a)
    assert (first.shards, first.downloaded, first.cached) == (3, 3, 0)
    for shard, path in zip(a.splits["train"].shards, first.paths["train"], strict=True):
        assert path == cache.path(shard.sha256)
        import hashlib

        assert hashlib.sha256(path.read_bytes()).hexdigest() == shard.sha256
    again = cache.pull(a)
    assert (again.downloaded, again.cached) == (0, 3)
    second = cache.pull(b)
    assert (second.downloaded, second.cached) == (1, 2)  # the shared shards are one entry each
    assert len(cache.entries()) == 4
    listed = {v.name: v for v in cache.versions()}
    assert listed[a.name].complete and listed[b.name].complete
    # clearing one version keeps what the other one uses
    removed, freed = cache.clear([a.name])
    assert removed == 1 and freed == a.splits["train"].shards[0].size
    assert len(cache.entries()) == 3
    assert {v.name for v in cache.versions()} == {b.name}
    assert not list((tmp_path / "cache" / "tmp").iterdir())


def test_tf_dataset_cache_reads_records_then_no_s3(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "gamma", [0, 1, 2, 3])
    expected = [r for s in range(4) for r in _records(s)]
    streamed = [bytes(r) for r in v.tf_dataset("train").as_numpy_iterator()]
    assert streamed == expected  # shard after shard, in index order
    cache = ShardCache(tmp_path / "cache")
    ds = v.tf_dataset("train", cache=cache)
    assert [bytes(r) for r in ds.as_numpy_iterator()] == expected
    assert len(cache.entries()) == 4
    # the objects disappear from S3: the cached dataset still reads every record
    client = s3_server.boto3_client()
    for uri in v.files("train"):
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        client.delete_object(Bucket=bucket, Key=key)
    assert [bytes(r) for r in ds.as_numpy_iterator()] == expected
    fresh = v.tf_dataset("train", cache=cache, verify=None)
    assert [bytes(r) for r in fresh.batch(64).unbatch().as_numpy_iterator()] == expected


def test_corrupt_entry_is_detected_and_refetched(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "delta", [0, 1])
    cache = ShardCache(tmp_path / "cache")
    cache.pull(v)
    shard = v.splits["train"].shards[1]
    blob = cache.path(shard.sha256)
    os.chmod(blob, 0o644)
    data = bytearray(blob.read_bytes())
    data[100] ^= 0xFF  # same size, one byte flipped
    blob.write_bytes(bytes(data))
    report = cache.pull(v)
    assert (report.cached, report.downloaded, report.refetched) == (1, 1, 1)
    import hashlib

    assert hashlib.sha256(blob.read_bytes()).hexdigest() == shard.sha256
    # damage that keeps size and mtime escapes the fast check, not the deep one
    st = blob.stat()
    os.chmod(blob, 0o644)
    data = bytearray(blob.read_bytes())
    data[200] ^= 0xFF
    blob.write_bytes(bytes(data))
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.pull(v).refetched == 0
    assert cache.pull(v, verify="deep").refetched == 1
    records = [bytes(r) for r in v.tf_dataset("train", cache=cache).as_numpy_iterator()]
    assert records == _records(0) + _records(1)


def test_eviction_at_the_bound_is_lru_and_spares_leases(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    versions = [
        _publish(s3_service, s3_server, s3_bucket, opts, f"ev{i}", [10 + i]) for i in range(4)
    ]
    size = versions[0].splits["train"].shards[0].size
    cache = ShardCache(tmp_path / "cache", max_size=int(size * 2.5))  # two entries fit
    sha = [v.splits["train"].shards[0].sha256 for v in versions]
    cache.pull(versions[0])
    cache.pull(versions[1])
    cache.pull(versions[0])  # used again: v1's entry is now the least recently used
    cache.pull(versions[2])
    assert {e.sha256 for e in cache.entries()} == {sha[0], sha[2]}
    assert cache.usage() <= cache.max_size
    # a live reader's lease keeps its entry; the other one goes
    with cache.lease([sha[0]]):
        cache.pull(versions[3])
        assert {e.sha256 for e in cache.entries()} == {sha[0], sha[3]}
    # a split larger than the bound is refused before anything is downloaded
    small = ShardCache(tmp_path / "small", max_size=size - 1)
    with pytest.raises(rk.InvalidInput, match="bound"):
        small.pull(versions[0])
    assert small.entries() == []


def test_concurrent_processes_pull_the_same_shards(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "conc", [0, 1, 2, 3, 4, 5])
    cache_dir = tmp_path / "cache"
    script = textwrap.dedent(
        f"""
        import json, sys
        import recordkeeper as rk
        from recordkeeper.shard_cache import ShardCache
        client = rk.Client({s3_service.url!r}, storage_options={opts!r})
        v = client.resolve({v.name!r})
        report = ShardCache({str(cache_dir)!r}).pull(v, workers=3)
        print(json.dumps(report.to_dict()))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "client"), str(ROOT)])}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        reports.append(json.loads(out))
    assert all(r["shards"] == 6 for r in reports)
    assert sum(r["downloaded"] for r in reports) == 6  # each shard downloaded once in all
    cache = ShardCache(cache_dir)
    import hashlib

    for shard in v.splits["train"].shards:
        assert hashlib.sha256(cache.path(shard.sha256).read_bytes()).hexdigest() == shard.sha256
    assert len(cache.entries()) == 6
    assert not list((cache_dir / "tmp").iterdir())
    assert not list((cache_dir / "leases").glob("*.lease"))


def test_cli_pull_ls_du_clear(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "clitest", [0, 1])
    env = {
        **os.environ,
        "RECORDKEEPER_URL": s3_service.url,
        "RECORDKEEPER_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "client"), str(ROOT)]),
    }
    so = [
        f"--storage-option=key={opts['key']}",
        f"--storage-option=secret={opts['secret']}",
        f"--storage-option=client_kwargs.endpoint_url={opts['client_kwargs']['endpoint_url']}",
    ]

    def run(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "recordkeeper.cli", *args, "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    pulled = run("pull", "clitest@v1", *so)
    assert (pulled["version"], pulled["downloaded"]) == (v.name, 2)
    assert run("pull", "clitest@latest", *so)["cached"] == 2
    listed = run("cache", "ls")
    assert [x["name"] for x in listed["versions"]] == [v.name]
    assert listed["versions"][0]["complete"] is True
    du = run("cache", "du")
    assert du["entries"] == 2 and du["size"] == sum(s.size for s in v.splits["train"].shards)
    assert run("cache", "clear")["removed"] == 2
    assert run("cache", "du")["entries"] == 0


def test_lease_of_a_dead_process_is_stale(
    live_service: LiveService, data_dir: Path, tmp_path: Path
) -> None:
    from recordkeeper.tfrecord import TFRecordWriter

    for i in range(2):
        with (
            open(data_dir / f"train-{i:05d}-of-00002.tfrecord", "wb") as fh,
            TFRecordWriter(fh) as w,
        ):
            for r in _records(20 + i):
                w.write(r)
    v = live_service.client().publish(
        rk.Dataset.from_directory(data_dir, name="lz"), progress=False
    )
    cache_dir = tmp_path / "cache"
    ShardCache(cache_dir).pull(v)  # local shards are copied in when pulled
    shas = [s.sha256 for s in v.splits["train"].shards]
    script = (
        "import os, sys; from recordkeeper.shard_cache import ShardCache; "
        f"held = ShardCache({str(cache_dir)!r}).lease({shas!r}); os._exit(0)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "client"), str(ROOT)])}
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    assert len(list((cache_dir / "leases").glob("*.lease"))) == 1  # left behind, unlocked
    cache = ShardCache(cache_dir)
    assert cache.leased() == set()  # stale: removed, protects nothing
    assert not list((cache_dir / "leases").glob("*.lease"))
    live = cache.lease(shas[:1])
    assert cache.leased() == {shas[0]}
    assert cache.clear() == (1, v.splits["train"].shards[1].size)  # the leased one stays
    live.release()
    assert cache.clear()[0] == 1 and cache.entries() == []


def test_a_shard_whose_bytes_changed_is_not_cached_and_is_named(
    s3_service: LiveService, s3_server: Any, s3_bucket: str, opts: dict, tmp_path: Path
) -> None:
    v = _publish(s3_service, s3_server, s3_bucket, opts, "changed", [0, 1])
    shard = v.splits["train"].shards[1]
    bucket, key = shard.uri.removeprefix("s3://").split("/", 1)
    client = s3_server.boto3_client()
    body = bytearray(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-10] ^= 0xFF  # same size, other bytes
    client.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    cache = ShardCache(tmp_path / "cache")
    dataset = v.tf_dataset("train", cache=cache, verify=None)
    with pytest.raises(rk.CorruptShard) as caught, rk.tf.typed_errors(dataset):
        list(dataset.as_numpy_iterator())
    assert caught.value.extra["shard"] == shard.name
    assert caught.value.extra["uri"] == shard.uri
    assert not cache.path(shard.sha256).exists()  # never served from the cache
    assert not list((tmp_path / "cache" / "tmp").iterdir())
    with pytest.raises(rk.CorruptShard, match="sha256"):
        cache.pull(v)

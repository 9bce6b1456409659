"""Copying small shards to S3 (issue 23, item 7): one ``PUT`` per shard whose answer is the
identity registered, no upload stream and no ``HEAD`` after it.  The mechanism is pinned, not
the time (bench/bench_small_files.py measures it against boto3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper.backends.s3 import S3Profile
from tests.client._records import frame
from tests.client.test_format_digests_pinned import fixed_records
from tests.integration.conftest import LiveService


@pytest.mark.s3
def test_small_shards_are_copied_to_s3_one_put_each_without_a_head(
    live_service_factory: Callable[..., LiveService],
    s3_bucket: str,
    s3_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "raw"
    data.mkdir()
    for i in range(10):
        (data / f"train-{i:05d}-of-00010.tfrecord").write_bytes(frame(fixed_records(3, salt=i)))
    service = live_service_factory(
        storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket, data.as_uri()]
    )
    opts = dict(s3_server.storage_options)
    client = service.client(storage_options=opts)
    heads: list[str] = []
    uploads: list[str] = []
    real_stat, real_stat_async = S3Profile.stat, S3Profile.stat_async
    real_open_write = S3Profile.open_write

    def stat(self: S3Profile, fs: Any, uri: str, path: str, **kw: Any) -> Any:
        heads.append(uri)
        return real_stat(self, fs, uri, path, **kw)

    async def stat_async(self: S3Profile, fs: Any, uri: str, path: str) -> Any:
        heads.append(uri)
        return await real_stat_async(self, fs, uri, path)

    def open_write(self: S3Profile, fs: Any, path: str) -> Any:
        uploads.append(path)
        return real_open_write(self, fs, path)

    monkeypatch.setattr(S3Profile, "stat", stat)
    monkeypatch.setattr(S3Profile, "stat_async", stat_async)
    monkeypatch.setattr(S3Profile, "open_write", open_write)
    v = client.publish(rk.Dataset.from_directory(data, name="tiny"), copy_to=True, progress=False)
    monkeypatch.undo()
    assert v.shard_count == 10
    # one PUT each, its answer is the identity (the record indexes beside them are written
    # after commit, as any small object)
    assert [u for u in heads + uploads if "/.recordkeeper/" not in u] == []
    s3 = s3_server.boto3_client()
    for shard in v.shards:
        assert shard.uri.startswith(f"{s3_bucket}/datasets/")
        bucket, key = shard.uri.removeprefix("s3://").split("/", 1)
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert shard.storage_identity["etag"] == head["ETag"]
        assert shard.storage_identity["checksum_sha256"] == head["ChecksumSHA256"]
        assert shard.size == head["ContentLength"]
    # the same records in place locally: the same content digest
    local = client.publish(rk.Dataset.from_directory(data, name="tiny_local"), progress=False)
    assert local.content_digest == v.content_digest
    assert v.verify().ok and v.verify(deep=True, progress=False).ok

"""Many small shards on S3 (SeaweedFS): fast verify by listing, publish by one GET each.

The batched paths must give exactly what the per-object paths give: the same registered
identities, the same problems with the same reasons and details, the same errors.  Each test
runs the batched path and the per-object path (batching switched off) on the same objects and
compares, and checks that the batched path really spared the requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import object_batches, publish, verify
from recordkeeper.backends.s3 import S3Profile
from recordkeeper.storage import stat_object
from tests.client._records import frame, sample_examples
from tests.integration.conftest import LiveService

pytestmark = pytest.mark.s3

SHARDS = 12


@pytest.fixture
def opts(s3_server: Any) -> dict[str, Any]:
    return dict(s3_server.storage_options)


@pytest.fixture
def s3_service(live_service_factory: Callable[..., LiveService], s3_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])


def _put(s3_server: Any, uri: str, body: bytes, checksum: bool = True) -> None:
    bucket, key = uri[len("s3://") :].split("/", 1)
    extra = {"ChecksumAlgorithm": "SHA256"} if checksum else {}
    s3_server.boto3_client().put_object(Bucket=bucket, Key=key, Body=body, **extra)


def _raw_shards(s3_server: Any, root: str, n: int = SHARDS) -> list[str]:
    uris = []
    for i in range(n):
        uri = f"{root}/train-{i:05d}-of-{n:05d}.tfrecord"
        _put(s3_server, uri, frame(sample_examples(5, i * 5)))
        uris.append(uri)
    return uris


def _spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[list[str]]:
    """Record the URIs each call of ``module.name`` was given."""
    calls: list[list[str]] = []
    original = getattr(module, name)

    def spy(uris: list[str], *args: Any, **kwargs: Any) -> Any:
        calls.append(list(uris))
        return original(uris, *args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def _problems(report: rk.VerifyReport) -> list[tuple[str, str, str]]:
    return [(p.shard.uri, p.reason, p.detail) for p in report.problems]


def test_publish_reads_small_shards_once_with_their_identity(
    s3_service: LiveService,
    s3_bucket: str,
    s3_server: Any,
    opts: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uris = _raw_shards(s3_server, f"{s3_bucket}/raw")
    client = s3_service.client(storage_options=opts)
    reads = _spy(monkeypatch, publish, "read_small_many")
    stats = _spy(monkeypatch, publish, "stat_many")
    v = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="small", storage_options=opts),
        progress=False,
    )
    assert sorted(u for call in reads for u in call) == uris  # one GET each ...
    assert [u for call in stats for u in call] == []  # ... and no HEAD before or after
    assert v.record_count == 5 * SHARDS and v.schema is not None
    for shard in v.shards:  # the GET's identity is the one a HEAD gives
        assert dict(shard.storage_identity or {}) == stat_object(shard.uri, opts).identity
        assert shard.storage_identity["checksum_sha256"]

    # The per-object path registers the same shards.
    monkeypatch.setattr(S3Profile, "listing_min_objects", 10**9)
    again = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="small", storage_options=opts),
        progress=False,
        force_new=True,
    )
    assert [_registered(s) for s in again.shards] == [_registered(s) for s in v.shards]


def _registered(shard: rk.Shard) -> tuple[Any, ...]:
    return (
        shard.uri,
        shard.size,
        shard.sha256,
        shard.crc32c,
        shard.records_sha256,
        shard.record_count,
        shard.compression,
        dict(shard.storage_identity or {}),
    )


def test_publish_of_a_corrupt_small_shard_fails_as_before(
    s3_service: LiveService,
    s3_bucket: str,
    s3_server: Any,
    opts: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uris = _raw_shards(s3_server, f"{s3_bucket}/raw")
    body = bytearray(frame(sample_examples(5, 100)))
    body[-30] ^= 1  # inside the last record's data
    _put(s3_server, uris[3], bytes(body))
    client = s3_service.client(storage_options=opts)
    errors = []
    for listing_from in (1, 10**9):  # batched, then per object
        monkeypatch.setattr(S3Profile, "listing_min_objects", listing_from)
        with pytest.raises(rk.CorruptShard) as caught:
            client.publish(
                rk.Dataset.from_directory(f"{s3_bucket}/raw", name="bad", storage_options=opts)
            )
        errors.append((caught.value.code, caught.value.detail, dict(caught.value.extra)))
    assert errors[0] == errors[1]
    assert errors[0][0] == "corrupt_shard" and errors[0][2]["offset"] > 0


def test_fast_verify_by_listing_reports_what_per_object_checks_report(
    s3_service: LiveService,
    s3_bucket: str,
    s3_server: Any,
    opts: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uris = _raw_shards(s3_server, f"{s3_bucket}/raw")
    client = s3_service.client(storage_options=opts)
    v = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="ver", storage_options=opts),
        progress=False,
    )
    heads = _spy(monkeypatch, verify, "stat_many")
    assert v.verify().ok
    assert heads == [[]]  # the listing alone proved every shard unchanged

    # Rewritten with other bytes (with and without a server-side checksum), deleted, and
    # rewritten with the same bytes (same content, same ETag: nothing to report).
    _put(s3_server, uris[1], frame(sample_examples(5, 500)))
    _put(s3_server, uris[2], frame(sample_examples(5, 600)), checksum=False)
    bucket, key = uris[4][len("s3://") :].split("/", 1)
    s3_server.boto3_client().delete_object(Bucket=bucket, Key=key)
    _put(s3_server, uris[6], frame(sample_examples(5, 30)))

    heads.clear()
    batched = v.verify()
    monkeypatch.setattr(S3Profile, "listing_min_objects", 10**9)
    per_object = v.verify()
    assert _problems(batched) == _problems(per_object)
    assert [p.shard.uri for p in batched.problems] == [uris[1], uris[2], uris[4]]
    assert batched.problems[2].reason == "missing"
    # only the objects the listing did not show as registered were asked for one by one
    asked = set(heads[0])
    assert {uris[1], uris[2], uris[4]} <= asked
    assert not asked & {uris[i] for i in (0, 3, 5, 7, 8, 9, 10, 11)}


def test_a_refused_listing_falls_back_to_one_request_per_object(
    s3_service: LiveService,
    s3_bucket: str,
    s3_server: Any,
    opts: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A policy may allow GetObject but not ListBucket: verify and publish still work, by
    asking for each object (and report what the per-object path reports)."""
    uris = _raw_shards(s3_server, f"{s3_bucket}/raw")
    client = s3_service.client(storage_options=opts)
    v = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="nolist", storage_options=opts),
        progress=False,
    )
    bucket, key = uris[5][len("s3://") :].split("/", 1)
    s3_server.boto3_client().delete_object(Bucket=bucket, Key=key)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise rk.StorageError("listing refused", uri=s3_bucket, reason="denied")

    monkeypatch.setattr(object_batches, "prefix_listing", refused)
    heads = _spy(monkeypatch, verify, "stat_many")
    report = v.verify()
    assert [(p.shard.uri, p.reason) for p in report.problems] == [(uris[5], "missing")]
    assert sorted(heads[0]) == sorted(uris)  # every shard asked for, as without a listing
    _put(s3_server, uris[5], frame(sample_examples(5, 25)))
    again = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="nolist", storage_options=opts),
        progress=False,
        force_new=True,
    )
    assert again.record_count == 5 * SHARDS


def test_refused_credentials_still_raise(
    s3_service: LiveService, s3_bucket: str, s3_server: Any, opts: dict
) -> None:
    _raw_shards(s3_server, f"{s3_bucket}/raw")
    client = s3_service.client(storage_options=opts)
    v = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="cred", storage_options=opts),
        progress=False,
    )
    bad = {**opts, "secret": "wrong-secret"}
    with pytest.raises(rk.StorageError) as caught:
        v.with_storage_options(bad).verify()
    assert caught.value.extra["reason"] == "denied"


def test_stat_many_equals_stat_object(s3_bucket: str, s3_server: Any, opts: dict) -> None:
    uris = _raw_shards(s3_server, f"{s3_bucket}/raw", n=3)
    results = object_batches.stat_many([*uris, f"{s3_bucket}/raw/absent"], opts)
    assert results[:3] == [stat_object(u, opts) for u in uris]
    missing = results[3]
    assert isinstance(missing, rk.StorageError) and missing.extra["reason"] == "missing"


def test_s3_timestamps_are_parsed_without_dateutil(s3_server: Any, s3_bucket: str) -> None:
    """Every answer of a filesystem from url_to_fs (HEAD, GET, listing) has its timestamps
    parsed by storage.parse_timestamp (timezone.utc), not by dateutil (its tzutc)."""
    import datetime

    from recordkeeper.storage import url_to_fs

    uri = f"{s3_bucket}/ts/train-00000-of-00001.tfrecord"
    _put(s3_server, uri, frame(sample_examples(2)))
    fs, path = url_to_fs(uri, s3_server.storage_options)
    fs.invalidate_cache()
    head = fs.info(path)
    listed = fs.ls(path.rsplit("/", 1)[0], detail=True)
    for stamp in (head["LastModified"], listed[0]["LastModified"]):
        assert isinstance(stamp, datetime.datetime)
        assert stamp.tzinfo is datetime.UTC
    (got,) = object_batches.read_small_many([uri], s3_server.storage_options)
    assert not isinstance(got, Exception)

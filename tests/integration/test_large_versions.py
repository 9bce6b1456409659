"""Versions too large for one answer, over real servers: 100,000 shards on PostgreSQL, and fast
verification of an S3 version read page by page.

No time is asserted here; the figures (registration and commit time, resolve time) come from
``bench/bench_service.py`` and ``bench/bench_client.py`` (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

import recordkeeper as rk
from recordkeeper.core.manifest import ManifestEntry, content_digest
from tests.client._records import frame
from tests.integration._load import shard_bodies
from tests.integration.conftest import LiveService

SHARDS = 100_000


class Sizes:
    """Paths and body sizes of the answers a client received."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def __call__(self, response: httpx.Response) -> None:
        response.read()
        self.seen.append((response.request.url.path, len(response.content)))


def _client(service: LiveService, **kwargs: Any) -> tuple[rk.Client, Sizes]:
    sizes = Sizes()
    http = httpx.Client(base_url=service.url, timeout=300, event_hooks={"response": [sizes]})
    return rk.Client(service.url, http_client=http, **kwargs), sizes


@pytest.mark.postgres
def test_a_version_of_100k_shards_on_postgresql(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str
) -> None:
    service = live_service_factory(database_url=postgres_database_url)
    client, sizes = _client(service)
    staged = client.stage("huge")
    bodies = shard_bodies(staged.storage_prefix, SHARDS, tag="huge")
    totals = client.register_shards(staged, bodies)
    assert totals == {"registered": SHARDS, "unchanged": 0, "shard_count": SHARDS}
    registrations = [p for p, _ in sizes.seen if p.endswith("/shards")]
    assert len(registrations) == SHARDS // 10_000  # in batches the service accepts
    committed = client.commit(staged)
    assert committed.state == "committed" and committed.shard_count == SHARDS
    expected = content_digest(
        ManifestEntry("train", b["index"], b["count"], b["records_sha256"], b["record_count"])
        for b in bodies
    )
    assert committed.content_digest == expected

    sizes.seen.clear()
    version = client.resolve("huge@latest")
    answers = sizes.seen
    pages = [size for path, size in answers if path.endswith("/shards")]
    assert len(pages) == SHARDS // 10_000
    # never one answer with every shard (the full form would be ~54 MB of JSON)
    assert max(size for _, size in answers) < 8 * 2**20, answers
    train = version.split("train")
    assert version.shard_count == SHARDS and len(train.shards) == SHARDS
    assert train.uris[:2] == [bodies[0]["uri"], bodies[1]["uri"]]
    last = train.shards[SHARDS - 1]
    assert last.to_dict() == rk.Shard.from_dict(bodies[-1]).to_dict()
    assert last.schema_digest is not None
    assert train.record_count == 10 * SHARDS

    # held now: resolving again is one 304, no page
    sizes.seen.clear()
    assert client.resolve("huge@latest").split("train").shards is train.shards
    assert [p for p, _ in sizes.seen] == [f"/api/v1/versions/{'huge@latest'}"]

    # a page-by-page walk sees every shard once, in order
    seen = 0
    for page in client.registry.shard_pages(version.name, page_size=25_000 // 3):
        assert page[0].index == seen
        seen += len(page)
    assert seen == SHARDS


@pytest.mark.s3
def test_fast_verify_reads_the_shard_list_page_by_page_on_s3(
    live_service_factory: Callable[..., LiveService], s3_server: Any, s3_bucket: str
) -> None:
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    opts = dict(s3_server.storage_options)
    s3 = s3_server.boto3_client()
    bucket = s3_bucket.removeprefix("s3://")
    n = 23
    for i in range(n):
        s3.put_object(
            Bucket=bucket,
            Key=f"raw/train-{i:05d}-of-{n:05d}.tfrecord",
            Body=frame([b"record %d" % i, b"more"]),
            ChecksumAlgorithm="SHA256",
        )
    client, sizes = _client(service, storage_options=opts)
    version = client.publish(
        rk.Dataset.from_directory(f"{s3_bucket}/raw", name="pages", storage_options=opts),
        progress=False,
    )
    client.registry.page_size = 5
    sizes.seen.clear()
    report = client.verify(version.name)
    assert report.ok and report.checked == n
    assert len([p for p, _ in sizes.seen if p.endswith("/shards")]) == 5  # 23 shards, 5 a page

    # rewrite one object with other records: found, by shard, as verify_version finds it
    s3.put_object(
        Bucket=bucket,
        Key=f"raw/train-00017-of-{n:05d}.tfrecord",
        Body=frame([b"other"]),
        ChecksumAlgorithm="SHA256",
    )
    streamed = client.verify(version.name)
    whole = client.resolve(version.name).verify()
    assert [(p.shard.name, p.reason) for p in streamed.problems] == [
        (p.shard.name, p.reason) for p in whole.problems
    ]
    assert [p.shard.index for p in streamed.problems] == [17]
    only_other_split = client.verify(version.name, splits=["validation"])
    assert only_other_split.ok and only_other_split.checked == 0

"""Resolution through the client: shards in compact pages, kept by name + content digest,
re-resolved every time with ``If-None-Match`` (a held version costs one ``304``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import recordkeeper as rk
from recordkeeper.core.shard_columns import ShardColumns
from recordkeeper.registry import collect_splits
from tests.apps import sqlite_app
from tests.service._helpers import shards as shard_bodies

pytest.importorskip("fastapi")


class Recorder:
    """The requests a client sent and the statuses it got."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def __call__(self, response: httpx.Response) -> None:
        self.seen.append((response.request.url.path, response.status_code))

    def take(self) -> list[tuple[str, int]]:
        seen, self.seen = self.seen, []
        return seen


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[rk.Client, Recorder]]:
    recorder = Recorder()
    with sqlite_app(tmp_path) as http:
        http.event_hooks["response"].append(recorder)
        yield rk.Client(http_client=http), recorder


def _publish(client: rk.Client, content: str = "", train: int = 7, validation: int = 3) -> Any:
    staged = client.stage("coco")
    prefix = staged.storage_prefix
    bodies = shard_bodies(prefix, train, content=content) + shard_bodies(
        prefix, validation, split="validation", content=content
    )
    client.register_shards(staged, bodies)
    client.commit(staged)
    return bodies


def test_cold_resolve_pages_and_builds_the_same_version(
    client: tuple[rk.Client, Recorder],
) -> None:
    rk_client, recorder = client
    bodies = _publish(rk_client)
    rk_client.registry.page_size = 3
    recorder.take()
    v = rk_client.resolve("coco@latest")
    paths = [path for path, _ in recorder.take()]
    assert paths[0].endswith("/versions/coco@latest")
    assert [p.endswith("/shards") for p in paths[1:]] == [True] * 4  # 10 shards, 3 a page
    assert v.ref == "coco@latest" and v.shard_count == 10
    assert sorted(v.splits) == ["train", "validation"]
    train = v.split("train")
    assert isinstance(train.shards, ShardColumns)
    assert train.uris == [b["uri"] for b in bodies[:7]]
    assert train.record_count == 70 and train.size == sum(b["size"] for b in bodies[:7])
    # the same values as the full form of the Version answer
    full = rk_client.http.api("GET", "/versions/coco@latest")
    assert v == rk.DatasetVersion.from_dict(full)
    assert v.shards[0].storage_identity == {"backend": "file", "mtime_ns": 1, "size": 100}
    assert list(v.split("validation").shards) == [
        rk.Shard.from_dict(s) for s in full["splits"]["validation"]["shards"]
    ]


def test_held_version_costs_one_304(client: tuple[rk.Client, Recorder]) -> None:
    rk_client, recorder = client
    _publish(rk_client)
    first = rk_client.resolve("coco@latest")
    recorder.take()
    again = rk_client.resolve("coco@latest")
    assert recorder.take() == [("/api/v1/versions/coco@latest", 304)]
    assert again.split("train").shards is first.split("train").shards  # held, not a copy
    # another reference to the same version: the held answer is offered and matches
    by_number = rk_client.resolve("coco@v1")
    assert [status for _, status in recorder.take()] == [304]
    assert by_number.ref == "coco@v1" and by_number.name == first.name


def test_latest_moves_and_is_re_resolved(client: tuple[rk.Client, Recorder]) -> None:
    rk_client, recorder = client
    _publish(rk_client)
    v1 = rk_client.resolve("coco@latest")
    _publish(rk_client, content="2", train=2, validation=1)
    recorder.take()
    v2 = rk_client.resolve("coco@latest")
    assert v2.number == 2 and v2.shard_count == 3
    assert [status for _, status in recorder.take()] == [200, 200]  # answer + one page
    # both held now: either resolves with one 304
    assert rk_client.resolve(v1.name).split("train").shards is v1.split("train").shards
    assert [status for _, status in recorder.take()] == [304]


def test_deprecation_is_seen_though_the_shards_are_held(
    client: tuple[rk.Client, Recorder],
) -> None:
    rk_client, recorder = client
    _publish(rk_client)
    v = rk_client.resolve("coco@v1")
    rk_client.deprecate("coco@v1", reason="bad labels")
    recorder.take()
    again = rk_client.resolve("coco@v1")
    assert again.state == "deprecated"
    assert again.split("train").shards is v.split("train").shards  # not fetched again
    assert [status for _, status in recorder.take()] == [200]


def test_expect_digest_is_checked_by_the_service_when_held(
    client: tuple[rk.Client, Recorder],
) -> None:
    rk_client, _ = client
    _publish(rk_client)
    v = rk_client.resolve("coco@latest")
    assert rk_client.resolve("coco@latest", expect_digest=v.content_digest).name == v.name
    with pytest.raises(rk.DigestMismatch):
        rk_client.resolve("coco@latest", expect_digest="sha256:" + "0" * 64)


def test_staged_versions_are_never_kept(client: tuple[rk.Client, Recorder]) -> None:
    rk_client, recorder = client
    staged = rk_client.stage("coco")
    rk_client.register_shards(staged, shard_bodies(staged.storage_prefix, 2))
    assert rk_client.resolve(staged.name).shard_count == 2
    rk_client.register_shards(staged, shard_bodies(staged.storage_prefix, 2, split="validation"))
    recorder.take()
    later = rk_client.resolve(staged.name)
    assert sorted(later.splits) == ["train", "validation"]
    assert [status for _, status in recorder.take()] == [200, 200]


def test_without_shards_fetches_no_page(client: tuple[rk.Client, Recorder]) -> None:
    rk_client, recorder = client
    _publish(rk_client)
    recorder.take()
    v = rk_client.resolve("coco@latest", shards=False)
    assert not v.splits and v.shard_count == 10
    assert len(recorder.take()) == 1


def test_collect_splits_joins_pages_with_different_prefixes() -> None:
    def page(uris: list[str], split: str, start: int) -> ShardColumns[rk.Shard]:
        rows = [
            rk.Shard(
                split=split,
                index=start + i,
                count=4,
                uri=u,
                compression="none",
                size=1,
                sha256="a" * 64,
                crc32c="0" * 8,
                records_sha256="b" * 64,
                record_count=2,
            )
            for i, u in enumerate(uris)
        ]
        from recordkeeper.core.shard_columns import to_columns

        compact = to_columns(rows)
        return ShardColumns(rk.Shard, compact["uri_prefix"], compact["columns"])

    splits = collect_splits(
        [
            page(["s3://a/x/0", "s3://a/x/1"], "train", 0),
            page(["s3://b/y/2", "s3://b/y/3"], "train", 2),
        ]
    )
    assert splits["train"].uris == ["s3://a/x/0", "s3://a/x/1", "s3://b/y/2", "s3://b/y/3"]
    assert [s.index for s in splits["train"].shards] == [0, 1, 2, 3]
    assert splits["train"].record_count == 8


def test_the_writer_gets_its_version_as_resolve_gives_it_with_one_request_less(
    client: tuple[rk.Client, Recorder],
) -> None:
    """After the commit only the shards are fetched: the commit's answer is the version as
    resolving its name answers it (but the shards). An identical version kept instead of the
    new one is resolved as before."""
    from tests.client._records import sample_examples

    rk_client, recorder = client
    records = sample_examples(20)
    with rk_client.writer("coco", shard_size=1000) as w:
        for record in records:
            w.write(record)
    paths = [path for path, _ in recorder.take()]
    commit = next(i for i, path in enumerate(paths) if path.endswith("/commit"))
    # then the record identity computed while writing is registered (docs/record-identity.md)
    # and the sample records that streamed by are sent (docs/client.md)
    tail = [p.rsplit("/", 1)[-1] for p in paths[commit:]]
    assert tail == ["commit", "shards", "record-sets", "sample"]
    assert w.version.shard_count > 1
    resolved = rk_client.resolve(w.version.name)
    assert w.version == resolved and w.version.ref == resolved.ref == w.version.name
    assert w.version.metadata == resolved.metadata and w.version.created_at == resolved.created_at

    with pytest.warns(rk.DuplicateWarning), rk_client.writer("coco", shard_size=1000) as again:
        for record in records:
            again.write(record)
    paths = [path for path, _ in recorder.take()]
    assert paths[-2].endswith("/commit") and paths[-1].endswith(f"/versions/{w.version.name}")
    assert again.version == resolved

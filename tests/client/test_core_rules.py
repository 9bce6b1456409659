"""The client's entry points apply the core's rules: the same inputs pass and fail as in the
core's own tables (tests/core/), before any request is sent."""

from __future__ import annotations

import httpx
import pytest

import recordkeeper as rk
from recordkeeper.checkpoint_lineage import normalize_data
from recordkeeper.core.digests import digest_hex, parse_digest
from recordkeeper.core.errors import STATUS_CODES, InvalidHash, InvalidInput, code_for_status
from recordkeeper.core.splits import is_split_name
from recordkeeper.http import HttpCore
from recordkeeper.pinned import InvalidConfig, parse_entries
from tests.core.test_digests import DIGESTS
from tests.core.test_splits import SPLITS


def _client(seen: list[httpx.Request]) -> rk.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/shards/consumers"):
            return httpx.Response(200, json={"data": [], "count": 0, "versions": [], "shards": []})
        return httpx.Response(404, json={"code": "dataset_not_found", "detail": "no coco"})

    http = httpx.Client(base_url="http://svc", transport=httpx.MockTransport(handler))
    return rk.Client(http_client=http, retries=0)


@pytest.mark.parametrize(("text", "canonical"), DIGESTS)
def test_expect_digest_is_parsed_by_the_core(text: object, canonical: str | None) -> None:
    if text is None:  # no expectation
        return
    seen: list[httpx.Request] = []
    client = _client(seen)
    if canonical is None:
        with pytest.raises(InvalidHash):
            client.resolve("coco@latest", expect_digest=text)  # type: ignore[arg-type]
        assert not seen
    else:
        with pytest.raises(rk.DatasetNotFound):
            client.resolve("coco@latest", expect_digest=text)  # type: ignore[arg-type]
        assert seen[0].url.params["expect_digest"] == canonical


@pytest.mark.parametrize(("text", "canonical"), DIGESTS)
def test_pinned_digests_are_parsed_by_the_core(text: object, canonical: str | None) -> None:
    data = {"train": {"version": "coco@v1", "digest": text}}
    if text is None:  # no digest: an unlocked entry
        assert parse_entries(data)[0].digest is None
    elif canonical is None:
        with pytest.raises(InvalidConfig):
            parse_entries(data)
    else:
        assert parse_entries(data)[0].digest == canonical


@pytest.mark.parametrize(("text", "canonical"), DIGESTS)
def test_shard_consumers_sha256_is_parsed_by_the_core(text: object, canonical: str | None) -> None:
    if not isinstance(text, str) or text != text.strip():  # the client strips what users type
        return
    seen: list[httpx.Request] = []
    client = _client(seen)
    if canonical is None:
        with pytest.raises(InvalidInput):
            client.shard_consumers(text)
        assert not seen
    else:
        client.shard_consumers(text)
        assert seen[0].url.params["sha256"] == digest_hex(text) == parse_digest(text)[7:]


@pytest.mark.parametrize(("name", "valid"), SPLITS)
def test_lineage_splits_use_the_core_grammar(name: object, valid: bool) -> None:
    data = {"train": {"version": "coco@v1", "splits": [name]}}
    assert is_split_name(name) is valid
    if valid:
        assert normalize_data(data)[0].splits == (name,)
    else:
        with pytest.raises(rk.InvalidCheckpoint):
            normalize_data(data)


@pytest.mark.parametrize("status", sorted({*STATUS_CODES, 418, 500, 502}))
def test_an_answer_without_a_code_gets_the_core_code(status: int) -> None:
    http = httpx.Client(transport=httpx.MockTransport(lambda _: httpx.Response(status)))
    core = HttpCore("http://svc", None, http_client=http, retries=0)
    with pytest.raises(rk.RecordkeeperError) as caught:
        core.request("POST", "/x")
    assert caught.value.code == code_for_status(status)


def test_rk_shard_is_the_core_record_with_a_read_only_identity() -> None:
    import pickle

    from recordkeeper.core.shards import ShardRecord

    body = {
        "split": "train",
        "index": "1",
        "count": 2,
        "uri": "file:///store/a",
        "size": 5,
        "sha256": "a" * 64,
        "crc32c": "0a0b0c0d",
        "records_sha256": "b" * 64,
        "record_count": 3,
        "storage_identity": None,
        "schema_digest": None,
        "registered_at": "2026-01-01T00:00:00Z",
    }
    shard = rk.Shard.from_dict(body)
    assert isinstance(shard, ShardRecord)
    assert shard.index == 1 and shard.compression == "none" and shard.name == "train-00001-of-00002"
    assert dict(shard.storage_identity) == {}
    with pytest.raises(TypeError):
        shard.storage_identity["x"] = 1  # type: ignore[index]
    assert pickle.loads(pickle.dumps(shard)) == shard
    assert list(shard.to_dict()) == [
        "split",
        "index",
        "count",
        "uri",
        "compression",
        "size",
        "sha256",
        "crc32c",
        "records_sha256",
        "record_count",
        "format",
        "storage_identity",
    ]

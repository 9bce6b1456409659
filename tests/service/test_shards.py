"""Registering shards: bulk, idempotent, validated, and never on a committed version."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, commit, error, register, shard, shards, stage


@pytest.fixture
def staged(client: TestClient) -> dict[str, Any]:
    return stage(client, "coco", date="20231015")


def test_register_then_repeat_is_a_no_op(client: TestClient, staged: dict[str, Any]) -> None:
    bodies = shards(staged["storage_prefix"], 4)
    response = register(client, staged["name"], bodies[:3])
    assert response.json() == {"registered": 3, "unchanged": 0, "shard_count": 3}
    response = register(client, staged["name"], bodies)
    assert response.json() == {"registered": 1, "unchanged": 3, "shard_count": 4}
    version = client.get(f"{API}/versions/{staged['name']}").json()
    assert version["shard_count"] == 4
    assert version["record_count"] == 40
    train = version["splits"]["train"]
    assert [s["index"] for s in train["shards"]] == [0, 1, 2, 3]
    first = train["shards"][0]
    assert first["sha256"] == bodies[0]["sha256"]
    assert first["storage_identity"] == bodies[0]["storage_identity"]
    assert first["schema_digest"].startswith("sha256:")
    assert "schema" not in first


def test_conflicting_registration(client: TestClient, staged: dict[str, Any]) -> None:
    prefix = staged["storage_prefix"]
    assert register(client, staged["name"], [shard(prefix, 0, 2)]).status_code == 200
    other = shard(prefix, 0, 2, content="different")
    body = error(register(client, staged["name"], [other]), 409, "shard_conflict")
    assert body["shard"] == 0
    moved = shard(prefix, 0, 2, uri=prefix + "elsewhere.tfrecord")
    error(register(client, staged["name"], [shard(prefix, 1, 2), moved]), 409, "shard_conflict")
    # the failed request registered nothing (one transaction)
    assert client.get(f"{API}/versions/{staged['name']}").json()["shard_count"] == 1
    twice = [shard(prefix, 1, 2), shard(prefix, 1, 2, content="x")]
    assert error(register(client, staged["name"], twice), 409, "shard_conflict")["shard"] == 1


@pytest.mark.parametrize(
    ("override", "code"),
    [
        ({"split": "Train"}, "invalid_shard"),
        ({"split": ""}, "invalid_shard"),
        ({"index": 2}, "invalid_shard"),
        ({"index": -1}, "invalid_shard"),
        ({"count": 0}, "invalid_shard"),
        ({"compression": "bz2"}, "invalid_shard"),
        ({"size": -1}, "invalid_shard"),
        ({"record_count": -5}, "invalid_shard"),
        ({"uri": "no-scheme/file"}, "invalid_shard"),
        ({"uri": "s3://ml-data/datasets/a b"}, "invalid_shard"),
        ({"schema": {"record_type": "weird"}}, "invalid_shard"),
        ({"schema": {"features": ["not an object"]}}, "invalid_shard"),
        ({"storage_identity": "etag"}, "invalid_request"),
        ({"sha256": "abc"}, "invalid_hash"),
        ({"sha256": "G" * 64}, "invalid_hash"),
        ({"sha256": "A" * 64}, "invalid_hash"),
        ({"records_sha256": "0" * 63}, "invalid_hash"),
        ({"crc32c": "123"}, "invalid_hash"),
        ({"crc32c": "0x123456"}, "invalid_hash"),
        ({"index": "one"}, "invalid_request"),
        ({"sha256": None}, "invalid_request"),
    ],
)
def test_invalid_shard_fields(
    client: TestClient, staged: dict[str, Any], override: dict[str, Any], code: str
) -> None:
    good = shard(staged["storage_prefix"], 0, 2)
    bad = {**shard(staged["storage_prefix"], 1, 2), **override}
    status = 422 if code == "invalid_request" else 400
    body = error(register(client, staged["name"], [good, bad]), status, code)
    if status == 400:
        assert body["shard"] == 1
        assert body["detail"].startswith("shard 1:")


def test_missing_field_is_invalid_request(client: TestClient, staged: dict[str, Any]) -> None:
    body = shard(staged["storage_prefix"], 0, 1)
    del body["records_sha256"]
    problems = error(register(client, staged["name"], [body]), 422, "invalid_request")["errors"]
    assert any("records_sha256" in p["loc"] for p in problems)
    error(client.post(f"{API}/versions/{staged['name']}/shards", json={}), 422, "invalid_request")
    error(register(client, staged["name"], []), 400, "invalid_shard")


def test_count_must_agree_within_a_split(client: TestClient, staged: dict[str, Any]) -> None:
    prefix = staged["storage_prefix"]
    assert register(client, staged["name"], [shard(prefix, 0, 3)]).status_code == 200
    body = error(register(client, staged["name"], [shard(prefix, 1, 4)]), 400, "invalid_shard")
    assert "count" in body["detail"]
    # other splits may have other counts
    other = shard(prefix, 0, 1, split="validation")
    assert register(client, staged["name"], [other]).status_code == 200


def test_shard_uri_outside_allowed_roots(client: TestClient, staged: dict[str, Any]) -> None:
    prefix = staged["storage_prefix"]
    for uri in [
        "file:///etc/passwd",
        "s3://other/x.tfrecord",
        prefix + "../../../../etc/passwd",
        prefix + "%2E%2E/escape",
    ]:
        bad = shard(prefix, 0, 1, uri=uri)
        body = error(register(client, staged["name"], [bad]), 403, "storage_root_not_allowed")
        assert body["shard"] == 0
        assert body["allowed_roots"]
    # registering in place under another allowed root is fine
    inplace = shard(prefix, 0, 1, uri="s3://ml-data/datasets/raw/train-0.tfrecord")
    assert register(client, staged["name"], [inplace]).status_code == 200


def test_too_many_shards_in_one_request(client: TestClient, staged: dict[str, Any]) -> None:
    bodies = shards(staged["storage_prefix"], 10_001, schema=None)
    error(register(client, staged["name"], bodies), 400, "invalid_shard")


def test_committed_shards_never_change(client: TestClient, staged: dict[str, Any]) -> None:
    prefix = staged["storage_prefix"]
    assert register(client, staged["name"], shards(prefix, 1)).status_code == 200
    assert commit(client, staged["name"]).status_code == 200
    for bodies in (shards(prefix, 1), [shard(prefix, 0, 1, content="new")]):
        body = error(register(client, staged["name"], bodies), 409, "version_immutable")
        assert body["state"] == "committed"
    deprecate = client.post(f"{API}/versions/{staged['name']}/deprecate", json={"reason": "x"})
    assert deprecate.status_code == 200
    body = error(register(client, staged["name"], shards(prefix, 1)), 409, "version_immutable")
    assert body["state"] == "deprecated"
    shown = client.get(f"{API}/versions/{staged['name']}").json()["splits"]["train"]["shards"]
    assert shown[0]["sha256"] == shards(prefix, 1)[0]["sha256"]


def test_abandoned_version_accepts_no_shards(client: TestClient, staged: dict[str, Any]) -> None:
    assert client.post(f"{API}/versions/{staged['name']}/abandon").status_code == 200
    body = error(
        register(client, staged["name"], shards(staged["storage_prefix"], 1)),
        409,
        "version_not_staged",
    )
    assert body["state"] == "abandoned"


def test_register_needs_a_version_name(client: TestClient, staged: dict[str, Any]) -> None:
    bodies = shards(staged["storage_prefix"], 1)
    error(register(client, "coco@v1", bodies), 400, "invalid_version_name")
    error(register(client, "coco_20231301_v1", bodies), 400, "invalid_version_name")
    error(register(client, "coco_20231015_v0", bodies), 400, "invalid_version_name")
    error(register(client, "coco_20231015_v9", bodies), 404, "version_not_found")
    error(register(client, "coco_20231016_v1", bodies), 404, "version_not_found")

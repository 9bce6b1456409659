"""Committing: completeness, digests, schema merge, idempotency and duplicate content."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service._helpers import (
    API,
    commit,
    error,
    example_schema,
    expected_digest,
    publish,
    register,
    shard,
    shards,
    stage,
)


def test_commit_computes_digest_counts_and_schema(client: TestClient) -> None:
    version = stage(client, "coco", date="20231015")
    prefix = version["storage_prefix"]
    bodies = shards(prefix, 3) + shards(prefix, 2, split="validation", records=5)
    assert register(client, version["name"], bodies).status_code == 200
    body = commit(client, version["name"]).json()
    assert body["state"] == "committed"
    assert body["content_digest"] == expected_digest(bodies)
    assert body["shard_count"] == 5
    assert body["record_count"] == 40
    assert body["size"] == sum(b["size"] for b in bodies)
    assert body["committed_at"].endswith("Z")
    schema = client.get(f"{API}/versions/{version['name']}/schema").json()
    assert schema["digest"] == body["schema_digest"]
    assert schema["schema"]["record_count"] == 40
    (label,) = schema["schema"]["features"]
    assert label["present_count"] == 40
    assert client.get(f"{API}/schemas/{schema['digest']}").json() == schema


def test_digest_ignores_storage_and_compression(client: TestClient) -> None:
    a = stage(client, "coco")
    b = stage(client, "coco")
    register(client, a["name"], shards(a["storage_prefix"], 2))
    moved = [
        {**s, "compression": "gzip", "sha256": "f" * 64, "crc32c": "ffffffff"}
        for s in shards(b["storage_prefix"], 2)
    ]
    register(client, b["name"], moved)
    first = commit(client, a["name"]).json()
    second = commit(client, b["name"], "commit").json()
    assert first["content_digest"] == second["content_digest"]


def test_commit_is_idempotent(client: TestClient) -> None:
    committed = publish(client, "coco")
    again = commit(client, committed["name"])
    assert again.status_code == 200
    assert again.json() == {**committed, "ref": again.json()["ref"]}


def test_incomplete_commits(client: TestClient) -> None:
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    body = error(commit(client, version["name"]), 409, "version_incomplete")
    assert body["missing"] == {}
    register(client, version["name"], [shard(prefix, 0, 4), shard(prefix, 2, 4)])
    register(client, version["name"], [shard(prefix, 0, 1, split="validation")])
    body = error(commit(client, version["name"]), 409, "version_incomplete")
    assert body["missing"] == {"train": [1, 3]}
    assert "2 of 4 missing" in body["detail"]
    assert client.get(f"{API}/versions/{version['name']}").json()["state"] == "staged"


def test_incomplete_lists_at_most_1000_missing(client: TestClient) -> None:
    version = stage(client, "coco")
    register(client, version["name"], [shard(version["storage_prefix"], 5, 5000, schema=None)])
    missing = error(commit(client, version["name"]), 409, "version_incomplete")["missing"]
    assert missing["train"][:6] == [0, 1, 2, 3, 4, 6]
    assert len(missing["train"]) == 1000


def test_schema_conflict(client: TestClient) -> None:
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    register(
        client,
        version["name"],
        [
            shard(prefix, 0, 2, schema=example_schema(kind="int64")),
            shard(prefix, 1, 2, schema=example_schema(kind="float")),
        ],
    )
    body = error(commit(client, version["name"]), 409, "schema_conflict")
    assert body["feature"] == "label"
    assert body["kinds"] == ["float", "int64"]


def test_no_merged_schema_unless_every_shard_has_one(client: TestClient) -> None:
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    register(client, version["name"], [shard(prefix, 0, 2), shard(prefix, 1, 2, schema=None)])
    body = commit(client, version["name"]).json()
    assert body["schema_digest"] is None
    error(client.get(f"{API}/versions/{version['name']}/schema"), 404, "schema_not_found")


def test_merged_schemas_are_deduplicated(client: TestClient) -> None:
    first = publish(client, "coco", content="a")
    second = publish(client, "coco", content="b")
    assert first["schema_digest"] == second["schema_digest"]


def test_duplicate_content_error(client: TestClient) -> None:
    original = publish(client, "coco", content="same")
    version = stage(client, "coco")
    register(client, version["name"], shards(version["storage_prefix"], 2, content="same"))
    body = error(commit(client, version["name"]), 409, "duplicate_content")
    assert body["duplicate_of"] == original["name"]
    assert client.get(f"{API}/versions/{version['name']}").json()["state"] == "staged"


def test_duplicate_content_use_existing(client: TestClient) -> None:
    original = publish(client, "coco", content="same")
    version = stage(client, "coco")
    register(client, version["name"], shards(version["storage_prefix"], 2, content="same"))
    answer = commit(client, version["name"], "use_existing").json()
    assert answer["name"] == original["name"]
    assert answer["duplicate_of"] == original["name"]
    staged = client.get(f"{API}/versions/{version['name']}").json()
    assert staged["state"] == "abandoned"
    assert staged["duplicate_of"] == original["name"]
    # a retried commit answers the same; other modes cannot commit an abandoned version
    assert commit(client, version["name"], "use_existing").json()["name"] == original["name"]
    error(commit(client, version["name"]), 409, "version_not_staged")


def test_duplicate_content_commit_anyway(client: TestClient) -> None:
    original = publish(client, "coco", content="same")
    forced = publish(client, "coco", content="same", on_duplicate="commit")
    assert forced["name"] != original["name"]
    assert forced["state"] == "committed"
    assert forced["duplicate_of"] is None
    assert forced["content_digest"] == original["content_digest"]
    latest = client.get(f"{API}/versions/coco@latest").json()
    assert latest["name"] == forced["name"]


def test_same_content_in_another_dataset_is_no_duplicate(client: TestClient) -> None:
    publish(client, "coco", content="same")
    assert publish(client, "other", content="same")["state"] == "committed"


def test_commit_abandoned_and_bad_on_duplicate(client: TestClient) -> None:
    version = stage(client, "coco")
    register(client, version["name"], shards(version["storage_prefix"], 1))
    error(
        client.post(f"{API}/versions/{version['name']}/commit", json={"on_duplicate": "x"}),
        422,
        "invalid_request",
    )
    assert client.post(f"{API}/versions/{version['name']}/abandon").status_code == 200
    body = error(commit(client, version["name"]), 409, "version_not_staged")
    assert body["state"] == "abandoned"


def test_commit_without_body(client: TestClient) -> None:
    version = stage(client, "coco")
    register(client, version["name"], shards(version["storage_prefix"], 1))
    response = client.post(f"{API}/versions/{version['name']}/commit")
    assert response.status_code == 200
    assert response.json()["state"] == "committed"


def test_abandon(client: TestClient) -> None:
    version = stage(client, "coco")
    first = client.post(f"{API}/versions/{version['name']}/abandon")
    assert first.json()["state"] == "abandoned"
    assert client.post(f"{API}/versions/{version['name']}/abandon").status_code == 200
    committed = publish(client, "coco")
    body = error(
        client.post(f"{API}/versions/{committed['name']}/abandon"), 409, "version_immutable"
    )
    assert body["state"] == "committed"


def test_a_duplicate_burns_no_number(client: TestClient) -> None:
    """Issue 9, point 4: identical content published again, then new content → v2, not v3."""
    v1 = publish(client, "coco", content="a", date="20231015")
    assert v1["name"] == "coco_20231015_v1"
    dup = stage(client, "coco", date="20231015")
    register(client, dup["name"], shards(dup["storage_prefix"], 2, content="a"))
    answer = commit(client, dup["name"], "use_existing").json()
    assert (answer["name"], answer["duplicate_of"]) == (v1["name"], v1["name"])
    abandoned = client.get(f"{API}/versions/{dup['name']}").json()
    assert (abandoned["state"], abandoned["number"]) == ("abandoned", None)
    refused = stage(client, "coco", date="20231015")  # on_duplicate=error: stays staged
    register(client, refused["name"], shards(refused["storage_prefix"], 2, content="a"))
    error(commit(client, refused["name"]), 409, "duplicate_content")
    v2 = publish(client, "coco", content="b", date="20231015")
    assert (v2["name"], v2["number"]) == ("coco_20231015_v2", 2)
    listed = client.get(f"{API}/datasets/coco/versions").json()["data"]
    assert [(v["state"], v["number"]) for v in listed] == [
        ("staged", None),
        ("abandoned", None),
        ("committed", 2),
        ("committed", 1),
    ]
    # forced anyway: a new number, as any commit
    forced = stage(client, "coco", date="20231015")
    register(client, forced["name"], shards(forced["storage_prefix"], 2, content="a"))
    assert commit(client, forced["name"], "commit").json()["number"] == 3
    events = client.get(
        f"{API}/events", params={"version": "coco_20231015_v2", "action": "version.committed"}
    ).json()["data"]
    assert events[0]["detail"]["staged_as"].startswith("coco_20231015_staged")


def test_a_version_numbered_at_commit_is_stored_under_its_committed_name(
    client: TestClient,
) -> None:
    """Shards registered in place elsewhere: the version's own prefix (where its record lookup
    goes after commit) takes the committed name, as a reserved staging's does from the start;
    one holding a shard of the version keeps the staged name."""
    elsewhere = stage(client, "coco", desc="in_place")
    staged_prefix = elsewhere["storage_prefix"]
    assert staged_prefix.endswith(f"/coco/{elsewhere['staged_name']}/")
    raw = staged_prefix.rsplit("/coco/", 1)[0] + "/raw/"
    register(client, elsewhere["name"], shards(raw, 2))
    done = commit(client, elsewhere["name"]).json()
    assert done["name"].endswith("_v1_in_place")
    assert done["storage_prefix"] == staged_prefix.replace(elsewhere["staged_name"], done["name"])
    shown = client.get(f"{API}/versions/{done['name']}").json()
    assert shown["storage_prefix"] == done["storage_prefix"]
    holding = stage(client, "coco", desc="under_prefix")
    register(client, holding["name"], shards(holding["storage_prefix"], 1, content="b"))
    kept = commit(client, holding["name"]).json()
    assert kept["storage_prefix"] == holding["storage_prefix"]

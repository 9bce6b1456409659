"""Resolution of every reference form, deprecation and ``expect_digest``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, commit, error, publish, register, shards, stage


def get(client: TestClient, ref: str, **params: Any) -> Any:
    return client.get(f"{API}/versions/{quote(ref, safe='')}", params=params)


@pytest.fixture
def three(client: TestClient) -> list[dict[str, Any]]:
    """coco v1 (add_person), v2, v3 committed; v4 staged."""
    versions = [
        publish(client, "coco", content="1", desc="add_person", date="20231015"),
        publish(client, "coco", content="2", date="20231016"),
        publish(client, "coco", content="3", desc="fix", date="20231017"),
    ]
    stage(client, "coco", date="20231018")
    return versions


def test_every_reference_form(client: TestClient, three: list[dict[str, Any]]) -> None:
    v1, _v2, v3 = three
    digest = v1["content_digest"].removeprefix("sha256:")
    forms = {
        "coco_20231015_v1_add_person": v1,
        "coco_20231015_v1": v1,
        "coco@v1": v1,
        "coco@1": v1,
        "coco@latest": v3,
        f"coco@sha256:{digest[:12]}": v1,
        f"coco@sha256:{digest}": v1,
    }
    for ref, expected in forms.items():
        response = get(client, ref)
        assert response.status_code == 200, (ref, response.text)
        body = response.json()
        assert body["name"] == expected["name"], ref
        assert body["ref"] == ref
        assert body["splits"]["train"]["shard_count"] == 2


def test_without_shards(client: TestClient, three: list[dict[str, Any]]) -> None:
    body = get(client, "coco@latest", shards="false").json()
    assert body["splits"] is None
    assert body["shard_count"] == 2


def test_missing_versions(client: TestClient, three: list[dict[str, Any]]) -> None:
    body = error(get(client, "coco@v7"), 404, "version_not_found")
    assert "highest committed is 3" in body["detail"]
    error(get(client, "coco_20231015_v9"), 404, "version_not_found")
    # right number, wrong date or desc
    error(get(client, "coco_20231016_v1"), 404, "version_not_found")
    error(get(client, "coco_20231015_v1_other"), 404, "version_not_found")
    body = error(get(client, "nope@latest"), 404, "dataset_not_found")
    assert "did you mean" not in body["detail"]
    # a near miss names the dataset it may have meant (issue 26: it said version_not_found)
    body = error(get(client, "cocoo@latest"), 404, "dataset_not_found")
    assert body["detail"] == "there is no dataset named 'cocoo'; did you mean 'coco'?"
    error(get(client, "cocoo_20231015_v1"), 404, "dataset_not_found")
    error(get(client, "coco@prod"), 404, "version_not_found")
    error(get(client, "coco@sha256:" + "0" * 12), 404, "version_not_found")


def test_staged_versions_only_by_exact_name(
    client: TestClient, three: list[dict[str, Any]]
) -> None:
    staged = get(client, "coco_20231018_staged4")
    assert staged.status_code == 200
    assert (staged.json()["state"], staged.json()["number"]) == ("staged", None)
    error(get(client, "coco@v4"), 404, "version_not_found")  # it has no number yet
    error(get(client, "coco_20231018_v4"), 404, "version_not_found")
    body = error(get(client, "coco_20231018_staged9"), 404, "version_not_found")
    assert "staged as coco_20231018_staged9" in body["detail"]
    assert get(client, "coco@latest").json()["number"] == 3
    # committed versions keep answering to their staged name
    assert get(client, "coco_20231017_staged3_fix").json()["name"] == "coco_20231017_v3_fix"


@pytest.mark.parametrize(
    "ref",
    [
        "",
        " ",
        "coco",
        "coco@",
        "coco@v0",
        "coco@sha256:abc",
        "coco@sha256:XYZXYZXYZXYZ",
        "Coco@latest",
        "coco@v1@v2",
        "coco@bad alias",
        "coco_20231301_v1",
    ],
)
def test_invalid_references(client: TestClient, ref: str) -> None:
    if not ref.strip():
        assert client.get(f"{API}/versions/{quote(ref)}").status_code in (400, 404, 405)
        return
    error(get(client, ref), 400, "invalid_reference")


def test_ambiguous_prefix_is_refused(client: TestClient, settings: Any) -> None:
    # Two versions whose digests share a 12-digit prefix cannot be produced by hashing in a
    # test, so plant them directly in the database.
    from sqlalchemy import update

    from recordkeeper_service.db import Database
    from recordkeeper_service.tables import Version

    a = publish(client, "amb", content="a")
    b = publish(client, "amb", content="b")
    database = Database(settings.effective_database_url, pool_size=1)
    try:
        with database.transaction() as session:
            for name, digest in ((a["name"], "1" * 64), (b["name"], "1" * 12 + "2" * 52)):
                session.execute(
                    update(Version)
                    .where(Version.name == name)
                    .values(content_digest="sha256:" + digest)
                )
    finally:
        database.dispose()
    body = error(get(client, "amb@sha256:" + "1" * 12), 400, "invalid_reference")
    assert "ambiguous" in body["detail"]
    assert get(client, "amb@sha256:" + "1" * 13).json()["name"] == a["name"]


def test_expect_digest(client: TestClient, three: list[dict[str, Any]]) -> None:
    v3 = three[2]
    ok = get(client, "coco@latest", expect_digest=v3["content_digest"])
    assert ok.status_code == 200
    wrong = "sha256:" + "0" * 64
    body = error(get(client, "coco@latest", expect_digest=wrong), 409, "digest_mismatch")
    assert body["expected"] == wrong
    assert body["actual"] == v3["content_digest"]
    error(get(client, "coco@latest", expect_digest="sha256:abc"), 400, "invalid_hash")


def test_deprecate_leaves_latest_but_stays_resolvable(
    client: TestClient, three: list[dict[str, Any]]
) -> None:
    v1, v2, v3 = three
    response = client.post(f"{API}/versions/coco@v3/deprecate", json={"reason": "bad labels"})
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "deprecated"
    assert body["deprecated_reason"] == "bad labels"
    assert body["deprecated_at"].endswith("Z")
    assert get(client, "coco@latest").json()["name"] == v2["name"]
    assert get(client, "coco@v3").json()["state"] == "deprecated"
    assert get(client, v3["name"]).json()["state"] == "deprecated"
    digest = v3["content_digest"][7:19]
    error(get(client, f"coco@sha256:{digest}"), 404, "version_not_found")
    # idempotent, first reason kept
    again = client.post(f"{API}/versions/{v3['name']}/deprecate", json={"reason": "other"})
    assert again.json()["deprecated_reason"] == "bad labels"
    assert client.get(f"{API}/datasets/coco").json()["latest"] == v2["name"]
    # a reason is optional
    assert client.post(f"{API}/versions/coco@v1/deprecate").json()["state"] == "deprecated"
    assert v1["name"] != v2["name"]


def test_deprecate_needs_a_committed_version(client: TestClient) -> None:
    version = stage(client, "coco")
    url = f"{API}/versions/{version['name']}/deprecate"
    error(client.post(url, json={"reason": "x"}), 404, "version_not_found")
    register(client, version["name"], shards(version["storage_prefix"], 1))
    commit(client, version["name"])
    error(client.post(url, json={"reason": "x" * 2001}), 422, "invalid_request")


def test_list_versions_filters(client: TestClient, three: list[dict[str, Any]]) -> None:
    url = f"{API}/datasets/coco/versions"
    page = client.get(url).json()
    assert [v["number"] for v in page["data"]] == [None, 3, 2, 1]  # staged ones first
    assert page["count"] == 4
    assert all(v["splits"] is None for v in page["data"])
    committed = client.get(url, params={"state": "committed"}).json()
    assert [v["number"] for v in committed["data"]] == [3, 2, 1]
    ranged = client.get(url, params={"since": "20231016", "until": "2023-10-17"}).json()
    assert [v["number"] for v in ranged["data"]] == [3, 2]
    paged = client.get(url, params={"limit": 1, "offset": 1}).json()
    assert [v["number"] for v in paged["data"]] == [3]
    error(client.get(url, params={"state": "gone"}), 422, "invalid_request")
    error(client.get(url, params={"since": "20231332"}), 400, "invalid_date")


def test_cached_answers_stay_live(client: TestClient) -> None:
    """Committed versions are cached per process; state, aliases and latest never are."""
    v1 = publish(client, "coco", content="1")
    for _ in range(2):  # the second answer comes from the cache
        body = get(client, "coco@latest").json()
        assert (body["name"], body["state"]) == (v1["name"], "committed")
        assert body["splits"]["train"]["shard_count"] == 2
    assert get(client, "coco@latest", shards="false").json()["splits"] is None
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": "coco@v1"})
    assert get(client, "coco@prod").json()["name"] == v1["name"]

    v2 = publish(client, "coco", content="2")
    assert get(client, "coco@latest").json()["name"] == v2["name"]
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": "coco@v2"})
    assert get(client, "coco@prod").json()["name"] == v2["name"]

    client.post(f"{API}/versions/coco@v2/deprecate", json={"reason": "bad"})
    deprecated = get(client, "coco@prod").json()
    assert (deprecated["state"], deprecated["deprecated_reason"]) == ("deprecated", "bad")
    assert deprecated["deprecated_at"] is not None
    assert get(client, "coco@latest").json()["name"] == v1["name"]
    assert get(client, v2["name"]).json()["state"] == "deprecated"
    error(get(client, "coco@latest", expect_digest=v2["content_digest"]), 409, "digest_mismatch")

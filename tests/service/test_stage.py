"""Staging: the server names the staging (``…_stagedK``) and its storage prefix; the version
number and the rk1 name come at commit."""

from __future__ import annotations

import datetime

from fastapi.testclient import TestClient

from tests.service._helpers import (
    API,
    commit,
    error,
    expected_digest,
    publish,
    register,
    shards,
    stage,
)


def test_stage_names_and_prefix(client: TestClient, store: str) -> None:
    body = stage(client, "coco", desc="add_person", date="20231015", metadata={"by": "me"})
    assert body["name"] == body["staged_name"] == "coco_20231015_staged1_add_person"
    assert body["number"] is None
    assert body["date"] == "2023-10-15"
    assert body["desc"] == "add_person"
    assert body["convention"] == "rk1"
    assert body["state"] == "staged"
    assert body["storage_prefix"] == f"{store}coco/coco_20231015_staged1_add_person/"
    assert body["metadata"] == {"by": "me"}
    assert body["content_digest"] is None
    assert body["created_by"] == "anonymous"
    # the dataset was created on the way
    assert client.get(f"{API}/datasets/coco").status_code == 200


def test_stage_defaults_to_today_and_accepts_iso_dates(client: TestClient) -> None:
    today = datetime.datetime.now(datetime.UTC).date()
    assert stage(client)["date"] == today.isoformat()
    assert stage(client, date="2024-02-29")["name"] == "coco_20240229_staged2"


def test_a_year_before_1000_keeps_four_digits(client: TestClient) -> None:
    staged = stage(client, date="00010101")
    assert staged["name"] == "coco_00010101_staged1"  # was coco_10101_staged1: unaddressable
    assert "/coco_00010101_staged1/" in str(staged["storage_prefix"])
    committed = _committed(client, staged, "early")
    assert committed["name"] == "coco_00010101_v1"
    assert client.get(f"{API}/versions/coco_00010101_v1").json()["date"] == "0001-01-01"


def _committed(client: TestClient, staged: dict[str, object], content: str) -> dict[str, object]:
    prefix = str(staged["storage_prefix"])
    assert register(client, str(staged["name"]), shards(prefix, 1, content=content)).is_success
    answer = commit(client, str(staged["name"]))
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_numbers_are_given_at_commit_in_commit_order(client: TestClient) -> None:
    first, second, third = (stage(client, date="20240101") for _ in range(3))
    assert client.post(f"{API}/versions/{second['name']}/abandon").status_code == 200
    # committed in another order than staged: numbers follow the commits, with no gap
    assert _committed(client, third, "c")["name"] == "coco_20240101_v1"
    done = _committed(client, first, "a")
    assert (done["number"], done["name"], done["staged_name"]) == (
        2,
        "coco_20240101_v2",
        "coco_20240101_staged1",
    )
    assert done["storage_prefix"] == first["storage_prefix"]  # shards stay where they are
    # the staged name keeps answering, for a retried commit too
    again = client.get(f"{API}/versions/coco_20240101_staged1").json()
    assert again["name"] == "coco_20240101_v2"
    assert commit(client, "coco_20240101_staged1").json()["name"] == "coco_20240101_v2"
    abandoned = client.get(f"{API}/versions/{second['name']}").json()
    assert (abandoned["state"], abandoned["number"]) == ("abandoned", None)
    assert stage(client, "other")["name"].endswith("_staged1")


def test_stage_under_another_allowed_root(client: TestClient) -> None:
    body = stage(client, "coco", root="s3://ml-data/datasets/team", date="20230101")
    assert body["storage_prefix"] == "s3://ml-data/datasets/team/coco/coco_20230101_staged1/"


def test_stage_bad_input(client: TestClient) -> None:
    url = f"{API}/datasets/coco/versions"
    error(client.post(url, json={"desc": "Add Person"}), 400, "invalid_desc")
    error(client.post(url, json={"desc": "add__person"}), 400, "invalid_desc")
    error(client.post(url, json={"date": "20231301"}), 400, "invalid_date")
    error(client.post(url, json={"date": "2023-1-1"}), 400, "invalid_date")
    error(client.post(url, json={"date": 20231015}), 422, "invalid_request")
    error(client.post(url, json={"metadata": [1, 2]}), 422, "invalid_request")
    error(client.post(f"{API}/datasets/Coco/versions", json={}), 400, "invalid_dataset_name")
    # nothing was allocated by the failures
    assert stage(client)["name"].endswith("_staged1")


def test_stage_root_outside_allowed_roots(client: TestClient) -> None:
    url = f"{API}/datasets/coco/versions"
    for root in ["file:///etc", "file:///etc/passwd", "s3://other-bucket/x", "s3://ml-data/"]:
        body = error(client.post(url, json={"root": root}), 403, "storage_root_not_allowed")
        assert "s3://ml-data/datasets/" in body["allowed_roots"]
    # '..' cannot climb out of an allowed root, nor can a look-alike bucket name
    for root in ["s3://ml-data/datasets/../secrets", "s3://ml-data/datasets/%2e%2e/x"]:
        error(client.post(url, json={"root": root}), 403, "storage_root_not_allowed")
    error(
        client.post(url, json={"root": "s3://ml-data/datasets-evil"}),
        403,
        "storage_root_not_allowed",
    )
    error(client.post(url, json={"root": "/no/scheme"}), 422, "invalid_request")


# --- reserved numbers: the storage prefix carries the committed name (docs/naming.md) -----


def test_a_reserved_staging_is_named_and_stored_by_its_number(
    client: TestClient, store: str
) -> None:
    publish(client, date="20261201", content="old")  # v1, staged the old way
    body = stage(client, date="20261201", desc="first_import", reserve=True)
    assert (body["name"], body["number"]) == ("coco_20261201_v2_first_import", 2)
    assert body["staged_name"] == "coco_20261201_staged2_first_import"
    assert body["state"] == "staged"
    assert body["storage_prefix"] == f"{store}coco/coco_20261201_v2_first_import/"
    # still invisible to everything but its exact names until committed
    assert client.get(f"{API}/versions/coco@latest").json()["name"] == "coco_20261201_v1"
    error(client.get(f"{API}/versions/coco@v2"), 404, "version_not_found")
    done = _committed(client, body, "new")
    assert (done["name"], done["number"], done["state"]) == (
        "coco_20261201_v2_first_import",
        2,
        "committed",
    )
    assert done["storage_prefix"] == body["storage_prefix"]
    for ref in ("coco@v2", "coco_20261201_staged2_first_import", "coco@latest"):
        assert client.get(f"{API}/versions/{ref}").json()["name"] == done["name"]


def test_a_declared_duplicate_takes_no_number_and_stages_nothing(client: TestClient) -> None:
    prefix = stage(client, date="20261201")["storage_prefix"]
    bodies = shards(prefix, 2, content="same")
    digest = expected_digest(bodies)
    v1 = publish(client, date="20261201", content="same")
    assert v1["content_digest"] == digest
    answer = stage(client, date="20261201", content_digest=digest, on_duplicate="use_existing")
    assert (answer["name"], answer["duplicate_of"]) == (v1["name"], v1["name"])
    assert answer["state"] == "committed"
    refused = client.post(
        f"{API}/datasets/coco/versions", json={"date": "20261201", "content_digest": digest}
    )
    assert error(refused, 409, "duplicate_content")["duplicate_of"] == v1["name"]
    # new content: reserved with the next number — the duplicates consumed none
    other = stage(
        client, date="20261201", content_digest=expected_digest(shards(prefix, 2, content="x"))
    )
    assert (other["name"], other["number"]) == ("coco_20261201_v2", 2)
    forced = stage(client, date="20261201", content_digest=digest, on_duplicate="commit")
    assert forced["number"] == 3 and forced["duplicate_of"] is None


def test_a_reserved_number_abandoned_is_a_gap(client: TestClient) -> None:
    reserved = stage(client, date="20261201", reserve=True)
    assert reserved["name"] == "coco_20261201_v1"
    assert client.post(f"{API}/versions/{reserved['name']}/abandon").status_code == 200
    assert publish(client, date="20261201", content="a")["name"] == "coco_20261201_v2"
    gone = client.get(f"{API}/versions/coco_20261201_v1")
    assert gone.json()["state"] == "abandoned"


def test_a_bad_declared_digest_is_refused(client: TestClient) -> None:
    for bad in ("sha256:abc", "md5:" + "0" * 32, 12):
        answer = client.post(f"{API}/datasets/coco/versions", json={"content_digest": bad})
        assert answer.status_code in (400, 422), answer.text
        assert answer.headers.get("x-error-code") in ("invalid_hash", "invalid_request")
    bad_mode = client.post(
        f"{API}/datasets/coco/versions",
        json={"content_digest": "0" * 64, "on_duplicate": "sometimes"},
    )
    assert bad_mode.status_code in (400, 422)

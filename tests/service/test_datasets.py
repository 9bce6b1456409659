"""Datasets: create, get, list with prefix and pagination."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish, stage


def test_create_get_and_exists(client: TestClient) -> None:
    response = client.post(f"{API}/datasets", json={"name": "coco", "description": "COCO 2017"})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "coco"
    assert body["description"] == "COCO 2017"
    assert body["version_count"] == 0
    assert body["latest"] is None
    assert body["created_at"].endswith("Z")

    assert client.get(f"{API}/datasets/coco").json()["name"] == "coco"
    again = client.post(f"{API}/datasets", json={"name": "coco"})
    error(again, 409, "dataset_exists")


def test_invalid_dataset_names(client: TestClient) -> None:
    for name in ["Coco", "1coco", "co co", "coco_20231015_v3", "a" * 65, ""]:
        response = client.post(f"{API}/datasets", json={"name": name})
        error(response, 400, "invalid_dataset_name")
    error(client.get(f"{API}/datasets/Bad!"), 400, "invalid_dataset_name")


def test_unknown_dataset(client: TestClient) -> None:
    error(client.get(f"{API}/datasets/nope"), 404, "dataset_not_found")
    error(client.get(f"{API}/datasets/nope/versions"), 404, "dataset_not_found")
    error(client.get(f"{API}/datasets/nope/aliases"), 404, "dataset_not_found")


def test_list_prefix_escapes_wildcards_and_paginates(client: TestClient) -> None:
    for name in ["mr_brain", "mrxbrain", "coco", "cocoa", "imagenet"]:
        assert client.post(f"{API}/datasets", json={"name": name}).status_code == 201
    names = [d["name"] for d in client.get(f"{API}/datasets").json()["data"]]
    assert names == sorted(names)
    # "_" is a LIKE wildcard; the prefix must match it literally.
    page = client.get(f"{API}/datasets", params={"prefix": "mr_"}).json()
    assert [d["name"] for d in page["data"]] == ["mr_brain"]
    assert page["count"] == 1
    page = client.get(f"{API}/datasets", params={"prefix": "coc", "limit": 1, "offset": 1}).json()
    assert page == {**page, "count": 2, "limit": 1, "offset": 1}
    assert [d["name"] for d in page["data"]] == ["cocoa"]


def test_list_rejects_bad_pagination(client: TestClient) -> None:
    for params in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "many"}):
        body = error(client.get(f"{API}/datasets", params=params), 422, "invalid_request")
        assert body["errors"]


def test_version_count_and_latest(client: TestClient) -> None:
    first = publish(client, "coco", content="a")
    second = publish(client, "coco", content="b")
    stage(client, "coco")  # staged versions are not counted
    body = client.get(f"{API}/datasets/coco").json()
    assert body["version_count"] == 2
    assert body["latest"] == second["name"] != first["name"]
    listed = client.get(f"{API}/datasets").json()["data"][0]
    assert listed["latest"] == second["name"]

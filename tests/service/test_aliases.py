"""Aliases: set, move, delete, history; ``latest`` is implicit."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish, stage

URL = f"{API}/datasets/coco/aliases"


@pytest.fixture
def two(client: TestClient) -> list[dict[str, Any]]:
    return [publish(client, "coco", content="1"), publish(client, "coco", content="2")]


def test_set_move_delete_with_history(client: TestClient, two: list[dict[str, Any]]) -> None:
    v1, v2 = two
    created = client.put(f"{URL}/prod", json={"version": "coco@v1"})
    assert created.status_code == 200
    assert created.json()["version"] == v1["name"]
    assert created.json()["updated_by"] == "anonymous"
    assert client.get(f"{API}/versions/coco@prod").json()["name"] == v1["name"]

    moved = client.put(f"{URL}/prod", json={"version": v2["name"]})
    assert moved.json()["version"] == v2["name"]
    assert client.get(f"{API}/versions/coco@prod").json()["name"] == v2["name"]
    # setting the same target again changes nothing
    client.put(f"{URL}/prod", json={"version": "coco@latest"})

    listed = client.get(URL).json()
    assert [(a["alias"], a["version"]) for a in listed["data"]] == [
        ("latest", v2["name"]),
        ("prod", v2["name"]),
    ]

    assert client.delete(f"{URL}/prod").status_code == 204
    error(client.get(f"{API}/versions/coco@prod"), 404, "version_not_found")
    error(client.delete(f"{URL}/prod"), 404, "alias_not_found")

    history = client.get(f"{URL}/prod/history").json()
    assert [(h["from_version"], h["to_version"]) for h in history["data"]] == [
        (v2["name"], None),
        (v1["name"], v2["name"]),
        (None, v1["name"]),
    ]
    assert all(h["by"] == "anonymous" and h["at"].endswith("Z") for h in history["data"])
    error(client.get(f"{URL}/never/history"), 404, "alias_not_found")


def test_alias_keeps_working_on_a_deprecated_version(
    client: TestClient, two: list[dict[str, Any]]
) -> None:
    client.put(f"{URL}/golden", json={"version": "coco@v1"})
    client.post(f"{API}/versions/coco@v1/deprecate", json={"reason": "old"})
    body = client.get(f"{API}/versions/coco@golden").json()
    assert body["state"] == "deprecated"
    # but an alias cannot be moved onto a deprecated version
    # — a refusal naming the reason (it was a 404 version_not_found, yet the version exists)
    body = error(client.put(f"{URL}/prod", json={"version": "coco@v1"}), 409, "version_deprecated")
    assert (body["state"], body["reason"]) == ("deprecated", "old")
    assert body["version"].startswith("coco_") and "deprecated" in body["detail"]


def test_invalid_aliases(client: TestClient, two: list[dict[str, Any]]) -> None:
    for alias in ["latest", "v3", "3", "Prod", "sha256"]:
        error(client.put(f"{URL}/{alias}", json={"version": "coco@v1"}), 400, "invalid_alias")
    error(client.delete(f"{URL}/latest"), 400, "invalid_alias")
    error(client.put(f"{URL}/prod", json={"version": "other@v1"}), 400, "invalid_reference")
    error(client.put(f"{URL}/prod", json={"version": "coco@"}), 400, "invalid_reference")
    error(client.put(f"{URL}/prod", json={"version": "coco@v9"}), 404, "version_not_found")
    error(client.put(f"{URL}/prod", json={}), 422, "invalid_request")
    error(
        client.put(f"{API}/datasets/nope/aliases/prod", json={"version": "nope@v1"}),
        404,
        "dataset_not_found",
    )


def test_alias_target_must_be_committed(client: TestClient) -> None:
    staged = stage(client, "coco")
    response = client.put(f"{URL}/prod", json={"version": staged["name"]})
    error(response, 404, "version_not_found")
    assert client.get(URL).json()["data"] == []

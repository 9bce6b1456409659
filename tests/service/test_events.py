"""Audit events: every state change is recorded with its actor."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service._helpers import API, publish, stage


def test_every_state_change_is_audited(client: TestClient) -> None:
    client.post(f"{API}/datasets", json={"name": "coco"})
    v1 = publish(client, "coco", content="1")
    staged = stage(client, "coco")
    client.post(f"{API}/versions/{staged['name']}/abandon")
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": "coco@v1"})
    client.delete(f"{API}/datasets/coco/aliases/prod")
    client.post(f"{API}/versions/coco@v1/deprecate", json={"reason": "x"})
    token = client.post(f"{API}/tokens", json={"name": "ci", "scope": "write"}).json()
    client.delete(f"{API}/tokens/{token['id']}")

    events = client.get(f"{API}/events").json()["data"]
    actions = [e["action"] for e in reversed(events)]
    assert actions == [
        "dataset.created",
        "version.staged",
        "version.shards_registered",
        "version.committed",
        "version.staged",
        "version.abandoned",
        "alias.set",
        "alias.deleted",
        "version.deprecated",
        "token.created",
        "token.revoked",
    ]
    assert all(e["actor"] == "anonymous" for e in events)
    ids = [e["id"] for e in events]
    assert ids == sorted(ids, reverse=True)
    committed = next(e for e in events if e["action"] == "version.committed")
    assert committed["version"] == v1["name"]
    assert committed["dataset"] == "coco"
    assert committed["detail"]["content_digest"] == v1["content_digest"]
    assert token["token"] not in client.get(f"{API}/events").text


def test_filters(client: TestClient) -> None:
    v1 = publish(client, "coco")
    publish(client, "other")
    by_dataset = client.get(f"{API}/events", params={"dataset": "other"}).json()
    assert by_dataset["count"] == 4
    assert {e["dataset"] for e in by_dataset["data"]} == {"other"}
    by_version = client.get(f"{API}/events", params={"version": v1["name"]}).json()
    assert [e["action"] for e in by_version["data"]] == [
        "version.committed",
        "version.shards_registered",
        "version.staged",
    ]
    by_action = client.get(f"{API}/events", params={"action": "version.committed"}).json()
    assert by_action["count"] == 2
    paged = client.get(f"{API}/events", params={"limit": 2, "offset": 1}).json()
    assert len(paged["data"]) == 2
    assert paged["count"] == 8

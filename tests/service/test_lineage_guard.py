"""Lineage and auth scopes, and the walks' cycle guard (a corrupted chain must still answer)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import text

from recordkeeper_service.db import Database
from tests.service._helpers import API, error, publish, shards
from tests.service.test_auth import bearer, make_token


def test_scopes(make_client: Callable[..., TestClient], database_url: str) -> None:
    secrets = {
        scope: bearer(make_token(database_url, scope)) for scope in ("read", "write", "admin")
    }
    client = make_client(auth="required")
    version = client.post(f"{API}/datasets/coco/versions", json={}, headers=secrets["write"])
    assert version.status_code == 201
    name = version.json()["name"]
    prefix = version.json()["storage_prefix"]
    assert (
        client.post(
            f"{API}/versions/{name}/shards",
            json={"shards": shards(prefix, 1)},
            headers=secrets["write"],
        ).status_code
        == 200
    )
    assert (
        client.post(f"{API}/versions/{name}/commit", json={}, headers=secrets["write"]).status_code
        == 200
    )

    body = {"data": [{"version": name}]}
    url = f"{API}/models/det/checkpoints/ckpt-1"
    error(client.put(url, json=body), 401, "unauthorized")
    refused = error(client.put(url, json=body, headers=secrets["read"]), 403, "forbidden")
    assert refused["required_scope"] == "write"
    assert client.put(url, json=body, headers=secrets["write"]).status_code == 201
    assert (
        client.get(f"{API}/versions/{name}/consumers", headers=secrets["read"]).json()["count"] == 1
    )

    deprecate = f"{API}/versions/{name}/deprecate"
    error(
        client.post(deprecate, json={"reason": "x"}, headers=secrets["write"]),
        409,
        "version_in_use",
    )
    forced = error(
        client.post(deprecate, json={"reason": "x", "force": True}, headers=secrets["write"]),
        403,
        "forbidden",
    )
    assert forced["required_scope"] == "admin"
    answer = client.post(deprecate, json={"reason": "x", "force": True}, headers=secrets["admin"])
    assert answer.status_code == 200 and answer.json()["state"] == "deprecated"


def test_cycle_in_a_corrupted_chain_terminates(client: TestClient, database_url: str) -> None:
    name = publish(client, "coco")["name"]
    for k in (1, 2, 3):
        parent = f"det/ckpt-{k - 1}" if k > 1 else None
        response = client.put(
            f"{API}/models/det/checkpoints/ckpt-{k}",
            json={"parent": parent, "data": [{"version": name}]},
        )
        assert response.status_code == 201
    # corrupt the database behind the service's back: ckpt-1's parent becomes ckpt-3
    database = Database(database_url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE checkpoints SET parent_kind = 'restored_from', parent_id = "
                    "(SELECT id FROM checkpoints WHERE name = 'ckpt-3') WHERE name = 'ckpt-1'"
                )
            )
    finally:
        database.dispose()
    lineage = client.get(f"{API}/models/det/checkpoints/ckpt-3/lineage").json()
    assert [c["checkpoint"] for c in lineage["chain"]] == ["ckpt-3", "ckpt-2", "ckpt-1"]
    assert lineage["versions"] == [name]
    consumers = client.get(f"{API}/versions/{name}/consumers").json()
    assert consumers["count"] == 3
    graph = client.get(
        f"{API}/lineage/graph", params={"checkpoint": "det/ckpt-1", "depth": 25}
    ).json()
    assert len(graph["nodes"]) == 4 and not graph["truncated"]

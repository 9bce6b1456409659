"""What the web UI asks of the API: who am I, records per split, diff, graph neighbour counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository
from tests.service._helpers import (
    API,
    commit,
    error,
    example_schema,
    publish,
    register,
    shard,
    shards,
    stage,
)
from tests.service.test_lineage import _history, ok


def test_whoami_answers_name_and_scope(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    open_client = make_client()
    assert ok(open_client.get(f"{API}/whoami")) == {
        "name": "anonymous",
        "scope": "admin",
        "token": False,
    }
    database = Database(database_url, pool_size=1)
    try:
        _, secret = TokenRepository(database).create("viewer", "read", actor="test")
    finally:
        database.dispose()
    client = make_client(auth="required")
    who = ok(client.get(f"{API}/whoami", headers={"Authorization": f"Bearer {secret}"}))
    assert who == {"name": "viewer", "scope": "read", "token": True}
    error(client.get(f"{API}/whoami"), 401, "unauthorized")


def test_splits_counts_records_per_split_without_shards(client: TestClient) -> None:
    name = publish(client, "coco", count=3, splits=("train", "validation"))["name"]
    answer = ok(client.get(f"{API}/versions/coco@latest/splits"))
    assert answer == {
        "name": name,
        "splits": {
            "train": {"shard_count": 3, "record_count": 30, "size": 303},
            "validation": {"shard_count": 3, "record_count": 30, "size": 303},
        },
    }
    staged = stage(client, "coco")
    assert ok(client.get(f"{API}/versions/{staged['name']}/splits"))["splits"] == {}
    error(client.get(f"{API}/versions/coco@v9/splits"), 404, "version_not_found")
    error(client.get(f"{API}/versions/coco@@/splits"), 400, "invalid_reference")


def test_diff_of_two_versions(client: TestClient) -> None:
    v1 = stage(client, "coco")
    prefix = v1["storage_prefix"]
    assert register(client, v1["name"], shards(prefix, 2)).status_code == 200
    first = ok(commit(client, v1["name"]))  # committing names it coco_…_v1
    v2 = stage(client, "coco")
    wider = example_schema(features=("label", "person"))
    bodies = [
        shard(v2["storage_prefix"], 0, 3),  # same records as v1's shard 0, stored elsewhere
        shard(v2["storage_prefix"], 1, 3, content="new", records=12, schema=wider),
        shard(v2["storage_prefix"], 2, 3, schema=wider),
    ]
    bodies[0]["records_sha256"] = shards(prefix, 2)[0]["records_sha256"]
    bodies[0]["count"] = 3
    assert register(client, v2["name"], bodies).status_code == 200
    second = ok(commit(client, v2["name"]))
    diff: dict[str, Any] = ok(client.get(f"{API}/versions/coco@v1/diff/coco@latest"))
    assert diff["old"] == first["name"] and diff["new"] == second["name"]
    assert diff["same_content"] is False
    assert diff["shards"]["unchanged"] == 1
    assert [(c["split"], c["index"]) for c in diff["shards"]["changed"]] == [("train", 1)]
    assert [(c["split"], c["index"]) for c in diff["shards"]["added"]] == [("train", 2)]
    assert diff["shards"]["removed"] == []
    assert diff["splits"]["train"] == {
        "old_records": 20,
        "new_records": 32,
        "record_delta": 12,
        "old_shards": 2,
        "new_shards": 3,
    }
    assert [(c["name"], c["change"]) for c in diff["schema"]] == [("person", "added")]
    same = ok(client.get(f"{API}/versions/coco@v2/diff/coco@latest"))
    assert same["same_content"] is True and same["schema"] == []
    error(client.get(f"{API}/versions/coco@v1/diff/coco@v7"), 404, "version_not_found")
    error(client.get(f"{API}/versions/coco@v1/diff/Bad%20Ref"), 400, "invalid_reference")


def test_graph_nodes_count_their_neighbours(client: TestClient) -> None:
    names = _history(client)
    graph = ok(client.get(f"{API}/lineage/graph", params={"checkpoint": "det/ckpt-3", "depth": 1}))
    counts = {n["id"]: (n["upstream_count"], n["downstream_count"]) for n in graph["nodes"]}
    assert counts == {
        "checkpoint:det@r1/ckpt-3": (2, 1),  # parent ckpt-2 and v1 (train and eval: one node)
        "checkpoint:det@r1/ckpt-2": (2, 1),
        "checkpoint:det@r1/ckpt-4": (2, 1),  # ckpt-3 and v2; ft/ckpt-1 below
        f"version:{names['v1']}": (0, 3),  # ckpt-1, -2, -3
    }
    ft = ok(client.get(f"{API}/lineage/graph", params={"checkpoint": "ft/ckpt-1", "depth": 1}))
    node = next(n for n in ft["nodes"] if n["id"] == "checkpoint:ft@ft-run/ckpt-1")
    assert node["run"] == "ft-run" and node["model"] == "ft"
    assert (node["upstream_count"], node["downstream_count"]) == (2, 0)
    v2 = next(n for n in ft["nodes"] if n["kind"] == "version")
    assert (v2["upstream_count"], v2["downstream_count"]) == (0, 2)  # det/ckpt-4 and ft/ckpt-1

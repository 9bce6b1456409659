"""Expensive reads are bounded per request and immutable ones are kept (issue 21, item 9): the
diff of two published versions is computed once per worker and paged; the lineage graph lists at
most ``limit`` nodes, reading no more rows than that needs."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper_service.repository.lineage import MAX_GRAPH_NODES
from tests.service._helpers import error, publish

API = "/api/v1"


def _two_versions(client: TestClient) -> tuple[str, str]:
    old = publish(client, "coco", count=5, content="a")["name"]
    new = publish(client, "coco", count=5, content="b")["name"]
    return old, new


def test_diff_pages_list_changes_in_order_with_totals(client: TestClient) -> None:
    old, new = _two_versions(client)
    first = client.get(f"{API}/versions/{old}/diff/{new}?limit=2").json()
    assert [c["index"] for c in first["shards"]["changed"]] == [0, 1]
    assert first["shards"]["counts"] == {"added": 0, "removed": 0, "changed": 5}
    assert first["shards"]["more"] is True and first["shards"]["limit"] == 2
    last = client.get(f"{API}/versions/{old}/diff/{new}?limit=2&offset=4").json()
    assert [c["index"] for c in last["shards"]["changed"]] == [4]
    assert last["shards"]["more"] is False
    whole = client.get(f"{API}/versions/{old}/diff/{new}").json()
    assert len(whole["shards"]["changed"]) == 5 and whole["shards"]["limit"] == 1000
    error(client.get(f"{API}/versions/{old}/diff/{new}?limit=10001"), 422, "invalid_request")


def test_a_diff_of_published_versions_is_computed_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = _two_versions(client)
    diffs = client.app.state.repository.diffs  # type: ignore[attr-defined]
    computed: list[Any] = []
    compare = diffs.compare
    monkeypatch.setattr(diffs, "compare", lambda a, b: computed.append(1) or compare(a, b))
    answers = [client.get(f"{API}/versions/{old}/diff/{new}").content for _ in range(3)]
    assert len(set(answers)) == 1 and len(computed) == 1
    client.get(f"{API}/versions/{old}/diff/{new}?limit=1")  # another page: rendered once more
    client.get(f"{API}/versions/{old}/diff/{new}?limit=1")
    assert len(computed) == 2
    # by alias too: the same versions, the same kept page
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": new})
    assert client.get(f"{API}/versions/{old}/diff/coco@prod").content == answers[0]
    assert len(computed) == 2


def test_the_graph_lists_at_most_limit_nodes(client: TestClient) -> None:
    version = publish(client, "coco", count=1)["name"]
    for i in range(12):
        body = {"step": i, "run": "r", "data": [{"version": version}]}
        assert client.put(f"{API}/models/m/checkpoints/ckpt-{i}", json=body).status_code == 201
    url = f"{API}/lineage/graph?version={version}&depth=1&direction=downstream"
    whole = client.get(url).json()
    assert len(whole["nodes"]) == 13 and whole["truncated"] is False
    cut = client.get(url + "&limit=5").json()
    assert len(cut["nodes"]) == 5 and cut["truncated"] is True
    assert cut["nodes"][0]["downstream_count"] == 12  # the count still tells the whole
    assert {e["target"] for e in cut["edges"]} <= {n["id"] for n in cut["nodes"]}
    error(client.get(url + f"&limit={MAX_GRAPH_NODES + 1}"), 422, "invalid_request")

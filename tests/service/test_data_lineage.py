"""Lineage through the data over the in-process app (SQLite and PostgreSQL): a checkpoint's
upstream answer carries the history of its versions (parents, sources, producers) to any
depth; impact from a version or a source URI reaches every derived version and every
checkpoint trained on one; a corrupted cyclic ``version_parents`` still answers, completely;
bad input gets a stable code."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from recordkeeper.core.data_lineage import HistoryEntry, describe
from tests.service._helpers import API, error, publish

COMMIT = "3f2a9c1" + "0" * 33
DIGEST = "sha256:" + "cd" * 32
RAW = "gs://raw/coco/"


def _provenance(parent: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "parents": [{"ref": parent, "role": "base"}] if parent else [],
        "producer": {"vcs": "git", "commit": COMMIT, "branch": "main", "entry": "prep.py"},
        "params": {"step": parent or "first"},
    }
    body.update(extra)
    return body


def _source(uri: str) -> dict[str, Any]:
    return {"uri": uri, "identity": {"method": "listing", "digest": DIGEST, "files": 2, "size": 9}}


def _register(client: TestClient, model: str, ckpt: str, **body: Any) -> None:
    response = client.put(f"{API}/models/{model}/checkpoints/{ckpt}", json=body)
    assert response.status_code in (200, 201), response.text


def _chain(client: TestClient, depth: int) -> list[dict[str, Any]]:
    """coco@v1 from raw sources, then ``depth - 1`` versions each a change of the previous."""
    versions = [
        publish(
            client,
            content="v1",
            provenance=_provenance(sources=[_source(RAW), _source("gs://raw/coco/labels.json")]),
        )
    ]
    for n in range(2, depth + 1):
        parent = f"coco@v{n - 1}"
        extra = {"sources": [_source(f"gs://raw/coco/fix-{n}.json")]} if n == depth else {}
        versions.append(publish(client, content=f"v{n}", provenance=_provenance(parent, **extra)))
    return versions


def test_upstream_continues_through_the_data_to_sources_and_producers(
    client: TestClient,
) -> None:
    chain = _chain(client, 3)
    plain = publish(client, dataset="objects365", content="plain")  # recorded nothing
    _register(
        client,
        "det",
        "ckpt-1",
        data=[{"version": "coco@v3"}, {"version": plain["name"]}],
    )
    _register(client, "det", "ckpt-2", parent="det/ckpt-1")
    body = client.get(f"{API}/models/det/checkpoints/ckpt-2/lineage").json()
    history = [HistoryEntry.from_json(e) for e in body["history"]]
    assert [(e.version, e.depth) for e in history] == [
        (chain[2]["name"], 0),
        (chain[1]["name"], 1),
        (chain[0]["name"], 2),
    ]
    assert body["history_truncated"] is False
    v3, v2, v1 = history
    assert v3.parents == ({"version": chain[1]["name"], "dataset": "coco", "number": 2,
                           "role": "base"},)  # fmt: skip
    assert [s["uri"] for s in v1.sources] == [RAW, "gs://raw/coco/labels.json"]
    assert v1.sources[0]["identity"]["digest"] == DIGEST
    assert v2.producer is not None and v2.producer["commit"] == COMMIT
    assert describe(v3) == "coco@v3 ← coco@v2 @ 3f2a9c1 ← gs://raw/coco/fix-3.json"
    assert describe(v1) == "coco@v1 @ 3f2a9c1 ← gs://raw/coco/, gs://raw/coco/labels.json"
    # the compact form carries the same history; a held answer too
    compact = client.get(f"{API}/models/det/checkpoints/ckpt-2/lineage?form=compact").json()
    assert compact["history"] == body["history"]
    again = client.get(f"{API}/models/det/checkpoints/ckpt-2/lineage").json()
    assert again == body
    # a deprecation shows in the history's state (the epoch moves)
    client.post(f"{API}/versions/{chain[0]['name']}/deprecate", json={"reason": "bad labels"})
    later = client.get(f"{API}/models/det/checkpoints/ckpt-2/lineage").json()
    assert {e["version"]: e["state"] for e in later["history"]}[chain[0]["name"]] == "deprecated"


def test_checkpoints_on_the_same_data_share_its_history_until_a_state_changes(
    client: TestClient,
) -> None:
    """A history answered for some versions is kept per lineage epoch and answered again for
    another checkpoint trained on them; a deprecation moves the epoch, so a checkpoint asked
    for the first time afterwards shows the new state."""
    chain = _chain(client, 2)
    for ckpt in ("ckpt-1", "ckpt-2", "ckpt-3"):
        _register(client, "share", ckpt, data=[{"version": "coco@v2"}])
    first = client.get(f"{API}/models/share/checkpoints/ckpt-1/lineage").json()["history"]
    assert [e["version"] for e in first] == [chain[1]["name"], chain[0]["name"]]
    second = client.get(f"{API}/models/share/checkpoints/ckpt-2/lineage").json()["history"]
    assert second == first
    client.post(f"{API}/versions/{chain[0]['name']}/deprecate", json={"reason": "bad labels"})
    third = client.get(f"{API}/models/share/checkpoints/ckpt-3/lineage?form=packed").json()
    states = {e["version"]: e["state"] for e in third["history"]}
    assert states == {chain[1]["name"]: "committed", chain[0]["name"]: "deprecated"}


def test_a_deep_chain_is_complete(client: TestClient) -> None:
    chain = _chain(client, 30)
    _register(client, "deep", "ckpt-1", data=[{"version": "coco@v30"}])
    body = client.get(f"{API}/models/deep/checkpoints/ckpt-1/lineage").json()
    assert [e["version"] for e in body["history"]] == [v["name"] for v in reversed(chain)]
    assert body["history"][-1]["depth"] == 29


def test_impact_from_a_source_or_a_version(client: TestClient) -> None:
    chain = _chain(client, 3)
    side = publish(
        client,
        dataset="objects365",
        content="side",
        provenance={"parents": [{"ref": "coco@v2", "role": "labels"}]},
    )
    _register(client, "det", "ckpt-1", data=[{"version": "coco@v3"}])
    _register(client, "det", "ckpt-2", parent="det/ckpt-1")
    _register(client, "other", "ckpt-1", data=[{"version": side["name"]}])
    _register(client, "unrelated", "ckpt-1", data=[{"version": chain[0]["name"]}])

    # a file inside a recorded prefix: v1 recorded gs://raw/coco/
    hit = client.get(f"{API}/lineage/impact", params={"source": "gs://raw/coco/img/7.jpg"})
    assert hit.status_code == 200, hit.text
    body = hit.json()
    assert [s["uri"] for s in body["sources"]] == [RAW]
    names = [(v["name"], v["depth"]) for v in body["versions"]]
    assert names == [
        (chain[0]["name"], 0),
        (chain[1]["name"], 1),
        (chain[2]["name"], 2),
        (side["name"], 2),
    ]
    via = {v["name"]: v["via"] for v in body["versions"]}
    assert via[side["name"]] == [{"version": chain[1]["name"], "role": "labels"}]
    refs = {c["ref"]: (c["direct"], c["versions"]) for c in body["data"]}
    assert set(refs) == {
        "det@default/ckpt-1",
        "det@default/ckpt-2",
        "other@default/ckpt-1",
        "unrelated@default/ckpt-1",
    }
    assert refs["det@default/ckpt-1"] == (True, [chain[2]["name"]])
    assert refs["det@default/ckpt-2"] == (False, [])

    # the file v3 recorded: v3 recorded it, v1 the prefix it lies under
    exact = client.get(f"{API}/lineage/impact", params={"source": "gs://raw/coco/fix-3.json"})
    assert {(s["uri"], s["version"]) for s in exact.json()["sources"]} == {
        (RAW, chain[0]["name"]),
        ("gs://raw/coco/fix-3.json", chain[2]["name"]),
    }
    assert [v["depth"] for v in exact.json()["versions"]][:2] == [0, 0]
    # a file only v1's labels.json names: not under another recorded prefix but gs://raw/coco/
    other = client.get(f"{API}/lineage/impact", params={"source": "gs://raw/other.json"}).json()
    assert other["versions"] == []
    # as a prefix, everything recorded under gs://raw/
    wide = client.get(f"{API}/lineage/impact", params={"source": "gs://raw/", "prefix": "true"})
    assert {s["uri"] for s in wide.json()["sources"]} == {
        RAW,
        "gs://raw/coco/labels.json",
        "gs://raw/coco/fix-3.json",
    }
    assert wide.json()["target"] == {"version": None, "source": "gs://raw/", "prefix": True}
    # without prefix, gs://raw/ itself was recorded by nothing
    narrow = client.get(f"{API}/lineage/impact", params={"source": "gs://raw/"}).json()
    assert narrow["versions"] == [] and narrow["data"] == [] and narrow["count"] == 0
    # from a version: itself and what derives from it
    from_v2 = client.get(f"{API}/lineage/impact", params={"version": "coco@v2"}).json()
    assert [v["name"] for v in from_v2["versions"]] == [
        chain[1]["name"],
        chain[2]["name"],
        side["name"],
    ]
    assert "unrelated@default/ckpt-1" not in {c["ref"] for c in from_v2["data"]}
    direct = client.get(
        f"{API}/lineage/impact", params={"version": "coco@v2", "transitive": "false"}
    ).json()
    assert {c["ref"] for c in direct["data"]} == {"det@default/ckpt-1", "other@default/ckpt-1"}


def test_a_source_prefix_matches_its_exact_text(client: TestClient) -> None:
    """Object keys are case-sensitive and sources are matched by their text: the prefix
    ``gs://raw/a_`` holds ``gs://raw/a_b/`` — not ``gs://raw/A_B/`` (SQLite's LIKE ignores ASCII
    case), nor ``gs://raw/axb/`` or ``gs://raw/a%b/`` (LIKE's wildcards)."""
    names = {}
    for i, uri in enumerate(["gs://raw/a_b/", "gs://raw/A_B/", "gs://raw/axb/", "gs://raw/a%b/"]):
        provenance = {"sources": [{"uri": uri}]}
        names[publish(client, content=str(i), provenance=provenance)["name"]] = uri
    for prefix, expected in (
        ("gs://raw/a_", ["gs://raw/a_b/"]),
        ("gs://raw/A_", ["gs://raw/A_B/"]),
        ("gs://raw/a%", ["gs://raw/a%b/"]),
    ):
        params = {"source": prefix, "prefix": "true"}
        answer = client.get(f"{API}/lineage/impact", params=params).json()
        assert [names[v["name"]] for v in answer["versions"]] == expected, prefix
        assert [s["uri"] for s in answer["sources"]] == expected, prefix


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({}, 422, "invalid_request"),
        ({"version": "coco@v1", "source": "gs://x/"}, 422, "invalid_request"),
        ({"source": "   "}, 422, "invalid_request"),
        ({"source": "gs://x/\x00"}, 422, "invalid_request"),
        ({"version": "coco@v9"}, 404, "version_not_found"),
        ({"version": "not a ref!"}, 400, "invalid_reference"),
    ],
)
def test_impact_refuses_bad_input(
    client: TestClient, params: dict[str, str], status: int, code: str
) -> None:
    publish(client, content="one")
    error(client.get(f"{API}/lineage/impact", params=params), status, code)


def test_a_cyclic_history_still_terminates_complete(client: TestClient, database_url: str) -> None:
    """Parents are committed before their children, so no cycle can be made through the API;
    one written into the table by hand still gives complete, finite answers."""
    chain = _chain(client, 3)
    engine = create_engine(database_url)
    with engine.begin() as conn:
        ids = {name: vid for vid, name in conn.execute(text("SELECT id, name FROM versions")).all()}
        conn.execute(
            text(
                "INSERT INTO version_parents (version_id, position, parent_id, role) "
                "VALUES (:v, 0, :p, 'base')"
            ),
            {"v": ids[chain[0]["name"]], "p": ids[chain[2]["name"]]},
        )
    engine.dispose()
    _register(client, "det", "ckpt-1", data=[{"version": "coco@v3"}])
    body = client.get(f"{API}/models/det/checkpoints/ckpt-1/lineage").json()
    assert sorted(e["version"] for e in body["history"]) == sorted(v["name"] for v in chain)
    impact = client.get(f"{API}/lineage/impact", params={"version": "coco@v1"}).json()
    assert sorted(v["name"] for v in impact["versions"]) == sorted(v["name"] for v in chain)
    graph = client.get(
        f"{API}/lineage/graph",
        params={"checkpoint": "det/ckpt-1", "depth": 10, "direction": "upstream"},
    ).json()
    kinds = {e["kind"] for e in graph["edges"]}
    assert {"trained_on", "derived_from", "source_of"} <= kinds


def test_the_graph_shows_the_data_chain_and_producers(client: TestClient) -> None:
    chain = _chain(client, 2)
    _register(client, "det", "ckpt-1", data=[{"version": "coco@v2"}])
    graph = client.get(
        f"{API}/lineage/graph",
        params={"checkpoint": "det/ckpt-1", "depth": 3, "direction": "upstream"},
    ).json()
    nodes = {n["id"]: n for n in graph["nodes"]}
    v1, v2 = (f"version:{v['name']}" for v in chain)
    assert nodes[v2]["producer"]["commit"] == COMMIT and nodes[v2]["upstream_count"] == 2
    assert nodes[f"source:{RAW}"]["kind"] == "source"
    edges = {(e["source"], e["target"], e["kind"]) for e in graph["edges"]}
    assert (v1, v2, "derived_from") in edges
    assert (f"source:{RAW}", v1, "source_of") in edges
    down = client.get(
        f"{API}/lineage/graph", params={"version": "coco@v1", "direction": "downstream"}
    ).json()
    assert {(e["source"], e["target"], e["kind"]) for e in down["edges"]} >= {
        (v1, v2, "derived_from"),
        (v2, "checkpoint:det@default/ckpt-1", "trained_on"),
    }

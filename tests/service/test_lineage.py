"""Checkpoint lineage over REST, on SQLite and PostgreSQL: register, upstream, downstream.

Scenario used throughout (``_history``)::

    coco v1 ──train/eval──► det@r1/ckpt-1 ─► det@r1/ckpt-2 ─► det@r1/ckpt-3        (resumed run)
    coco v2 ──train───────────────────────────────────────────► det@r1/ckpt-4 (restored from ckpt-3)
    coco v2 ──train (validation split)──► ft@ft-run/ckpt-1  (initialised from det@r1/ckpt-4)
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish, stage


def put(client: TestClient, ref: str, **body: Any) -> Any:
    """PUT ``model/checkpoint`` or ``model@run/checkpoint`` (the run goes into the body)."""
    head, checkpoint = ref.split("/")
    model, _, run = head.partition("@")
    if run:
        body.setdefault("run", run)
    return client.put(f"{API}/models/{model}/checkpoints/{checkpoint}", json=body)


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _history(client: TestClient) -> dict[str, str]:
    v1 = publish(client, "coco", splits=("train", "validation"), content="a")["name"]
    for k in (1, 2, 3):
        ok(
            put(
                client,
                f"det@r1/ckpt-{k}",
                step=k * 100,
                uri=f"s3://models/det/ckpt-{k}",
                parent=f"det@r1/ckpt-{k - 1}" if k > 1 else None,
                data=[{"version": v1, "role": "train"}, {"version": "coco@v1", "role": "eval"}],
            ),
            201,
        )
    v2 = publish(client, "coco", splits=("train", "validation"), content="b")["name"]
    ok(
        put(
            client,
            "det@r1/ckpt-4",
            step=400,
            parent="det@r1/ckpt-3",
            data=[{"version": "coco@latest"}],
        ),
        201,
    )
    ok(
        put(
            client,
            "ft@ft-run/ckpt-1",
            step=10,
            parent="det@r1/ckpt-4",
            parent_kind="initialized_from",
            run="ft-run",
            data=[{"version": v2, "splits": ["validation"]}],
            saved_models=[
                {"name": "classifier", "uri": "s3://models/ft/ckpt-1_saved_modules/classifier"}
            ],
            metrics={"loss": 0.25},
        ),
        201,
    )
    return {"v1": v1, "v2": v2}


def test_register_is_idempotent_and_resolves_refs_to_exact_versions(client: TestClient) -> None:
    v1 = publish(client, "coco", splits=("train", "validation"))["name"]
    body = {"step": 1, "uri": "s3://m/ckpt-1", "data": [{"version": "coco@latest", "role": "eval"}]}
    first = ok(put(client, "det@r1/ckpt-1", **body), 201)
    assert first["created"] is True
    assert first["ref"] == "det@r1/ckpt-1"
    assert first["data"] == [
        {
            "version": v1,
            "dataset": "coco",
            "content_digest": first["data"][0]["content_digest"],
            "data_state": "stored",
            "data_deleted_at": None,
            "data_deleted_reason": None,
            "role": "eval",
            "splits": ["validation"],  # eval defaults to the validation split
        }
    ]
    # the same registration again (a retry, a flushed queue): 200, unchanged
    again = ok(put(client, "det@r1/ckpt-1", **body))
    assert again["created"] is False
    assert {k: v for k, v in again.items() if k != "created"} == {
        k: v for k, v in first.items() if k != "created"
    }
    # the alias moves; the exact version recorded earlier makes the same body a conflict now
    publish(client, "coco", splits=("train", "validation"), content="new")
    conflict = error(put(client, "det@r1/ckpt-1", **body), 409, "checkpoint_conflict")
    assert conflict["fields"] == ["data"]
    conflict = error(
        put(
            client,
            "det@r1/ckpt-1",
            **{**body, "data": [{"version": v1, "role": "eval"}], "step": 2},
        ),
        409,
        "checkpoint_conflict",
    )
    assert conflict["fields"] == ["step"]
    assert ok(client.get(f"{API}/models/det/checkpoints/ckpt-1"))["step"] == 1


def test_default_and_explicit_splits(client: TestClient) -> None:
    v = publish(client, "mnist", splits=("train", "test", "validation"))["name"]
    other = publish(client, "extra", splits=("shard_a", "shard_b"))["name"]
    record = ok(
        put(
            client,
            "m/c1",
            data=[
                {"version": v, "role": "train"},
                {"version": v, "role": "test"},
                {"version": other, "role": "train"},  # no 'train' split: every split
                {"version": v, "role": "eval", "splits": ["train", "test"]},
            ],
        ),
        201,
    )
    got = {(d["version"], d["role"]): d["splits"] for d in record["data"]}
    assert got == {
        (v, "train"): ["train"],
        (v, "test"): ["test"],
        (v, "eval"): ["test", "train"],
        (other, "train"): ["shard_a", "shard_b"],
    }
    body = error(
        put(client, "m/c2", data=[{"version": v, "splits": ["nope"]}]), 400, "invalid_checkpoint"
    )
    assert "nope" in body["detail"] and "validation" in body["detail"]
    # an empty list used to register the entry with no split at all (silently dropped)
    body = error(
        put(client, "m/c3", data=[{"version": v, "splits": []}]), 400, "invalid_checkpoint"
    )
    assert "splits is empty" in body["detail"]


@pytest.mark.parametrize(
    ("ref", "body", "status", "code"),
    [
        ("Bad/ckpt-1", {}, 400, "invalid_checkpoint"),
        ("m/ckpt 1", {}, 400, "invalid_checkpoint"),
        ("m/c", {"parent": "m/missing"}, 404, "checkpoint_not_found"),
        ("m/c", {"parent": "nomodel/ckpt-1"}, 404, "checkpoint_not_found"),
        ("m/c", {"parent": "no-slash"}, 400, "invalid_checkpoint"),
        ("m/c", {"parent": "m/c"}, 400, "invalid_checkpoint"),
        # the client's rule too (core.lineage.checkpoint_parent): a kind needs a parent
        ("m/c", {"parent_kind": "restored_from"}, 400, "invalid_checkpoint"),
        ("m/c", {"parent_kind": "forked_from", "parent": "m/x"}, 400, "invalid_checkpoint"),
        (
            "m/c",
            {"parent_kind": "restored_from", "parent": "m/x", "step": -1},
            422,
            "invalid_request",
        ),
        ("m/c", {"data": [{"version": "coco@v9"}]}, 404, "version_not_found"),
        ("m/c", {"data": [{"version": "coco@@"}]}, 400, "invalid_reference"),
        ("m/c", {"data": [{"version": "coco@v1", "role": "finetune"}]}, 400, "invalid_checkpoint"),
        ("m/c", {"data": "coco@v1"}, 422, "invalid_request"),
        ("m/c", {"step": "many"}, 422, "invalid_request"),
    ],
)
def test_bad_registrations(
    client: TestClient, ref: str, body: dict[str, Any], status: int, code: str
) -> None:
    publish(client, "coco")
    error(put(client, ref, **body), status, code)
    # nothing was created by a refused registration
    assert ok(client.get(f"{API}/models"))["count"] == 0


def test_staged_versions_cannot_be_training_data(client: TestClient) -> None:
    staged = stage(client, "coco")["name"]
    body = error(put(client, "m/c", data=[{"version": staged}]), 404, "version_not_found")
    assert "staged" in body["detail"]


def test_upstream_union_along_resumed_and_fine_tuned_chain(client: TestClient) -> None:
    names = _history(client)
    lineage = ok(client.get(f"{API}/models/ft/checkpoints/ckpt-1/lineage"))
    assert [c["ref"] for c in lineage["chain"]] == [
        "ft@ft-run/ckpt-1",
        "det@r1/ckpt-4",
        "det@r1/ckpt-3",
        "det@r1/ckpt-2",
        "det@r1/ckpt-1",
    ]
    assert [c["parent_kind"] for c in lineage["chain"]] == [
        "initialized_from",
        "restored_from",
        "restored_from",
        "restored_from",
        None,
    ]
    assert lineage["versions"] == [names["v1"], names["v2"]]  # oldest use first
    entries = {(e["version"], e["role"]): e for e in lineage["data"]}
    assert set(entries) == {(names["v1"], "train"), (names["v1"], "eval"), (names["v2"], "train")}
    v1_train = entries[(names["v1"], "train")]
    assert v1_train["splits"] == ["train"]
    assert [s["checkpoint"] for s in v1_train["segments"]] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert [s["depth"] for s in v1_train["segments"]] == [4, 3, 2]
    assert entries[(names["v1"], "eval")]["splits"] == ["validation"]
    v2 = entries[(names["v2"], "train")]
    assert v2["splits"] == ["train", "validation"]
    assert [(s["model"], s["checkpoint"], s["splits"]) for s in v2["segments"]] == [
        ("det", "ckpt-4", ["train"]),
        ("ft", "ckpt-1", ["validation"]),
    ]
    assert v2["content_digest"].startswith("sha256:") and v2["state"] == "committed"
    own = lineage["checkpoint"]
    assert own["parent"] == "det@r1/ckpt-4" and own["run"] == "ft-run"
    assert own["saved_models"] == [
        {"name": "classifier", "uri": "s3://models/ft/ckpt-1_saved_modules/classifier"}
    ]
    assert own["metrics"] == {"loss": 0.25}
    assert [d["version"] for d in own["data"]] == [names["v2"]]
    # a root checkpoint's lineage is just its own segment
    root = ok(client.get(f"{API}/models/det/checkpoints/ckpt-1/lineage"))
    assert root["versions"] == [names["v1"]] and len(root["chain"]) == 1


def test_downstream_direct_and_transitive(client: TestClient) -> None:
    names = _history(client)
    body = ok(client.get(f"{API}/versions/coco@v1/consumers"))
    assert body["versions"][0]["name"] == names["v1"]
    refs = {c["ref"]: c for c in body["data"]}
    assert list(refs) == [
        "det@r1/ckpt-1",
        "det@r1/ckpt-2",
        "det@r1/ckpt-3",
        "det@r1/ckpt-4",
        "ft@ft-run/ckpt-1",
    ]
    assert [refs[r]["direct"] for r in refs] == [True, True, True, False, False]
    assert refs["det@r1/ckpt-2"]["roles"] == ["eval", "train"]
    assert refs["det@r1/ckpt-2"]["splits"] == ["train", "validation"]
    assert refs["det@r1/ckpt-4"]["parent"] == "det@r1/ckpt-3"
    assert body["models"] == [
        {"model": "det", "checkpoints": 4, "direct": 3},
        {"model": "ft", "checkpoints": 1, "direct": 0},
    ]
    direct = ok(client.get(f"{API}/versions/{names['v1']}/consumers?transitive=false"))
    assert [c["ref"] for c in direct["data"]] == ["det@r1/ckpt-1", "det@r1/ckpt-2", "det@r1/ckpt-3"]
    assert direct["data"][1]["parent"] == "det@r1/ckpt-1"
    # an alias target: coco@latest is v2
    latest = ok(client.get(f"{API}/versions/coco%40latest/consumers"))
    assert [c["ref"] for c in latest["data"]] == ["det@r1/ckpt-4", "ft@ft-run/ckpt-1"]
    assert all(c["direct"] for c in latest["data"])
    # paging
    page = ok(client.get(f"{API}/versions/coco@v1/consumers?limit=2&offset=1"))
    assert page["count"] == 5 and [c["ref"] for c in page["data"]] == [
        "det@r1/ckpt-2",
        "det@r1/ckpt-3",
    ]
    # nobody trained on a fresh version
    v3 = publish(client, "coco", content="c")["name"]
    assert ok(client.get(f"{API}/versions/{v3}/consumers"))["count"] == 0
    error(client.get(f"{API}/versions/coco@v9/consumers"), 404, "version_not_found")


def test_shard_consumers_by_uri_and_sha256(client: TestClient) -> None:
    names = _history(client)
    version = ok(client.get(f"{API}/versions/{names['v2']}"))
    validation = version["splits"]["validation"]["shards"][0]
    train = version["splits"]["train"]["shards"][1]
    by_uri = ok(client.get(f"{API}/shards/consumers", params={"uri": validation["uri"]}))
    assert [c["ref"] for c in by_uri["data"]] == ["ft@ft-run/ckpt-1"]  # det/ckpt-4 used only train
    assert by_uri["shards"] == [
        {
            "version": names["v2"],
            "split": "validation",
            "index": 0,
            "count": validation["count"],
            "uri": validation["uri"],
            "sha256": validation["sha256"],
        }
    ]
    by_sha = ok(client.get(f"{API}/shards/consumers", params={"sha256": train["sha256"]}))
    assert [(c["ref"], c["direct"]) for c in by_sha["data"]] == [
        ("det@r1/ckpt-4", True),
        ("ft@ft-run/ckpt-1", False),
    ]
    v1 = ok(client.get(f"{API}/versions/{names['v1']}"))
    v1_shard = v1["splits"]["train"]["shards"][0]["sha256"]
    transitive = ok(client.get(f"{API}/shards/consumers", params={"sha256": "sha256:" + v1_shard}))
    assert transitive["count"] == 5
    unknown = ok(client.get(f"{API}/shards/consumers", params={"uri": "s3://nowhere/x.tfrecord"}))
    assert unknown["count"] == 0 and unknown["data"] == []
    error(client.get(f"{API}/shards/consumers", params={"sha256": "abc"}), 400, "invalid_hash")
    error(client.get(f"{API}/shards/consumers"), 422, "invalid_request")
    for empty in ({"uri": ""}, {"sha256": ""}):  # names no shard (uri= answered an empty list)
        error(client.get(f"{API}/shards/consumers", params=empty), 422, "invalid_request")


def test_graph_both_directions_bounded(client: TestClient) -> None:
    names = _history(client)
    graph = ok(
        client.get(f"{API}/lineage/graph", params={"checkpoint": "det@r1/ckpt-3", "depth": 1})
    )
    assert graph["root"] == "checkpoint:det@r1/ckpt-3"
    ids = {n["id"] for n in graph["nodes"]}
    assert ids == {
        "checkpoint:det@r1/ckpt-3",
        "checkpoint:det@r1/ckpt-2",
        "checkpoint:det@r1/ckpt-4",
        f"version:{names['v1']}",
    }
    edges = {(e["source"], e["target"], e["kind"], e.get("role")) for e in graph["edges"]}
    assert ("checkpoint:det@r1/ckpt-2", "checkpoint:det@r1/ckpt-3", "restored_from", None) in edges
    assert ("checkpoint:det@r1/ckpt-3", "checkpoint:det@r1/ckpt-4", "restored_from", None) in edges
    assert (f"version:{names['v1']}", "checkpoint:det@r1/ckpt-3", "trained_on", "train") in edges
    # downstream from a version reaches the fine-tuned model within three hops
    down = ok(
        client.get(
            f"{API}/lineage/graph",
            params={"version": "coco@v2", "direction": "downstream", "depth": 3},
        )
    )
    assert {n["id"] for n in down["nodes"]} == {
        f"version:{names['v2']}",
        "checkpoint:det@r1/ckpt-4",
        "checkpoint:ft@ft-run/ckpt-1",
    }
    assert any(e["kind"] == "initialized_from" for e in down["edges"])
    up = ok(
        client.get(
            f"{API}/lineage/graph",
            params={"checkpoint": "ft@ft-run/ckpt-1", "direction": "upstream", "depth": 25},
        )
    )
    assert len([n for n in up["nodes"] if n["kind"] == "checkpoint"]) == 5
    error(client.get(f"{API}/lineage/graph"), 422, "invalid_request")
    error(
        client.get(f"{API}/lineage/graph", params={"checkpoint": "det@r1/ckpt-1", "depth": 99}),
        422,
        "invalid_request",
    )


def test_listing_models_and_checkpoints(client: TestClient) -> None:
    _history(client)
    models = ok(client.get(f"{API}/models"))
    assert [(m["name"], m["checkpoint_count"], m["latest_checkpoint"]) for m in models["data"]] == [
        ("det", 4, "det@r1/ckpt-4"),
        ("ft", 1, "ft@ft-run/ckpt-1"),
    ]
    assert ok(client.get(f"{API}/models?prefix=f"))["count"] == 1
    ckpts = ok(client.get(f"{API}/models/det/checkpoints?limit=2"))
    assert ckpts["count"] == 4 and [c["checkpoint"] for c in ckpts["data"]] == ["ckpt-4", "ckpt-3"]
    assert ckpts["data"][0]["parent"] == "det@r1/ckpt-3"
    error(client.get(f"{API}/models/nobody/checkpoints"), 404, "model_not_found")
    error(client.get(f"{API}/models/det/checkpoints/ckpt-9"), 404, "checkpoint_not_found")
    error(client.get(f"{API}/models/det/checkpoints/ckpt-9/lineage"), 404, "checkpoint_not_found")


def test_deprecating_a_version_that_trained_checkpoints_is_refused(client: TestClient) -> None:
    names = _history(client)
    body = error(
        client.post(f"{API}/versions/{names['v1']}/deprecate", json={"reason": "bad labels"}),
        409,
        "version_in_use",
    )
    assert body["checkpoints"] == ["det@r1/ckpt-1", "det@r1/ckpt-2", "det@r1/ckpt-3"]
    assert body["count"] == 3
    assert ok(client.get(f"{API}/versions/{names['v1']}"))["state"] == "committed"
    # an unused version deprecates as before
    v3 = publish(client, "coco", content="c")["name"]
    assert ok(client.post(f"{API}/versions/{v3}/deprecate", json={"reason": "x"}))["state"] == (
        "deprecated"
    )
    # forced (open access on loopback is admin): deprecated, and the audit event says over what
    forced = client.post(
        f"{API}/versions/{names['v1']}/deprecate", json={"reason": "bad labels", "force": True}
    )
    assert ok(forced)["state"] == "deprecated"
    events = ok(client.get(f"{API}/events", params={"version": names["v1"]}))["data"]
    deprecated = [e for e in events if e["action"] == "version.deprecated"]
    assert deprecated[0]["detail"]["forced_over_checkpoints"] == [
        "det@r1/ckpt-1",
        "det@r1/ckpt-2",
        "det@r1/ckpt-3",
    ]
    # lineage still shows the version, now deprecated
    lineage = ok(client.get(f"{API}/models/det/checkpoints/ckpt-4/lineage"))
    states = {e["version"]: e["state"] for e in lineage["data"]}
    assert states[names["v1"]] == "deprecated"


def test_runs_tell_apart_checkpoints_of_one_model_name(client: TestClient) -> None:
    """A rerun in a fresh directory registers its own ckpt-1 (issue 9): the run is derived from
    the directory, ``model/ckpt`` answers while unambiguous, then names the candidates."""
    from recordkeeper.core.lineage import run_of

    v = publish(client, "coco")["name"]
    first = ok(put(client, "det/ckpt-1", uri="file:///ck/a/ckpt-1", data=[{"version": v}]), 201)
    run_a = run_of(None, "file:///ck/a/ckpt-1")
    assert first["run"] == run_a and first["ref"] == f"det@{run_a}/ckpt-1"
    assert ok(client.get(f"{API}/models/det/checkpoints/ckpt-1"))["run"] == run_a  # unambiguous
    # a resume in the same directory is the same run: the same registration, no conflict
    assert not ok(put(client, "det/ckpt-1", uri="file:///ck/a/ckpt-1", data=[{"version": v}]))[
        "created"
    ]
    second = ok(put(client, "det/ckpt-1", uri="file:///ck/b/ckpt-1", step=7), 201)
    run_b = run_of(None, "file:///ck/b/ckpt-1")
    assert run_b != run_a and second["ref"] == f"det@{run_b}/ckpt-1"
    body = error(client.get(f"{API}/models/det/checkpoints/ckpt-1"), 409, "ambiguous_checkpoint")
    assert sorted(body["candidates"]) == sorted([first["ref"], second["ref"]])
    assert first["ref"] in body["detail"] and "model@run/checkpoint" in body["detail"]
    error(client.get(f"{API}/models/det/checkpoints/ckpt-1/lineage"), 409, "ambiguous_checkpoint")
    got = ok(client.get(f"{API}/models/det/checkpoints/ckpt-1", params={"run": run_b}))
    assert got["step"] == 7
    # a child names its parent exactly; an ambiguous parent is refused with the candidates
    error(
        put(client, "det/ckpt-2", uri="file:///ck/b/ckpt-2", parent="det/ckpt-1"),
        409,
        "ambiguous_checkpoint",
    )
    child = ok(put(client, "det/ckpt-2", uri="file:///ck/b/ckpt-2", parent=second["ref"]), 201)
    assert child["parent"] == second["ref"] and child["run"] == run_b
    lineage_b = ok(client.get(f"{API}/models/det/checkpoints/ckpt-2/lineage"))
    assert [c["ref"] for c in lineage_b["chain"]] == [child["ref"], second["ref"]]
    assert lineage_b["versions"] == []  # run a's data is not run b's
    runs = ok(client.get(f"{API}/models/det/checkpoints", params={"run": run_a}))
    assert [c["ref"] for c in runs["data"]] == [first["ref"]]
    error(
        client.get(f"{API}/models/det/checkpoints", params={"run": "nope"}),
        404,
        "checkpoint_not_found",
    )
    error(
        client.get(f"{API}/models/det/checkpoints/ckpt-1", params={"run": "a/b"}),
        400,
        "invalid_checkpoint",
    )
    # with neither run nor URI: the 'default' run
    assert ok(put(client, "det/ckpt-9"), 201)["ref"] == "det@default/ckpt-9"


def test_deleted_checkpoints_keep_their_lineage(client: TestClient) -> None:
    names = _history(client)
    route = f"{API}/models/det/checkpoints/ckpt-2/deletion"
    for outside_utc in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        body = {"run": "r1", "deleted_at": outside_utc}
        error(client.put(route, json=body), 400, "invalid_checkpoint")  # was a 500
    when = "2026-11-30T12:00:00Z"
    deleted = ok(client.put(route, json={"run": "r1", "reason": "max_to_keep", "deleted_at": when}))
    assert deleted["state"] == "deleted" and deleted["deleted_reason"] == "max_to_keep"
    assert deleted["deleted_at"].startswith("2026-11-30T12:00:00")
    # idempotent: the first time and reason stay
    again = ok(client.put(route, json={"run": "r1", "reason": "files_missing"}))
    assert again == deleted
    lineage = ok(client.get(f"{API}/models/det/checkpoints/ckpt-3/lineage"))
    states = {c["ref"]: c["state"] for c in lineage["chain"]}
    assert states["det@r1/ckpt-2"] == "deleted" and states["det@r1/ckpt-3"] == "present"
    assert names["v1"] in lineage["versions"]  # history is never lost
    used = ok(client.get(f"{API}/versions/{names['v1']}/consumers"))
    assert {c["ref"]: c["state"] for c in used["data"]}["det@r1/ckpt-2"] == "deleted"
    listed = ok(client.get(f"{API}/models/det/checkpoints", params={"state": "deleted"}))
    assert [c["ref"] for c in listed["data"]] == ["det@r1/ckpt-2"]
    error(
        client.get(f"{API}/models/det/checkpoints", params={"state": "gone"}),
        422,
        "invalid_request",
    )
    error(client.put(route, json={"run": "r1", "reason": ""}), 400, "invalid_checkpoint")
    error(
        client.put(f"{API}/models/det/checkpoints/nope/deletion", json={}),
        404,
        "checkpoint_not_found",
    )
    graph = ok(client.get(f"{API}/lineage/graph", params={"checkpoint": "det@r1/ckpt-2"}))
    assert graph["nodes"][0]["state"] == "deleted"


def test_check_model_compares_recorded_serving_inputs_with_schemas(client: TestClient) -> None:
    from tests.service._helpers import commit, example_schema, register, shards

    trained = publish(client, "coco")["name"]  # every record: one int64 'label'
    other = stage(client, "coco")
    bodies = shards(
        other["storage_prefix"], 1, schema=example_schema(kind="float", features=("label", "x"))
    )
    assert register(client, other["name"], bodies).status_code == 200
    committed = commit(client, other["name"])
    assert committed.status_code == 200
    other_name = committed.json()["name"]  # the rk1 name comes at commit (`…_v2`)
    inputs = [
        {"name": "label", "kind": "dense", "dtype": "int64", "shape": [], "has_default": False},
        {"name": "x", "kind": "dense", "dtype": "float32", "shape": [3]},
        {"name": "tags", "kind": "sparse", "dtype": "string"},
    ]
    export = {"name": "serving", "uri": "file:///m/ckpt-1_saved_modules/serving", "inputs": inputs}
    ok(put(client, "det@r1/ckpt-1", data=[{"version": trained}], saved_models=[export]), 201)
    route = f"{API}/models/det/checkpoints/ckpt-1/model-check"
    answer = ok(client.get(route, params={"data": ["coco@v2"]}))
    assert answer["checkpoint"] == "det@r1/ckpt-1" and answer["ok"] is False
    by_version = {(c["version"], c["role"]): c for c in answer["checks"]}
    assert set(by_version) == {(trained, "train"), (other_name, "asked")}
    on_trained = {
        (p["feature"], p["problem"], p["severity"])
        for p in by_version[trained, "train"]["problems"]
    }
    assert on_trained == {
        ("x", "missing_feature", "error"),
        ("tags", "missing_feature", "warning"),
    }
    on_other = {(p["feature"], p["problem"]) for p in by_version[other_name, "asked"]["problems"]}
    assert on_other == {
        ("label", "dtype_mismatch"),  # float values, parsed as int64
        ("x", "shape_mismatch"),  # one value per record, parsed with shape [3]
        ("tags", "missing_feature"),
    }
    assert answer["saved_models"][0]["inputs"][1]["shape"] == [3]
    # a checkpoint without recorded inputs, bad inputs, unknown data: clear errors
    ok(put(client, "det@r1/ckpt-2", saved_models=[{"name": "s", "uri": "file:///s"}]), 201)
    error(client.get(f"{API}/models/det/checkpoints/ckpt-2/model-check"), 400, "invalid_checkpoint")
    error(client.get(route, params={"data": ["coco@v9"]}), 404, "version_not_found")
    bad = {**export, "inputs": [{"name": "x", "kind": "dense", "dtype": "float32", "shape": [-5]}]}
    error(put(client, "det@r1/ckpt-3", saved_models=[bad]), 400, "invalid_checkpoint")

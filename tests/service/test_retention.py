"""Retention of committed versions: policies, pins, the plan and claims, on SQLite and PostgreSQL.

Every keep rule has a test; shared objects (two versions registering the same object in place)
are counted once and never released while a live version references them.
"""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from recordkeeper.core.roots import AllowedRoots
from recordkeeper_service.db import Database
from tests.service._helpers import API, commit, error, publish, register, shards, stage

PLAN = f"{API}/retention/plan"
CLAIMS = f"{API}/retention/claims"
DELETABLE = f"{API}/retention/deletable"


def set_policy(client: TestClient, scope: str = "coco", **policy: Any) -> dict[str, Any]:
    response = client.put(f"{API}/retention/policies/{scope}", json=policy)
    assert response.status_code == 200, response.text
    return dict(response.json())


def plan(client: TestClient, **params: Any) -> dict[str, Any]:
    response = client.get(PLAN, params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def actions(answer: dict[str, Any]) -> dict[int, str]:
    return {item["number"]: item["action"] for item in answer["items"]}


def kept_by(answer: dict[str, Any]) -> dict[int, set[str]]:
    return {item["number"]: {k["rule"] for k in item["kept_by"]} for item in answer["items"]}


def publish_n(client: TestClient, n: int, dataset: str = "coco") -> list[str]:
    return [publish(client, dataset, content=f"{dataset}-{k}")["name"] for k in range(n)]


def backdate(database_url: str, name: str, days: int) -> None:
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=days)
    database = Database(database_url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            conn.execute(
                text("UPDATE versions SET committed_at = :t, created_at = :t WHERE name = :n"),
                {"t": when, "n": name},
            )
    finally:
        database.dispose()


def test_no_policy_keeps_everything_and_the_plan_changes_nothing(client: TestClient) -> None:
    publish_n(client, 3)
    answer = plan(client)
    assert actions(answer) == {1: "keep", 2: "keep", 3: "keep"}
    assert kept_by(answer)[1] == {"no_policy"}
    assert answer["objects"] == 0 and answer["delete"] == 0
    got = client.get(f"{API}/retention/policies/coco").json()
    assert got["source"] == "none" and got["policy"] is None


def test_keep_last_and_latest_alias(client: TestClient) -> None:
    publish_n(client, 5)
    set_policy(client, keep_last=2)
    answer = plan(client, dataset="coco")
    assert actions(answer) == {1: "delete", 2: "delete", 3: "delete", 4: "keep", 5: "keep"}
    assert kept_by(answer)[5] == {"last", "alias"}  # latest is an alias
    assert kept_by(answer)[4] == {"last"}
    # each deleted version frees its two objects (100 + 101 bytes)
    assert answer["objects"] == 6 and answer["bytes"] == 3 * 201
    # a plan is read-only: asking again answers the same
    assert plan(client, dataset="coco") == answer


def test_keep_alias(client: TestClient) -> None:
    names = publish_n(client, 3)
    set_policy(client, keep_last=1)
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": names[0]})
    answer = plan(client)
    assert actions(answer) == {1: "keep", 2: "delete", 3: "keep"}
    assert kept_by(answer)[1] == {"alias"}
    set_policy(client, keep_last=1, keep_aliased=False)
    assert actions(plan(client))[1] == "delete"


def test_keep_newer_than(client: TestClient, database_url: str) -> None:
    names = publish_n(client, 3)
    backdate(database_url, names[0], 40)
    backdate(database_url, names[1], 10)
    set_policy(client, keep_days=30, keep_aliased=False)
    answer = plan(client)
    assert actions(answer) == {1: "delete", 2: "keep", 3: "keep"}
    assert kept_by(answer)[2] == {"newer_than"}


def test_keep_trained_and_force(client: TestClient) -> None:
    names = publish_n(client, 3)
    put = client.put(
        f"{API}/models/det/checkpoints/ckpt-1", json={"run": "r1", "data": [{"version": names[0]}]}
    )
    assert put.status_code == 201, put.text
    set_policy(client, keep_last=1)
    answer = plan(client)
    assert actions(answer) == {1: "keep", 2: "delete", 3: "keep"}
    assert kept_by(answer)[1] == {"trained"}
    set_policy(client, keep_last=1, keep_trained=False)
    answer = plan(client)
    assert actions(answer)[1] == "needs_force"
    assert answer["items"][0]["trained"] == ["det@r1/ckpt-1"]
    assert actions(plan(client, force="true"))[1] == "delete"
    # apply without force leaves it; force needs a reason
    error(client.post(CLAIMS, json={"force": True}), 422, "invalid_request")
    claimed = client.post(CLAIMS, json={}).json()["data"]
    assert [c["name"] for c in claimed] == [names[1]]
    claimed = client.post(
        CLAIMS, json={"force": True, "reason": "licence withdrawn", "exclude": [names[1]]}
    ).json()["data"]
    assert [(c["name"], c["forced"]) for c in claimed] == [(names[0], True)]
    events = client.get(f"{API}/events", params={"action": "version.retention_claimed"}).json()
    forced = [e for e in events["data"] if e["version"] == names[0]]
    assert forced[0]["detail"]["force_reason"] == "licence withdrawn"
    assert forced[0]["detail"]["checkpoints"] == ["det@r1/ckpt-1"]


def test_a_deleted_checkpoint_keeps_nothing_unless_a_descendant_is_present(
    client: TestClient,
) -> None:
    names = publish_n(client, 3)
    route = f"{API}/models/det/checkpoints"
    assert client.put(f"{route}/ckpt-1", json={"run": "r1", "data": [{"version": names[0]}]})
    assert client.put(
        f"{route}/ckpt-2",
        json={"run": "r1", "parent": "det@r1/ckpt-1", "data": [{"version": names[1]}]},
    )
    set_policy(client, keep_last=1)
    assert kept_by(plan(client))[1] == {"trained"}
    # ckpt-1 deleted, but ckpt-2 (its child, present) was trained on names[0] through it
    client.put(f"{route}/ckpt-1/deletion", json={"run": "r1", "reason": "max_to_keep"})
    assert kept_by(plan(client))[1] == {"trained"}
    client.put(f"{route}/ckpt-2/deletion", json={"run": "r1", "reason": "max_to_keep"})
    assert actions(plan(client)) == {1: "delete", 2: "delete", 3: "keep"}


def test_keep_pinned(client: TestClient) -> None:
    names = publish_n(client, 3)
    set_policy(client, keep_last=1)
    response = client.post(
        f"{API}/retention/pins", json={"label": "train.lock.yaml", "versions": ["coco@v1"]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["data"][0]["version"] == names[0]
    answer = plan(client)
    assert actions(answer) == {1: "keep", 2: "delete", 3: "keep"}
    assert answer["items"][0]["kept_by"] == [{"rule": "pinned", "detail": "train.lock.yaml"}]
    listed = client.get(f"{API}/retention/pins", params={"dataset": "coco"}).json()["data"]
    assert [p["label"] for p in listed] == ["train.lock.yaml"]
    removed = client.delete(f"{API}/retention/pins", params={"label": "train.lock.yaml"})
    assert removed.json() == {"removed": 1}
    assert actions(plan(client))[1] == "delete"


def test_default_policy_and_dataset_override(client: TestClient) -> None:
    publish_n(client, 3, "coco")
    publish_n(client, 3, "mnist")
    set_policy(client, "*", keep_last=1)
    set_policy(client, "mnist", keep_last=2)
    answer = plan(client)
    by = {(i["dataset"], i["number"]): i["action"] for i in answer["items"]}
    assert [n for (d, n), a in sorted(by.items()) if a == "delete" and d == "coco"] == [1, 2]
    assert [n for (d, n), a in sorted(by.items()) if a == "delete" and d == "mnist"] == [1]
    assert client.get(f"{API}/retention/policies/coco").json()["source"] == "default"
    assert client.get(f"{API}/retention/policies/mnist").json()["source"] == "dataset"
    scopes = [p["scope"] for p in client.get(f"{API}/retention/policies").json()["data"]]
    assert scopes == ["*", "mnist"]
    assert client.delete(f"{API}/retention/policies/mnist").status_code == 204
    assert client.get(f"{API}/retention/policies/mnist").json()["source"] == "default"


def test_bad_policies_are_refused_with_a_code(client: TestClient) -> None:
    publish_n(client, 1)
    route = f"{API}/retention/policies/coco"
    error(client.put(route, json={"keep_last": 0}), 422, "invalid_request")
    error(client.put(route, json={"keep_days": -1}), 422, "invalid_request")
    error(client.put(route, json={"keep_lats": 3}), 422, "invalid_request")
    error(client.put(route, json={"keep_aliased": "yes"}), 422, "invalid_request")
    error(client.put(f"{API}/retention/policies/nosuch", json={}), 404, "dataset_not_found")
    error(client.put(f"{API}/retention/policies/Bad Name", json={}), 400, "invalid_dataset_name")
    error(client.get(PLAN, params={"dataset": "nosuch"}), 404, "dataset_not_found")


def _shared_pair(client: TestClient) -> tuple[str, str, str]:
    """Two committed versions registering the same object in place, then a third."""
    uri = "s3://ml-data/datasets/raw/train-00000-of-00001.tfrecord"
    names = []
    for content in ("a", "b"):
        version = stage(client)
        bodies = shards(version["storage_prefix"], 2, content=content)
        bodies[0] = dict(bodies[0], uri=uri)  # the same object, registered in place by both
        assert register(client, version["name"], bodies).status_code == 200
        done = commit(client, version["name"])
        assert done.status_code == 200, done.text
        names.append(done.json()["name"])
    names.append(publish(client, content="c")["name"])
    return names[0], names[1], uri


def test_a_shared_object_is_never_freed_while_a_live_version_references_it(
    client: TestClient,
) -> None:
    first, _second, uri = _shared_pair(client)
    set_policy(client, keep_last=2)  # keeps v2 (which shares uri with v1) and v3
    answer = plan(client)
    item = answer["items"][0]
    assert (item["number"], item["action"]) == (1, "delete")
    assert (item["objects"], item["shared"]) == (1, 1)  # its own shard only
    # claim and ask: the shared object is not deletable
    claimed = client.post(CLAIMS, json={}).json()["data"]
    assert [c["name"] for c in claimed] == [first]
    own = f"{claimed[0]['storage_prefix']}train-00001-of-00002.tfrecord"
    answer = client.post(DELETABLE, json={"version": first, "uris": [uri, own, "s3://x/y"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["deletable"] == [own]
    reasons = {k["uri"]: k["reason"] for k in body["kept"]}
    assert reasons[uri] == "a live version references it"
    assert reasons["s3://x/y"].startswith("not an object of")


def test_a_shared_object_of_two_expiring_versions_is_counted_once(client: TestClient) -> None:
    _shared_pair(client)
    set_policy(client, keep_last=1)  # v1 and v2 expire; uri is theirs alone
    answer = plan(client)
    one, two = answer["items"][0], answer["items"][1]
    assert (one["objects"], two["objects"]) == (2, 1)
    assert answer["objects"] == 3  # four shards, three objects


def test_claim_deletable_done_and_history_kept(client: TestClient) -> None:
    names = publish_n(client, 2)
    set_policy(client, keep_last=1)
    claimed = client.post(CLAIMS, json={}).json()["data"]
    assert [c["name"] for c in claimed] == [names[0]]
    # released: it reads as being deleted, nothing may pin or alias it
    version = client.get(f"{API}/versions/{names[0]}").json()
    assert version["data_state"] == "deleting"
    error(
        client.post(f"{API}/retention/pins", json={"label": "x", "versions": [names[0]]}),
        409,
        "version_data_deleted",
    )
    # a crashed apply: the next claim by the same caller gives it back
    again = client.post(CLAIMS, json={}).json()["data"]
    assert [(c["name"], c["resumed"]) for c in again] == [(names[0], True)]
    assert plan(client)["items"][0]["action"] == "resume"
    done = client.post(f"{API}/versions/{names[0]}/retention-done", json={"objects": 2})
    assert done.status_code == 200, done.text
    assert client.post(f"{API}/versions/{names[0]}/retention-done", json={}).status_code == 200
    version = client.get(f"{API}/versions/{names[0]}").json()
    assert version["data_state"] == "deleted" and version["data_deleted_reason"] == "retention"
    assert version["data_deleted_at"] and version["content_digest"] and version["splits"]
    assert version["state"] == "committed"
    # nothing more to do; the plan counts it as history
    assert client.post(CLAIMS, json={}).json()["data"] == []
    answer = plan(client)
    assert answer["data_deleted"] == 1 and actions(answer) == {2: "keep"}
    events = client.get(f"{API}/events", params={"action": "version.data_deleted"}).json()
    assert [e["version"] for e in events["data"]] == [names[0]]


def test_only_the_claimant_asks_and_reports(client: TestClient) -> None:
    names = publish_n(client, 2)
    error(
        client.post(DELETABLE, json={"version": names[0], "uris": []}), 409, "conflict"
    )  # not claimed
    error(client.post(f"{API}/versions/{names[0]}/retention-done", json={}), 409, "conflict")


def test_nothing_new_may_depend_on_released_data(client: TestClient) -> None:
    names = publish_n(client, 2)
    set_policy(client, keep_last=1)
    claimed = client.post(CLAIMS, json={}).json()["data"]
    assert [c["name"] for c in claimed] == [names[0]]
    # no alias may point at it, and no staged version may register its objects in place
    error(
        client.put(f"{API}/datasets/coco/aliases/prod", json={"version": names[0]}),
        409,
        "version_data_deleted",
    )
    obj = f"{claimed[0]['storage_prefix']}train-00000-of-00002.tfrecord"
    staged = stage(client)
    bodies = shards(staged["storage_prefix"], 1)
    bodies[0] = dict(bodies[0], uri=obj)
    error(register(client, staged["name"], bodies), 409, "storage_released")


def test_an_alias_set_after_the_plan_keeps_the_version_at_claim(client: TestClient) -> None:
    names = publish_n(client, 2)
    set_policy(client, keep_last=1)
    assert actions(plan(client))[1] == "delete"
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": names[0]})
    assert client.post(CLAIMS, json={}).json()["data"] == []


def _derived(client: TestClient, dataset: str, n: int, shards_per: int) -> None:
    """``n`` versions; every even shard is the object the first version registered in place."""
    first: list[dict[str, Any]] = []
    for k in range(n):
        version = stage(client, dataset)
        bodies = shards(
            f"s3://ml-data/datasets/{dataset}/{k}/", shards_per, content=f"{dataset}{k}"
        )
        if not first:
            first = bodies
        bodies = [first[i] if i % 2 == 0 else b for i, b in enumerate(bodies)]
        assert register(client, version["name"], bodies).status_code == 200
        assert commit(client, version["name"]).status_code == 200


def test_a_plan_runs_a_bounded_number_of_queries_and_counts_shared_objects_once(
    client: TestClient, database_url: str
) -> None:
    """Scale without timing: the plan's statements do not grow with versions or shards (a
    bounded instance of bench/bench_retention.py), and its counts match a brute force."""
    from sqlalchemy import event

    from recordkeeper_service.repository.retention import RetentionRepository

    set_policy(client, "*", keep_last=2)
    database = Database(database_url, pool_size=1)
    repo = RetentionRepository(database, AllowedRoots.of(["s3://ml-data/"]))
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(database.engine, "before_cursor_execute", count)
    try:
        sizes = {}
        for n, per in ((4, 10), (12, 40)):
            dataset = f"ds{n}"
            _derived(client, dataset, n, per)
            statements.clear()
            answer = repo.plan(dataset).to_json()
            sizes[n] = len(statements)
            # brute force: objects of expired versions no kept version references
            items = {i["number"]: i for i in answer["items"]}
            expired = [k for k, i in items.items() if i["action"] == "delete"]
            assert expired == list(range(1, n - 1))
            kept_uris, freed = set(), {}
            for number, item in items.items():
                got = client.get(f"{API}/versions/{item['name']}").json()["splits"]["train"]
                for s in got["shards"]:
                    if number in expired:
                        freed.setdefault(s["uri"], s["size"])
                    else:
                        kept_uris.add(s["uri"])
            freed = {u: size for u, size in freed.items() if u not in kept_uris}
            assert (answer["objects"], answer["bytes"]) == (len(freed), sum(freed.values()))
            assert answer["objects"] == len(expired) * per // 2
        assert sizes[12] == sizes[4], sizes
    finally:
        event.remove(database.engine, "before_cursor_execute", count)
        database.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_checkpoint_registration_waits_for_a_release_in_progress(
    client: TestClient, database_url: str
) -> None:
    """A claim in progress holds the version's row; a checkpoint naming it is recorded only
    after the claim has committed (so the claim's re-read of "trained" was never stale)."""
    (name,) = publish_n(client, 1)
    database = Database(database_url, pool_size=1)
    outcome: dict[str, Any] = {}

    def register_checkpoint() -> None:
        outcome["answer"] = client.put(
            f"{API}/models/det/checkpoints/ckpt-1", json={"run": "r1", "data": [{"version": name}]}
        )

    try:
        with database.engine.connect() as conn:
            transaction = conn.begin()
            # what a claim holds between its re-check and its commit
            conn.execute(text("SELECT id FROM versions WHERE name = :n FOR UPDATE"), {"n": name})
            worker = threading.Thread(target=register_checkpoint, daemon=True)
            worker.start()
            worker.join(timeout=1.0)
            waited = worker.is_alive()
            transaction.commit()
        worker.join(timeout=60)
    finally:
        database.dispose()
    assert waited, "the registration did not wait for the claim holding the version"
    assert outcome["answer"].status_code == 201, outcome["answer"].text

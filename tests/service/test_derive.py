"""Derived versions: staged with ``base``, committed with a change set, on SQLite and PostgreSQL.

The base's kept shards become the derived version's rows (the same objects); retention and gc
keep an object while any live version lists it; bad input is refused with a code and stores
nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core.derive import Changes
from tests.service._helpers import (
    API,
    error,
    expected_digest,
    publish,
    register,
    shard,
    shards,
    stage,
)


def _base(client: TestClient) -> dict[str, Any]:
    return publish(client, "coco", count=4, splits=("test", "train"), desc="first")


def _shards_of(client: TestClient, name: str) -> list[dict[str, Any]]:
    body = client.get(f"{API}/versions/{name}").json()
    return [s for split in sorted(body["splits"]) for s in body["splits"][split]["shards"]]


def _commit(client: TestClient, name: str, **changes: Any) -> Any:
    return client.post(f"{API}/versions/{name}/commit", json={"changes": changes})


def _key(s: dict[str, Any]) -> tuple[Any, ...]:
    return (s["split"], s["index"], s["count"], s["uri"], s["records_sha256"])


def test_add_shards_to_a_split_references_the_rest(client: TestClient) -> None:
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"], desc="add_person")
    assert derived["provenance"]["parents"] == [
        {"name": base["name"], "dataset": "coco", "number": 1, "role": "base"}
    ]
    added = shards(derived["storage_prefix"], 2, content="new")
    assert register(client, derived["name"], added).status_code == 200
    done = _commit(client, derived["name"])
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["name"].endswith("_v2_add_person")
    assert body["shard_count"] == 10
    before = {s["uri"]: s for s in _shards_of(client, base["name"])}
    after = _shards_of(client, body["name"])
    train = [s for s in after if s["split"] == "train"]
    assert [s["index"] for s in train] == list(range(6))
    assert {s["count"] for s in train} == {6}
    assert [s["uri"] for s in train[:4]] == [u for u, s in before.items() if s["split"] == "train"]
    assert [s["uri"] for s in train[4:]] == [a["uri"] for a in added]
    assert [_key(s) for s in after if s["split"] == "test"] == [
        _key(s) for s in before.values() if s["split"] == "test"
    ]
    # the digest is the one of its content, as for any version with these shards
    assert body["content_digest"] == expected_digest(after)
    diff = client.get(f"{API}/versions/{base['name']}/diff/{body['name']}").json()
    assert diff["shards"]["counts"] == {"added": 2, "removed": 0, "changed": 0}
    events = client.get(f"{API}/events", params={"action": "version.committed"}).json()
    derived_detail = events["data"][0]["detail"]["derived"]
    assert derived_detail == {
        "base": base["name"],
        "kept": 8,
        "added": 2,
        "removed": 0,
        "changes_digest": Changes().digest(),
    }


def test_remove_rename_and_replace(client: TestClient) -> None:
    base = _base(client)
    before = _shards_of(client, base["name"])
    derived = stage(client, "coco", base=base["name"], desc="rework")
    replacement = shards(derived["storage_prefix"], 1, split="test", content="new")
    assert register(client, derived["name"], replacement).status_code == 200
    removed_uri = next(s["uri"] for s in before if (s["split"], s["index"]) == ("train", 3))
    done = _commit(
        client,
        derived["name"],
        remove_splits=["test"],
        rename_splits={"train": "training"},
        remove_shards=["train:1", removed_uri],
    )
    assert done.status_code == 200, done.text
    after = _shards_of(client, done.json()["name"])
    kept = [s for s in before if s["split"] == "train" and s["index"] in (0, 2)]
    assert [(s["split"], s["index"], s["count"], s["uri"]) for s in after] == [
        ("test", 0, 1, replacement[0]["uri"]),
        ("training", 0, 2, kept[0]["uri"]),
        ("training", 1, 2, kept[1]["uri"]),
    ]
    # its replacement shard lies under the staged prefix: the prefix stays (it holds it)
    assert done.json()["storage_prefix"] == derived["storage_prefix"]
    only_renamed = stage(client, "coco", base=done.json()["name"], desc="renamed")
    renamed = _commit(client, only_renamed["name"], rename_splits={"test": "holdout"}).json()
    # nothing stored under the staged prefix: the version's own files (its record lookup,
    # written after commit) go under its committed name
    assert renamed["storage_prefix"].endswith(f"/coco/{renamed['name']}/")
    # the log names the rename (the diff rule counts the renamed split's shards as removed
    # and added); a version that renamed nothing says so with an empty mapping
    log = client.get(f"{API}/datasets/coco/log").json()["data"]
    assert [entry["change"]["renamed_splits"] for entry in log[:2]] == [
        {"test": "holdout"},
        {"train": "training"},
    ]
    assert log[2]["change"] is None or log[2]["change"]["renamed_splits"] == {}


def test_bad_changes_are_refused_and_nothing_is_stored(client: TestClient) -> None:
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"])
    name = derived["name"]
    error(_commit(client, name, remove_splits=["nope"]), 404, "split_not_found")
    error(_commit(client, name, rename_splits={"nope": "x"}), 404, "split_not_found")
    error(_commit(client, name, rename_splits={"train": "test"}), 409, "split_exists")
    error(_commit(client, name, remove_shards=["train:9"]), 404, "shard_not_found")
    error(_commit(client, name, remove_shards=["s3://no/such.tfrecord"]), 404, "shard_not_found")
    error(_commit(client, name, remove_shards=["not a position"]), 422, "invalid_request")
    # a misspelt change is refused, not ignored: the version would keep the split for good
    error(_commit(client, name, remove_split=["test"]), 422, "invalid_request")
    # a base object added again is the same object twice
    again = dict(_shards_of(client, base["name"])[0], split="extra", index=0, count=1)
    again.pop("registered_at", None)
    assert register(client, name, [again]).status_code == 200
    error(_commit(client, name), 409, "shard_conflict")
    staged = client.get(f"{API}/versions/{name}").json()
    assert staged["state"] == "staged" and staged["shard_count"] == 1  # nothing was kept
    listed = client.get(f"{API}/datasets/coco/versions").json()
    assert [v["number"] for v in listed["data"] if v["number"]] == [1]  # no number taken
    # removing only a split is allowed, and the rename onto a removed split too
    other = stage(client, "coco", base=base["ref"])
    done = _commit(client, other["name"], remove_splits=["test"], rename_splits={"train": "test"})
    assert done.status_code == 200, done.text
    assert done.json()["number"] == 2


def test_removing_every_shard_says_so(client: TestClient) -> None:
    """The message was 'has no shards; register shards before committing', about a staged
    name the caller never saw and registrations a derivation does not make."""
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"])
    body = error(
        _commit(client, derived["name"], remove_splits=["test", "train"]), 409, "version_incomplete"
    )
    assert "remove every shard of its base and add none" in body["detail"]
    assert client.get(f"{API}/versions/{derived['name']}").json()["state"] == "staged"


def test_bad_bases_are_refused_before_anything_is_staged(client: TestClient) -> None:
    base = _base(client)
    versions = f"{API}/datasets/coco/versions"
    error(client.post(versions, json={"base": "coco@v9"}), 404, "parent_not_found")
    staged = stage(client, "coco")
    error(client.post(versions, json={"base": staged["name"]}), 409, "parent_not_committed")
    publish(client, "other")
    error(client.post(versions, json={"base": "other@v1"}), 422, "invalid_request")
    error(
        client.post(f"{API}/datasets/coco/versions", json={"base": "not a ref!"}),
        400,
        "invalid_reference",
    )
    listed = client.get(versions).json()
    assert listed["count"] == 2  # the base and the plain staging only
    # changes on a version staged without base are refused
    error(_commit(client, staged["name"], remove_splits=["train"]), 422, "invalid_request")
    assert base["number"] == 1


def test_same_content_is_a_duplicate(client: TestClient) -> None:
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"])
    error(_commit(client, derived["name"]), 409, "duplicate_content")


def test_retention_of_the_base_keeps_what_the_child_references(client: TestClient) -> None:
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"], desc="drop_test")
    done = _commit(client, derived["name"], remove_splits=["test"])
    assert done.status_code == 200, done.text
    put = client.put(f"{API}/retention/policies/coco", json={"keep_last": 1})
    assert put.status_code == 200, put.text
    claimed = client.post(f"{API}/retention/claims", json={}).json()["data"]
    assert [c["name"] for c in claimed] == [base["name"]]
    uris = [s["uri"] for s in _shards_of(client, base["name"])]
    answer = client.post(
        f"{API}/retention/deletable", json={"version": base["name"], "uris": uris}
    ).json()
    # train is the child's too: kept; test was the base's alone: deletable
    assert sorted(answer["deletable"]) == sorted(u for u in uris if "/test-" in u)
    assert {k["uri"] for k in answer["kept"]} == {u for u in uris if "/train-" in u}
    # and nothing new may derive from released data
    error(
        client.post(f"{API}/datasets/coco/versions", json={"base": base["name"]}),
        409,
        "version_data_deleted",
    )


def test_gc_of_an_abandoned_derived_staging_keeps_the_base_objects(
    client: TestClient,
) -> None:
    """An abandoned derived staging is collected: its added files go, the base's stay."""
    base = _base(client)
    derived = stage(client, "coco", base=base["ref"], desc="more")
    add = [shard(derived["storage_prefix"], 0, 1, split="extra")]
    assert register(client, derived["name"], add).status_code == 200
    assert client.post(f"{API}/versions/{derived['name']}/abandon").status_code == 200
    claimed = client.post(f"{API}/gc/claims", json={}).json()["data"]
    assert [c["name"] for c in claimed] == [derived["name"]]
    base_uris = [s["uri"] for s in _shards_of(client, base["name"])]
    answer = client.post(
        f"{API}/versions/{derived['name']}/gc-objects", json={"uris": [add[0]["uri"], *base_uris]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["delete"] == [add[0]["uri"]]
    assert {k["uri"] for k in answer.json()["keep"]} == set(base_uris)


def test_the_commit_reads_the_derived_rows_once(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the copy, commit's totals, content digest and schema come from one read of the
    version's rows (``_scan``), not three passes (two grouped queries and the manifest's)."""
    from sqlalchemy import event

    from recordkeeper_service.repository import commit

    base = _base(client)
    derived = stage(client, "coco", base=base["ref"], desc="add")
    assert (
        register(client, derived["name"], shards(derived["storage_prefix"], 2)).status_code == 200
    )
    scans: list[int] = []
    real_scan = commit._scan

    def counted_scan(session: Any, version_id: int) -> Any:
        scans.append(version_id)
        return real_scan(session, version_id)

    monkeypatch.setattr(commit, "_scan", counted_scan)
    sent: list[str] = []
    engine = client.app.state.repository.db.engine  # type: ignore[attr-defined]
    listener = lambda *a: sent.append(a[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        done = _commit(client, derived["name"])
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert done.status_code == 200, done.text
    assert len(scans) == 1
    copied = next(i for i, sql in enumerate(sent) if sql.startswith("INSERT INTO shards"))
    grouped = [sql for sql in sent[copied:] if "FROM shards" in sql and "GROUP BY" in sql]
    assert grouped == []
    # the same digest as a from-scratch version with these shards
    assert done.json()["content_digest"] == expected_digest(_shards_of(client, done.json()["name"]))


def test_a_derived_version_still_staged_is_not_compared(client: TestClient) -> None:
    """Until its commit joins its base's kept shards, a staged derived version holds only what
    was added: a diff would show every kept shard removed. Refused, in either order."""
    base = _base(client)
    derived = stage(client, "coco", base=base["name"], desc="pending")
    register(client, derived["name"], shards(derived["storage_prefix"], 1, split="extra"))
    for a, b in ((base["name"], derived["name"]), (derived["name"], base["name"])):
        body = error(client.get(f"{API}/versions/{a}/diff/{b}"), 409, "version_incomplete")
        assert "still staged" in body["detail"]
    done = _commit(client, derived["name"])
    assert done.status_code == 200, done.text
    diff = client.get(f"{API}/versions/{base['name']}/diff/{done.json()['name']}").json()
    assert diff["shards"]["counts"] == {"added": 1, "removed": 0, "changed": 0}

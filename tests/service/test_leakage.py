"""Leakage policies and results: set/get a dataset's policy, the policy at commit (refuse,
warn, a commit without a check), check results stored and served per version."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository
from tests.service._helpers import API, commit, error, publish, register, shards, stage


def _staged(client: TestClient, dataset: str = "coco", content: str = "") -> dict[str, Any]:
    """A staged version with train and test (2 shards of 10 records each), registered."""
    version = stage(client, dataset)
    bodies = [
        b
        for split in ("train", "test")
        for b in shards(version["storage_prefix"], 2, split=split, content=content)
    ]
    assert register(client, version["name"], bodies).status_code == 200
    return version


def _check(name: str, leaked: int = 0, records: int = 20) -> dict[str, Any]:
    """The check a client sends: test (evaluation) against train."""
    pair = {
        "split": "test",
        "other_ref": name,
        "other_split": "train",
        "records": records,
        "leaked": leaked,
        "distinct": leaked,
    }
    return {"kind": "bytes", "width": 16, "pairs": [pair]}


def _commit(client: TestClient, name: str, leakage: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {} if leakage is None else {"leakage": leakage}
    return client.post(f"{API}/versions/{name}/commit", json=body)


def _policy(client: TestClient, dataset: str, mode: str, max_rate: float = 0.0) -> Any:
    return client.put(
        f"{API}/datasets/{dataset}/leakage-policy", json={"mode": mode, "max_rate": max_rate}
    )


def test_policy_default_set_and_replace(client: TestClient) -> None:
    got = client.get(f"{API}/datasets/coco/leakage-policy").json()
    assert got == {
        "dataset": "coco",
        "mode": "off",
        "max_rate": 0.0,
        "source": "default",
        "updated_at": None,
        "updated_by": None,
    }
    put = _policy(client, "coco", "refuse", 0.01)  # before the dataset exists
    assert put.status_code == 200, put.text
    assert put.json()["mode"] == "refuse" and put.json()["source"] == "dataset"
    assert _policy(client, "coco", "warn").json()["max_rate"] == 0.0
    got = client.get(f"{API}/datasets/coco/leakage-policy").json()
    assert (got["mode"], got["max_rate"], got["updated_by"]) == ("warn", 0.0, "anonymous")
    events = client.get(f"{API}/events", params={"action": "dataset.leakage_policy"}).json()
    assert [e["detail"]["mode"] for e in events["data"]] == ["warn", "refuse"]
    error(_policy(client, "coco", "block"), 422, "invalid_request")
    error(_policy(client, "coco", "warn", 1.5), 422, "invalid_request")
    error(_policy(client, "Bad Name", "warn"), 400, "invalid_dataset_name")
    error(client.get(f"{API}/datasets/Bad Name/leakage-policy"), 400, "invalid_dataset_name")


def test_refuse_names_the_pairs_and_keeps_the_version_staged(client: TestClient) -> None:
    assert _policy(client, "coco", "refuse").status_code == 200
    version = _staged(client)
    name = version["name"]
    body = error(_commit(client, name, _check(name, leaked=3)), 409, "split_overlap")
    assert body["version"] == name and body["max_rate"] == 0.0
    assert body["pairs"] == [
        {
            "split": "test",
            "other_ref": name,
            "other_split": "train",
            "records": 20,
            "leaked": 3,
            "distinct": 3,
            "rate": 0.15,
        }
    ]
    assert "test in train: 3/20 records" in body["detail"]
    assert client.get(f"{API}/versions/{name}").json()["state"] == "staged"
    # no check at all: its own code, saying how to fix it
    body = error(_commit(client, name), 409, "leakage_check_missing")
    assert "record_index" in body["detail"]
    # a clean check commits, and is stored as the version's
    answer = _commit(client, name, _check(name))
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "committed" and answer.json()["leakage_warning"] is None
    committed = answer.json()["name"]
    stored = client.get(f"{API}/versions/{committed}/leakage").json()
    assert stored["count"] == 1
    pair = stored["data"][0]
    assert (pair["split"], pair["other_ref"], pair["other_split"]) == ("test", committed, "train")
    assert (pair["records"], pair["leaked"], pair["rate"], pair["source"]) == (20, 0, 0.0, "commit")
    assert pair["computed_by"] == "anonymous" and pair["computed_at"]


def test_max_rate_tolerates_up_to_the_rate(client: TestClient) -> None:
    assert _policy(client, "coco", "refuse", 0.15).status_code == 200
    name = _staged(client)["name"]
    error(_commit(client, name, _check(name, leaked=4)), 409, "split_overlap")  # 20 %
    assert _commit(client, name, _check(name, leaked=3)).status_code == 200  # 15 %


def test_warn_commits_says_so_and_records_an_event(client: TestClient) -> None:
    assert _policy(client, "coco", "warn").status_code == 200
    name = _staged(client)["name"]
    answer = _commit(client, name, _check(name, leaked=2))
    assert answer.status_code == 200, answer.text
    committed = answer.json()["name"]
    warning = answer.json()["leakage_warning"]
    assert warning["mode"] == "warn" and warning["missing"] is False
    assert warning["pairs"][0]["leaked"] == 2 and warning["pairs"][0]["other_ref"] == committed
    events = client.get(f"{API}/events", params={"action": "version.leakage_warning"}).json()
    assert [e["version"] for e in events["data"]] == [committed]
    assert client.get(f"{API}/versions/{committed}/leakage").json()["data"][0]["leaked"] == 2
    # without a check: committed, with the warning saying it was missing
    other = _staged(client, content="other")["name"]
    answer = _commit(client, other)
    assert answer.status_code == 200, answer.text
    assert answer.json()["leakage_warning"]["missing"] is True
    assert client.get(f"{API}/versions/{answer.json()['name']}/leakage").json()["count"] == 0


def test_off_ignores_checks_and_commits_without_one(client: TestClient) -> None:
    name = _staged(client)["name"]
    answer = _commit(client, name)
    assert answer.status_code == 200 and answer.json()["leakage_warning"] is None
    name = _staged(client, content="2")["name"]
    assert _commit(client, name, _check(name, leaked=20)).status_code == 200
    assert _policy(client, "coco", "off").status_code == 200
    name = _staged(client, content="3")["name"]
    assert _commit(client, name).status_code == 200


def test_checks_that_do_not_match_the_version_are_refused(client: TestClient) -> None:
    assert _policy(client, "coco", "refuse").status_code == 200
    name = _staged(client)["name"]
    # other record counts: computed from other shards
    error(_commit(client, name, _check(name, records=19)), 422, "invalid_request")
    # a pair missing (no pairs at all, while test must be checked against train)
    error(_commit(client, name, {"pairs": []}), 422, "invalid_request")
    # another version's split in a commit's check
    error(_commit(client, name, _check("other_20261201_v1")), 422, "invalid_request")
    # inconsistent counts
    bad = _check(name, leaked=3)
    bad["pairs"][0]["distinct"] = 4
    error(_commit(client, name, bad), 422, "invalid_request")
    bad = _check(name)
    bad["pairs"][0]["leaked"] = -1
    error(_commit(client, name, bad), 422, "invalid_request")
    assert client.get(f"{API}/versions/{name}").json()["state"] == "staged"


def test_a_dataset_with_only_training_splits_needs_an_empty_check(client: TestClient) -> None:
    assert _policy(client, "coco", "refuse").status_code == 200
    version = stage(client, "coco")
    assert (
        register(client, version["name"], shards(version["storage_prefix"], 1)).status_code == 200
    )
    error(_commit(client, version["name"]), 409, "leakage_check_missing")
    answer = _commit(client, version["name"], {"pairs": []})
    assert answer.status_code == 200, answer.text


def test_saved_check_results_are_served_per_pair(client: TestClient) -> None:
    mine = publish(client, "coco", splits=("train", "test"))["name"]
    other = publish(client, "objects", splits=("train",))["name"]
    pairs = [
        {
            "split": "test",
            "other_ref": mine,
            "other_split": "train",
            "records": 20,
            "leaked": 0,
            "distinct": 0,
        },
        {
            "split": "test",
            "other_ref": other,
            "other_split": "train",
            "records": 20,
            "leaked": 5,
            "distinct": 4,
        },
    ]
    put = client.put(f"{API}/versions/coco@latest/leakage", json={"pairs": pairs})
    assert put.status_code == 200, put.text
    got = client.get(f"{API}/versions/{mine}/leakage").json()
    assert got["version"] == mine and got["count"] == 2
    by_other = {p["other_ref"]: p for p in got["data"]}
    assert by_other[other]["rate"] == 0.25 and by_other[other]["source"] == "check"
    # the same pair again replaces it
    pairs[1]["leaked"] = pairs[1]["distinct"] = 1
    assert (
        client.put(f"{API}/versions/{mine}/leakage", json={"pairs": pairs[1:]}).status_code == 200
    )
    got = client.get(f"{API}/versions/{mine}/leakage").json()
    assert got["count"] == 2
    assert {p["other_ref"]: p["leaked"] for p in got["data"]} == {mine: 0, other: 1}
    # refused: counts that are not the version's, unknown versions, staged versions
    wrong = [{**pairs[0], "records": 7}]
    error(
        client.put(f"{API}/versions/{mine}/leakage", json={"pairs": wrong}), 422, "invalid_request"
    )
    unknown = [{**pairs[0], "other_ref": "nope@latest"}]
    error(
        client.put(f"{API}/versions/{mine}/leakage", json={"pairs": unknown}),
        404,
        "dataset_not_found",
    )
    staged = _staged(client, "coco", content="x")["name"]
    error(
        client.put(f"{API}/versions/{staged}/leakage", json={"pairs": pairs}),
        422,
        "invalid_request",
    )
    error(client.get(f"{API}/versions/nope@latest/leakage"), 404, "dataset_not_found")
    assert client.get(f"{API}/versions/{other}/leakage").json() == {
        "version": other,
        "data": [],
        "count": 0,
    }


def test_read_tokens_cannot_set_policies_or_save_results(
    client: TestClient, database_url: str
) -> None:
    database = Database(database_url, pool_size=1)
    try:
        _record, secret = TokenRepository(database).create("reader", "read", actor="test")
    finally:
        database.dispose()
    read = {"Authorization": f"Bearer {secret}"}
    url = f"{API}/datasets/coco/leakage-policy"
    error(client.put(url, json={"mode": "refuse"}, headers=read), 403, "forbidden")
    assert client.get(url, headers=read).status_code == 200
    name = publish(client, "coco", splits=("train", "test"))["name"]
    body = {"pairs": _check(name)["pairs"]}
    url = f"{API}/versions/{name}/leakage"
    error(client.put(url, json=body, headers=read), 403, "forbidden")
    assert client.get(url, headers=read).status_code == 200


def test_a_retried_commit_answers_the_committed_version(client: TestClient) -> None:
    assert _policy(client, "coco", "refuse").status_code == 200
    name = _staged(client)["name"]
    first = _commit(client, name, _check(name))
    assert first.status_code == 200
    # the commit went through; a retry (even without its check) answers it
    again = commit(client, name)
    assert again.status_code == 200 and again.json()["name"] == first.json()["name"]


def test_refuse_judges_a_duplicate_of_a_committed_version_too(client: TestClient) -> None:
    """The policy judges the content committed, before the duplicate check: content that
    equals a version committed before the policy is refused, not answered as that version."""
    first = _staged(client)["name"]
    assert _commit(client, first).status_code == 200  # policy off
    assert _policy(client, "coco", "refuse").status_code == 200
    again = _staged(client)["name"]  # the same content
    body = {"on_duplicate": "use_existing", "leakage": _check(again, leaked=1)}
    error(client.post(f"{API}/versions/{again}/commit", json=body), 409, "split_overlap")
    body["leakage"] = _check(again)
    answer = client.post(f"{API}/versions/{again}/commit", json=body)
    assert answer.status_code == 200 and answer.json()["duplicate_of"] is not None


def test_warn_on_a_duplicate_kept_as_the_existing_version(client: TestClient) -> None:
    first = _staged(client)["name"]
    assert _commit(client, first).status_code == 200  # policy off
    assert _policy(client, "coco", "warn").status_code == 200
    again = _staged(client)["name"]  # the same content
    body = {"on_duplicate": "use_existing", "leakage": _check(again, leaked=2)}
    answer = client.post(f"{API}/versions/{again}/commit", json=body)
    assert answer.status_code == 200, answer.text
    kept = answer.json()["duplicate_of"]
    warning = answer.json()["leakage_warning"]
    assert warning["pairs"][0]["leaked"] == 2 and warning["pairs"][0]["other_ref"] == kept
    events = client.get(f"{API}/events", params={"action": "version.leakage_warning"}).json()
    assert [e["version"] for e in events["data"]] == [kept]

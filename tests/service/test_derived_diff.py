"""A diff of a version and one derived from it reads only what the derivation changed.

``GET /versions/{a}/diff/{b}`` of such a pair (either order, or along a chain of derivations)
is computed from the rows after the positions both hold alike and the stored split totals
(``basis: derivation``); the answer must be the one the rule gives on both whole versions,
which each test checks against :func:`recordkeeper.core.diff.diff_versions` run here on both
versions' full shard lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core import diff as core_diff
from recordkeeper.core.schema import Schema
from recordkeeper.core.shards import ShardRecord
from recordkeeper_service.repository import diff as diff_module
from tests.service._helpers import API, error, publish, register, shard, shards, stage


def _version(client: TestClient, name: str) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"{API}/versions/{name}").json()
    return body


def _side(body: dict[str, Any]) -> core_diff.DiffSide[ShardRecord]:
    rows = [
        ShardRecord.from_json(s)
        for split in sorted(body["splits"])
        for s in body["splits"][split]["shards"]
    ]
    return core_diff.DiffSide(
        name=body["name"],
        content_digest=body["content_digest"],
        schema_digest=body["schema_digest"],
        shards=rows,
        schema=Schema,
    )


def _expected(client: TestClient, a: str, b: str) -> dict[str, Any]:
    """The rule on both whole versions (schemas aside: both sides here have one schema)."""
    found = core_diff.diff_versions(_side(_version(client, a)), _side(_version(client, b)))
    answer = found.to_dict(limit=10_000)
    del answer["schema"], answer["basis"]
    return answer


def _answer(client: TestClient, a: str, b: str, **params: Any) -> dict[str, Any]:
    response = client.get(f"{API}/versions/{a}/diff/{b}", params={"limit": 10_000, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _assert_same_as_the_rule(client: TestClient, a: str, b: str) -> None:
    for old, new in ((a, b), (b, a)):
        answer = _answer(client, old, new, basis="derivation")
        assert answer["basis"] == "derivation"
        del answer["schema"], answer["basis"]
        assert answer == _expected(client, old, new), (old, new)


def _derive(
    client: TestClient,
    base: str,
    added: Sequence[tuple[str, int, str]] = (),
    **changes: Any,
) -> str:
    """Derive from ``base`` adding ``(split, n, content)`` shards per entry; commit."""
    staged = stage(client, "coco", base=base)
    bodies = [
        b
        for split, n, content in added
        for b in shards(staged["storage_prefix"], n, split=split, content=content)
    ]
    if bodies:
        assert register(client, staged["name"], bodies).status_code == 200
    done = client.post(f"{API}/versions/{staged['name']}/commit", json={"changes": changes})
    assert done.status_code == 200, done.text
    name: str = done.json()["name"]
    return name


@pytest.fixture
def base(client: TestClient) -> str:
    name: str = publish(client, "coco", count=8, splits=("test", "train"))["name"]
    return name


def test_appended_shards_and_a_new_split(client: TestClient, base: str) -> None:
    derived = _derive(client, base, [("train", 3, "more"), ("extra", 2, "x")])
    _assert_same_as_the_rule(client, base, derived)
    answer = _answer(client, base, derived)
    assert answer["shards"]["counts"] == {"added": 5, "removed": 0, "changed": 0}
    assert answer["shards"]["unchanged"] == 16
    assert answer["splits"]["train"] == {
        "old_records": 80,
        "new_records": 110,
        "record_delta": 30,
        "old_shards": 8,
        "new_shards": 11,
    }


def test_removed_shards_renumber_the_rest(client: TestClient, base: str) -> None:
    derived = _derive(client, base, [("train", 1, "late")], remove_shards=["train:2", "train:5"])
    _assert_same_as_the_rule(client, base, derived)
    answer = _answer(client, base, derived)
    assert answer["shards"]["counts"] == {"added": 1, "removed": 2, "changed": 0}
    assert [(c["split"], c["index"]) for c in answer["shards"]["removed"]] == [
        ("train", 2),
        ("train", 5),
    ]


def test_removed_and_renamed_splits(client: TestClient, base: str) -> None:
    derived = _derive(
        client, base, [("test", 1, "new")], remove_splits=["test"], rename_splits={"train": "tr"}
    )
    _assert_same_as_the_rule(client, base, derived)


def test_shards_with_the_same_records_follow_the_rule(client: TestClient) -> None:
    """Every shard holds the same records: the rule's shift matching, not the derivation's
    positions, decides which one is reported removed — the derived answer must agree."""
    staged = stage(client, "coco")
    prefix = staged["storage_prefix"]
    same = shard(prefix, 0, 6)["records_sha256"]
    bodies = [shard(prefix, i, 6, records_sha256=same) for i in range(6)]
    assert register(client, staged["name"], bodies).status_code == 200
    done = client.post(f"{API}/versions/{staged['name']}/commit", json={})
    assert done.status_code == 200, done.text
    base = done.json()["name"]
    derived = _derive(client, base, remove_shards=["train:1"])
    _assert_same_as_the_rule(client, base, derived)


def test_a_chain_of_derivations(client: TestClient, base: str) -> None:
    first = _derive(client, base, [("train", 2, "one")])
    second = _derive(client, first, [("test", 1, "two")], remove_shards=["train:6"])
    third = _derive(client, second, rename_splits={"test": "eval"})
    for a, b in ((base, second), (base, third), (first, third)):
        _assert_same_as_the_rule(client, a, b)


def test_only_the_changed_rows_are_read(
    client: TestClient, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    derived = _derive(client, base, [("train", 3, "more")])
    read: list[int] = []
    real = diff_module.shards_after

    def counted(session: Any, version_id: int, starts: Any) -> Any:
        rows = real(session, version_id, starts)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(diff_module, "shards_after", counted)
    answer = _answer(client, base, derived, form="full")
    assert read == [0, 3]  # the base's side: nothing; the derived side: the 3 added shards
    added = answer["shards"]["added"]
    assert [c["new"]["index"] for c in added] == [8, 9, 10]
    # form=full: whole shard records, as a shard page lists them
    assert {"sha256", "size", "crc32c", "format", "storage_identity"} <= added[0]["new"].keys()


def test_unrelated_versions_need_their_shards(client: TestClient, base: str) -> None:
    other = publish(client, "coco", count=3, content="other")["name"]
    error(
        client.get(f"{API}/versions/{base}/diff/{other}", params={"basis": "derivation"}),
        409,
        "diff_not_derived",
    )
    answer = _answer(client, base, other)
    assert answer["basis"] == "shards"
    bad = client.get(f"{API}/versions/{base}/diff/{other}", params={"basis": "x"})
    error(bad, 422, "invalid_request")

"""A version's totals stay 64-bit: shards that would overflow them are refused up front.

Each shard's ``size`` and ``record_count`` is at most 2^63-1, but the service adds them up (the
version's ``size`` and ``record_count``, each split's, the merged schema's counts). A
registration that would take any of those sums past 2^63-1 is ``400 invalid_shard`` before
anything is written, on both backends, so nothing stored can make a later read fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from recordkeeper.core.errors import ServiceUnavailable
from recordkeeper.core.limits import MAX_INT64
from recordkeeper_service.db import Database
from tests.service._helpers import API, commit, error, example_schema, register, shard, stage

HUGE = {"size": MAX_INT64, "record_count": MAX_INT64, "schema": None}


def _check_readable(client: TestClient, name: str, dataset: str = "coco") -> dict[str, Any]:
    """Every read of the version and its dataset answers; returns the version."""
    version = client.get(f"{API}/versions/{name}")
    assert version.status_code == 200, version.text
    splits = client.get(f"{API}/versions/{name}/splits")
    assert splits.status_code == 200, splits.text
    listing = client.get(f"{API}/datasets/{dataset}/versions")
    assert listing.status_code == 200, listing.text
    assert client.get(f"{API}/datasets/{dataset}").status_code == 200
    body: dict[str, Any] = version.json()
    assert splits.json()["splits"] == {
        split: {k: v for k, v in counts.items() if k != "shards"}
        for split, counts in body["splits"].items()
    }
    return body


def test_one_request_over_the_limit_is_refused(client: TestClient) -> None:
    staged = stage(client, "coco")
    prefix = staged["storage_prefix"]
    bodies = [shard(prefix, i, 3, **HUGE) for i in range(3)]
    body = error(register(client, staged["name"], bodies), 400, "invalid_shard")
    assert body["shard"] == 1  # the first shard that takes a total past the limit
    assert "size" in body["detail"] and str(MAX_INT64) in body["detail"]
    version = _check_readable(client, staged["name"])
    assert (version["shard_count"], version["size"], version["record_count"]) == (0, 0, 0)


@pytest.mark.parametrize("field", ["size", "record_count"])
def test_each_total_is_checked(client: TestClient, field: str) -> None:
    staged = stage(client, "coco")
    prefix = staged["storage_prefix"]
    bodies = [shard(prefix, i, 2, schema=None, **{field: MAX_INT64 // 2 + 1}) for i in range(2)]
    body = error(register(client, staged["name"], bodies), 400, "invalid_shard")
    assert body["shard"] == 1
    assert field in body["detail"]
    # exactly at the limit is fine
    bodies[1][field] = MAX_INT64 - bodies[0][field]
    assert register(client, staged["name"], bodies).status_code == 200
    version = _check_readable(client, staged["name"])
    assert version[field] == MAX_INT64
    assert version["splits"]["train"][field] == MAX_INT64
    assert commit(client, staged["name"]).status_code == 200
    _check_readable(client, "coco@latest")


def test_a_second_request_over_the_limit_is_refused(client: TestClient) -> None:
    """Totals count the shards already registered: the second request is the one refused."""
    versions = [stage(client, "coco") for _ in range(2)]
    for staged in versions:
        prefix = staged["storage_prefix"]
        first = shard(prefix, 0, 1, **HUGE)
        assert register(client, staged["name"], [first]).status_code == 200
        for second in (
            shard(prefix, 0, 1, split="validation", **HUGE),  # another split: version total
            shard(prefix, 0, 1, split="test", schema=None, size=1, record_count=0),
            shard(prefix, 0, 1, split="test", schema=None, size=0, record_count=1),
        ):
            body = error(register(client, staged["name"], [second]), 400, "invalid_shard")
            assert body["shard"] == 0
            assert str(MAX_INT64) in body["detail"]
        version = _check_readable(client, staged["name"])
        assert (version["shard_count"], version["size"]) == (1, MAX_INT64)
        assert list(version["splits"]) == ["train"]
        # registering the same shard again adds nothing: still accepted
        again = register(client, staged["name"], [first])
        assert again.json() == {"registered": 0, "unchanged": 1, "shard_count": 1}
        # shards that add nothing to the totals still fit
        empty = shard(prefix, 0, 1, split="test", schema=None, size=0, record_count=0)
        assert register(client, staged["name"], [empty]).status_code == 200

    committed = commit(client, versions[0]["name"])
    assert committed.status_code == 200, committed.text
    assert committed.json()["size"] == MAX_INT64
    _check_readable(client, committed.json()["name"])
    abandoned = client.post(f"{API}/versions/{versions[1]['name']}/abandon")
    assert abandoned.status_code == 200, abandoned.text
    assert abandoned.json()["state"] == "abandoned"
    _check_readable(client, versions[1]["name"])


def test_merged_schema_counts_stay_within_the_limit(client: TestClient) -> None:
    """The merged schema sums each shard schema's counts: a shard's schema may not count more
    records than the shard holds, nor a feature in more records than the schema counts."""
    staged = stage(client, "coco")
    prefix = staged["storage_prefix"]
    too_many = shard(prefix, 0, 2, records=10, schema=example_schema(MAX_INT64))
    body = error(register(client, staged["name"], [too_many]), 400, "invalid_shard")
    assert body["shard"] == 0 and "record_count" in body["detail"]
    present = example_schema(10)
    present["features"][0]["present_count"] = 11
    too_present = shard(prefix, 0, 2, records=10, schema=present)
    body = error(register(client, staged["name"], [too_present]), 400, "invalid_shard")
    assert body["shard"] == 0 and "present_count" in body["detail"]

    bodies = [shard(prefix, i, 2, records=MAX_INT64 // 2) for i in range(2)]
    assert register(client, staged["name"], bodies).status_code == 200
    committed = commit(client, staged["name"])
    assert committed.status_code == 200, committed.text
    schema = client.get(f"{API}/versions/{committed.json()['name']}/schema")
    assert schema.status_code == 200, schema.text
    merged = schema.json()["schema"]
    assert merged["record_count"] == committed.json()["record_count"] <= MAX_INT64
    assert merged["features"][0]["present_count"] <= MAX_INT64


# SQLite only: PostgreSQL's SUM of bigint is numeric, it does not overflow (and a skip of a
# PostgreSQL test counts as a failure under CI)
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_database_arithmetic_error_is_not_an_outage(
    database_url: str, backend: str, tmp_path: Path
) -> None:
    """SQLite's "integer overflow" (from SUM) is a statement error: retrying cannot help, so it
    never becomes 503 service_unavailable (it is a 500); a database it cannot open still is."""
    overflow = text(f"SELECT sum(x) FROM (SELECT {MAX_INT64} AS x UNION ALL SELECT 1)")
    database = Database(database_url, pool_size=1)
    try:
        with (
            pytest.raises(OperationalError, match="integer overflow"),
            database.transaction(write=False) as session,
        ):
            session.execute(overflow).all()
        with pytest.raises(OperationalError, match="integer overflow"):
            database.read(lambda conn: conn.execute(overflow).all())
    finally:
        database.dispose()
    unreachable = Database(f"sqlite:///{tmp_path / 'missing' / 'registry.db'}", pool_size=1)
    try:
        with pytest.raises(ServiceUnavailable), unreachable.transaction() as session:
            session.execute(text("SELECT 1")).all()
    finally:
        unreachable.dispose()

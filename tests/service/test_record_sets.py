"""Record identity of versions: registration checks, listing, look-up by records digest."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from recordkeeper.core.record_index import version_records_digest
from tests.service._helpers import API, error, publish, stage

ZERO, ONE = "sha256:" + "0" * 64, "sha256:" + "1" * 64


def _body(counts: dict[str, int], digest: str = ZERO, **extra: object) -> dict[str, object]:
    splits = [{"split": s, "records": n, "digest": digest} for s, n in counts.items()]
    return {"splits": splits, "index_location": "file:///d/{shard}.rkidx", **extra}


def _counts(client: TestClient, name: str) -> dict[str, int]:
    splits = client.get(f"{API}/versions/{name}/splits").json()["splits"]
    return {s: v["record_count"] for s, v in splits.items()}


def test_register_list_find_and_replace(client: TestClient) -> None:
    name = publish(client, "coco", splits=("train", "test"))["name"]
    counts = _counts(client, name)
    put = client.put(f"{API}/versions/{name}/record-sets", json=_body(counts))
    assert put.status_code == 200, put.text
    got = put.json()
    expected = version_records_digest({s: (n, "0" * 64) for s, n in counts.items()})
    assert got["records_digest"] == "sha256:" + expected
    assert got["record_count"] == sum(counts.values())
    listed = client.get(f"{API}/versions/coco@latest/record-sets").json()
    assert listed["count"] == 1 and listed["data"][0]["records_digest"] == got["records_digest"]
    found = client.get(f"{API}/record-sets/{got['records_digest']}").json()
    assert [r["version"] for r in found["data"]] == [name]
    again = client.put(f"{API}/versions/{name}/record-sets", json=_body(counts, ONE)).json()
    assert again["records_digest"] != got["records_digest"]  # replaced, not added
    assert client.get(f"{API}/versions/{name}/record-sets").json()["count"] == 1
    other = client.put(f"{API}/versions/{name}/record-sets", json=_body(counts, kind="example"))
    assert other.status_code == 200
    assert client.get(f"{API}/versions/{name}/record-sets").json()["count"] == 2


def test_counts_that_are_not_the_versions_are_refused(client: TestClient) -> None:
    name = publish(client, "coco")["name"]
    counts = _counts(client, name)
    wrong = {s: n + 1 for s, n in counts.items()}
    error(
        client.put(f"{API}/versions/{name}/record-sets", json=_body(wrong)), 422, "invalid_request"
    )
    extra = {**counts, "test": 0}
    error(
        client.put(f"{API}/versions/{name}/record-sets", json=_body(extra)), 422, "invalid_request"
    )


def test_bad_bodies_and_staged_versions_are_refused(client: TestClient) -> None:
    name = publish(client, "coco")["name"]
    counts = _counts(client, name)
    url = f"{API}/versions/{name}/record-sets"
    error(client.put(url, json=_body(counts, "sha256:xyz")), 422, "invalid_request")
    error(client.put(url, json=_body(counts, kind="text")), 422, "invalid_request")
    error(client.put(url, json=_body(counts, width=8)), 422, "invalid_request")
    error(client.put(url, json=_body(counts, index_format=2)), 422, "invalid_request")
    staged = stage(client, "coco")["name"]
    error(
        client.put(f"{API}/versions/{staged}/record-sets", json=_body({})), 404, "version_not_found"
    )
    error(client.get(f"{API}/record-sets/nothex"), 422, "invalid_request")
    assert client.get(f"{API}/record-sets/{ZERO}").json()["count"] == 0


def test_a_records_reference_resolves_to_the_newest_version_with_those_records(
    client: TestClient, database_url: str
) -> None:
    names = [publish(client, "coco", content=str(i))["name"] for i in range(3)]
    for name, digest in zip(names, (ZERO, ONE, ZERO), strict=True):
        counts = _counts(client, name)
        put = client.put(f"{API}/versions/{name}/record-sets", json=_body(counts, digest))
        assert put.status_code == 200, put.text
    records = {
        name: client.get(f"{API}/versions/{name}/record-sets").json()["data"][0]["records_digest"]
        for name in names
    }
    assert records[names[0]] == records[names[2]] != records[names[1]]
    same = records[names[0]].removeprefix("sha256:")
    for ref, expected in (
        (f"coco@records:sha256:{same}", names[2]),  # two versions: the newest
        (f"coco@records:sha256:{same[:12]}", names[2]),  # a prefix of 12 digits
        (f"coco@records:{records[names[1]]}", names[1]),
    ):
        got = client.get(f"{API}/versions/{ref}")
        assert got.status_code == 200, got.text
        assert got.json()["name"] == expected
        # every route that takes a reference resolves it the same way
        assert client.get(f"{API}/versions/{ref}/record-sets").json()["data"][0]["version"] == (
            expected
        )
    error(client.get(f"{API}/versions/coco@records:sha256:{'f' * 12}"), 404, "version_not_found")
    error(client.get(f"{API}/versions/other@records:sha256:{same}"), 404, "dataset_not_found")
    error(client.get(f"{API}/versions/coco@records:{same}"), 400, "invalid_reference")
    error(client.get(f"{API}/versions/coco@records:sha256:{same[:11]}"), 400, "invalid_reference")
    # a deprecated version is never picked by its records
    client.post(f"{API}/versions/{names[2]}/deprecate", json={"reason": "bad labels"})
    got = client.get(f"{API}/versions/coco@records:sha256:{same}").json()
    assert got["name"] == names[0]
    # two different records digests sharing the prefix: ambiguous, never a guess
    forged = f"sha256:{same[:12]}{'f' * 52}"
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE version_record_sets SET records_digest = :d WHERE records_digest = :o"
                ),
                {"d": forged, "o": records[names[1]]},
            )
    finally:
        engine.dispose()
    error(client.get(f"{API}/versions/coco@records:sha256:{same[:12]}"), 400, "invalid_reference")
    assert client.get(f"{API}/versions/coco@records:sha256:{same}").json()["name"] == names[0]
    assert client.get(f"{API}/versions/coco@records:{forged}").json()["name"] == names[1]


def test_a_records_reference_to_deprecated_records_names_the_version(client: TestClient) -> None:
    name = publish(client, "coco")["name"]
    put = client.put(f"{API}/versions/{name}/record-sets", json=_body(_counts(client, name), ZERO))
    digest = put.json()["records_digest"]
    client.post(f"{API}/versions/{name}/deprecate", json={"reason": "bad labels"})
    body = error(client.get(f"{API}/versions/coco@records:{digest}"), 404, "version_not_found")
    # not "run `recordkeeper index`": the records are registered, in a version never picked
    assert f"{name} (deprecated) has it" in body["detail"], body
    assert "recordkeeper index" not in body["detail"]

"""Stored record diffs: checked against both versions, stored, listed, replaced (SQLite and
PostgreSQL)."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish, stage

SAME, OLD, NEW, VAL = ("sha256:" + c * 64 for c in "0123")
H = "ab" * 16  # a 16-byte identity as hex


def _index(client: TestClient, name: str, digests: dict[str, str], width: int = 16) -> None:
    splits = client.get(f"{API}/versions/{name}/splits").json()["splits"]
    body = {
        "width": width,
        "index_location": "file:///d/{shard}.rkidx",
        "splits": [
            {"split": s, "records": splits[s]["record_count"], "digest": d}
            for s, d in digests.items()
        ],
    }
    response = client.put(f"{API}/versions/{name}/record-sets", json=body)
    assert response.status_code == 200, response.text


def _split(name: str, a: int, b: int, added: int = 0, removed: int = 0, **kw: Any) -> dict:
    entry = {
        "split": name,
        "records_a": a,
        "records_b": b,
        "added": added,
        "removed": removed,
        "common": a - removed,
        "moved_in": 0,
        "moved_out": 0,
        "duplicates_a": 0,
        "duplicates_b": 0,
        "sample_added": [],
        "sample_removed": [],
    }
    return {**entry, **kw}


def _pair(client: TestClient) -> tuple[str, str]:
    """v1 (train, test) → v2 (train resharded, test changed, val new), both indexed."""
    a = publish(client, "coco", splits=("train", "test"))["name"]
    b = publish(client, "coco", splits=("train", "test", "val"), content="x")["name"]
    _index(client, a, {"train": SAME, "test": OLD})
    _index(client, b, {"train": SAME, "test": NEW, "val": VAL})
    return a, b


def _document() -> dict[str, Any]:
    return {
        "kind": "bytes",
        "width": 16,
        "new": 21,
        "gone": 1,
        "splits": [
            _split("val", 0, 20, added=20, moved_in=1, sample_added=[H]),
            _split("train", 20, 20),
            _split("test", 20, 20, added=1, removed=1, moved_out=1, sample_removed=["cd" * 16]),
        ],
    }


def test_store_list_and_replace(client: TestClient) -> None:
    a, b = _pair(client)
    url = f"{API}/versions/{a}/record-diffs/{b}"
    assert client.get(url).json() == {"data": [], "count": 0}
    put = client.put(url, json=_document())
    assert put.status_code == 200, put.text
    got = put.json()
    assert (got["a"], got["b"], got["kind"], got["width"]) == (a, b, "bytes", 16)
    assert [s["split"] for s in got["splits"]] == ["test", "train", "val"]  # name order
    assert got["splits"][2]["sample_added"] == [H] and not got["identical"]
    assert got["recorded_by"] == "anonymous"  # the token that sent it (none here)
    assert got["recorded_at"].endswith("Z")
    listed = client.get(f"{API}/versions/coco@latest/record-diffs/coco@1").json()
    assert listed["count"] == 0  # direction matters: B → A is another diff
    listed = client.get(f"{API}/versions/coco@1/record-diffs/coco@latest").json()
    assert listed["count"] == 1 and listed["data"][0] == got
    again = _document()
    again["splits"][0]["sample_added"] = []
    assert client.put(url, json=again).status_code == 200  # replaced, not added
    listed = client.get(url).json()
    assert listed["count"] == 1 and listed["data"][0]["splits"][2]["sample_added"] == []
    events = client.get(f"{API}/events", params={"action": "version.record_diff"}).json()
    assert len(events["data"]) == 2


def _refused(
    client: TestClient, url: str, document: dict[str, Any], status: int, code: str
) -> None:
    error(client.put(url, json=document), status, code)


def test_diffs_that_do_not_agree_with_the_versions_are_refused(client: TestClient) -> None:
    a, b = _pair(client)
    url = f"{API}/versions/{a}/record-diffs/{b}"

    def changed(edit: Any) -> dict[str, Any]:
        document = copy.deepcopy(_document())
        edit(document)
        return document

    bad = [
        changed(lambda d: d["splits"].pop(0)),  # a split of B missing
        changed(lambda d: d["splits"].append(_split("extra", 0, 0))),  # not a split of A or B
        changed(lambda d: d["splits"][1].update(records_a=19, common=19)),  # not A's count
        # train's digests are equal: no change can be shown
        changed(lambda d: d["splits"][1].update(added=1, removed=1, common=19)),
        # test's digests differ: "no change" is not believable
        changed(
            lambda d: d["splits"][2].update(
                added=0, removed=0, common=20, moved_out=0, sample_removed=[]
            )
        ),
        changed(lambda d: d["splits"][1].update(common=19)),  # records_a != common + removed
        changed(lambda d: d["splits"][0].update(sample_added=["AB" * 16])),  # not lowercase
        changed(lambda d: d["splits"][0].update(sample_added=["ab" * 20])),  # not 16 bytes
        changed(lambda d: d["splits"][0].update(sample_added=[H, H])),  # twice
        changed(lambda d: d["splits"][1].update(sample_added=[H])),  # more than added
        changed(lambda d: d["splits"][0].update(moved_in=0)),  # moves do not add up
        # moves that add up, but one out of train, which removed nothing
        changed(lambda d: (d["splits"][0].update(moved_in=2), d["splits"][1].update(moved_out=1))),
        changed(lambda d: d.update(new=22)),  # more new than added
        changed(lambda d: d["splits"][1].update(duplicates_a=20)),
        changed(lambda d: d["splits"].append(copy.deepcopy(d["splits"][1]))),  # twice
        changed(lambda d: d["splits"][0].update(split="Bad Split")),
        changed(lambda d: d.update(width=32)),  # not indexed at 32 (and hex of 16 bytes)
        changed(lambda d: d.update(kind="example")),  # not indexed as examples
    ]
    for document in bad:
        _refused(client, url, document, 422, "invalid_record_diff")
    assert client.get(url).json()["count"] == 0
    for document in (
        changed(lambda d: d.update(kind="text")),
        changed(lambda d: d.update(width=8)),
        changed(lambda d: d["splits"][0].update(added=-1)),
        changed(lambda d: d["splits"][0].update(added=2**63)),
        changed(lambda d: d["splits"][0].update(added="1")),
        changed(lambda d: d["splits"][0].update(sample_added=[H] * 11)),
        changed(lambda d: d["splits"][0].update(sample_added=["a" * 65])),
        changed(lambda d: d["splits"][0].pop("common")),
        changed(lambda d: d.update(splits=[_split(f"s{i}", 0, 0) for i in range(257)])),
    ):
        _refused(client, url, document, 422, "invalid_request")
    staged = stage(client, "coco")["name"]
    _refused(
        client, f"{API}/versions/{a}/record-diffs/{staged}", _document(), 404, "version_not_found"
    )
    _refused(
        client, f"{API}/versions/{a}/record-diffs/coco@9", _document(), 404, "version_not_found"
    )
    _refused(
        client, f"{API}/versions/{a}/record-diffs/bad@@ref", _document(), 400, "invalid_reference"
    )
    error(client.get(f"{API}/versions/{a}/record-diffs/coco@9"), 404, "version_not_found")


def test_an_unindexed_version_is_named_with_the_command_that_indexes_it(
    client: TestClient,
) -> None:
    a = publish(client, "coco", splits=("train", "test"))["name"]
    b = publish(client, "coco", splits=("train", "test"), content="y")["name"]
    _index(client, a, {"train": SAME, "test": OLD})
    document = _document()
    document["splits"] = [_split("train", 20, 20), _split("test", 20, 20)]
    document.update(new=0, gone=0)
    body = error(
        client.put(f"{API}/versions/{a}/record-diffs/{b}", json=document),
        422,
        "invalid_record_diff",
    )
    assert f"recordkeeper index {b}" in body["detail"]
    _index(client, b, {"train": SAME, "test": OLD})  # the same records, resharded
    answer = client.put(f"{API}/versions/{a}/record-diffs/{b}", json=document)
    assert answer.status_code == 200, answer.text
    assert answer.json()["identical"]

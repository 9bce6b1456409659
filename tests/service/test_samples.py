"""Sample records of versions: attach, answer, replace; bad documents get stable codes."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from recordkeeper.core.record_sample import MAX_SAMPLE_BYTES
from tests.service._helpers import API, error, publish, stage


def _row(i: int = 0, **features: Any) -> dict[str, Any]:
    return {"index": i, "size": 10, "kind": "example", "features": features or {"label": [i]}}


def _sample(*rows: dict[str, Any], split: str = "train", **extra: Any) -> dict[str, Any]:
    return {"splits": [{"split": split, "records": list(rows or [_row()])}], **extra}


def test_attach_answer_and_replace(client: TestClient) -> None:
    name = publish(client, "coco", splits=("train", "test"))["name"]
    error(client.get(f"{API}/versions/{name}/sample"), 404, "sample_not_found")
    body = _sample(_row(0, text=["a cat"], box=[0.5, 1.0]), _row(1), source="publish")
    put = client.put(f"{API}/versions/{name}/sample", json=body)
    assert put.status_code == 200, put.text
    got = client.get(f"{API}/versions/coco@latest/sample").json()
    assert got["version"] == name and got["source"] == "publish"
    assert got["splits"] == body["splits"]
    assert got["recorded_by"] and got["recorded_at"]
    again = client.put(f"{API}/versions/{name}/sample", json=_sample(split="test"))
    assert again.status_code == 200 and again.json()["source"] == "attach"  # the default
    assert [s["split"] for s in client.get(f"{API}/versions/{name}/sample").json()["splits"]] == [
        "test"
    ]
    events = client.get(f"{API}/events", params={"action": "version.sample"}).json()["data"]
    assert len(events) == 2


def test_bad_documents_are_refused_with_stable_codes(client: TestClient) -> None:
    name = publish(client, "coco")["name"]
    url = f"{API}/versions/{name}/sample"
    error(client.put(url, json=_sample(split="nope")), 422, "invalid_sample")  # not its split
    error(client.put(url, json=_sample(split="Bad Split")), 422, "invalid_sample")
    twice = {"splits": [_sample()["splits"][0], _sample()["splits"][0]]}
    error(client.put(url, json=twice), 422, "invalid_sample")
    error(client.put(url, json=_sample(_row(0, label=[{"x": 1}]))), 422, "invalid_sample")
    error(client.put(url, json=_sample(_row(0, label=[True]))), 422, "invalid_sample")
    error(client.put(url, json=_sample(_row(0, label="text"))), 422, "invalid_sample")
    bytes_row = {"index": 0, "size": 1, "kind": "bytes", "features": {"a": [1]}}
    error(client.put(url, json=_sample(bytes_row)), 422, "invalid_sample")
    big = _sample(*[_row(i, text=["x" * 4000]) for i in range(10)])
    assert len(str(big)) > MAX_SAMPLE_BYTES
    error(client.put(url, json=big), 422, "invalid_sample")
    # the body's own types and the boundary's text policy: the boundary's code
    error(client.put(url, json=_sample(*[_row(i) for i in range(11)])), 422, "invalid_request")
    error(client.put(url, json={"splits": "train"}), 422, "invalid_request")
    error(client.put(url, json=_sample({**_row(), "kind": "text"})), 422, "invalid_request")
    error(client.put(url, json=_sample(_row(0, t=["a\x00b"]))), 422, "invalid_request")
    error(client.put(url, json=_sample(source="later")), 422, "invalid_request")
    staged = stage(client, "coco")["name"]
    error(client.put(f"{API}/versions/{staged}/sample", json=_sample()), 404, "version_not_found")
    error(client.get(f"{API}/versions/nope@latest/sample"), 404, "dataset_not_found")
    error(client.get(url), 404, "sample_not_found")  # nothing was stored by the refusals


def test_deleting_a_versions_data_drops_its_sample(client: TestClient) -> None:
    """A sample is a copy of records: retention deleting a version's data deletes it in the
    same step, and a version whose data is released or deleted gets no new one."""
    old = publish(client, "coco")["name"]
    assert client.put(f"{API}/versions/{old}/sample", json=_sample()).status_code == 200
    publish(client, "coco", desc="newer", content="newer")
    policy = {"keep_last": 1, "keep_trained": False, "keep_aliased": False}
    assert client.put(f"{API}/retention/policies/coco", json=policy).status_code == 200
    claimed = client.post(f"{API}/retention/claims", json={}).json()["data"]
    assert [c["name"] for c in claimed] == [old]
    # released: nothing new may copy its records
    error(client.put(f"{API}/versions/{old}/sample", json=_sample()), 409, "version_data_deleted")
    assert client.get(f"{API}/versions/{old}/sample").status_code == 200  # not deleted yet
    done = client.post(f"{API}/versions/{old}/retention-done", json={"objects": 1})
    assert done.status_code == 200, done.text
    error(client.get(f"{API}/versions/{old}/sample"), 404, "sample_not_found")
    error(client.put(f"{API}/versions/{old}/sample", json=_sample()), 409, "version_data_deleted")
    events = client.get(f"{API}/events", params={"action": "version.data_deleted"}).json()["data"]
    assert events[0]["detail"]["sample_dropped"] is True

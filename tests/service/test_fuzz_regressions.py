"""Regressions found by fuzzing the REST API (see tests/service/test_api_fuzz.py).

Each test is one input that used to answer a 500 or an answer docs/rest-api.md does not list.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service._helpers import API, error, register, shard, stage


def test_undecodable_json_body_is_invalid_request(client: TestClient) -> None:
    # Not UTF-8: FastAPI raised a bare 400 "There was an error parsing the body".
    response = client.post(
        f"{API}/datasets", content=b"\xb6", headers={"Content-Type": "application/json"}
    )
    body = error(response, 422, "invalid_request")
    assert body["errors"][0]["type"] == "json_invalid"


BEYOND_INT64 = [2**63, 2**64, 33813510628388541663727845376]


def test_offsets_beyond_64_bits_are_invalid_requests(client: TestClient) -> None:
    # The database cannot bind them: OverflowError (SQLite) / DataError (PostgreSQL) → 500.
    for path in ["datasets", "events", "tokens", "models", "datasets/coco/versions"]:
        for offset in BEYOND_INT64:
            response = client.get(f"{API}/{path}", params={"offset": offset})
            error(response, 422, "invalid_request")
    assert client.get(f"{API}/datasets", params={"offset": 2**63 - 1}).json()["data"] == []


def test_token_ids_beyond_64_bits_are_not_found(client: TestClient) -> None:
    for token_id in [*BEYOND_INT64, -(2**63) - 1, 2**63 - 1, 0, -1]:
        error(client.delete(f"{API}/tokens/{token_id}"), 404, "token_not_found")


def test_storage_identity_with_a_huge_integer_is_an_invalid_request(client: TestClient) -> None:
    # It used to be stored, and every later GET of the version answered 500 (orjson cannot
    # render integers beyond 64 bits).  Then 2**64 was invalid_shard but 2**63 stored; now any
    # integer beyond 64-bit signed in free-form JSON is refused with the body (invalid_number).
    version = stage(client, root="s3://ml-data/datasets")
    for huge in (2**64, 2**63):
        identity = {"backend": "s3", "etag": huge}
        body = shard(version["storage_prefix"], 0, 1, storage_identity=identity)
        answer = error(register(client, version["name"], [body]), 422, "invalid_request")
        assert answer["errors"][0]["type"] == "invalid_number"
        assert "shards[0].storage_identity.etag" in answer["detail"]
    assert client.get(f"{API}/versions/{version['name']}").status_code == 200


def test_metadata_and_metrics_with_huge_integers_are_invalid_requests(client: TestClient) -> None:
    # Stored as sent, then unrenderable: the stage answer itself, and every later read of the
    # version or of the model's checkpoints, answered 500.
    for huge in (2**64, -(2**63) - 1, 2**70):
        response = client.post(f"{API}/datasets/coco/versions", json={"metadata": {"a": [huge]}})
        error(response, 422, "invalid_request")
        for body in ({"metrics": {"loss": huge}}, {"metadata": {"a": {"b": huge}}}, {"step": huge}):
            response = client.put(f"{API}/models/det/checkpoints/ckpt-1", json=body)
            error(response, 422, "invalid_request")
    error(client.get(f"{API}/datasets/coco"), 404, "dataset_not_found")
    error(client.get(f"{API}/models/det/checkpoints"), 404, "model_not_found")
    limit = 2**63 - 1
    assert client.post(f"{API}/datasets/coco/versions", json={"metadata": {"a": limit}}).is_success
    response = client.put(f"{API}/models/det/checkpoints/ckpt-1", json={"step": limit})
    assert response.status_code == 201, response.text
    assert client.get(f"{API}/models/det/checkpoints").status_code == 200


def test_gc_candidates_with_an_age_beyond_the_calendar(client: TestClient) -> None:
    # now - timedelta(seconds=76502951884) is before year 1: OverflowError → 500.
    version = stage(client)
    assert client.post(f"{API}/versions/{version['name']}/abandon").status_code == 200
    for age in (76502951884, 10**20, 2**63 - 1):
        response = client.get(f"{API}/gc/candidates", params={"staged_older_than": age})
        assert response.status_code == 200, response.text
        assert [c["name"] for c in response.json()["data"]] == [version["name"]]

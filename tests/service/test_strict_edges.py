"""Looser edges made strict (issue 21, item 10), through the API: schema field types, shard
URIs that do not show what they name, and JSON nested too deeply to decode."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core.roots import UriError, as_root
from tests.service._helpers import error, example_schema, register, shard, stage

API = "/api/v1"


@pytest.mark.parametrize(
    ("field", "value"),
    [("min_count", "1"), ("min_count", True), ("max_count", 1.9), ("name", {"a": 1}), ("name", "")],
)
def test_a_schema_with_loose_field_types_is_refused(
    client: TestClient, field: str, value: object
) -> None:
    version = stage(client)
    schema = example_schema(10)
    schema["features"][0][field] = value
    body = shard(version["storage_prefix"], 0, 1, schema=schema)
    answer = error(register(client, version["name"], [body]), 400, "invalid_shard")
    assert field.split("_")[0] in answer["detail"] and answer["shard"] == 0
    assert client.get(f"{API}/versions/{version['name']}").json()["shard_count"] == 0


@pytest.mark.parametrize(
    "trick",
    [
        "train\u200b-00000.tfrecord",  # zero-width space
        "train-\u202e00000.tfrecord",  # right-to-left override
        "\ufefftrain.tfrecord",  # byte order mark
        "\uff0e\uff0e/escape.tfrecord",  # full-width dots: '..' once normalised
    ],
)
def test_shard_uris_that_hide_what_they_name_are_refused(client: TestClient, trick: str) -> None:
    version = stage(client)
    body = shard(version["storage_prefix"], 0, 1, uri=version["storage_prefix"] + trick)
    answer = register(client, version["name"], [body])
    assert answer.status_code in (400, 403), answer.text  # 403: it could escape the roots
    assert answer.headers["x-error-code"] in ("invalid_shard", "storage_root_not_allowed")
    assert "U+" in answer.json()["detail"] or "segment" in answer.json()["detail"]


def test_a_bucket_with_a_full_width_dot_is_not_a_storage_root() -> None:
    for bad in ("s3://ml\uff0edata/", "s3://m\u0131-data/", "gs://data\u200b/x/"):
        with pytest.raises(UriError):
            as_root(bad)
    assert as_root("s3://ml-data/日本語/") == "s3://ml-data/日本語/"  # paths may be Unicode


def test_valid_json_nested_too_deeply_is_named_so(client: TestClient) -> None:
    deep = '{"desc": ' + "[" * 1000 + "]" * 1000 + "}"
    answer = client.post(
        f"{API}/datasets/coco/versions", content=deep, headers={"content-type": "application/json"}
    )
    body = error(answer, 422, "invalid_request")
    assert "nested too deeply" in body["detail"] and "not valid JSON" not in body["detail"]
    broken = client.post(
        f"{API}/datasets/coco/versions", content="{", headers={"content-type": "application/json"}
    )
    assert "not valid JSON" in error(broken, 422, "invalid_request")["detail"]


def test_token_names_are_unique_among_active_tokens(client: TestClient) -> None:
    """Audit events and gc claims name tokens: a second active ``ops`` token used to complete
    the first one's gc claim."""
    first = client.post(f"{API}/tokens", json={"name": "ops", "scope": "admin"})
    assert first.status_code == 201, first.text
    secret = {"Authorization": f"Bearer {first.json()['token']}"}
    again = client.post(f"{API}/tokens", json={"name": "ops", "scope": "admin"}, headers=secret)
    body = error(again, 409, "token_name_taken")
    assert "ops" in body["detail"]
    other = client.post(f"{API}/tokens", json={"name": "ops-2", "scope": "read"}, headers=secret)
    assert other.status_code == 201
    assert client.delete(f"{API}/tokens/{other.json()['id']}", headers=secret).status_code == 204
    reused = client.post(f"{API}/tokens", json={"name": "ops-2", "scope": "read"}, headers=secret)
    assert reused.status_code == 201  # a revoked token's name may be used again

"""The service applies the core's rules, and answers as the client's pre-checks predict.

Each rule lives once in ``recordkeeper.core``; these tests catch a second copy that disagrees:
the tables of accepted/refused inputs are the core tests' own (tests/core/), and every endpoint
that takes such an input must accept and refuse exactly the same ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect

from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import InvalidHash, StorageRootNotAllowed, code_for_status
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.shards import INPUT_FIELDS, ShardRecord
from recordkeeper.core.splits import is_split_name
from recordkeeper.publish import check_allowed
from recordkeeper_service import tables as m
from tests.core.test_digests import DIGESTS
from tests.core.test_splits import SPLITS
from tests.service._helpers import API, register, shard, stage


def _core_accepts_digest(text: object) -> bool:
    try:
        parse_digest(text)
    except InvalidHash:
        return False
    return True


def test_digest_parsing_is_the_core_parser_on_every_endpoint(client: TestClient) -> None:
    for text, _ in DIGESTS:
        if not isinstance(text, str):
            continue
        accepted = _core_accepts_digest(text)
        answers = [
            client.get(f"{API}/versions/coco@latest", params={"expect_digest": text}),
            client.get(f"{API}/shards/consumers", params={"sha256": text}),
        ]
        if text and "/" not in text and text == text.strip():
            answers.append(client.get(f"{API}/schemas/{text}"))
        for response in answers:  # refused: invalid_hash (or a route's length bound: 422)
            code = response.headers.get("x-error-code")
            refused = code in ("invalid_hash", "invalid_request")
            assert refused is not accepted, (text, response.request.url, response.text)


#: URIs under the test roots (store, s3://ml-data/datasets/) and how a naive prefix check
#: would have judged them.
def _uris(store: str) -> list[str]:
    return [
        store + "coco/a.tfrecord",
        "s3://ml-data/datasets/coco/a.tfrecord",
        "S3://ml-data/datasets/coco/a.tfrecord",  # the scheme is case-insensitive
        "s3://ml-data/datasets/../secret/a.tfrecord",  # '..' could climb out of the root
        "s3://ml-data/datasets/%2e%2e/secret/a.tfrecord",
        store + "coco/../../etc/a.tfrecord",
        "s3://ml-data/datasets2/a.tfrecord",  # a root matches whole segments
        "s3://ml-data/datasets//a.tfrecord",
        "s3://ml-data/datasets/a b.tfrecord",
        "s3://ml-data/datasets/a.tfrecord?x=1",
        "ml-data/datasets/a.tfrecord",
    ]


def test_client_pre_check_and_server_agree_on_storage_roots(client: TestClient, store: str) -> None:
    allowed_roots = client.get(f"{API}/info").json()["allowed_roots"]
    version = stage(client)
    uris = _uris(store)
    for index, uri in enumerate(uris):
        body = shard(version["storage_prefix"], index, len(uris), uri=uri)
        response = register(client, version["name"], [body])
        server_refuses = response.status_code != 200
        if server_refuses:
            code = response.headers.get("x-error-code")
            assert code in ("storage_root_not_allowed", "invalid_shard"), response.text
        try:
            check_allowed([uri], allowed_roots)
            client_refuses = False
        except StorageRootNotAllowed:
            client_refuses = True
        assert client_refuses is server_refuses, (uri, response.text)
        assert AllowedRoots.of(allowed_roots).allows(uri) is not server_refuses, uri


def test_split_grammar_is_the_core_grammar(client: TestClient) -> None:
    version = stage(client)
    for name, _ in SPLITS:
        if not isinstance(name, str):
            continue
        body = shard(version["storage_prefix"], 0, 1, split=name or "x")
        body["split"] = name
        response = register(client, version["name"], [body])
        assert (response.status_code == 200) is is_split_name(name), (name, response.text)


def test_status_codes_are_the_core_map(client: TestClient) -> None:
    for response in (client.get(f"{API}/no/such/route"), client.delete(f"{API}/datasets")):
        assert response.headers["x-error-code"] == code_for_status(response.status_code)


def test_shard_record_fields_are_the_rest_models_and_the_table(client: TestClient) -> None:
    names = [f.name for f in dataclasses.fields(ShardRecord)]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert set(schemas["ShardIn"]["properties"]) == {*INPUT_FIELDS, "schema"}
    assert set(schemas["ShardOut"]["properties"]) == {*names, "registered_at"}
    columns = {c.key for c in inspect(m.Shard).columns}
    assert set(names) <= columns


@pytest.mark.parametrize("record_format", ["tfrecord", "array_record", "riegeli"])
def test_a_registered_shard_reads_back_as_the_core_record(
    client: TestClient, record_format: str
) -> None:
    """Every field sent comes back (a new field replaced by its default would fail here: the
    shard's format, sent as array_record, used to be the kind of field that did)."""
    version = stage(client)
    body: dict[str, Any] = shard(version["storage_prefix"], 0, 1, format=record_format)
    assert register(client, version["name"], [body]).status_code == 200
    answer = client.get(f"{API}/versions/{version['name']}").json()
    (stored,) = answer["splits"]["train"]["shards"]
    record = ShardRecord.from_json(stored)
    assert record.to_wire(schema=body["schema"]) == body
    assert stored["format"] == record_format
    assert stored["schema_digest"].startswith("sha256:")
    compact = client.get(f"{API}/versions/{version['name']}/shards?form=compact").json()
    assert compact["compact"]["columns"]["format"] == [record_format]


def test_a_shard_without_a_format_is_a_tfrecord_one(client: TestClient) -> None:
    version = stage(client)
    body: dict[str, Any] = shard(version["storage_prefix"], 0, 1)
    del body["format"]
    assert register(client, version["name"], [body]).status_code == 200
    answer = client.get(f"{API}/versions/{version['name']}").json()
    assert answer["splits"]["train"]["shards"][0]["format"] == "tfrecord"


def test_an_unknown_format_is_refused_with_its_code(client: TestClient) -> None:
    version = stage(client)
    bad = shard(version["storage_prefix"], 0, 1, format="parquet")
    response = register(client, version["name"], [bad])
    assert response.status_code == 400
    assert response.headers["x-error-code"] == "invalid_shard"
    gz = shard(version["storage_prefix"], 0, 1, format="array_record", compression="gzip")
    assert register(client, version["name"], [gz]).headers["x-error-code"] == "invalid_shard"


@pytest.mark.parametrize("text", ["sha256:" + "a" * 64, "a" * 64])
def test_schema_digest_may_leave_out_the_prefix(client: TestClient, text: str) -> None:
    response = client.get(f"{API}/schemas/{text}")
    assert response.headers["x-error-code"] == "schema_not_found"

"""Text and numbers that the two databases would not store alike are refused at the boundary.

Found over a real socket: a NUL (JSON ``"\\u0000"``) was stored by SQLite and refused by
PostgreSQL with its own message ("the database refused a value: PostgreSQL text fields cannot
contain NUL"); ``NaN``/``Infinity``/``1e400`` in free-form JSON were stored as null by SQLite and
refused by PostgreSQL ("invalid input syntax for type json"); gc-done counts beyond 64 bits were
stored in an event.  Every such body now answers the same ``422 invalid_request`` on both
backends, naming where the value is, and nothing of it is stored.

Bodies are sent as raw bytes: ``json.dumps`` would already have changed ``NaN`` or ``1e400``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish, register, shard, stage
from tests.service.test_gc import claim

JSON = {"Content-Type": "application/json"}
CHECKPOINT = f"{API}/models/det/checkpoints/ckpt-1"
NUL = "\\u0000"  # as written in a JSON body


def send(client: TestClient, method: str, path: str, raw: str) -> Any:
    """Send ``raw`` as the JSON body, each ``<NUL>`` written as the escape ``\\u0000``."""
    return client.request(method, path, content=raw.replace("<NUL>", NUL).encode(), headers=JSON)


def with_number(body: dict[str, Any], number: str) -> str:
    """``body`` as JSON text with its ``"@"`` value replaced by ``number`` as written."""
    return json.dumps(body).replace('"@"', number)


def refused(response: Any, kind: str, where: str) -> dict[str, Any]:
    """The documented refusal: 422 invalid_request, ``errors[0].type`` ``kind``, naming
    ``where``, and no word of the database's."""
    body = error(response, 422, "invalid_request")
    assert body["errors"][0]["type"] == kind, body
    assert body["errors"][0]["msg"].startswith(f"{where}: "), body
    assert body["detail"].startswith(f"body: {where}: "), body
    for leak in ("database", "PostgreSQL", "json", "NUL (0x00)"):
        assert leak not in body["detail"], body
    return body


# -- NUL in text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"name": "coco", "description": "a<NUL>b"}', "description"),
        ('{"name": "co<NUL>co"}', "name"),
    ],
)
def test_nul_in_a_dataset_is_refused(client: TestClient, raw: str, where: str) -> None:
    refused(send(client, "POST", f"{API}/datasets", raw), "invalid_text", where)
    assert client.get(f"{API}/datasets").json()["data"] == []


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"desc": "add<NUL>"}', "desc"),
        ('{"metadata": {"note": "a<NUL>b"}}', "metadata.note"),
        ('{"metadata": {"k<NUL>": 1}}', "metadata.<key>"),
        ('{"metadata": {"a": [1, {"b": "<NUL>"}]}}', "metadata.a[1].b"),
    ],
)
def test_nul_in_a_staged_version_is_refused(client: TestClient, raw: str, where: str) -> None:
    refused(send(client, "POST", f"{API}/datasets/coco/versions", raw), "invalid_text", where)
    error(client.get(f"{API}/datasets/coco"), 404, "dataset_not_found")


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ('{"uri": "s3://models/run1/ckpt<NUL>"}', "uri"),
        ('{"run": "r<NUL>"}', "run"),
        ('{"metrics": {"loss<NUL>": 0.5}}', "metrics.<key>"),
        ('{"metadata": {"host": "<NUL>"}}', "metadata.host"),
        ('{"saved_models": [{"name": "clf", "uri": "s3://m/x<NUL>"}]}', "saved_models[0].uri"),
    ],
)
def test_nul_in_a_checkpoint_is_refused(client: TestClient, raw: str, where: str) -> None:
    refused(send(client, "PUT", CHECKPOINT, raw), "invalid_text", where)
    error(client.get(f"{API}/models/det/checkpoints"), 404, "model_not_found")


def test_nul_in_reasons_aliases_shards_and_tokens_is_refused(client: TestClient) -> None:
    version = publish(client)
    name = version["name"]
    deprecate = f"{API}/versions/{name}/deprecate"
    refused(send(client, "POST", deprecate, '{"reason": "wrong<NUL>"}'), "invalid_text", "reason")
    assert client.get(f"{API}/versions/{name}").json()["state"] == "committed"

    alias = f"{API}/datasets/coco/aliases/prod"
    refused(send(client, "PUT", alias, '{"version": "coco@v1<NUL>"}'), "invalid_text", "version")
    assert [a["alias"] for a in client.get(f"{API}/datasets/coco/aliases").json()["data"]] == [
        "latest"
    ]

    tokens = client.get(f"{API}/tokens").json()["count"]
    refused(send(client, "POST", f"{API}/tokens", '{"name": "ci<NUL>"}'), "invalid_text", "name")
    assert client.get(f"{API}/tokens").json()["count"] == tokens

    staged = stage(client, root="s3://ml-data/datasets")
    body = shard(staged["storage_prefix"], 0, 1, storage_identity={"etag": "x\x00"})
    refused(
        register(client, staged["name"], [body]), "invalid_text", "shards[0].storage_identity.etag"
    )
    body = shard(staged["storage_prefix"], 0, 1, split="tr\x00ain")
    refused(register(client, staged["name"], [body]), "invalid_text", "shards[0].split")
    shards_now = client.get(f"{API}/versions/{staged['name']}/shards").json()
    assert shards_now["shard_count"] == 0


def test_nul_in_a_deletion_reason_is_refused(client: TestClient) -> None:
    response = client.put(CHECKPOINT, json={"uri": "s3://models/run1/ckpt-1"})
    assert response.status_code == 201, response.text
    deletion = f"{CHECKPOINT}/deletion"
    refused(send(client, "PUT", deletion, '{"reason": "gone<NUL>"}'), "invalid_text", "reason")
    assert client.get(CHECKPOINT).json()["state"] == "present"


def test_text_that_merely_mentions_an_escape_is_stored(client: TestClient) -> None:
    # "\\u0000" in JSON is the six characters \u0000, not a NUL: it is text like any other.
    raw = '{"metadata": {"pattern": "\\\\u0000"}, "desc": "plain"}'
    response = send(client, "POST", f"{API}/datasets/coco/versions", raw)
    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == {"pattern": "\\u0000"}


# -- numbers in free-form JSON ----------------------------------------------------------------

NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1.5e309"]


@pytest.mark.parametrize("number", NOT_FINITE)
def test_non_finite_numbers_in_version_metadata_are_refused(
    client: TestClient, number: str
) -> None:
    raw = with_number({"metadata": {"loss": [0.5, {"x": "@"}]}}, number)
    refused(
        send(client, "POST", f"{API}/datasets/coco/versions", raw),
        "invalid_number",
        "metadata.loss[1].x",
    )
    error(client.get(f"{API}/datasets/coco"), 404, "dataset_not_found")


@pytest.mark.parametrize("number", NOT_FINITE)
@pytest.mark.parametrize("field", ["metrics", "metadata"])
def test_non_finite_numbers_in_checkpoints_are_refused(
    client: TestClient, number: str, field: str
) -> None:
    raw = with_number({"step": 1, field: {"acc": "@"}}, number)
    refused(send(client, "PUT", CHECKPOINT, raw), "invalid_number", f"{field}.acc")
    error(client.get(f"{API}/models/det/checkpoints"), 404, "model_not_found")


@pytest.mark.parametrize("number", ["NaN", "1e400"])
def test_non_finite_numbers_in_shards_are_refused(client: TestClient, number: str) -> None:
    staged = stage(client, root="s3://ml-data/datasets")
    for where in ("storage_identity", "schema"):
        body = shard(staged["storage_prefix"], 0, 1)
        body[where] = {**(body[where] or {}), "odd": "@"}
        raw = with_number({"shards": [body]}, number)
        response = send(client, "POST", f"{API}/versions/{staged['name']}/shards", raw)
        refused(response, "invalid_number", f"shards[0].{where}.odd")
    assert client.get(f"{API}/versions/{staged['name']}/shards").json()["shard_count"] == 0


def test_finite_floats_are_stored_as_sent(client: TestClient) -> None:
    metrics = {"loss": 1e308, "tiny": 5e-324, "neg": -0.25, "zero": 0.0}
    response = client.put(CHECKPOINT, json={"metrics": metrics})
    assert response.status_code == 201, response.text
    assert client.get(CHECKPOINT).json()["metrics"] == metrics


# -- integers beyond 64 bits ------------------------------------------------------------------

BEYOND = [2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30]


@pytest.mark.parametrize("huge", BEYOND)
def test_free_form_integers_are_64_bit_signed_on_both_sides(client: TestClient, huge: int) -> None:
    raw = json.dumps({"metadata": {"n": huge}})  # exact: Python writes big integers as is
    refused(
        send(client, "POST", f"{API}/datasets/coco/versions", raw), "invalid_number", "metadata.n"
    )
    raw = json.dumps({"metrics": {"n": [huge]}})
    refused(send(client, "PUT", CHECKPOINT, raw), "invalid_number", "metrics.n[0]")
    error(client.get(f"{API}/datasets/coco"), 404, "dataset_not_found")
    error(client.get(f"{API}/models/det/checkpoints"), 404, "model_not_found")


def test_64_bit_integers_are_stored_as_sent(client: TestClient) -> None:
    bounds = {"max": 2**63 - 1, "min": -(2**63)}
    version = stage(client, metadata=bounds)
    assert client.get(f"{API}/versions/{version['name']}").json()["metadata"] == bounds
    response = client.put(CHECKPOINT, json={"metrics": bounds, "step": 2**63 - 1})
    assert response.status_code == 201, response.text
    assert client.get(CHECKPOINT).json()["metrics"] == bounds


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"objects": 10**30, "bytes": 1}, "objects"),
        ({"objects": 1, "bytes": 2**64}, "bytes"),
        ({"objects": 2**63, "bytes": 1}, "objects"),
    ],
)
def test_gc_done_counts_beyond_64_bits_are_refused(
    client: TestClient, body: dict[str, int], where: str
) -> None:
    name = stage(client)["name"]
    assert client.post(f"{API}/versions/{name}/abandon").status_code == 200
    assert claim(client) == [name]
    done = f"{API}/versions/{name}/gc-done"
    refused(client.post(done, json=body), "invalid_number", where)
    events = client.get(f"{API}/events", params={"action": "version.collected"}).json()
    assert events["data"] == []
    response = client.post(done, json={"objects": 2**63 - 1, "bytes": 2**63 - 1})
    assert response.status_code == 200, response.text
    events = client.get(f"{API}/events", params={"action": "version.collected"}).json()
    assert events["data"][0]["detail"]["objects"] == 2**63 - 1


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("PUT", CHECKPOINT, {"step": 2**64}, "step"),
        (
            "PUT",
            CHECKPOINT,
            {
                "saved_models": [
                    {
                        "name": "clf",
                        "uri": "s3://m/x",
                        "inputs": [
                            {"name": "x", "kind": "dense", "dtype": "float32", "shape": [2**64]}
                        ],
                    }
                ]
            },
            "saved_models[0].inputs[0].shape[0]",
        ),
        ("POST", f"{API}/gc/claims", {"staged_older_than": -(2**63) - 1}, "staged_older_than"),
    ],
)
def test_declared_integers_beyond_64_bits_are_refused(
    client: TestClient, method: str, path: str, body: dict[str, Any], where: str
) -> None:
    refused(client.request(method, path, json=body), "invalid_number", where)


def test_every_declared_request_integer_is_bounded_in_openapi(client: TestClient) -> None:
    # The bounds are documented: every integer of every request body has a minimum and a
    # maximum within 64-bit signed.
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    request_models = [name for name in schemas if name.endswith("In")]
    assert "GcDoneIn" in request_models and "ShardIn" in request_models
    unbounded = []

    def visit(where: str, node: Any) -> None:
        if isinstance(node, dict):
            # FastAPI's OpenAPI model writes bounds as floats (2**63 - 1 as 9.223372036854776e18).
            low, high = float(node.get("minimum", -(2.0**64))), float(node.get("maximum", 2.0**64))
            if node.get("type") == "integer" and not (low >= -(2.0**63) and high <= 2.0**63):
                unbounded.append(where)
            for key, child in node.items():
                visit(f"{where}.{key}", child)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                visit(f"{where}[{i}]", child)

    for name in request_models:
        visit(name, schemas[name])
    assert unbounded == []


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/events?action=%00",
        f"{API}/datasets?prefix=a%00",
        f"{API}/events?dataset=coco%00",
        f"{API}/models/m/checkpoints?run=%00",
    ],
)
def test_nul_in_a_query_is_refused_on_both_backends(client: TestClient, path: str) -> None:
    """It was 200 with an empty list on SQLite and a database refusal on PostgreSQL."""
    body = error(client.get(path), 422, "invalid_request")
    assert body["errors"][0]["type"] == "invalid_text" and "NUL" in body["detail"]

"""The OpenAPI document tells the truth: errors, the bearer scheme, and every response's model.

* every ``/api/v1`` operation declares the ``bearer`` security scheme and documents its error
  answers (401/403/422/503, plus 400/404/409/413 where they apply) as ``ErrorOut``;
* a real answer of every route validates against the response model the route declares, and
  serialising it through that model gives back exactly the body that was sent.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from tests.service._helpers import API, publish, shards, stage

ERROR_REF = "#/components/schemas/ErrorOut"


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_error_schema_and_bearer_scheme_are_declared(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    error_out = document["components"]["schemas"]["ErrorOut"]
    assert set(error_out["required"]) == {"code", "detail"}
    assert error_out["additionalProperties"] is True  # codes add documented fields
    assert document["components"]["securitySchemes"] == {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": document["components"]["securitySchemes"]["bearer"]["description"],
        }
    }


def test_every_api_operation_documents_auth_and_errors(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    operations = _operations(document)
    assert len(operations) >= 30
    for method, path, operation in operations:
        where = f"{method} {path}"
        responses = operation["responses"]
        error_statuses = {s for s in responses if s.startswith(("4", "5"))}
        for status in error_statuses:
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": ERROR_REF}, (where, status)
        if not path.startswith(API):
            assert "security" not in operation, where
            continue
        assert operation["security"] == [{"bearer": []}], where
        assert {"401", "403", "422", "503"} <= error_statuses, where
        if "requestBody" in operation:
            assert "413" in error_statuses, where
    readyz = document["paths"]["/readyz"]["get"]["responses"]
    assert readyz["503"]["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}
    by_route = {(m, p): set(o["responses"]) for m, p, o in operations}
    assert {"400", "404", "409"} <= by_route["GET", f"{API}/versions/{{ref}}"]
    assert "409" in by_route["POST", f"{API}/datasets"]
    assert {"400", "404", "409"} <= by_route["POST", f"{API}/versions/{{version_name}}/commit"]
    assert "404" in by_route["GET", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}"]


class _Checked:
    """Calls routes by their path template and checks each answer against the declared model."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        app: Any = client.app
        self.routes = {
            (method, context.path): context.original_route
            for context in iter_route_contexts(app.routes)
            if isinstance(context.original_route, APIRoute)
            for method in context.methods or ()
        }
        self.checked: set[tuple[str, str]] = set()

    def __call__(
        self, method: str, template: str, status: int = 200, json: Any = None, **params: Any
    ) -> Any:
        path_params = {k: v for k, v in params.items() if f"{{{k}}}" in template}
        query = {k: v for k, v in params.items() if k not in path_params}
        response = self.client.request(
            method, template.format(**path_params), params=query, json=json
        )
        assert response.status_code == status, (template, response.text)
        route = self.routes[method, template]
        assert isinstance(route, APIRoute)
        body = response.json()
        adapter: TypeAdapter[Any] = TypeAdapter(route.response_model)
        value = adapter.validate_python(body)
        exclude_unset = route.response_model_exclude_unset
        assert (
            adapter.dump_python(value, mode="json", by_alias=True, exclude_unset=exclude_unset)
            == body
        )
        self.checked.add((method, template))
        return body


def test_every_answer_validates_against_its_declared_model(client: TestClient) -> None:
    call = _Checked(client)
    call("GET", "/healthz")
    call("GET", "/readyz")
    call("GET", f"{API}/info")
    call("POST", f"{API}/datasets", 201, json={"name": "coco", "description": "d"})
    call("GET", f"{API}/datasets", prefix="co")
    call("GET", f"{API}/datasets/{{name}}", name="coco")

    staged = call("POST", f"{API}/datasets/{{name}}/versions", 201, json={"desc": "a"}, name="coco")
    name = staged["name"]
    bodies = shards(staged["storage_prefix"], 2) + shards(
        staged["storage_prefix"], 1, split="validation"
    )
    call(
        "POST",
        f"{API}/versions/{{version_name}}/shards",
        json={"shards": bodies},
        version_name=name,
    )
    call("POST", f"{API}/versions/{{version_name}}/commit", json={}, version_name=name)
    call("GET", f"{API}/versions/{{ref}}", ref="coco@latest")
    call("GET", f"{API}/versions/{{ref}}", ref="coco@v1", shards=False)
    call("GET", f"{API}/versions/{{ref}}/shards", ref=name, limit=2)
    call("GET", f"{API}/versions/{{ref}}/shards", ref=name, form="compact")
    call("GET", f"{API}/datasets/{{name}}/versions", name="coco")
    call("GET", f"{API}/versions/{{ref}}/schema", ref=name)
    digest = client.get(f"{API}/versions/{name}").json()["schema_digest"]
    call("GET", f"{API}/schemas/{{digest}}", digest=digest)

    call(
        "PUT",
        f"{API}/datasets/{{name}}/aliases/{{alias}}",
        json={"version": name},
        name="coco",
        alias="prod",
    )
    call("GET", f"{API}/datasets/{{name}}/aliases", name="coco")
    call("GET", f"{API}/datasets/{{name}}/aliases/{{alias}}/history", name="coco", alias="prod")
    call("GET", f"{API}/events", dataset="coco")
    call("POST", f"{API}/tokens", 201, json={"name": "ci", "scope": "read"})
    call("GET", f"{API}/tokens")

    checkpoint = {"step": 10, "data": [{"version": name, "role": "train"}], "metrics": {"a": 1}}
    route = f"{API}/models/{{model}}/checkpoints/{{checkpoint}}"
    created = call("PUT", route, 201, json=checkpoint, model="det", checkpoint="ckpt-1")
    again = call("PUT", route, 200, json=checkpoint, model="det", checkpoint="ckpt-1")
    assert (created["created"], again["created"]) == (True, False)
    child = {"parent": "det/ckpt-1", "parent_kind": "restored_from", "step": 20}
    call("PUT", route, 201, json=child, model="det", checkpoint="ckpt-2")
    got = call("GET", route, model="det", checkpoint="ckpt-1")
    assert "created" not in got  # only in the answer to a PUT
    call("GET", f"{API}/models")
    call("GET", f"{API}/models/{{model}}/checkpoints", model="det")
    call(
        "GET",
        f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/lineage",
        model="det",
        checkpoint="ckpt-2",
    )
    deleted = call(
        "PUT",
        f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/deletion",
        json={"reason": "max_to_keep"},
        model="det",
        checkpoint="ckpt-1",
    )
    assert deleted["state"] == "deleted"
    export = {
        "name": "serving",
        "uri": "file:///m/ckpt-3_saved_modules/serving",
        "inputs": [{"name": "label", "kind": "dense", "dtype": "int64", "shape": []}],
    }
    call(
        "PUT",
        route,
        201,
        json={**child, "saved_models": [export]},
        model="det",
        checkpoint="ckpt-3",
    )
    checked = call(
        "GET",
        f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/model-check",
        model="det",
        checkpoint="ckpt-3",
    )
    assert checked["checks"]
    consumers = call("GET", f"{API}/versions/{{ref}}/consumers", ref="coco@prod")
    assert "shards" not in consumers
    by_uri = call("GET", f"{API}/shards/consumers", uri=bodies[0]["uri"])
    assert by_uri["shards"]
    call("GET", f"{API}/lineage/graph", checkpoint="det/ckpt-2")
    impact = call("GET", f"{API}/lineage/impact", version="coco@prod")
    assert impact["data"] and impact["versions"][0]["depth"] == 0
    call("GET", f"{API}/lineage/impact", source="gs://raw/nothing/a.json", prefix="true")
    call("GET", f"{API}/whoami")
    call("GET", f"{API}/versions/{{ref}}/splits", ref="coco@latest")
    report = {"mode": "fast", "checked": 3, "problems": [{"shard": "s", "reason": "missing"}]}
    call("POST", f"{API}/versions/{{ref}}/verifications", 201, json=report, ref=name)
    counts: dict[str, int] = {}
    for body in bodies:
        counts[body["split"]] = counts.get(body["split"], 0) + body["record_count"]
    record_set = {
        "splits": [
            {"split": s, "records": n, "digest": "sha256:" + "0" * 64} for s, n in counts.items()
        ],
        "index_location": "file:///d/{shard}.rkidx",
    }
    registered = call("PUT", f"{API}/versions/{{ref}}/record-sets", json=record_set, ref=name)
    call("GET", f"{API}/versions/{{ref}}/record-sets", ref=name)
    found = call("GET", f"{API}/record-sets/{{digest}}", digest=registered["records_digest"])
    assert found["count"] == 1
    zero = dict.fromkeys(("added", "removed", "moved_in", "moved_out", "duplicates_a"), 0)
    splits = [
        {"split": s, "records_a": n, "records_b": n, "common": n, "duplicates_b": 0, **zero,
         "sample_added": [], "sample_removed": []}
        for s, n in counts.items()
    ]  # fmt: skip
    record_diff = {"kind": "bytes", "width": 16, "new": 0, "gone": 0, "splits": splits}
    url = f"{API}/versions/{{ref}}/record-diffs/{{other}}"
    call("PUT", url, json=record_diff, ref=name, other=name)
    assert call("GET", url, ref=name, other=name)["data"][0]["identical"]
    records = [
        {"index": 0, "size": 12, "kind": "example", "features": {"label": [3], "t": ["a cat"]}},
        {"index": 1, "size": 3, "kind": "bytes", "features": "<3 bytes: 0a0b0c>"},
    ]
    sample = {"splits": [{"split": "train", "records": records}], "source": "publish"}
    call("PUT", f"{API}/versions/{{ref}}/sample", json=sample, ref=name)
    assert call("GET", f"{API}/versions/{{ref}}/sample", ref=name)["source"] == "publish"
    policy_path = f"{API}/datasets/{{name}}/leakage-policy"
    call("PUT", policy_path, json={"mode": "warn", "max_rate": 0.1}, name="elsewhere")
    assert call("GET", policy_path, name="elsewhere")["mode"] == "warn"
    split, n = next(iter(counts.items()))
    pair = {"split": split, "other_ref": name, "other_split": split, "records": n}
    result = {"pairs": [{**pair, "leaked": 0, "distinct": 0}]}
    call("PUT", f"{API}/versions/{{ref}}/leakage", json=result, ref=name)
    assert call("GET", f"{API}/versions/{{ref}}/leakage", ref=name)["count"] == 1

    other = publish(client, "coco", content="b")["name"]
    derived = stage(client, "coco", provenance={"parents": [{"ref": name, "role": "base"}]})
    provenance = {
        "parents": [{"ref": name, "role": "base"}],
        "sources": [{"uri": "s3://raw/coco/", "identity": None}],
        "params": {"lr": 0.1},
    }
    call(
        "PUT",
        f"{API}/versions/{{version_name}}/provenance",
        json=provenance,
        version_name=derived["name"],
    )
    call("GET", f"{API}/versions/{{ref}}/children", ref=name)
    call("GET", f"{API}/sources/versions", uri="s3://raw/coco/")
    call("GET", f"{API}/datasets/{{name}}/log", name="coco")
    diff = call("GET", f"{API}/versions/{{ref}}/diff/{{other}}", ref=name, other=other)
    assert diff["shards"]["changed"] and "schema" in diff
    call("POST", f"{API}/versions/{{ref}}/deprecate", json={"reason": "r"}, ref=other)
    abandoned = stage(client, "coco")["name"]
    call("POST", f"{API}/versions/{{version_name}}/abandon", version_name=abandoned)
    call("GET", f"{API}/gc/candidates")
    prefix = client.get(f"{API}/versions/{abandoned}").json()["storage_prefix"]
    call(
        "POST",
        f"{API}/versions/{{version_name}}/gc-preview",
        json={"uris": [prefix + "x.tfrecord"]},
        version_name=abandoned,
    )
    call("POST", f"{API}/gc/claims", json={})
    call(
        "POST",
        f"{API}/versions/{{version_name}}/gc-objects",
        json={"uris": [prefix + "x.tfrecord"]},
        version_name=abandoned,
    )
    call(
        "POST",
        f"{API}/versions/{{version_name}}/gc-done",
        json={"objects": 0},
        version_name=abandoned,
    )

    publish(client, "coco", content="c")  # v3: kept as the last; v2 (deprecated) expires
    policy = "/retention/policies/{scope}"
    call("PUT", f"{API}{policy}", json={"keep_last": 1}, scope="coco")
    call("GET", f"{API}{policy}", scope="coco")
    call("GET", f"{API}/retention/policies")
    pins = {"label": "train.lock.yaml", "versions": [name]}
    call("POST", f"{API}/retention/pins", json=pins)
    call("GET", f"{API}/retention/pins", dataset="coco")
    call("DELETE", f"{API}/retention/pins", label="train.lock.yaml")
    assert call("GET", f"{API}/retention/plan", dataset="coco")["delete"] == 1
    claimed = call("POST", f"{API}/retention/claims", json={"dataset": "coco"})
    assert [c["name"] for c in claimed["data"]] == [other]
    uris = [bodies[0]["uri"], "s3://ml-data/x"]
    call("POST", f"{API}/retention/deletable", json={"version": other, "uris": uris})
    call(
        "POST",
        f"{API}/versions/{{version_name}}/retention-done",
        json={"objects": 1},
        version_name=other,
    )
    assert call("GET", f"{API}/versions/{{ref}}", ref=other)["data_state"] == "deleted"

    with_model = {key for key, route in call.routes.items() if route.response_model is not None}
    assert with_model - call.checked == set()


def test_cached_resolve_answers_equal_the_models_serialisation(client: TestClient) -> None:
    """The hot path splices a cached version's splits, serialised once, into each answer."""
    from recordkeeper_service.routes.versions import VersionOut

    name = publish(client, "coco", count=3, splits=("train", "validation"))["name"]
    first, second, by_name = (
        client.get(f"{API}/versions/{ref}") for ref in ("coco@latest", "coco@latest", name)
    )
    assert first.headers["content-type"] == "application/json"
    assert first.json() == second.json()
    assert {**by_name.json(), "ref": "coco@latest"} == first.json()
    model = VersionOut.model_validate(first.json())
    assert model.model_dump(mode="json") == first.json()
    assert model.splits is not None and model.splits["validation"].shard_count == 3

"""Builders for requests against the service in tests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi.testclient import TestClient
from httpx import Response

from recordkeeper.core.manifest import ManifestEntry, content_digest

API = "/api/v1"


def sha(text: str) -> str:
    """A deterministic 64-hex digest for test content."""
    return hashlib.sha256(text.encode()).hexdigest()


def example_schema(
    records: int = 10, kind: str = "int64", features: Iterable[str] = ("label",)
) -> dict[str, Any]:
    """A shard schema in the REST form: every record carries each feature once."""
    return {
        "record_type": "example",
        "record_count": records,
        "features": [
            {
                "name": name,
                "kind": kind,
                "min_count": 1,
                "max_count": 1,
                "present_count": records,
            }
            for name in features
        ],
    }


def shard(
    prefix: str,
    index: int,
    count: int,
    *,
    split: str = "train",
    content: str = "",
    records: int = 10,
    schema: Mapping[str, Any] | bool | None = True,
    **overrides: Any,
) -> dict[str, Any]:
    """A valid shard registration under ``prefix``; ``content`` varies the hashes."""
    tag = f"{split}/{index}/{count}/{content}"
    body: dict[str, Any] = {
        "split": split,
        "index": index,
        "count": count,
        "uri": f"{prefix}{split}-{index:05d}-of-{count:05d}.tfrecord",
        "compression": "none",
        "size": 100 + index,
        "sha256": sha("stored:" + tag),
        "crc32c": f"{index:08x}",
        "records_sha256": sha("records:" + tag),
        "record_count": records,
        "format": "tfrecord",
        "storage_identity": {"backend": "file", "mtime_ns": 1, "size": 100 + index},
    }
    if schema is True:
        body["schema"] = example_schema(records)
    elif schema:
        body["schema"] = dict(schema)
    body.update(overrides)
    return body


def shards(prefix: str, count: int, *, split: str = "train", **kw: Any) -> list[dict[str, Any]]:
    return [shard(prefix, i, count, split=split, **kw) for i in range(count)]


def expected_digest(bodies: Iterable[Mapping[str, Any]]) -> str:
    """The content digest the service must compute for these shards."""
    return content_digest(
        ManifestEntry(b["split"], b["index"], b["count"], b["records_sha256"], b["record_count"])
        for b in bodies
    )


def stage(client: TestClient, dataset: str = "coco", **body: Any) -> dict[str, Any]:
    response = client.post(f"{API}/datasets/{dataset}/versions", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


def register(client: TestClient, name: str, bodies: list[dict[str, Any]]) -> Response:
    return client.post(f"{API}/versions/{name}/shards", json={"shards": bodies})


def commit(client: TestClient, name: str, on_duplicate: str | None = None) -> Response:
    body = {} if on_duplicate is None else {"on_duplicate": on_duplicate}
    return client.post(f"{API}/versions/{name}/commit", json=body)


def publish(
    client: TestClient,
    dataset: str = "coco",
    *,
    count: int = 2,
    content: str = "",
    splits: Iterable[str] = ("train",),
    on_duplicate: str | None = None,
    **stage_body: Any,
) -> dict[str, Any]:
    """Stage, register ``count`` shards per split and commit; returns the commit answer."""
    version = stage(client, dataset, **stage_body)
    bodies = [
        b
        for split in splits
        for b in shards(version["storage_prefix"], count, split=split, content=content)
    ]
    response = register(client, version["name"], bodies)
    assert response.status_code == 200, response.text
    response = commit(client, version["name"], on_duplicate)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def error(response: Response, status: int, code: str) -> dict[str, Any]:
    """Assert ``response`` is the documented error and return its body."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers.get("x-error-code") == code, response.headers
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert "Traceback" not in response.text
    if status == 401:  # RFC 9110: a 401 names how to authenticate
        assert response.headers["www-authenticate"] == 'Bearer realm="recordkeeper"'
    return body

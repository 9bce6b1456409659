"""Bad input of every kind gets a 4xx with a stable code, never a 500 or a traceback."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fastapi.testclient import TestClient

from tests.service._helpers import API, error, shards, stage


def test_unknown_route_and_method(client: TestClient) -> None:
    error(client.get("/nope"), 404, "not_found")
    error(client.get(f"{API}/versions/coco@v1/nope"), 404, "not_found")
    error(client.delete(f"{API}/datasets"), 405, "method_not_allowed")
    error(client.put(f"{API}/versions/coco@v1"), 405, "method_not_allowed")


def test_malformed_json(client: TestClient) -> None:
    headers = {"Content-Type": "application/json"}
    for raw in [b"{", b'{"name": }', b"\xff\xfe", b"[1, 2", b"nul"]:
        body = error(
            client.post(f"{API}/datasets", content=raw, headers=headers), 422, "invalid_request"
        )
        assert body["errors"]
    body = error(
        client.post(f"{API}/datasets", content=b"{", headers=headers), 422, "invalid_request"
    )
    assert "JSON" in body["detail"]


def test_wrong_types_list_capped_field_errors(client: TestClient) -> None:
    version = stage(client)
    bodies = [{"split": 1, "index": "x"} for _ in range(500)]
    body = error(
        client.post(f"{API}/versions/{version['name']}/shards", json={"shards": bodies}),
        422,
        "invalid_request",
    )
    assert len(body["errors"]) == 50
    assert "more problems" in body["detail"]
    assert set(body["errors"][0]) == {"loc", "msg", "type"}


def test_huge_input_is_not_echoed(client: TestClient) -> None:
    huge = "x" * 100_000
    response = client.post(f"{API}/datasets", json={"name": huge})
    error(response, 400, "invalid_dataset_name")
    assert len(response.content) < 2_000
    response = client.post(f"{API}/datasets", json={"name": ["list"] * 10_000})
    error(response, 422, "invalid_request")
    assert len(response.content) < 5_000


def test_oversized_body_by_content_length(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=4096)
    version = stage(client)
    big = {"shards": shards(version["storage_prefix"], 50)}
    body = error(
        client.post(f"{API}/versions/{version['name']}/shards", json=big), 413, "payload_too_large"
    )
    assert body["max_bytes"] == 4096
    assert "send shards in several requests" in body["detail"]  # what the caller can do
    assert client.get(f"{API}/versions/{version['name']}").json()["shard_count"] == 0


def test_an_oversized_body_elsewhere_is_not_told_to_send_shards(
    make_client: Callable[..., TestClient],
) -> None:
    # a record diff, metadata, a token: their bodies cannot be split into several requests
    client = make_client(max_body_bytes=4096)
    version = stage(client)
    big = {"kind": "bytes", "width": 16, "new": 0, "gone": 0, "splits": [], "x": "x" * 5000}
    url = f"{API}/versions/{version['name']}/record-diffs/{version['name']}"
    body = error(client.put(url, json=big), 413, "payload_too_large")
    assert "RECORDKEEPER_MAX_SMALL_BODY_BYTES" in body["detail"], body
    assert "several requests" not in body["detail"]


def test_oversized_body_streamed_without_length(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_body_bytes=4096)
    version = stage(client)

    def chunks() -> Iterator[bytes]:
        yield b'{"shards": ['
        for _ in range(100):
            yield b'{"split": "train", "index": 0, "count": 1},' * 4
        yield b"]}"

    response = client.post(
        f"{API}/versions/{version['name']}/shards",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    error(response, 413, "payload_too_large")


def test_bad_content_length(client: TestClient) -> None:
    response = client.post(f"{API}/datasets", content=b"{}", headers={"Content-Length": "abc"})
    assert response.status_code in (400, 422)


def test_internal_errors_hide_the_traceback(client: TestClient) -> None:
    def boom() -> None:
        raise RuntimeError("secret internals at /srv/app.py line 3")

    client.app.add_api_route("/boom", boom)  # type: ignore[attr-defined]
    body = error(client.get("/boom"), 500, "internal_error")
    assert "secret internals" not in body["detail"]


def test_garbage_everywhere_is_never_a_500(client: TestClient) -> None:
    version = stage(client)
    name = version["name"]
    garbage: list[object] = [None, 0, -1, "", "x" * 300, [], {}, {"a": 1}, True, 1.5, "../../"]
    posts = [
        f"{API}/datasets",
        f"{API}/datasets/coco/versions",
        f"{API}/versions/{name}/shards",
        f"{API}/versions/{name}/commit",
        f"{API}/versions/{name}/abandon",
        f"{API}/versions/coco@v1/deprecate",
        f"{API}/tokens",
    ]
    for url in posts:
        for value in garbage:
            for body in (
                value,
                {
                    "name": value,
                    "shards": value,
                    "desc": value,
                    "date": value,
                    "root": value,
                    "on_duplicate": value,
                    "reason": value,
                    "scope": value,
                    "metadata": value,
                },
            ):
                response = client.post(url, json=body)
                assert response.status_code < 500, (url, body, response.text)
                assert response.headers.get("x-error-code") or response.status_code < 400
    for ref in ["%00", "coco@%FF", "a" * 500, "coco@sha256:" + "g" * 64, "..", "coco@v99999999999"]:
        response = client.get(f"{API}/versions/{ref}")
        assert response.status_code < 500, (ref, response.text)
        response = client.get(f"{API}/schemas/{ref}")
        assert response.status_code < 500, (ref, response.text)
    for shard_value in garbage:
        response = client.post(f"{API}/versions/{name}/shards", json={"shards": [shard_value]})
        assert response.status_code < 500, (shard_value, response.text)

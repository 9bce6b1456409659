"""The text and number policy of the boundary, over a real socket (issue 8, failures 1 and 5).

* Lone surrogates (JSON ``"\\ud800"``) are refused with ``422 invalid_request`` naming where they
  are, in every body, before anything is stored; a poisoned checkpoint PUT leaves nothing behind.
* Version numbers are bounded before conversion: a 4,301-digit reference answers 400 on every
  route taking a reference, and the CLI prints a clean ``error:`` line.
* Grammars that say digits mean ASCII digits (names, references, dates).
* Typed fields accept their type only (a shard ``index`` of ``0.0``/``false``/``"0"``).
* A shard URI names a file strictly inside a root and the version's prefix.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from tests.integration.conftest import LiveService

API = "/api/v1"
SHA = "a" * 64
HUGE = "9" * 4301  # one digit over Python's int-string limit


class Http:
    """One keep-alive connection; sends raw JSON text so escapes reach the server as written."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname and parts.port
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)

    def __call__(
        self, method: str, path: str, body: str | None = None
    ) -> tuple[int, dict[str, Any], http.client.HTTPResponse]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, API + path, body=body, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else {}), response

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def live_service(
    request: pytest.FixtureRequest, live_service_factory: Callable[..., LiveService]
) -> LiveService:
    """The service on SQLite and on PostgreSQL (where the poisoned rows were found)."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_database_url")
        return live_service_factory(database_url=url)
    return live_service_factory()


@pytest.fixture
def api(live_service: LiveService) -> Any:
    client = Http(live_service.url)
    yield client
    client.close()


def _shard(root: str, index: int = 0, **over: Any) -> dict[str, Any]:
    shard = {
        "split": "train",
        "index": index,
        "count": 2,
        "uri": f"{root.rstrip('/')}/coco/train-{index}.tfrecord",
        "compression": "none",
        "size": 10,
        "sha256": SHA,
        "crc32c": "0" * 8,
        "records_sha256": SHA,
        "record_count": 1,
    }
    shard.update(over)
    return shard


def _published(api: Http, root: str) -> str:
    status, _, _ = api("POST", "/datasets", json.dumps({"name": "coco"}))
    assert status == 201
    status, version, _ = api("POST", "/datasets/coco/versions", json.dumps({"date": "20231015"}))
    assert status == 201, version
    name = version["name"]
    shards = [_shard(root, 0), _shard(root, 1)]
    status, body, _ = api("POST", f"/versions/{name}/shards", json.dumps({"shards": shards}))
    assert status == 200, body
    status, body, _ = api("POST", f"/versions/{name}/commit", json.dumps({}))
    assert status == 200, body
    return str(name)


def _staged(api: Http) -> str:
    status, _, _ = api("POST", "/datasets", json.dumps({"name": "staged"}))
    assert status in (201, 409)
    status, version, _ = api("POST", "/datasets/staged/versions", json.dumps({}))
    assert status == 201, version
    return str(version["name"])


def _invalid_request(status: int, body: dict[str, Any], where: str) -> None:
    assert status == 422, body
    assert body["code"] == "invalid_request", body
    assert where in body["detail"], body


# -- failure 1: lone surrogates ---------------------------------------------------------------


def test_poisoned_checkpoint_is_refused_and_nothing_is_stored(
    api: Http, live_service: LiveService
) -> None:
    _published(api, live_service.storage_root)
    body = (
        '{"data": [{"version": "coco@v1"}],'
        ' "saved_models": [{"name": "clf", "uri": "s3://m/\\ud800"}]}'
    )
    status, answer, response = api("PUT", "/models/det/checkpoints/ckpt-1", body)
    _invalid_request(status, answer, "saved_models[0].uri")
    assert response.getheader("Connection") != "close"
    # The same connection still works, and nothing was committed: the list, the checkpoint and
    # the version's consumers answer 200 / 404 as for a checkpoint never registered.
    status, listing, _ = api("GET", "/models")
    assert status == 200 and listing["data"] == []
    status, answer, _ = api("GET", "/models/det/checkpoints/ckpt-1/lineage")
    assert status == 404, answer
    status, consumers, _ = api("GET", "/versions/coco@v1/consumers")
    assert status == 200 and consumers["data"] == []
    # A clean registration afterwards works and lists.
    clean = body.replace("\\ud800", "x")
    status, answer, _ = api("PUT", "/models/det/checkpoints/ckpt-1", clean)
    assert status == 201, answer
    for path in ("/models/det/checkpoints", "/models/det/checkpoints/ckpt-1/lineage"):
        status, answer, _ = api("GET", path)
        assert status == 200, (path, answer)


@pytest.mark.parametrize(
    ("method", "path", "body", "where"),
    [
        ("POST", "/datasets", '{"name": "d", "description": "x\\ud800"}', "description"),
        ("POST", "/datasets/coco/versions", '{"root": "file:///a/\\udfff"}', "root"),
        ("POST", "/datasets/coco/versions", '{"metadata": {"k": ["\\ud800"]}}', "metadata.k[0]"),
        ("POST", "/datasets/coco/versions", '{"metadata": {"\\ud800": 1}}', "metadata.<key>"),
        ("PUT", "/models/m/checkpoints/c", '{"uri": "s3://m/\\ud800"}', "uri"),
        ("PUT", "/models/m/checkpoints/c", '{"metrics": {"a": "\\ud800"}}', "metrics.a"),
        ("POST", "/versions/coco@v1/deprecate", '{"reason": "\\ud800"}', "reason"),
        ("PUT", "/datasets/coco/aliases/prod", '{"version": "coco@\\ud800"}', "version"),
    ],
)
def test_lone_surrogates_are_refused_everywhere(
    api: Http, live_service: LiveService, method: str, path: str, body: str, where: str
) -> None:
    _published(api, live_service.storage_root)
    status, answer, response = api(method, path, body)
    _invalid_request(status, answer, where)
    assert response.getheader("Connection") != "close"
    status, _, _ = api("GET", "/versions/coco@v1")
    assert status == 200


def test_lone_surrogate_in_a_shard_uri(api: Http, live_service: LiveService) -> None:
    name = _staged(api)
    shard = json.dumps({"shards": [_shard(live_service.storage_root)]})
    body = shard.replace("train-0.tfrecord", "train-\\ud800.tfrecord")
    status, answer, _ = api("POST", f"/versions/{name}/shards", body)
    _invalid_request(status, answer, "shards[0].uri")
    status, version, _ = api("GET", f"/versions/{name}")
    assert status == 200 and version["shard_count"] == 0


def test_percent_encoded_surrogates_in_paths_and_queries_are_not_500(api: Http) -> None:
    # The server decodes paths and queries with replacement characters: never a lone surrogate.
    for path in (
        "/versions/coco%ED%A0%80",
        "/datasets/%ED%A0%80",
        "/shards/consumers?uri=s3://b/%ED%A0%80",
        "/lineage/graph?version=coco%ED%A0%80",
    ):
        status, answer, _ = api("GET", path)
        assert status < 500, (path, answer)


# -- failure 5: numbers and grammars ----------------------------------------------------------


def _reference_routes(version: str, staged: str) -> list[tuple[str, str, str | None]]:
    ref = f"coco@v{HUGE}"
    name = f"coco_20231015_v{HUGE}"
    return [
        ("GET", f"/versions/{ref}", None),
        ("GET", f"/versions/{name}", None),
        ("GET", f"/versions/{ref}/schema", None),
        ("GET", f"/versions/{ref}/consumers", None),
        ("POST", f"/versions/{ref}/deprecate", "{}"),
        ("POST", f"/versions/{name}/commit", "{}"),
        ("POST", f"/versions/{name}/abandon", None),
        ("POST", f"/versions/{name}/gc-done", None),
        (
            "POST",
            f"/versions/{name}/shards",
            json.dumps({"shards": [_shard("file:///x", 0)]}),
        ),
        ("PUT", "/datasets/coco/aliases/prod", json.dumps({"version": ref})),
        ("GET", f"/lineage/graph?version={quote(ref)}", None),
        (
            "PUT",
            "/models/m/checkpoints/c",
            json.dumps({"data": [{"version": ref}]}),
        ),
    ]


def test_huge_version_numbers_answer_400_on_every_reference_route(
    api: Http, live_service: LiveService
) -> None:
    version = _published(api, live_service.storage_root)
    staged = _staged(api)
    for method, path, body in _reference_routes(version, staged):
        status, answer, response = api(method, path, body)
        assert status == 400, (method, path[:60], answer)
        assert answer["code"] in ("invalid_reference", "invalid_version_name"), answer
        assert "4300" not in answer["detail"] and "int" not in answer["detail"].split()
        assert response.getheader("Connection") != "close"
    # A number just above the 64-bit range is refused the same way, one below it is simply
    # not found.
    status, answer, _ = api("GET", "/versions/coco@v9223372036854775808")
    assert status == 400 and answer["code"] == "invalid_reference", answer
    status, answer, _ = api("GET", "/versions/coco@v9223372036854775807")
    assert status == 404, answer


def test_cli_prints_a_clean_error_for_a_huge_version_number(live_service: LiveService) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "recordkeeper.cli", "show", f"coco@v{HUGE}"],
        capture_output=True,
        text=True,
        env={**live_service.env, "PATH": "/usr/bin:/bin", **_pythonpath()},
        timeout=60,
    )
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: "), result.stderr
    assert "[invalid_reference]" in result.stderr
    assert "Traceback" not in result.stderr and "4300" not in result.stderr
    assert len(result.stderr) < 600


def _pythonpath() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME")}


@pytest.mark.parametrize(
    "path",
    [
        "/versions/hbase_\u0662\u0660\u0662\u0666\u0661\u0661\u0663\u0660_v\u0661",
        "/versions/coco@\u0661",
        "/versions/coco@v\uff11",
        "/versions/coco_\uff12\uff10\uff12\uff13\uff11\uff10\uff11\uff15_v1",
    ],
)
def test_non_ascii_digits_are_not_digits(api: Http, live_service: LiveService, path: str) -> None:
    _published(api, live_service.storage_root)
    status, answer, _ = api("GET", quote(path, safe="/@"))
    assert status == 400, answer
    assert answer["code"] == "invalid_reference", answer


@pytest.mark.parametrize(
    "date", ["\uff12\uff10\uff12\uff13\uff11\uff10\uff11\uff15", "\u0662\u0660\u0662\u0663-10-15"]
)
def test_non_ascii_dates_are_refused_at_stage(api: Http, date: str) -> None:
    api("POST", "/datasets", json.dumps({"name": "coco"}))
    status, answer, _ = api("POST", "/datasets/coco/versions", json.dumps({"date": date}))
    assert status == 400, answer
    assert answer["code"] == "invalid_date", answer


@pytest.mark.parametrize("index", [0.0, False, "0", None])
def test_shard_index_takes_an_integer_only(
    api: Http, live_service: LiveService, index: object
) -> None:
    name = _staged(api)
    body = json.dumps({"shards": [_shard(live_service.storage_root, index=index)]})  # type: ignore[arg-type]
    status, answer, _ = api("POST", f"/versions/{name}/shards", body)
    _invalid_request(status, answer, "shards.0.index")
    status, version, _ = api("GET", f"/versions/{name}")
    assert version["shard_count"] == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("count", 2.0), ("size", True), ("record_count", "1"), ("split", 5), ("uri", ["x"])],
)
def test_other_shard_fields_take_their_type_only(
    api: Http, live_service: LiveService, field: str, value: object
) -> None:
    name = _staged(api)
    body = json.dumps({"shards": [_shard(live_service.storage_root, **{field: value})]})
    status, answer, _ = api("POST", f"/versions/{name}/shards", body)
    _invalid_request(status, answer, f"shards.0.{field}")


def test_checkpoint_step_and_deprecate_force_take_their_type_only(
    api: Http, live_service: LiveService
) -> None:
    _published(api, live_service.storage_root)
    for step in ("5", 5.0, True):
        status, answer, _ = api("PUT", "/models/m/checkpoints/c", json.dumps({"step": step}))
        _invalid_request(status, answer, "step")
    status, answer, _ = api("POST", "/versions/coco@v1/deprecate", json.dumps({"force": "yes"}))
    _invalid_request(status, answer, "force")


def test_shard_uri_must_name_a_file_inside_root_and_prefix(
    api: Http, live_service: LiveService
) -> None:
    name = _staged(api)
    status, version, _ = api("GET", f"/versions/{name}")
    prefix = version["storage_prefix"]
    root = live_service.storage_root
    for uri in (root, root.rstrip("/") + "/", prefix, prefix.rstrip("/"), prefix + "sub/"):
        body = json.dumps({"shards": [_shard(root, uri=uri)]})
        status, answer, _ = api("POST", f"/versions/{name}/shards", body)
        assert status == 400, (uri, answer)
        assert answer["code"] == "invalid_shard", answer
    body = json.dumps({"shards": [_shard(root, uri=prefix + "train-0.tfrecord")]})
    status, answer, _ = api("POST", f"/versions/{name}/shards", body)
    assert status == 200, answer

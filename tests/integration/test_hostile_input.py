"""Hostile and careless input to the newest routes, over a real socket (SQLite and PostgreSQL).

Each case here answered 500, stored what it should have refused, or answered a success that
was not, before its fix:

* a body nested a few hundred levels deep, which the JSON decoder still takes, exhausted the
  stack in the text policy's check (``invalid_text_at``): sample records, params, metrics;
* a checkpoint whose data entries count more than 2^63-1 records of one version and role
  together, and the lineage of a chain whose counted records add up past it;
* a derived version whose base's kept shards and added shards together pass 2^63-1 bytes or
  records (500 on SQLite, a generic 422 on PostgreSQL);
* provenance sources with control characters (ESC, DEL, C1), bidirectional overrides or
  ``.``/``..`` segments were stored, and impact by such a source matched by text what its
  path does not lie under;
* a second commit of a derived version with other changes than the first was answered 200
  with the version the first one made;
* impact by a source prefix read and answered every recorded source under it (unbounded).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from tests.integration.conftest import LiveService

API = "/api/v1"
SHA = "a" * 64
MAX_INT64 = 2**63 - 1


class Http:
    """One keep-alive connection sending raw JSON text (so nesting and escapes arrive as
    written); every answer must be JSON, and never a 500."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname and parts.port
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        text = body if isinstance(body, str) or body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if text is not None else {}
        self.conn.request(method, API + path, body=text, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        answer = json.loads(raw) if raw else {}
        assert response.status < 500, (method, path, response.status, answer)
        if response.getheader("Connection") == "close":
            self.conn.close()
        return response.status, answer

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def live_service(
    request: pytest.FixtureRequest, live_service_factory: Callable[..., LiveService]
) -> LiveService:
    if request.param == "postgresql":
        return live_service_factory(database_url=request.getfixturevalue("postgres_database_url"))
    return live_service_factory()


@pytest.fixture
def api(live_service: LiveService) -> Iterator[Http]:
    client = Http(live_service.url)
    yield client
    client.close()


def _shard(root: str, name: str, index: int = 0, count: int = 1, **over: Any) -> dict[str, Any]:
    shard = {
        "split": "train",
        "index": index,
        "count": count,
        "uri": f"{root.rstrip('/')}/raw/{name}.tfrecord",
        "compression": "none",
        "size": 10,
        "sha256": SHA,
        "crc32c": "0" * 8,
        "records_sha256": SHA,
        "record_count": 1,
    }
    shard.update(over)
    return shard


def _committed(api: Http, root: str, dataset: str, *shards: dict[str, Any]) -> str:
    status, version = api("POST", f"/datasets/{dataset}/versions", {})
    assert status == 201, version
    name = version["name"]
    status, body = api("POST", f"/versions/{name}/shards", {"shards": list(shards)})
    assert status == 200, body
    status, body = api("POST", f"/versions/{name}/commit", {})
    assert status == 200, body
    return str(body["name"])


# -- nesting --------------------------------------------------------------------------------


def test_deep_nesting_is_refused_at_every_depth(api: Http, live_service: LiveService) -> None:
    """From just past where orjson stops (255 levels) to where the JSON decoder stops
    (~1,000), every depth is a 4xx: before, ~900-980 levels passed the decoder and broke the
    text check."""
    version = _committed(
        api, live_service.storage_root, "coco", _shard(live_service.storage_root, "a")
    )
    status, staged = api("POST", "/datasets/deep/versions", {})
    assert status == 201, staged
    bodies = {
        f"/versions/{version}/sample": (
            "PUT",
            '{"splits": [{"split": "train", "records": [{"index": 0, "size": 1, '
            '"kind": "example", "features": {"a": %s}}]}]}',
        ),
        f"/versions/{staged['name']}/provenance": ("PUT", '{"params": {"a": %s}}'),
        "/models/m/checkpoints/c": ("PUT", '{"metrics": {"a": %s}}'),
    }
    for path, (method, template) in bodies.items():
        for depth in range(260, 1010, 10):
            status, answer = api(method, path, template % ("[" * depth + "]" * depth))
            assert 400 <= status < 500, (path, depth, status, answer)
            assert answer["code"] in ("invalid_request", "invalid_sample", "invalid_params")


# -- 64-bit counts --------------------------------------------------------------------------


def test_checkpoint_records_of_one_version_add_up_within_64_bits(
    api: Http, live_service: LiveService
) -> None:
    root = live_service.storage_root
    version = _committed(api, root, "coco", _shard(root, "a"))
    half = 2**62
    twice = [{"version": version, "records": half}, {"version": version, "records": half}]
    status, answer = api("PUT", "/models/m/checkpoints/c0", {"uri": "s3://m/r/c0", "data": twice})
    assert status == 400 and answer["code"] == "invalid_checkpoint", answer
    assert "data[1].records" in answer["detail"]
    status, answer = api("GET", "/models/m/checkpoints/c0")
    assert status == 404, answer  # nothing was stored
    # Within the bound per registration, a chain of them adds up past it: the chain's total
    # is answered as at most 2^63-1 (a lower bound, like its epochs), never a 500.
    parent = None
    for i in range(3):
        body: dict[str, Any] = {
            "uri": f"s3://m/r/c{i + 1}",
            "data": [{"version": version, "records": MAX_INT64}],
        }
        if parent is not None:
            body["parent"] = parent
        status, answer = api("PUT", f"/models/m/checkpoints/c{i + 1}", body)
        assert status == 201, answer
        parent = answer["ref"]
    status, lineage = api("GET", "/models/m/checkpoints/c3/lineage")
    assert status == 200, lineage
    (consumed,) = lineage["consumed"]
    assert consumed["records"] == MAX_INT64
    assert [s["records"] for s in consumed["segments"]] == [MAX_INT64] * 3


@pytest.mark.parametrize("field", ["size", "record_count"])
def test_derived_totals_past_64_bits_are_refused(
    api: Http, live_service: LiveService, field: str
) -> None:
    """The base's kept shards and the added ones meet only at commit: their sum is bounded
    there as registration bounds a version's own shards (400 invalid_shard, still staged)."""
    root = live_service.storage_root
    base = _committed(api, root, "coco", _shard(root, "a", **{field: MAX_INT64 - 10}))
    status, staged = api("POST", "/datasets/coco/versions", {"base": base})
    assert status == 201, staged
    name = staged["name"]
    status, body = api(
        "POST",
        f"/versions/{name}/shards",
        {"shards": [_shard(root, "b", records_sha256="b" * 64, **{field: 100})]},
    )
    assert status == 200, body
    status, answer = api("POST", f"/versions/{name}/commit", {})
    assert status == 400 and answer["code"] == "invalid_shard", answer
    assert f"total {field}" in answer["detail"]
    status, version = api("GET", f"/versions/{name}")
    assert status == 200 and version["state"] == "staged", version
    # Leaving the big shard out fits: the same version commits.
    status, answer = api(
        "POST", f"/versions/{name}/commit", {"changes": {"remove_shards": ["train:0"]}}
    )
    assert status == 200 and answer["state"] == "committed", answer


# -- source URIs ----------------------------------------------------------------------------

HIDDEN_OR_CLIMBING = [
    "s3://raw/\x1b[31mred",  # ESC: a terminal acts on it when the CLI prints the source
    "s3://raw/x\x7f",
    "s3://raw/\x85x",  # C1 next line
    "s3://raw/\u202egnp.exe",  # right-to-left override
    "s3://raw/a\u200bb",  # zero-width space
    "s3://raw/a\u2028b",  # line separator
    "file:///data/raw/../secret/",
    "s3://raw/coco/%2e%2e/other",
    "s3://raw/./coco",
    "s3://raw/\uff0e\uff0e/x",  # full-width dots
]


@pytest.mark.parametrize("uri", HIDDEN_OR_CLIMBING)
def test_sources_show_what_they_name(api: Http, uri: str) -> None:
    status, answer = api(
        "POST", "/datasets/raw/versions", {"provenance": {"sources": [{"uri": uri}]}}
    )
    assert status == 422 and answer["code"] == "invalid_provenance", answer
    assert "sources[0].uri" in answer["detail"]
    status, staged = api("POST", "/datasets/raw/versions", {})
    assert status == 201, staged
    status, answer = api(
        "PUT", f"/versions/{staged['name']}/provenance", {"sources": [{"uri": uri}]}
    )
    assert status == 422 and answer["code"] == "invalid_provenance", answer
    status, answer = api("GET", f"/lineage/impact?source={quote(uri, safe='')}")
    assert status == 422 and answer["code"] == "invalid_request", answer


def test_plain_sources_are_kept_as_written(api: Http) -> None:
    """What a source may be: any scheme, spaces, a query, non-ASCII letters; impact by a
    file under a recorded directory still finds it, by a '..' path it is refused."""
    sources = ["file:///data/my raw/", "https://example.com/a.csv?rev=2", "gs://raw/café/"]
    status, staged = api(
        "POST", "/datasets/raw/versions", {"provenance": {"sources": [{"uri": u} for u in sources]}}
    )
    assert status == 201, staged
    assert [s["uri"] for s in staged["provenance"]["sources"]] == sources
    status, impact = api("GET", "/lineage/impact?source=" + quote("file:///data/my raw/x.json"))
    assert status == 200 and [v["name"] for v in impact["versions"]] == [staged["name"]], impact
    status, answer = api("GET", "/lineage/impact?source=" + quote("file:///data/my raw/../x"))
    assert status == 422, answer


# -- commits of a committed derived version -------------------------------------------------


def test_a_retried_commit_is_answered_only_for_the_changes_made(
    api: Http, live_service: LiveService
) -> None:
    """Two clients commit one derived version with different changes: the second used to get
    200 with a version its changes were not applied to (concurrently, whichever came first)."""
    root = live_service.storage_root
    base = _committed(
        api, root, "coco", _shard(root, "a", count=2), _shard(root, "b", index=1, count=2)
    )
    status, staged = api("POST", "/datasets/coco/versions", {"base": base})
    assert status == 201, staged
    name = staged["name"]
    removed = {"changes": {"remove_shards": ["train:1"]}}
    status, first = api("POST", f"/versions/{name}/commit", removed)
    assert status == 200 and first["shard_count"] == 1, first
    # The same change set again (order and repeats aside) is a retry: answered.
    again = {"changes": {"remove_shards": ["train:1", "train:1"]}}
    status, answer = api("POST", f"/versions/{name}/commit", again)
    assert status == 200 and answer["name"] == first["name"], answer
    for other in ({}, {"changes": {"remove_shards": ["train:0"]}}):
        status, answer = api("POST", f"/versions/{first['name']}/commit", other)
        assert status == 409 and answer["code"] == "version_immutable", answer
    # A version staged without base takes no changes, committed or not.
    status, answer = api("POST", f"/versions/{base}/commit", removed)
    assert status == 422 and answer["code"] == "invalid_request", answer
    status, answer = api("POST", f"/versions/{base}/commit", {})
    assert status == 200 and answer["name"] == base, answer


# -- impact by a prefix ---------------------------------------------------------------------


def test_impact_by_a_prefix_is_guarded(api: Http, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefix matches every source recorded under it (a whole bucket): the matches are cut
    at the walk's guard and the answer says so, as for the versions (they were read and
    answered whole).  The guard is lowered to 3 here (100,000 in service)."""
    import recordkeeper_service.repository.lineage as lineage

    monkeypatch.setattr(lineage, "MAX_HISTORY_VERSIONS", 3, raising=False)
    for i in range(5):
        body = {"provenance": {"sources": [{"uri": f"s3://raw/coco/part-{i}/"}]}}
        status, staged = api("POST", "/datasets/raw/versions", body)
        assert status == 201, staged
    status, impact = api("GET", "/lineage/impact?source=s3://raw/&prefix=true")
    assert status == 200, impact
    assert [s["uri"] for s in impact["sources"]] == [f"s3://raw/coco/part-{i}/" for i in range(3)]
    assert len(impact["versions"]) == 3 and impact["versions_truncated"] is True
    status, impact = api("GET", "/lineage/impact?source=s3://raw/coco/part-4/x.json")
    assert status == 200 and impact["versions_truncated"] is False, impact

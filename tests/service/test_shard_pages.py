"""``GET /versions/{ref}/shards`` (keyset pages, full and compact forms) and conditional GETs
(``ETag`` / ``If-None-Match`` → 304) on it and on ``GET /versions/{ref}``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

from recordkeeper.core.shard_columns import ShardColumns, to_columns, unpack_columns
from recordkeeper.core.shards import ShardRecord
from tests.service._helpers import API, commit, error, register, shards, stage


def _pages(client: TestClient, ref: str, **params: Any) -> list[dict[str, Any]]:
    pages, after = [], None
    while True:
        query = {**params, **({"after": after} if after else {})}
        response = client.get(f"{API}/versions/{quote(ref, safe='')}/shards", params=query)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        after = pages[-1]["next"]
        if after is None:
            return pages


def _two_splits(client: TestClient, content: str = "") -> tuple[str, list[dict[str, Any]]]:
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    bodies = shards(prefix, 7, content=content) + shards(
        prefix, 3, split="validation", content=content
    )
    register(client, version["name"], bodies)
    committed = commit(client, version["name"])
    assert committed.status_code == 200
    return committed.json()["name"], bodies  # the committed name, not the staged one


def test_pages_walk_every_shard_once_in_order(client: TestClient) -> None:
    name, bodies = _two_splits(client)
    pages = _pages(client, "coco@latest", limit=3)
    assert [len(p["shards"]) for p in pages] == [3, 3, 3, 1]
    assert [p["next"] for p in pages] == ["train:2", "train:5", "validation:1", None]
    got = [(s["split"], s["index"], s["uri"]) for p in pages for s in p["shards"]]
    want = sorted((b["split"], b["index"], b["uri"]) for b in bodies)
    assert got == want
    assert {p["version"] for p in pages} == {name}
    assert all(p["shard_count"] == 10 and p["compact"] is None for p in pages)


def test_compact_form_carries_the_same_records(client: TestClient) -> None:
    _two_splits(client)
    full = [s for p in _pages(client, "coco@v1") for s in p["shards"]]
    compact = _pages(client, "coco@v1", form="compact", limit=4)
    assert all(p["shards"] is None for p in compact)
    prefix = compact[0]["compact"]["uri_prefix"]
    assert prefix.endswith("/coco_" + prefix.split("/coco_")[-1]) and prefix.endswith("/")
    records = [
        r
        for p in compact
        for r in ShardColumns(ShardRecord, p["compact"]["uri_prefix"], p["compact"]["columns"])
    ]
    assert records == [ShardRecord.from_json(s) for s in full]
    assert records[0].storage_identity == {"backend": "file", "mtime_ns": 1, "size": 100}


def test_compact_pages_render_what_the_full_pages_say(client: TestClient) -> None:
    """The compact form is rendered straight from the rows (storage identities spliced in as
    stored JSON): every page must be exactly the columns of the full page's records, with the
    same page fields, for a staged and a committed version, with and without the optional
    fields, across splits and URI prefixes."""
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    bodies = shards(prefix, 5, storage_identity=None, schema=None) + [
        {**b, "uri": b["uri"].replace("/validation-", "/other/validation-")}
        for b in shards(prefix, 4, split="validation")
    ]
    bodies[1]["storage_identity"] = {"backend": "s3", "etag": '"ab\\u00e9"', "version_id": None}
    register(client, version["name"], bodies)

    def check(ref: str, limit: int) -> None:
        full = _pages(client, ref, limit=limit)
        compact = _pages(client, ref, limit=limit, form="compact")
        assert len(full) == len(compact)
        for f, c in zip(full, compact, strict=True):
            records = [ShardRecord.from_json(s) for s in f["shards"]]
            assert c["compact"] == to_columns(records)
            assert {**c, "compact": None, "shards": f["shards"]} == f

    check(version["name"], 4)  # staged: rendered each time
    name = commit(client, version["name"]).json()["name"]
    for limit in (1, 4, 9, 10_000):
        check(name, limit)
    page = client.get(f"{API}/versions/{name}/shards", params={"form": "compact"}).json()
    assert page["compact"]["columns"]["storage_identity"][1] == bodies[1]["storage_identity"]
    assert page["compact"]["uri_prefix"] == prefix  # the longest shared prefix ending in "/"


def test_packed_pages_unpack_to_the_compact_columns(client: TestClient) -> None:
    """The packed form (runs, joined lines, storage identities as JSON text) unpacks to what
    the compact form says, record for record, whatever encoding each column took."""
    version = stage(client, "coco")
    prefix = version["storage_prefix"]
    bodies = shards(prefix, 20) + shards(prefix, 3, split="validation", schema=None)
    bodies[2]["storage_identity"] = None
    register(client, version["name"], bodies)
    name = commit(client, version["name"]).json()["name"]
    for limit in (1, 7, 23, 10_000):
        compact = _pages(client, name, limit=limit, form="compact")
        packed = _pages(client, name, limit=limit, form="packed")
        assert len(compact) == len(packed)
        for c, pk in zip(compact, packed, strict=True):
            assert pk["compact"] is None and pk["shards"] is None and c["packed"] is None
            assert {**pk, "packed": None, "compact": c["compact"]} == c
            got = ShardColumns(
                ShardRecord,
                pk["packed"]["uri_prefix"],
                unpack_columns(pk["packed"]["columns"], pk["packed"]["length"]),
            )
            want = ShardColumns(ShardRecord, c["compact"]["uri_prefix"], c["compact"]["columns"])
            assert list(got) == list(want)
    whole = _pages(client, name, form="packed")[0]["packed"]["columns"]
    assert whole["split"] == {"runs": [["train", 20], ["validation", 3]]}
    assert set(whole["sha256"]) == {"lines"} and set(whole["storage_identity"]) == {"json_lines"}
    assert ShardColumns(ShardRecord, "", unpack_columns(whole, 23))[2].storage_identity is None


def test_published_pages_are_rendered_once_in_every_form(client: TestClient) -> None:
    """A published version's pages never change: the second request of a page, in any form,
    is answered from the rendered-page cache without reading the rows again (a cold client
    resolve of a 10,000-shard version asks for the packed form)."""
    name, _ = _two_splits(client)
    pages = client.app.state.repository.versions.rendered_pages  # type: ignore[attr-defined]
    lookups: list[bool] = []
    metrics = pages.on_lookup
    pages.on_lookup = lambda hit: (lookups.append(hit), metrics and metrics(hit))
    try:
        for form in ("full", "compact", "packed"):
            first = _pages(client, name, form=form, limit=4)
            del lookups[:]
            again = _pages(client, name, form=form, limit=4)
            assert again == first
            assert lookups == [True] * len(first), form
    finally:
        pages.on_lookup = metrics


def test_staged_versions_page_without_etag(client: TestClient) -> None:
    version = stage(client, "coco")
    register(client, version["name"], shards(version["storage_prefix"], 2))
    response = client.get(f"{API}/versions/{version['name']}/shards")
    assert response.status_code == 200
    assert "ETag" not in response.headers
    assert response.json()["content_digest"] is None
    assert len(response.json()["shards"]) == 2


def test_bad_cursor_and_limit(client: TestClient) -> None:
    _two_splits(client)
    path = f"{API}/versions/coco@v1/shards"
    for bad in ("train", "Train:1", "train:-1", "train:x", "train:99999999999", ":1"):
        error(client.get(path, params={"after": bad}), 422, "invalid_request")
    error(client.get(path, params={"limit": 0}), 422, "invalid_request")
    error(client.get(path, params={"limit": 10_001}), 422, "invalid_request")
    error(client.get(path, params={"form": "columns"}), 422, "invalid_request")
    error(client.get(f"{API}/versions/coco@v9/shards"), 404, "version_not_found")
    # a cursor past the end is an empty last page
    body = client.get(path, params={"after": "zzz:0"}).json()
    assert body["shards"] == [] and body["next"] is None


def test_resolve_etag_and_304(client: TestClient) -> None:
    name, _ = _two_splits(client)
    first = client.get(f"{API}/versions/coco@latest")
    etag = first.headers["ETag"]
    assert etag.startswith('W/"')
    again = client.get(f"{API}/versions/coco@latest", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["ETag"] == etag
    # any reference designating the same version in the same state matches
    by_name = client.get(f"{API}/versions/{name}", headers={"If-None-Match": f'"x", {etag}'})
    assert by_name.status_code == 304
    # the answer without shards is another representation
    small = client.get(f"{API}/versions/coco@latest?shards=false", headers={"If-None-Match": etag})
    assert small.status_code == 200 and small.headers["ETag"] != etag
    # a new latest no longer matches
    _two_splits(client, content="new")
    moved = client.get(f"{API}/versions/coco@latest", headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.json()["number"] == 2


def test_deprecation_changes_the_etag(client: TestClient) -> None:
    name, _ = _two_splits(client)
    etag = client.get(f"{API}/versions/{name}").headers["ETag"]
    client.post(f"{API}/versions/{name}/deprecate", json={"reason": "bad labels"})
    after = client.get(f"{API}/versions/{name}", headers={"If-None-Match": etag})
    assert after.status_code == 200
    assert after.json()["state"] == "deprecated"
    # pages list only shards, which deprecation does not change
    page = client.get(f"{API}/versions/{name}/shards")
    again = client.get(
        f"{API}/versions/{name}/shards", headers={"If-None-Match": page.headers["ETag"]}
    )
    assert again.status_code == 304


def test_staged_versions_have_no_etag(client: TestClient) -> None:
    version = stage(client, "coco")
    response = client.get(f"{API}/versions/{version['name']}", headers={"If-None-Match": "*"})
    assert response.status_code == 200
    assert "ETag" not in response.headers


def test_page_etag_depends_on_the_page(client: TestClient) -> None:
    _two_splits(client)
    path = f"{API}/versions/coco@v1/shards"
    tag = client.get(path, params={"limit": 3}).headers["ETag"]
    assert client.get(path, params={"limit": 3}, headers={"If-None-Match": tag}).status_code == 304
    other = client.get(
        path, params={"limit": 3, "after": "train:2"}, headers={"If-None-Match": tag}
    )
    assert other.status_code == 200
    compact = client.get(
        path, params={"limit": 3, "form": "compact"}, headers={"If-None-Match": tag}
    )
    assert compact.status_code == 200

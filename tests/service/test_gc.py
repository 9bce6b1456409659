"""Garbage-collection candidates and marking them collected, on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import text

from recordkeeper_service.db import Database
from tests.service._helpers import API, error, publish, register, shards, stage
from tests.service.test_auth import bearer, make_token

CANDIDATES = f"{API}/gc/candidates"


CLAIMS = f"{API}/gc/claims"
HOUR = 3600


def age(database_url: str, name: str, seconds: int) -> None:
    """Pretend version ``name`` was created, and its shards registered, ``seconds`` ago."""
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)
    database = Database(database_url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            conn.execute(
                text("UPDATE versions SET created_at = :t WHERE name = :n"), {"t": when, "n": name}
            )
            conn.execute(
                text(
                    "UPDATE shards SET registered_at = :t WHERE version_id = "
                    "(SELECT id FROM versions WHERE name = :n)"
                ),
                {"t": when, "n": name},
            )
    finally:
        database.dispose()


def claim(client: TestClient, **body: int) -> list[str]:
    response = client.post(CLAIMS, json=body)
    assert response.status_code == 200, response.text
    return [c["name"] for c in response.json()["data"]]


def names(client: TestClient, **params: int) -> list[str]:
    response = client.get(CANDIDATES, params=params)
    assert response.status_code == 200, response.text
    return [c["name"] for c in response.json()["data"]]


def test_candidates_are_abandoned_and_stale_staged_only(
    client: TestClient, database_url: str
) -> None:
    committed = publish(client)
    fresh = stage(client)
    idle = stage(client)
    stale = stage(client)
    abandoned = stage(client)
    assert client.post(f"{API}/versions/{abandoned['name']}/abandon").status_code == 200
    age(database_url, idle["name"], 2 * HOUR)
    age(database_url, stale["name"], 2 * 86400)
    age(database_url, abandoned["name"], 3 * 86400)
    assert client.post(f"{API}/versions/{committed['name']}/deprecate", json={}).status_code == 200

    body = client.get(CANDIDATES).json()
    assert body["count"] == 2
    assert [c["name"] for c in body["data"]] == [abandoned["name"], stale["name"]]  # newest last
    first = body["data"][0]
    assert first == {
        "name": abandoned["name"],
        "dataset": "coco",
        "state": "abandoned",
        "created_at": first["created_at"],
        "storage_prefix": abandoned["storage_prefix"],
        "shard_count": 0,
        "abandoned_at": first["abandoned_at"],
        "collected_at": None,
        "claimed_by": None,
        "claimed_at": None,
    }
    # A threshold of 0 lists every staged version idle for the server's minimum (an hour), never
    # one created (or given a shard) within it, never committed or deprecated ones.
    assert names(client, staged_older_than=0) == [abandoned["name"], stale["name"], idle["name"]]
    assert names(client, staged_older_than=0, limit=1, offset=1) == [stale["name"]]
    assert fresh["name"] not in names(client, staged_older_than=0)
    error(client.get(CANDIDATES, params={"staged_older_than": -1}), 422, "invalid_request")


def test_gc_done_marks_collected_once(client: TestClient, database_url: str) -> None:
    committed = publish(client)
    staged = stage(client)
    name = staged["name"]
    error(client.post(f"{API}/versions/{name}/gc-done"), 409, "conflict")  # claim first
    error(client.post(f"{API}/versions/{committed['name']}/gc-done"), 409, "version_immutable")
    assert client.post(f"{API}/versions/{name}/abandon").status_code == 200
    refused = error(client.post(f"{API}/versions/{name}/gc-done"), 409, "conflict")  # not claimed
    assert "claim it first" in refused["detail"]
    assert claim(client) == [name]

    done = client.post(f"{API}/versions/{name}/gc-done", json={"objects": 3, "bytes": 30})
    assert done.status_code == 200, done.text
    assert done.json()["collected_at"] and done.json()["state"] == "abandoned"
    again = client.post(f"{API}/versions/{name}/gc-done", json={"objects": 0, "bytes": 0})
    assert again.json()["collected_at"] == done.json()["collected_at"]
    assert names(client, staged_older_than=0) == []

    events = client.get(f"{API}/events", params={"action": "version.collected"}).json()["data"]
    assert len(events) == 1
    assert events[0]["version"] == name
    assert events[0]["detail"]["objects"] == 3 and events[0]["detail"]["bytes"] == 30
    # Still resolvable by exact name, still abandoned.
    assert client.get(f"{API}/versions/{name}").json()["state"] == "abandoned"
    error(client.post(f"{API}/versions/coco_20260101_v99/gc-done"), 404, "version_not_found")


def test_a_version_that_trained_a_checkpoint_is_never_a_candidate(client: TestClient) -> None:
    trained = publish(client)
    put = client.put(
        f"{API}/models/det/checkpoints/ckpt-1", json={"data": [{"version": trained["name"]}]}
    )
    assert put.status_code == 201, put.text
    assert names(client, staged_older_than=0) == []
    assert claim(client, staged_older_than=0) == []
    error(client.post(f"{API}/versions/{trained['name']}/gc-done"), 409, "version_immutable")


def test_prefix_holding_published_shards_is_collected_but_they_are_kept(
    client: TestClient, database_url: str
) -> None:
    """Shards registered in place under an abandoned version's prefix no longer protect the
    whole prefix: the version is a candidate, and the collector is told to keep those objects;
    other versions may still reference them after the release (they were kept)."""
    old = stage(client)
    assert client.post(f"{API}/versions/{old['name']}/abandon").status_code == 200
    other = stage(client)
    in_place = shards(old["storage_prefix"], 1)
    assert register(client, other["name"], in_place).status_code == 200
    age(database_url, other["name"], 2 * HOUR)
    assert names(client, staged_older_than=0) == [other["name"], old["name"]]  # aged: older
    committed = client.post(f"{API}/versions/{other['name']}/commit", json={})
    assert committed.status_code == 200
    assert names(client, staged_older_than=0) == [old["name"]]
    assert claim(client) == [old["name"]]
    answer = client.post(OBJECTS.format(old["name"]), json={"uris": [in_place[0]["uri"]]})
    kept = [{"uri": in_place[0]["uri"], "referenced_by": [committed.json()["name"]]}]
    assert answer.json()["keep"] == kept
    # A version derived from the committed one references the kept object: allowed.
    derived = stage(client)
    assert register(client, derived["name"], in_place).status_code == 200
    body = {"on_duplicate": "commit"}  # the same content, on purpose
    assert client.post(f"{API}/versions/{derived['name']}/commit", json=body).status_code == 200
    assert client.post(f"{API}/versions/{old['name']}/gc-done").status_code == 200


def test_scopes(make_client: Callable[..., TestClient], database_url: str) -> None:
    secrets = {s: bearer(make_token(database_url, s)) for s in ("read", "write", "admin")}
    client = make_client(auth="required")
    staged = client.post(f"{API}/datasets/coco/versions", json={}, headers=secrets["write"])
    name = staged.json()["name"]
    client.post(f"{API}/versions/{name}/abandon", headers=secrets["write"])
    error(client.get(CANDIDATES), 401, "unauthorized")
    assert client.get(CANDIDATES, headers=secrets["read"]).json()["count"] == 1
    for scope in ("read", "write"):
        refused = error(client.post(CLAIMS, json={}, headers=secrets[scope]), 403, "forbidden")
        assert refused["required_scope"] == "admin"
    url = f"{API}/versions/{name}/gc-done"
    refused = error(client.post(url, headers=secrets["write"]), 403, "forbidden")
    assert refused["required_scope"] == "admin"
    assert client.get(CANDIDATES, headers=secrets["read"]).json()["data"][0]["claimed_by"] is None
    claimed = client.post(CLAIMS, json={}, headers=secrets["admin"]).json()["data"]
    assert [c["name"] for c in claimed] == [name]
    assert client.post(url, headers=secrets["admin"]).status_code == 200


def test_claims(client: TestClient, database_url: str) -> None:
    """The server abandons what it claims, records the claimant, never releases twice."""
    fresh = stage(client)
    stale = stage(client)
    age(database_url, stale["name"], 2 * HOUR)
    active = stage(client)  # staged long ago, but a shard registered a minute ago
    assert register(client, active["name"], shards(active["storage_prefix"], 1)).status_code == 200
    age(database_url, active["name"], 2 * HOUR)
    database = Database(database_url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            conn.execute(
                text("UPDATE shards SET registered_at = :t"),
                {"t": datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=60)},
            )
    finally:
        database.dispose()

    assert claim(client, staged_older_than=2 * 86400) == []  # the threshold is respected
    assert claim(client, staged_older_than=0) == [stale["name"]]
    assert claim(client, staged_older_than=0) == []  # already released to this caller
    version = client.get(f"{API}/versions/{stale['name']}").json()
    assert version["state"] == "abandoned"  # abandoned by the claim: no late commit
    for untouched in (fresh, active):
        assert client.get(f"{API}/versions/{untouched['name']}").json()["state"] == "staged"
    (listed,) = [c for c in client.get(CANDIDATES).json()["data"] if c["name"] == stale["name"]]
    assert listed["claimed_by"] == "anonymous" and listed["claimed_at"]

    events = client.get(f"{API}/events", params={"version": stale["name"]}).json()["data"]
    actions = {e["action"]: e for e in events}
    assert actions["version.abandoned"]["detail"] == {"reason": "gc"}
    claimed = actions["version.gc_claimed"]
    assert claimed["actor"] == "anonymous"
    assert claimed["detail"]["storage_prefix"] == stale["storage_prefix"]

    for beyond_the_calendar in (76502951884, 2**63 - 1):
        assert claim(client, staged_older_than=beyond_the_calendar) == []
    error(client.post(CLAIMS, json={"staged_older_than": 2**63}), 422, "invalid_request")
    error(client.post(CLAIMS, json={"staged_older_than": -1}), 422, "invalid_request")
    error(client.post(CLAIMS, json={"limit": 0}), 422, "invalid_request")
    error(client.post(CLAIMS, json={"limit": 1001}), 422, "invalid_request")
    error(client.post(CLAIMS, json={"older": 1}), 422, "invalid_request")


def test_only_the_claimant_reports_collected(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    first, second = (bearer(make_token(database_url, "admin", name=n)) for n in ("gc-a", "gc-b"))
    client = make_client(auth="required")
    staged = client.post(f"{API}/datasets/coco/versions", json={}, headers=first).json()
    client.post(f"{API}/versions/{staged['name']}/abandon", headers=first)
    claimed = client.post(CLAIMS, json={}, headers=first).json()["data"]
    assert [c["claimed_by"] for c in claimed] == ["gc-a"]
    assert client.post(CLAIMS, json={}, headers=second).json()["data"] == []  # held by gc-a
    url = f"{API}/versions/{staged['name']}/gc-done"
    refused = error(client.post(url, headers=second), 409, "conflict")
    assert refused["claimed_by"] == "gc-a"
    assert client.post(url, json={"objects": 2}, headers=first).status_code == 200


OBJECTS = API + "/versions/{}/gc-objects"


def test_registration_in_released_storage_is_refused(client: TestClient) -> None:
    """Once a version's storage is claimed, no shard may be registered at or under its prefix
    (in place or written), nor at one of its objects: ``409 storage_released``."""
    old = stage(client)
    inside = shards(old["storage_prefix"], 1)
    assert register(client, old["name"], inside).status_code == 200
    assert client.post(f"{API}/versions/{old['name']}/abandon").status_code == 200
    assert claim(client) == [old["name"]]
    late = stage(client)
    refused = error(register(client, late["name"], inside), 409, "storage_released")
    assert refused["released_by"] == old["name"] and old["name"] in refused["detail"]
    deeper = shards(old["storage_prefix"] + "sub/dir/", 1)
    error(register(client, late["name"], deeper), 409, "storage_released")
    # An object the released version registered in place, outside its prefix, is released too.
    in_place = shards(old["storage_prefix"].rsplit("/", 3)[0] + "/elsewhere/", 1, content="p")
    first = stage(client)
    assert register(client, first["name"], in_place).status_code == 200
    assert client.post(f"{API}/versions/{first['name']}/abandon").status_code == 200
    assert claim(client) == [first["name"]]
    refused = error(register(client, late["name"], in_place), 409, "storage_released")
    assert refused["released_by"] == first["name"]
    # The version's own prefix and unrelated storage stay open.
    assert register(client, late["name"], shards(late["storage_prefix"], 1)).status_code == 200


def test_gc_objects_keeps_what_a_live_version_references(client: TestClient) -> None:
    """The collector asks which objects it may delete; another live version's shard is kept."""
    old = stage(client)
    assert client.post(f"{API}/versions/{old['name']}/abandon").status_code == 200
    other = stage(client)  # registers a file under the abandoned version's prefix, in place
    kept = shards(old["storage_prefix"], 1)
    assert register(client, other["name"], kept).status_code == 200
    assert claim(client) == [old["name"]]
    junk = old["storage_prefix"] + "_incomplete/train-00001.tfrecord"
    outside = other["storage_prefix"] + "x.tfrecord"
    answer = client.post(
        OBJECTS.format(old["name"]), json={"uris": [kept[0]["uri"], junk, outside]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "version": old["name"],
        "delete": [junk],
        "keep": [
            {"uri": kept[0]["uri"], "referenced_by": [other["name"]]},
            {"uri": outside, "referenced_by": []},
        ],
    }
    # The referencing version commits, and gc-done is accepted: nothing slipped in after.
    assert client.post(f"{API}/versions/{other['name']}/commit", json={}).status_code == 200
    assert client.post(f"{API}/versions/{old['name']}/gc-done").status_code == 200
    error(client.post(OBJECTS.format(old["name"]), json={"uris": [junk]}), 409, "conflict")


def test_gc_preview_answers_a_dry_run_as_gc_objects_would(client: TestClient) -> None:
    """A dry run asks, without claiming, what gc-objects would answer: another live version's
    shard is kept there too; nothing changes; a published or collected version is refused."""
    old = stage(client)
    assert client.post(f"{API}/versions/{old['name']}/abandon").status_code == 200
    other = stage(client)
    kept = shards(old["storage_prefix"], 1)
    assert register(client, other["name"], kept).status_code == 200
    junk = old["storage_prefix"] + "_incomplete/train-00001.tfrecord"
    preview = API + f"/versions/{old['name']}/gc-preview"
    answer = client.post(preview, json={"uris": [kept[0]["uri"], junk]})
    assert answer.status_code == 200, answer.text
    expected = {
        "version": old["name"],
        "delete": [junk],
        "keep": [{"uri": kept[0]["uri"], "referenced_by": [other["name"]]}],
    }
    assert answer.json() == expected
    version = client.get(f"{API}/versions/{old['name']}").json()
    assert version["data_state"] == "stored"  # not claimed: nothing changed
    # claimed, gc-objects answers the same
    assert claim(client) == [old["name"]]
    claimed = client.post(OBJECTS.format(old["name"]), json={"uris": [kept[0]["uri"], junk]})
    assert (
        claimed.json()
        == expected
        == client.post(preview, json={"uris": [kept[0]["uri"], junk]}).json()
    )
    assert client.post(f"{API}/versions/{old['name']}/gc-done").status_code == 200
    error(client.post(preview, json={"uris": [junk]}), 409, "conflict")  # collected
    published = publish(client, "coco")["name"]
    error(
        client.post(f"{API}/versions/{published}/gc-preview", json={"uris": []}),
        409,
        "version_immutable",
    )


def test_gc_objects_claimant_only(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    secrets = {s: bearer(make_token(database_url, s)) for s in ("write", "admin")}
    other_admin = bearer(make_token(database_url, "admin", name="ops2"))
    client = make_client(auth="required")
    staged = client.post(f"{API}/datasets/coco/versions", json={}, headers=secrets["write"])
    name = staged.json()["name"]
    url = OBJECTS.format(name)
    body = {"uris": [staged.json()["storage_prefix"] + "a"]}
    error(client.post(url, json=body, headers=secrets["admin"]), 409, "conflict")  # not claimed
    client.post(f"{API}/versions/{name}/abandon", headers=secrets["write"])
    error(client.post(url, json=body, headers=secrets["write"]), 403, "forbidden")
    assert client.post(CLAIMS, json={}, headers=secrets["admin"]).status_code == 200
    refused = error(client.post(url, json=body, headers=other_admin), 409, "conflict")
    assert "only the claimant" in refused["detail"]
    assert client.post(url, json=body, headers=secrets["admin"]).json()["delete"] == body["uris"]
    escaping = {"uris": [body["uris"][0] + "/../../../etc/passwd"]}
    error(client.post(url, json=escaping, headers=secrets["admin"]), 422, "invalid_request")
    # A name no shard could carry (registration normalises URIs) is junk under the prefix.
    junk = {"uris": [body["uris"][0] + " copy", "no-scheme"]}
    answer = client.post(url, json=junk, headers=secrets["admin"]).json()
    assert answer["delete"] == junk["uris"][:1]
    assert answer["keep"] == [{"uri": "no-scheme", "referenced_by": []}]
    too_many = {"uris": [f"{body['uris'][0]}{i}" for i in range(1001)]}
    error(client.post(url, json=too_many, headers=secrets["admin"]), 422, "invalid_request")


def test_commit_and_gc_done_recheck_a_shard_that_slipped_in(
    client: TestClient, database_url: str
) -> None:
    """Were a registration to slip past the lock (simulated: a shard moved into the released
    prefix after the claim, in SQL), commit and gc-done refuse instead of pointing at, or
    recording as collected, storage being deleted."""
    old = stage(client)
    assert client.post(f"{API}/versions/{old['name']}/abandon").status_code == 200
    late = stage(client)
    assert register(client, late["name"], shards(late["storage_prefix"], 1)).status_code == 200
    assert claim(client) == [old["name"]]
    database = Database(database_url, pool_size=1)
    try:
        with database.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE shards SET uri = :uri, registered_at = :t WHERE version_id = "
                    "(SELECT id FROM versions WHERE name = :n)"
                ),
                {
                    "uri": old["storage_prefix"] + "slipped.tfrecord",
                    "t": datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=5),
                    "n": late["name"],
                },
            )
    finally:
        database.dispose()
    refused = error(
        client.post(f"{API}/versions/{late['name']}/commit", json={}), 409, "storage_released"
    )
    assert refused["released_by"] == old["name"]
    refused = error(client.post(f"{API}/versions/{old['name']}/gc-done"), 409, "storage_released")
    assert refused["version"] == late["name"]

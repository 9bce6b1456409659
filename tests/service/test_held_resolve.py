"""A held resolve (a conditional ``GET /versions/{ref}`` answered ``304``) is never stale, and
it costs one statement.

Two app instances on one database stand for two service workers (processes): each has its own
caches and its own connections, so whatever one worker holds must be checked against what the
other changed — ``@latest`` moving on a commit, an alias moving, a deprecation, retention
releasing and deleting a version's data.  The client holding the answer sends its ``ETag`` to
the worker that did *not* make the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

import recordkeeper as rk
from recordkeeper.core.refs import parse_reference
from recordkeeper_service.db import Database
from recordkeeper_service.repository.fastpath import HOT_COLUMNS
from recordkeeper_service.repository.resolve import resolution_params, resolution_statement
from recordkeeper_service.repository.sqlite_hot import SqliteHotReader
from tests.service._helpers import API, publish

CLAIMS = f"{API}/retention/claims"


def _get(client: TestClient, ref: str, etag: str | None = None) -> Any:
    headers = {"If-None-Match": etag} if etag else {}
    return client.get(
        f"{API}/versions/{quote(ref, safe='')}", params={"shards": "false"}, headers=headers
    )


class Held:
    """What a client holds of ``ref``: the answer and its ``ETag``, from worker ``client``."""

    def __init__(self, client: TestClient, ref: str) -> None:
        self.client, self.ref = client, ref
        answer = _get(client, ref)
        assert answer.status_code == 200, answer.text
        self.body, self.etag = answer.json(), answer.headers["etag"]
        assert _get(client, ref, self.etag).status_code == 304

    def again(self) -> dict[str, Any]:
        """Ask again with the held ``ETag``: a changed answer must come back whole (200)."""
        answer = _get(self.client, self.ref, self.etag)
        assert answer.status_code == 200, (self.ref, answer.status_code)
        assert answer.headers["etag"] != self.etag
        self.body, self.etag = answer.json(), answer.headers["etag"]
        assert _get(self.client, self.ref, self.etag).status_code == 304  # and now held again
        return self.body


@pytest.fixture
def workers(make_client: Callable[..., TestClient]) -> tuple[TestClient, TestClient]:
    """Two app instances (own caches, own connections) on the same database."""
    return make_client(), make_client()


def test_a_held_answer_is_never_served_after_another_worker_changed_it(
    workers: tuple[TestClient, TestClient],
) -> None:
    reader, writer = workers
    v1 = publish(writer, "coco", content="1")
    latest, prod, by_name = Held(reader, "coco@latest"), None, Held(reader, v1["name"])
    assert latest.body["name"] == v1["name"]

    v2 = publish(writer, "coco", content="2")  # @latest moves
    assert latest.again()["name"] == v2["name"]
    assert _get(reader, v1["name"], by_name.etag).status_code == 304  # v1 did not change

    for target in ("coco@v1", "coco@v2"):  # the alias is set, then moved
        assert writer.put(f"{API}/datasets/coco/aliases/prod", json={"version": target}).is_success
        if prod is None:
            prod = Held(reader, "coco@prod")
            assert prod.body["name"] == v1["name"]
        else:
            assert prod.again()["name"] == v2["name"]

    writer.post(f"{API}/versions/coco@v2/deprecate", json={"reason": "bad"})
    assert latest.again()["name"] == v1["name"]  # @latest never names a deprecated version
    assert prod.again()["state"] == "deprecated"

    # retention releases v1's data, then deletes it: the state an answer carries changes twice
    v3 = publish(writer, "coco", content="3")
    assert latest.again()["name"] == v3["name"]
    policy = writer.put(f"{API}/retention/policies/coco", json={"keep_last": 1})
    assert policy.status_code == 200, policy.text
    claimed = writer.post(CLAIMS, json={}).json()["data"]
    assert v1["name"] in [c["name"] for c in claimed]
    assert by_name.again()["data_state"] == "deleting"
    done = writer.post(f"{API}/versions/{v1['name']}/retention-done", json={"objects": 2})
    assert done.status_code == 200, done.text
    assert by_name.again()["data_state"] == "deleted"


def test_the_client_resolves_the_new_answer_after_a_commit_elsewhere(
    workers: tuple[TestClient, TestClient],
) -> None:
    reader, writer = workers
    client = rk.Client("http://testserver", http_client=reader)
    v1 = publish(writer, "coco", content="1")
    assert client.resolve("coco@latest").name == v1["name"]
    assert client.resolve("coco@latest").name == v1["name"]  # held: answered 304
    v2 = publish(writer, "coco", content="2")
    again = client.resolve("coco@latest")
    assert (again.name, again.content_digest) == (v2["name"], v2["content_digest"])
    assert len(again.split("train").shards) == 2


@contextmanager
def _counted(client: TestClient) -> Iterator[dict[str, int]]:
    """Statements the app ran while the block ran: through SQLAlchemy (``sqlalchemy``) and on
    the hot read path (``hot``: the SQLite reader's statements, or PostgreSQL's async queries)."""
    repository = client.app.state.repository  # type: ignore[attr-defined]
    counts = {"sqlalchemy": 0, "hot": 0}

    def count(*_args: Any) -> None:
        counts["sqlalchemy"] += 1

    engine = repository.db.engine
    event.listen(engine, "before_cursor_execute", count)
    versions = repository.versions
    sqlite_before = versions._sqlite_fast.statements if versions._sqlite_fast else 0
    fast = versions._fast
    real_query = fast._query if fast is not None else None

    async def query(sql: str, params: dict[str, Any]) -> list[Any]:
        counts["hot"] += 1
        assert real_query is not None
        return await real_query(sql, params)

    if fast is not None:
        fast._query = query
    try:
        yield counts
    finally:
        event.remove(engine, "before_cursor_execute", count)
        if fast is not None:
            fast._query = real_query
        if versions._sqlite_fast is not None:
            counts["hot"] += versions._sqlite_fast.statements - sqlite_before


def test_a_held_resolve_runs_one_statement(client: TestClient) -> None:
    """The work a ``304`` costs the service: one statement of the hot read, none through
    SQLAlchemy (before: a pool checkout, ``BEGIN``, the statement, ``ROLLBACK`` on SQLite)."""
    publish(client, "coco")
    held = Held(client, "coco@latest")
    with _counted(client) as counts:
        for _ in range(5):
            assert _get(client, "coco@latest", held.etag).status_code == 304
    assert counts == {"sqlalchemy": 0, "hot": 5}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_sqlite_hot_rows_equal_sqlalchemys(client: TestClient, database_url: str) -> None:
    """Every reference form reads the same values (dates and times converted alike) on the
    hot reader as through SQLAlchemy."""
    from sqlalchemy import select

    v1 = publish(client, "coco", content="1", desc="add_person", date="20231015")
    v2 = publish(client, "coco", content="2")
    client.put(f"{API}/datasets/coco/aliases/prod", json={"version": "coco@v1"})
    client.post(f"{API}/versions/coco@v1/deprecate", json={"reason": "bad"})
    database = Database(database_url, pool_size=1)
    reader = SqliteHotReader.for_url(database.url)
    assert reader is not None
    try:
        for text in (
            "coco@latest",
            "coco@prod",
            "coco@v1",
            "coco@2",
            v1["name"],
            f"coco@{v2['content_digest'][:19]}",
        ):
            ref = parse_reference(text)
            statement = resolution_statement(select(*HOT_COLUMNS), ref)
            with database.engine.connect() as conn:
                expected = [tuple(r) for r in conn.execute(statement, resolution_params(ref))]
            got = reader.fetch_versions(ref)
            assert got is not None and [tuple(r) for r in got] == expected, text
            assert expected, text
            if text == "coco@prod":
                prod = got[0]
        assert prod.deprecated_at is not None and prod.date.isoformat() == "2023-10-15"
    finally:
        reader.close()
        database.dispose()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_failed_hot_read_takes_the_ordinary_path(client: TestClient) -> None:
    """The SQLite hot read failing (here: its connection closed under it) costs the request
    nothing but the ordinary path: the answer is the same."""
    v1 = publish(client, "coco")
    held = Held(client, "coco@latest")
    reader = client.app.state.repository.versions._sqlite_fast  # type: ignore[attr-defined]
    reader._connection().close()
    assert _get(client, "coco@latest", held.etag).status_code == 304
    assert _get(client, "coco@latest").json()["name"] == v1["name"]


def test_an_in_memory_database_has_no_hot_reader() -> None:
    assert SqliteHotReader.for_url(Database("sqlite://").url) is None
    assert SqliteHotReader.for_url(Database("sqlite:///:memory:").url) is None

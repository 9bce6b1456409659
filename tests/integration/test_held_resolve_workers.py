"""A held resolve against ``recordkeeper serve --workers 2``: never a stale ``304``.

Several clients, each on its own keep-alive connection (so, across them, on both worker
processes), hold ``coco@latest``; a commit, an alias move and a deprecation are made through
yet another connection; every holder's next resolve must see the change, whichever worker
holds its connection and whichever made the change.  On SQLite (the hot read on each worker's
own ``sqlite3`` connection) and PostgreSQL (each worker's asyncio psycopg read).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import recordkeeper as rk
from tests.apps import migrated
from tests.integration._serve import serve
from tests.service._helpers import shards

pytestmark = pytest.mark.slow

HOLDERS = 6


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return migrated(f"sqlite:///{tmp_path / 'registry.db'}")
    return migrated(request.getfixturevalue("postgres_database_url"))


def _publish(client: rk.Client, store: str, content: str) -> str:
    """A committed version of ``coco`` (registration only: no shard is read)."""
    staged = client.stage("coco")
    client.register_shards(staged, shards(f"{store}coco/{content}/", 2, content=content))
    return client.commit(staged).name


def test_every_holder_sees_each_change(database_url: str, tmp_path: Path) -> None:
    store = (tmp_path / "store").as_uri() + "/"
    with serve(
        database_url=database_url,
        storage_root=store,
        log=tmp_path / "serve.log",
        workers=2,
    ) as served:
        writer = rk.Client(served.url)
        v1 = _publish(writer, store, "1")
        holders = [rk.Client(served.url) for _ in range(HOLDERS)]
        for holder in holders:
            assert holder.resolve("coco@latest").name == v1
            assert holder.resolve("coco@latest").name == v1  # held: answered 304

        v2 = _publish(writer, store, "2")  # @latest moves
        for holder in holders:
            assert holder.resolve("coco@latest").name == v2

        for target, expected in (("coco@v1", v1), ("coco@v2", v2)):  # an alias set, moved
            writer.http.api("PUT", "/datasets/coco/aliases/prod", json={"version": target})
            for holder in holders:
                assert holder.resolve("coco@prod").name == expected

        writer.http.api("POST", "/versions/coco@v2/deprecate", json={"reason": "bad"})
        for holder in holders:
            with pytest.warns(rk.DeprecatedVersionWarning):
                assert holder.resolve("coco@prod").state == "deprecated"
            assert holder.resolve("coco@latest").name == v1
        for client in (writer, *holders):
            client.close()

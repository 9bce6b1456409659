"""The PostgreSQL hot read path: concurrent resolutions of one reference share queries, and a
request never shares a query that was sent before it arrived (read-your-writes holds)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core.refs import parse_reference
from recordkeeper_service.db import Database
from recordkeeper_service.repository.fastpath import AsyncPostgresReader
from tests.service._helpers import publish


@pytest.fixture(params=[pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """PostgreSQL only: the asyncio fast path serves no other database."""
    return str(request.param)


@pytest.fixture
def reader(database_url: str) -> AsyncPostgresReader:
    return AsyncPostgresReader(Database(database_url, pool_size=1).url, size=4)


class Gated:
    """Wraps the reader's query: counts queries, and can hold an answer until released."""

    def __init__(self, reader: AsyncPostgresReader) -> None:
        self.real = reader._query
        self.sent = 0
        self.hold: asyncio.Event | None = None
        self.executed = asyncio.Event()
        reader._query = self  # type: ignore[method-assign]

    async def __call__(self, sql: str, params: dict[str, Any]) -> list[Any]:
        self.sent += 1
        rows = await self.real(sql, params)
        self.executed.set()
        if self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()  # the rows are already read: this answer is "old"
        return rows


def test_concurrent_requests_share_queries(client: TestClient, reader: AsyncPostgresReader) -> None:
    v1 = publish(client, "coco")
    ref = parse_reference("coco@latest")

    async def scenario() -> tuple[list[list[Any]], int]:
        gate = Gated(reader)
        results = await asyncio.gather(*(reader.fetch_versions(ref) for _ in range(12)))
        await reader.aclose()
        return list(results), gate.sent

    results, sent = asyncio.run(scenario())
    assert all(rows[0].name == v1["name"] for rows in results)
    assert sent < 12  # shared: one query ran, the others waited for one follow-up at most
    assert sent <= 2


def test_a_request_never_shares_an_older_query(
    client: TestClient, reader: AsyncPostgresReader
) -> None:
    v1 = publish(client, "coco", content="1")
    ref = parse_reference("coco@latest")

    async def scenario() -> tuple[Any, Any, Any, int]:
        gate = Gated(reader)
        gate.hold = release = asyncio.Event()
        first = asyncio.ensure_future(reader.fetch_versions(ref))
        await gate.executed.wait()  # the first query has read: latest is v1
        v2 = await asyncio.to_thread(publish, client, "coco", content="2")  # acknowledged
        second = asyncio.ensure_future(reader.fetch_versions(ref))  # arrives after the ack
        third = asyncio.ensure_future(reader.fetch_versions(ref))
        await asyncio.sleep(0.05)
        release.set()
        answers = await asyncio.gather(first, second, third)
        await reader.aclose()
        return v2, answers[0][0], (answers[1][0], answers[2][0]), gate.sent

    v2, first, later, sent = asyncio.run(scenario())
    assert first.name == v1["name"]  # arrived before the commit: either answer is right
    assert [row.name for row in later] == [v2["name"], v2["name"]]
    assert sent == 2  # the second and third shared the follow-up query


def test_errors_reach_every_sharer(client: TestClient, reader: AsyncPostgresReader) -> None:
    publish(client, "coco")
    ref = parse_reference("coco@v2147483647")  # in range, absent: an empty answer, no error

    async def scenario() -> list[Any]:
        Gated(reader)
        reader._conninfo = "postgresql://127.0.0.1:1/nothing"  # nothing listens there
        outcome = await asyncio.gather(
            *(reader.fetch_versions(ref) for _ in range(3)), return_exceptions=True
        )
        await reader.aclose()
        return outcome

    outcome = asyncio.run(scenario())
    assert [type(o).__name__ for o in outcome] == ["ServiceUnavailable"] * 3

"""Checkpoint registration under concurrency, on PostgreSQL over a real socket (uvicorn).

A retried or queued registration can race the original: the same checkpoint registered by
several requests at once must end as one row (one ``201``, the rest ``200``), and concurrent
children of one parent must all land.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import recordkeeper as rk
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.postgres]

API = "/api/v1"


def test_concurrent_registrations(
    live_service_factory: Callable[..., LiveService], postgres_database_url: str
) -> None:
    service = live_service_factory(database_url=postgres_database_url)
    client = service.client()
    with client.writer("coco") as w:
        w.write(b"record", split="train")
    version = w.version.name
    client.register_checkpoint(model="det", checkpoint="ckpt-0", data={"train": version})

    def put(name: str, parent: str | None, model: str = "det") -> int:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            answer = http.put(
                f"{API}/models/{model}/checkpoints/{name}",
                json={"parent": parent, "step": 1, "data": [{"version": version}], "run": "r"},
            )
            return answer.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        same = list(pool.map(lambda _: put("ckpt-1", "det/ckpt-0"), range(8)))
    assert sorted(same) == [200] * 7 + [201]

    with ThreadPoolExecutor(max_workers=8) as pool:
        children = list(pool.map(lambda i: put(f"branch-{i}", "det/ckpt-1"), range(8)))
    assert children == [201] * 8
    assert len(client.checkpoints("det")) == 10
    # a model (and run) created by racing first registrations
    with ThreadPoolExecutor(max_workers=8) as pool:
        fresh = list(pool.map(lambda _: put("ckpt-1", None, "fresh"), range(8)))
    assert sorted(fresh) == [200] * 7 + [201]
    assert [m.name for m in client.models()] == ["det", "fresh"]
    used = client.consumers(version)
    assert used.count == 11 and all(c.direct for c in used.checkpoints)
    with pytest.raises(rk.VersionInUse):
        client.deprecate(version, "no")

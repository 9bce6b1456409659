"""register_shards splits large lists into requests of at most 10,000 shards."""

from __future__ import annotations

import json

import httpx

import recordkeeper as rk


def test_register_shards_batches() -> None:
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/info":
            return httpx.Response(200, json={"max_shards_per_request": 10000})
        shards = json.loads(request.content)["shards"]
        sizes.append(len(shards))
        return httpx.Response(
            200, json={"registered": len(shards), "unchanged": 0, "shard_count": sum(sizes)}
        )

    http = httpx.Client(transport=httpx.MockTransport(handler))
    client = rk.Client("http://svc", http_client=http)
    shards = [{"split": "train", "index": i} for i in range(25_001)]
    totals = client.register_shards("coco_20231015_v1", shards)
    assert sizes == [10_000, 10_000, 5_001]
    assert totals == {"registered": 25_001, "unchanged": 0, "shard_count": 25_001}

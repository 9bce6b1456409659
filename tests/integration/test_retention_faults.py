"""Retention apply under S3 faults (503 SlowDown, connection resets, truncated LIST pages,
through :class:`tests.servers.faults.FaultProxy` in front of SeaweedFS): it never deletes a live
object, reports what it could not finish, and running it again finishes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import fsspec
import pytest

import recordkeeper as rk
from recordkeeper import storage
from recordkeeper.core.retry import RetryPolicy
from tests.client._records import frame, sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.servers.faults import FaultProxy

pytestmark = pytest.mark.s3

#: DeleteObjects (POST ?delete) and DeleteObject (DELETE key) under the dataset's objects.
DELETES = r"[?&]delete|/datasets/|/raw/"


@pytest.fixture
def s3_proxy(s3_server: Any) -> Iterator[FaultProxy]:
    proxy = FaultProxy(s3_server.endpoint_url, "s3")
    yield proxy
    proxy.stop()


def _keys(bucket: str, opts: dict[str, Any]) -> set[str]:
    fs, path = fsspec.core.url_to_fs(bucket, **opts)
    found: set[str] = set()
    token: dict[str, str] = {}
    while True:  # straight from ListObjectsV2, no fsspec cache
        page = fs.call_s3("list_objects_v2", Bucket=path.strip("/"), **token)
        found |= {f"{bucket}/{o['Key']}" for o in page.get("Contents", [])}
        if not page.get("IsTruncated"):
            return found
        token = {"ContinuationToken": page["NextContinuationToken"]}


def test_apply_under_s3_faults_keeps_live_objects_and_finishes_when_rerun(
    live_service_factory: Callable[..., LiveService],
    s3_bucket: str,
    s3_server: Any,
    s3_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Deletions answer 503 for good below: a 1 s retry budget instead of 10 s, the same path.
    monkeypatch.setattr(storage, "STORAGE_RETRY", RetryPolicy(budget=1.0))
    clean = dict(s3_server.storage_options)
    faulty = {
        **clean,
        "client_kwargs": {**clean["client_kwargs"], "endpoint_url": s3_proxy.endpoint_url},
    }
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    client = service.client(storage_options=clean)
    old = []
    for k in range(2):
        with client.writer("coco", storage_options=clean, shard_size=1) as w:
            for record in sample_examples(2, 100 * k):
                w.write(record, split="train")
        old.append(w.version)
    s0, s1, t1 = (f"{s3_bucket}/raw/{n}-train.tfrecord" for n in ("s0", "s1", "t1"))
    for k, uri in enumerate((s0, s1, t1)):
        sc.put_bytes(uri, frame(sample_examples(3, 1000 + 10 * k)), clean)
    shared = client.publish(rk.Dataset.from_files("coco", [s0, s1], storage_options=clean))
    pinned = client.publish(rk.Dataset.from_files("coco", [s0, t1], storage_options=clean))
    with client.writer("coco", storage_options=clean) as w:
        w.write(sample_examples(1, 999)[0], split="train")
    client.pin_versions("release", [pinned.name])
    client.set_retention_policy("coco", keep_last=1)
    expired = {s.uri for v in (*old, shared) for s in v.shards} - {s0}
    live = _keys(s3_bucket, clean) - expired
    assert s0 in live and t1 in live and len(expired) == 5
    roots = [s3_bucket]

    # Every deletion answers 503 SlowDown, and LIST pages are cut short: nothing is deleted,
    # every version is reported unfinished (and stays released to this caller).
    slowdown = s3_proxy.inject("503", method=None, path=DELETES, times=None)
    # apply never lists (it deletes the exact objects the service names): cut pages can't matter
    s3_proxy.inject("truncate", method="GET", path=r"list-type=2", times=None)
    report = client.apply_retention("coco", storage_options=faulty, allowed_roots=roots)
    assert not report.ok and slowdown.fired >= 5
    assert {i.action for i in report.items} == {"incomplete"}
    assert sum(len(i.failed) for i in report.items) == 5
    assert _keys(s3_bucket, clean) == live | expired
    assert {client.resolve(v.name).data_state for v in (*old, shared)} == {"deleting"}

    # Resets now and then: whatever is finished is finished, live objects stay.
    s3_proxy.clear()
    reset = s3_proxy.inject("reset", method=None, path=DELETES, fraction=0.5, seed=7)
    client.apply_retention("coco", storage_options=faulty, allowed_roots=roots)
    assert reset.matched and live <= _keys(s3_bucket, clean)

    # The store is healthy again: the next apply finishes every version, and only those.
    s3_proxy.clear()
    report = client.apply_retention("coco", storage_options=faulty, allowed_roots=roots)
    assert report.ok, report.to_dict()
    assert _keys(s3_bucket, clean) == live
    assert {client.resolve(v.name).data_state for v in (*old, shared)} == {"deleted"}
    assert client.resolve(pinned.name).verify().ok

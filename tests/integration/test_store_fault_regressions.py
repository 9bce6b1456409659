"""Regressions of issue 21 over SeaweedFS (and fake-gcs-server) behind the fault proxy.

* per-call ``storage_options`` stay with the versions made with them;
* one ``503`` (bodiless, on a ``HEAD``) is retried, not fatal; a store that stays throttled
  fails with ``StorageError(reason="throttled")`` within the retry budget; a reset is
  ``transport``, never "endpoint unreachable";
* a byte flipped in transit is reported as transport damage, not as a corrupt shard;
* a failed ``tf_dataset`` read leaves nothing behind that hangs the next S3 call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.servers.faults import FaultProxy
from tests.servers.retry_waits import scale_s3_waits

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s3_proxy(s3_server: Any) -> Iterator[FaultProxy]:
    proxy = FaultProxy(s3_server.endpoint_url, "s3")
    yield proxy
    proxy.stop()


@pytest.fixture
def opts(s3_server: Any) -> dict[str, Any]:
    return dict(s3_server.storage_options)


@pytest.fixture
def faulty(opts: dict[str, Any], s3_proxy: FaultProxy) -> Iterator[dict[str, Any]]:
    s3_proxy.clear()
    yield {
        **opts,
        "client_kwargs": {**opts["client_kwargs"], "endpoint_url": s3_proxy.endpoint_url},
    }
    s3_proxy.clear()


@pytest.fixture
def s3_service(live_service_factory: Callable[..., LiveService], s3_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])


def _publish(service: LiveService, bucket: str, opts: dict[str, Any], name: str = "coco") -> Any:
    raw = f"{bucket}/raw/{name}"
    sc.make_raw_dataset(raw, opts, shards=2, per_shard=20)
    client = service.client(storage_options=opts)
    return client.publish(
        rk.Dataset.from_directory(raw, name=name, storage_options=opts), progress=False
    )


# -- 5. per-call storage_options ---------------------------------------------------------------


def test_versions_keep_the_storage_options_they_were_made_with(
    s3_service: LiveService, s3_bucket: str, opts: dict[str, Any]
) -> None:
    """A client without storage options; the options are given per call only."""
    client = s3_service.client()
    assert client.storage_options == {}
    raw = f"{s3_bucket}/raw/percall"
    sc.make_raw_dataset(raw, opts, shards=2, per_shard=10)
    published = client.publish(
        rk.Dataset.from_directory(raw, name="percall", storage_options=opts),
        storage_options=opts,
        progress=False,
    )
    # checked before any storage call: without them verify() would ask AWS's endpoint
    assert published.storage_options == opts
    assert published.verify().ok

    with client.writer("percallw", root=f"{s3_bucket}/datasets", storage_options=opts) as w:
        w.write(b"record")
    assert w.version.storage_options == opts
    assert w.version.verify(deep=True).ok


# -- 4. throttling and transport errors --------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("operation", ["publish", "fast_verify", "tf_dataset"])
def test_one_bodiless_503_on_a_head_is_retried(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    operation: str,
    request: pytest.FixtureRequest,
) -> None:
    """botocore's retries are off and s3fs retried a 503 only with a SlowDown body: one 503
    answering a HEAD (which has no body) failed the whole operation."""
    client = s3_service.client(storage_options=opts)
    if operation == "publish":
        raw = f"{s3_bucket}/raw/once"
        sc.make_raw_dataset(raw, opts, shards=2, per_shard=10)
        rule = s3_proxy.inject("503", method="HEAD", path=r"/raw/", times=1)
        version = client.publish(
            rk.Dataset.from_directory(raw, name="once", storage_options=faulty), progress=False
        )
        assert version.with_storage_options(opts).verify(deep=True).ok
    else:
        version = _publish(s3_service, s3_bucket, opts)
        rule = s3_proxy.inject("503", method="HEAD", path=r"/raw/", times=1)
        if operation == "fast_verify":
            assert version.with_storage_options(faulty).verify().ok
        else:
            request.getfixturevalue("tensorflow")
            records = list(version.tf_dataset("train", storage_options=faulty))
            assert len(records) == 40
    assert rule.fired == 1


@pytest.mark.timeout(120)
def test_a_store_that_stays_throttled_fails_with_a_typed_reason(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scale_s3_waits(monkeypatch, 0.1)  # the same retries and give-up, 1 s asleep instead of 10 s
    version = _publish(s3_service, s3_bucket, opts)
    rule = s3_proxy.inject("503", method="HEAD", path=r"/raw/", times=None)
    with pytest.raises(rk.StorageError) as err:
        version.with_storage_options(faulty).verify()
    assert err.value.extra["reason"] == "throttled"
    assert "unreachable" not in err.value.detail
    assert rule.fired > 1  # retried before giving up


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", ["reset", "truncate"])
def test_a_cut_answer_is_a_transport_error_not_an_unreachable_endpoint(
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    fault: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from recordkeeper.storage import list_files

    scale_s3_waits(monkeypatch, 0.1)  # the same retries and give-up, 1 s asleep instead of 10 s

    sc.put_bytes(f"{s3_bucket}/raw/a", b"x", opts)
    rule = s3_proxy.inject(fault, method="GET", path=r"list-type=2", times=None)
    with pytest.raises(rk.StorageError) as err:
        list_files(f"{s3_bucket}/raw", faulty)
    assert err.value.extra["reason"] == "transport"
    assert "check the endpoint URL" not in err.value.detail
    assert rule.fired > 1
    s3_proxy.clear()
    rule = s3_proxy.inject(fault, method="GET", path=r"list-type=2", times=1)
    assert list_files(f"{s3_bucket}/raw", faulty) == [f"{s3_bucket}/raw/a"]
    assert rule.fired == 1


@pytest.mark.timeout(180)
def test_a_store_that_stays_down_is_not_asked_for_every_shard(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deep verify with 2 workers and 3 shards, every read refused: the error comes after the
    two reads in flight, without a third shard started meanwhile (which doubled the time to
    the error: one more retry budget, ~35 s on GCS)."""
    scale_s3_waits(monkeypatch, 0.1)  # the same retries and give-up, 1 s asleep instead of 10 s
    version = _publish(s3_service, s3_bucket, opts)
    assert len(version.shards) == 3
    s3_proxy.inject("503", method="GET", path=r"/raw/", times=None)
    with pytest.raises(rk.StorageError) as err:
        version.with_storage_options(faulty).verify(deep=True, max_workers=2)
    assert err.value.extra["reason"] == "throttled"
    asked = {seen.target.split("?")[0] for seen in s3_proxy.log if seen.fault == "503"}
    assert len(asked) == 2, asked


# -- 3. a bit flipped in transit ------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_bit_flipped_in_transit_is_not_a_corrupt_shard(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    tensorflow: Any,
) -> None:
    version = _publish(s3_service, s3_bucket, opts)
    expected = sorted(version.tf_dataset("train", verify=None).as_numpy_iterator())
    rule = s3_proxy.inject("flip", method="GET", path=r"/raw/", times=1)
    report = version.with_storage_options(faulty).verify(deep=True)
    assert rule.fired == 1
    assert report.ok, report  # re-read: intact; nothing reported to the audit log
    import httpx

    events = httpx.get(
        f"{s3_service.url}/api/v1/events", params={"action": "version.verification_failed"}
    ).json()
    assert events["count"] == 0, events

    rule = s3_proxy.inject("flip", method="GET", path=r"/raw/", times=1)
    got = sorted(
        version.tf_dataset("train", verify=None, storage_options=faulty).as_numpy_iterator()
    )
    assert rule.fired == 1
    assert got == expected


# -- 2. no hang after a failed read -------------------------------------------------------------

HANG_CHILD = r"""
import contextlib, json, os, sys, threading, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import recordkeeper as rk
import recordkeeper.tf
import tensorflow as tf
from recordkeeper import storage
from recordkeeper.core.retry import RetryPolicy

# Every read here fails for good: a short retry budget keeps the runs quick, the same code path.
storage.STORAGE_RETRY = RetryPolicy(budget=1.0)

url, ref, runs = sys.argv[1], sys.argv[2], int(sys.argv[5])
clean, faulty = json.loads(sys.argv[3]), json.loads(sys.argv[4])


def reading_threads():
    found = 0
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "read_shard_batches":
                found += 1
                break
            frame = frame.f_back
    return found


out = []
for run in range(runs):
    version = rk.Client(url, storage_options=faulty).resolve(ref)
    typed = run % 2 == 1  # plain iteration (TensorFlow's error), then inside typed_errors
    dataset = None
    try:
        dataset = version.tf_dataset("train", verify=None)
        with rk.tf.typed_errors() if typed else contextlib.nullcontext():
            sum(1 for _ in dataset)
        failed = None
    except Exception as exc:
        failed = type(exc).__name__ if typed else f"tf:{isinstance(exc, tf.errors.OpError)}"
    del dataset
    deadline = time.monotonic() + 60  # readers may finish their current request first
    while reading_threads() and time.monotonic() < deadline:
        time.sleep(0.2)
    left = reading_threads()
    # the next S3 call of this process, through a fresh client
    ok = rk.Client(url, storage_options=clean).resolve(ref).verify().ok
    out.append({"failed": failed, "readers_left": left, "next_ok": ok})
print(json.dumps(out))
"""


@pytest.mark.timeout(600)
def test_a_failed_s3_read_leaves_no_reader_and_no_hang(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict[str, Any],
    faulty: dict[str, Any],
    s3_proxy: FaultProxy,
    tensorflow: Any,
) -> None:
    """Repeats the failure a bounded number of times in a subprocess with a timeout: a hang
    fails the test (``TimeoutExpired``) instead of hanging the run."""
    raw = f"{s3_bucket}/raw/hang"
    sc.make_raw_dataset(raw, opts, shards=6, per_shard=600)
    version = s3_service.client(storage_options=opts).publish(
        rk.Dataset.from_directory(raw, name="hang", storage_options=opts), progress=False
    )
    s3_proxy.inject("truncate", method="GET", path=r"/raw/", times=None)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(HANG_CHILD),
            s3_service.url,
            version.name,
            json.dumps(opts),
            json.dumps(faulty),
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(runs) == 3
    assert [r["failed"] == "tf:True" for r in runs] == [True, False, True]
    for run in runs:
        assert run["failed"] in ("StorageError", "CorruptShard", "tf:True"), run
        assert run["readers_left"] == 0, run
        assert run["next_ok"], run


@pytest.mark.timeout(120)
def test_a_stuck_event_loop_bounds_every_wait(
    s3_bucket: str, opts: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsspec loop blocked (as a deadlocked finalizer would block it): a fresh
    filesystem's session set-up gives up after the bound instead of waiting for as long as the
    loop is stuck (for ever, in the deadlock issue 21 saw)."""
    import asyncio
    import threading

    import fsspec.asyn

    from recordkeeper import storage

    storage.url_to_fs(f"{s3_bucket}/raw/stuck", opts)
    monkeypatch.setattr(storage, "LOOP_TIMEOUT", 2.0, raising=False)
    release = threading.Event()

    async def block() -> None:
        release.wait(30)  # blocks the loop's thread itself (bounded)

    loop = fsspec.asyn.get_loop()
    blocked = asyncio.run_coroutine_threadsafe(block(), loop)
    try:
        fresh = {**opts, "client_kwargs": {**opts["client_kwargs"], "region_name": "eu-west-1"}}
        with pytest.raises(rk.StorageError):
            storage.url_to_fs(f"{s3_bucket}/raw/stuck", fresh)  # a new instance: new session
    finally:
        release.set()
        blocked.result(timeout=30)

"""Object stores under faults: store (s3, gcs) x operation x fault, through a fault proxy.

Each cell runs one public operation with ``storage_options`` pointing at a
:class:`tests.servers.faults.FaultProxy` in front of the session's SeaweedFS / fake-gcs-server,
with one fault injected on the requests that operation makes (two in a row: retries may
absorb them, or not).  The contract, whatever the outcome:

* success with the right bytes: the result equals a clean run (hashes, records, ``ok``); or
* a typed :class:`recordkeeper.RecordkeeperError` (never a bare botocore/aiohttp/OSError), and
  nothing committed: the version does not resolve, or gc still has it as a candidate;
* never a hang (pytest-timeout per test), and the fault actually fired.

Multipart uploads on S3 are checked separately: a part refused for good leaves no incomplete
multipart upload behind.  docs/reliability.md ("Object stores under faults") describes the
matrix.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
import recordkeeper.tf
from tests.client._records import sample_examples
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.servers.faults import FaultProxy
from tests.servers.retry_waits import scale_gcsfs_waits, scale_s3_waits
from tests.service.test_gc import age

FAULTS = ("503", "reset", "slow", "truncate")
OPERATIONS = ("writer", "publish", "fast_verify", "deep_verify", "tf_dataset", "gc_delete")
#: which requests each operation's fault hits: store -> operation -> (method, path regex)
TARGETS: dict[str, dict[str, tuple[str | None, str]]] = {
    "s3": {
        "writer": ("PUT", r"/_incomplete/"),
        "publish": ("GET", r"/raw/"),
        "fast_verify": ("HEAD", r"/raw/"),
        "deep_verify": ("GET", r"/raw/"),
        "tf_dataset": ("GET", r"/raw/"),
        "gc_delete": (None, r"[?&]delete|/datasets/"),
    },
    "gcs": {
        "writer": ("POST", r"^/upload/"),
        "publish": ("GET", r"raw"),
        "fast_verify": ("GET", r"raw"),
        "deep_verify": ("GET", r"raw.*alt=media"),
        "tf_dataset": ("GET", r"raw.*alt=media"),
        "gc_delete": (None, r"^/batch/|/o/datasets%2F"),
    },
}


@pytest.fixture(scope="module")
def s3_proxy(s3_server: Any) -> Iterator[FaultProxy]:
    proxy = FaultProxy(s3_server.endpoint_url, "s3")
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def gcs_proxy(gcs_server: Any) -> Iterator[FaultProxy]:
    proxy = FaultProxy(gcs_server.endpoint_url, "gcs")
    yield proxy
    proxy.stop()


class Store:
    """One store of the matrix: bucket, clean and proxied options, the proxy, a service."""

    def __init__(
        self, kind: str, bucket: str, clean: dict, proxy: FaultProxy, service: LiveService
    ) -> None:
        self.kind, self.bucket, self.clean, self.proxy, self.service = (
            kind,
            bucket,
            clean,
            proxy,
            service,
        )
        if kind == "s3":
            self.faulty = {
                **clean,
                "client_kwargs": {**clean["client_kwargs"], "endpoint_url": proxy.endpoint_url},
            }
        else:
            self.faulty = {**clean, "endpoint_url": proxy.endpoint_url}

    def inject(self, fault: str, operation: str) -> Any:
        """Two faults in a row (``"503-always"``: every matching request answers 503)."""
        method, path = TARGETS[self.kind][operation]
        times = None if fault == "503-always" else 2
        fault = fault.removesuffix("-always")
        return self.proxy.inject(fault, method=method, path=path, times=times, delay=0.5)


@pytest.fixture(params=["s3", "gcs"])
def store(
    request: pytest.FixtureRequest,
    live_service_factory: Callable[..., LiveService],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Store]:
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        clean = dict(request.getfixturevalue("s3_server").storage_options)
        proxy = request.getfixturevalue("s3_proxy")
    else:
        server = request.getfixturevalue("gcs_server")
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        bucket = request.getfixturevalue("gcs_bucket")
        clean = dict(server.storage_options)
        proxy = request.getfixturevalue("gcs_proxy")
        # gcsfs sleeps 1 s, 2 s, ... 16 s between its six attempts: a tenth of that, the same
        # six attempts (most GCS cells spent seconds asleep, a store that stays down ~34 s)
        scale_gcsfs_waits(monkeypatch, 0.1)
    service = live_service_factory(storage_root=f"{bucket}/datasets", allowed_roots=[bucket])
    proxy.clear()
    yield Store(request.param, bucket, clean, proxy, service)
    proxy.clear()


def _typed(exc: BaseException) -> None:
    """A failure must be one of ours, with the store's exception only as its cause."""
    assert isinstance(exc, rk.RecordkeeperError), f"untyped {type(exc).__mro__}: {exc}"


def _published(store: Store, name: str = "coco") -> rk.DatasetVersion:
    raw = f"{store.bucket}/raw/{name}"
    sc.make_raw_dataset(raw, store.clean, shards=2, per_shard=20)
    client = store.service.client(storage_options=store.clean)
    return client.publish(
        rk.Dataset.from_directory(raw, name=name, storage_options=store.clean), progress=False
    )


def _outcome(exc: BaseException) -> str:
    reason = getattr(exc, "extra", {}).get("reason")
    return f"{type(exc).__name__}({reason})" if reason else type(exc).__name__


def _hashes(version: rk.DatasetVersion) -> list[tuple[str, str, str, int]]:
    return [
        (s.uri.rsplit("/", 1)[-1], s.sha256, s.records_sha256, s.record_count)
        for split in sorted(version.splits)
        for s in version.splits[split].shards
    ]


def _run(store: Store, operation: str, fault: str, tensorflow: Callable[[], ModuleType]) -> None:
    client = store.service.client(storage_options=store.clean)
    if operation == "writer":
        records = sample_examples(60)
        store.inject(fault, operation)
        try:
            with client.writer(
                "wfault",
                root=f"{store.bucket}/datasets",
                shard_size="4KB",
                storage_options=store.faulty,
            ) as w:
                for rec in records:
                    w.write(rec)
        except Exception as exc:
            _typed(exc)
            with pytest.raises(rk.NotFound):
                client.resolve("wfault@latest")
            return _outcome(exc)
        version = client.resolve("wfault@latest").with_storage_options(store.clean)
        assert version.record_count == len(records)
        assert version.verify(deep=True).ok
        return "ok"
    if operation == "publish":
        raw = f"{store.bucket}/raw/pfault"
        sc.make_raw_dataset(raw, store.clean, shards=2, per_shard=20)
        expected = _hashes(_published(store, "pclean"))
        store.inject(fault, operation)
        try:
            version = client.publish(
                rk.Dataset.from_directory(raw, name="pfault", storage_options=store.faulty),
                progress=False,
            )
        except Exception as exc:
            _typed(exc)
            with pytest.raises(rk.NotFound):
                client.resolve("pfault@latest")
            return _outcome(exc)
        # records from a clean publish of the same records; bytes from a clean download (the
        # gzip file's header holds its write time, so only these files' own bytes compare)
        assert [h[2:] for h in _hashes(version)] == [h[2:] for h in expected]
        for split in version.splits.values():
            for shard in split.shards:
                data = sc.get_bytes(shard.uri, store.clean)
                assert shard.sha256 == hashlib.sha256(data).hexdigest()
                assert shard.size == len(data)
        return "ok"
    version = _published(store)
    if operation in ("fast_verify", "deep_verify"):
        store.inject(fault, operation)
        try:
            report = version.with_storage_options(store.faulty).verify(
                deep=operation == "deep_verify"
            )
        except Exception as exc:
            _typed(exc)
            return _outcome(exc)
        # The data is intact: a fault must never be reported as a missing or changed shard.
        assert report.ok, report
        return "ok"
    if operation == "tf_dataset":
        tf = tensorflow()
        expected = sorted(sample_examples(20) + sample_examples(20, 20))
        store.inject(fault, operation)
        try:
            ds = version.tf_dataset("train", storage_options=store.faulty)
            with recordkeeper.tf.typed_errors(ds):  # TensorFlow's errors as recordkeeper's
                got = sorted(bytes(r) for r in ds.as_numpy_iterator())
        except Exception as exc:
            _typed(exc)
            return _outcome(exc)
        del tf
        assert got == expected
        return "ok"
    assert operation == "gc_delete"
    crashed = client.stage("coco")
    age(store.service.database_url, crashed.name, 2 * 3600)
    prefix = crashed.storage_prefix
    for i in range(3):
        sc.put_bytes(f"{prefix}train-{i:05d}-of-00003.tfrecord", b"x" * 100, store.clean)
    store.inject(fault, operation)
    try:
        report = client.collect_garbage(
            staged_older_than=0,
            dry_run=False,
            storage_options=store.faulty,
            allowed_roots=[client.info()["storage_root"]],  # the collector's own roots
        )
    except Exception as exc:
        _typed(exc)
        report, outcome = None, _outcome(exc)
    else:
        outcome = "ok" if report.ok else f"skipped: {report.items[0].error}"[:80]
    left = [c.name for c in client.gc_candidates(staged_older_than=0)]
    if report is not None and report.ok:
        assert [i.name for i in report.items] == [crashed.name]
        assert report.objects == 3
        assert client.resolve(crashed.name).state == "abandoned"
        assert left == []
    else:
        # Not collected: still a candidate, claimed for a lease, then released to any gc again.
        assert left == [crashed.name]
    return outcome


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_fault_matrix(
    store: Store, operation: str, fault: str, request: pytest.FixtureRequest
) -> None:
    outcome = _run(store, operation, fault, lambda: request.getfixturevalue("tensorflow"))
    request.node.user_properties.append(("outcome", outcome))
    print(f"\nOUTCOME {store.kind} {operation} {fault}: {outcome}")
    fired = [s for s in store.proxy.log if s.fault == fault.removesuffix("-always")]
    assert fired, f"no {fault} fault reached the store during {operation}"


#: gcsfs retries 6 times, 1 s to 16 s apart (fixed in gcsfs): ~35 s per cell (3.5 s with the
#: waits scaled down, the same six attempts), so two cells only.
STORE_DOWN = [
    *[("s3", op) for op in ("writer", "publish", "deep_verify", "gc_delete")],
    *[("gcs", op) for op in ("writer", "gc_delete")],
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("store", "operation"), STORE_DOWN, indirect=["store"])
def test_store_down(
    store: Store, operation: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every matching request answers 503: a typed error within the retry budget, nothing kept."""
    # The S3 policy's waits and its 10 s budget a tenth as long: the same retries, the same
    # give-up, 1 s instead of 10 s asleep per request.
    scale_s3_waits(monkeypatch, 0.1)
    outcome = _run(store, operation, "503-always", lambda: request.getfixturevalue("tensorflow"))
    print(f"\nOUTCOME {store.kind} {operation} 503-always: {outcome}")
    assert outcome != "ok"


@pytest.mark.timeout(120)
def test_failed_multipart_upload_is_aborted(
    s3_server: Any,
    s3_bucket: str,
    s3_proxy: FaultProxy,
    live_service_factory: Callable[..., LiveService],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shard large enough for a multipart upload, its second part refused for good."""
    scale_s3_waits(monkeypatch, 0.1)  # the refused part given up after 1 s, not 10 s
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    store = Store("s3", s3_bucket, dict(s3_server.storage_options), s3_proxy, service)
    s3_proxy.clear()
    rule = s3_proxy.inject("503", method="PUT", path=r"partNumber=2", times=None)
    client = service.client()
    big = [b"r" * 2**20 + i.to_bytes(4, "big") for i in range(20)]  # ~20 MiB: two parts
    with (
        pytest.raises(rk.RecordkeeperError),
        client.writer(
            "big", root=f"{s3_bucket}/datasets", shard_size="1GB", storage_options=store.faulty
        ) as w,
    ):
        for rec in big:
            w.write(rec)
    s3_proxy.clear()
    assert rule.fired, "the writer never uploaded a second part: no multipart upload"
    bucket = s3_bucket.removeprefix("s3://")
    uploads = s3_server.boto3_client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert uploads == [], uploads
    with pytest.raises(rk.NotFound):
        client.resolve("big@latest")

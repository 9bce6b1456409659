"""The client end to end on S3 (SeaweedFS) against the service over a real socket.

Storage is configured exactly as users do: ``storage_options`` with key/secret and
``client_kwargs.endpoint_url``.  SeaweedFS runs with one identity (the fixture's key and
secret), so a wrong secret or an unknown access key is refused: those must surface as
:class:`recordkeeper.StorageError` (reason ``denied``) naming the URI, without a retry (what makes
them quick; the test counts the retry policy's waits instead of timing).  A wrong endpoint
and a missing bucket are tested too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import storage
from recordkeeper.core.retry import RetryPolicy
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService

pytestmark = pytest.mark.s3


@pytest.fixture
def opts(s3_server: Any) -> dict[str, Any]:
    return dict(s3_server.storage_options)


@pytest.fixture
def s3_service(live_service_factory: Callable[..., LiveService], s3_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])


def test_publish_resolve_verify(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.publish_resolve_verify(s3_service, s3_bucket, opts)


def test_writer_and_diff(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    v2 = sc.writer_and_diff(s3_service, s3_bucket, opts)
    shard = v2.splits["train"].shards[0]
    # Uploaded with ChecksumAlgorithm=SHA256: the store's checksum is the shard's sha256.
    import base64

    assert base64.b64decode(shard.storage_identity["checksum_sha256"]).hex() == shard.sha256


def test_copies_under_committed_names(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.copies_under_committed_names(s3_service, s3_bucket, opts)


def test_writer_failure_cleans_up(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.writer_failure_cleans_up(s3_service, s3_bucket, opts)


def test_corruption_is_reported(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.corruption_is_reported(s3_service, s3_bucket, opts)


def test_cli(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.cli_roundtrip(s3_service, s3_bucket, opts)


def test_tf_dataset_over_s3(
    s3_service: LiveService, s3_bucket: str, opts: dict, tensorflow: ModuleType
) -> None:
    sc.tf_dataset_parses(s3_service, s3_bucket, opts, tensorflow)


def test_wrong_endpoint_and_missing_bucket(
    s3_service: LiveService, s3_bucket: str, opts: dict
) -> None:
    client = s3_service.client(storage_options=opts)
    with client.writer("coco") as w:
        w.write(sc.sample_examples(1)[0])
    bad = {
        **opts,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "us-east-1"},
    }
    with pytest.raises(rk.StorageError, match="unreachable") as info:
        client.resolve("coco@latest").verify(storage_options=bad)
    assert info.value.extra["reason"] == "unreachable"
    with pytest.raises(rk.StorageError, match="not found"):
        rk.Dataset.from_directory("s3://rk-no-such-bucket-x/raw", name="x", storage_options=opts)


# --------------------------------------------------------------------------------------------
# wrong credentials
# --------------------------------------------------------------------------------------------

#: refused credentials must fail at once (no retry loop on 403s)
#: How long a writer may take before the test calls it hung (a guard, not a timing).
HANG_SECONDS = 120.0


class _CountingRetry(RetryPolicy):
    """The storage retry policy, counting the waits it grants."""

    def __init__(self, waits: list[float]) -> None:
        super().__init__()
        object.__setattr__(self, "_waits", waits)

    def wait(self, retry: int, elapsed: float, random: float) -> float | None:
        granted = super().wait(retry, elapsed, random)
        if granted is not None:
            self._waits.append(granted)  # type: ignore[attr-defined]
        return granted


@pytest.fixture(autouse=True)
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of the S3 retry policy during the test (a refusal must grant none)."""
    waits: list[float] = []
    monkeypatch.setattr(storage, "STORAGE_RETRY", _CountingRetry(waits))
    return waits


@pytest.fixture(params=["wrong_secret", "unknown_key"])
def bad_opts(request: pytest.FixtureRequest, s3_server: Any, opts: dict) -> dict[str, Any]:
    if not s3_server.enforces_credentials:
        pytest.skip(f"{s3_server.kind} accepts any credentials")
    if request.param == "wrong_secret":
        return {**opts, "secret": opts["secret"] + "-wrong"}
    return {**opts, "key": "rk-unknown-access-key"}


def _assert_denied(
    info: pytest.ExceptionInfo[rk.StorageError], uri_prefix: str, waits: list[float]
) -> None:
    err = info.value
    assert not waits, f"refused credentials were retried ({len(waits)} waits)"
    assert err.extra["reason"] == "denied", err
    assert str(err.extra["uri"]).startswith(uri_prefix)
    text = str(err)
    assert str(err.extra["uri"]) in text
    assert "access denied" in text and "credentials were refused" in text
    assert "Traceback" not in text and "botocore" not in text


def _publish_raw(s3_service: LiveService, s3_bucket: str, opts: dict) -> rk.DatasetVersion:
    raw = f"{s3_bucket}/raw/creds"
    for i in range(2):
        sc.put_bytes(
            f"{raw}/train-{i:05d}-of-00002.tfrecord", sc.frame(sc.sample_examples(5, i * 5)), opts
        )
    client = s3_service.client(storage_options=opts)
    return client.publish(
        rk.Dataset.from_directory(raw, name="creds", storage_options=opts), progress=False
    )


def test_wrong_credentials_publish(
    s3_service: LiveService, s3_bucket: str, opts: dict, bad_opts: dict, retry_waits: list[float]
) -> None:
    """publish() of shards on S3 with refused credentials: StorageError(denied) naming the URI."""
    raw = f"{s3_bucket}/raw/coco"
    sc.make_raw_dataset(raw, opts, shards=2, per_shard=5)
    client = s3_service.client(storage_options=bad_opts)
    with pytest.raises(rk.StorageError) as info:
        client.publish(
            rk.Dataset.from_directory(raw, name="coco", storage_options=bad_opts), progress=False
        )
    _assert_denied(info, raw, retry_waits)
    with pytest.raises(rk.NotFound):
        client.resolve("coco@latest")  # nothing was registered


def test_wrong_credentials_verify(
    s3_service: LiveService, s3_bucket: str, opts: dict, bad_opts: dict, retry_waits: list[float]
) -> None:
    """Fast and deep verify with refused credentials raise, not report shards as missing."""
    v = _publish_raw(s3_service, s3_bucket, opts)
    for deep in (False, True):
        with pytest.raises(rk.StorageError) as info:
            v.with_storage_options(bad_opts).verify(deep=deep)
        _assert_denied(info, f"{s3_bucket}/raw/creds/train-", retry_waits)
    # the same through a client configured with the bad options
    client = s3_service.client(storage_options=bad_opts)
    with pytest.raises(rk.StorageError) as info:
        client.resolve("creds@latest").verify()
    _assert_denied(info, f"{s3_bucket}/raw/creds/train-", retry_waits)
    assert v.with_storage_options(opts).verify().ok  # the right credentials still work


def test_wrong_credentials_tf_dataset(
    s3_service: LiveService,
    s3_bucket: str,
    opts: dict,
    bad_opts: dict,
    tensorflow: ModuleType,
    retry_waits: list[float],
) -> None:
    """tf_dataset() (verify="fast", the default) fails before building the pipeline."""
    v = _publish_raw(s3_service, s3_bucket, opts)
    with pytest.raises(rk.StorageError) as info:
        v.with_storage_options(bad_opts).tf_dataset("train")
    _assert_denied(info, f"{s3_bucket}/raw/creds/train-", retry_waits)
    with pytest.raises(rk.StorageError) as info:
        v.tf_dataset("train", storage_options=bad_opts)
    _assert_denied(info, f"{s3_bucket}/raw/creds/train-", retry_waits)


def test_wrong_credentials_writer(
    s3_service: LiveService, s3_bucket: str, bad_opts: dict, retry_waits: list[float]
) -> None:
    """client.writer() to S3 with refused credentials raises StorageError(denied), promptly."""
    client = s3_service.client()
    root = f"{s3_bucket}/datasets"
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            with client.writer("wcreds", root=root, storage_options=bad_opts) as w:
                for rec in sc.sample_examples(20):
                    w.write(rec)
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc

    # In a daemon thread: a deadlocked writer must fail this test, not hang the session.
    worker = threading.Thread(target=run, name="wrong-credentials-writer", daemon=True)
    worker.start()
    worker.join(HANG_SECONDS)
    assert not worker.is_alive(), "client.writer() hung on refused credentials"
    error = outcome.get("error")
    assert isinstance(error, rk.StorageError), repr(error)
    with pytest.raises(rk.StorageError) as info:
        raise error
    _assert_denied(info, root, retry_waits)
    with pytest.raises(rk.NotFound):
        client.resolve("wcreds@latest")

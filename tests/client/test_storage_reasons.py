"""What a storage failure is called, and which ones the one retry policy retries (issue 21)."""

from __future__ import annotations

import random

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from recordkeeper.core.errors import StorageError
from recordkeeper.core.retry import STORAGE_RETRY, RetryPolicy
from recordkeeper.storage import storage_errors


def _client_error(status: int, code: str, message: str = "") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "HeadObject",
    )


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (_client_error(503, "503"), "throttled"),  # a HEAD's 503 has no body
        (_client_error(503, "SlowDown", "Please reduce your request rate."), "throttled"),
        (_client_error(429, "TooManyRequests"), "throttled"),
        (ConnectionClosedError(endpoint_url="http://127.0.0.1:1/b/k"), "transport"),
        (ConnectionResetError("Connection reset by peer"), "transport"),
        (_client_error(502, "502"), "transport"),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), "unreachable"),
        (ConnectionRefusedError("Connection refused"), "unreachable"),
        (_client_error(403, "AccessDenied"), "denied"),
        (FileNotFoundError("no such key"), "missing"),
        (_client_error(500, "InternalError"), "error"),
    ],
)
def test_each_failure_has_its_reason(exc: Exception, reason: str) -> None:
    with pytest.raises(StorageError) as err, storage_errors("s3://b/k"):
        raise exc
    assert err.value.extra["reason"] == reason
    if reason in ("throttled", "transport"):
        assert "check the endpoint URL" not in err.value.detail
    assert STORAGE_RETRY.retries(reason) == (reason in ("throttled", "transport"))


def test_the_backoff_is_jittered_exponential_and_bounded_in_time() -> None:
    policy = RetryPolicy(base=0.1, cap=2.0, budget=10.0, max_attempts=50)
    assert policy.wait(0, 0.0, 0.999) == pytest.approx(0.0999)
    assert policy.wait(3, 0.0, 0.5) == pytest.approx(0.4)
    assert policy.wait(10, 0.0, 0.999) == pytest.approx(1.998)  # capped
    assert policy.wait(2, 9.9, 0.9) is None  # the next wait would end past the budget
    rng = random.Random(1)
    elapsed, retry = 0.0, 0
    while (wait := policy.wait(retry, elapsed, rng.random())) is not None:
        elapsed += wait
        retry += 1
    assert elapsed <= policy.budget
    assert RetryPolicy(max_attempts=3).wait(2, 0.0, 0.5) is None


@pytest.mark.parametrize(
    "exc",
    [
        # s3fs reads userinfo as part of the bucket name and quotes it bare
        _client_error(404, "NoSuchBucket", "The bucket AKIA:SeCrEt@raw does not exist"),
        FileNotFoundError("s3://AKIA:SeCrEt@raw/coco/?X-Amz-Signature=f00d&part=1"),
        PermissionError("denied for https://tok:SeCrEt@host/x"),
    ],
)
def test_a_storage_error_never_shows_credentials(exc: Exception) -> None:
    uri = "s3://AKIA:SeCrEt@raw/coco/?X-Amz-Signature=f00d&part=1"
    with pytest.raises(StorageError) as err, storage_errors(uri):
        raise exc
    shown = f"{err.value} {err.value.extra}"
    assert "SeCrEt" not in shown and "f00d" not in shown
    assert err.value.extra["uri"] == "s3://raw/coco/?part=1"


def test_a_source_with_credentials_fails_without_showing_them() -> None:
    from recordkeeper.provenance import source_identity

    with pytest.raises(StorageError) as err:
        source_identity("memory://AKIA:SeCrEt@bucket/raw/?X-Amz-Signature=f00d")
    assert "SeCrEt" not in str(err.value) and "f00d" not in str(err.value)
    assert err.value.extra["reason"] == "missing"

"""The client end to end on S3 (SeaweedFS) against the service over a real socket.

Storage is configured exactly as users do: ``storage_options`` with key/secret and
``client_kwargs.endpoint_url``.  SeaweedFS without identities accepts any key, so "wrong
credentials" cannot be produced here; a wrong endpoint and a missing bucket are tested instead.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
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


def test_writer_failure_cleans_up(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.writer_failure_cleans_up(s3_service, s3_bucket, opts)


def test_corruption_is_reported(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.corruption_is_reported(s3_service, s3_bucket, opts)


def test_cli(s3_service: LiveService, s3_bucket: str, opts: dict) -> None:
    sc.cli_roundtrip(s3_service, s3_bucket, opts)


def test_tf_dataset_over_s3(s3_service: LiveService, s3_bucket: str, opts: dict,
                            tensorflow: ModuleType) -> None:
    sc.tf_dataset_parses(s3_service, s3_bucket, opts, tensorflow)


def test_wrong_endpoint_and_missing_bucket(s3_service: LiveService, s3_bucket: str,
                                           opts: dict) -> None:
    client = s3_service.client(storage_options=opts)
    with client.writer("coco") as w:
        w.write(sc.sample_examples(1)[0])
    bad = {**opts, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9",
                                     "region_name": "us-east-1"}}
    with pytest.raises(rk.StorageError, match="unreachable") as info:
        client.resolve("coco@latest").verify(storage_options=bad)
    assert info.value.extra["reason"] == "unreachable"
    with pytest.raises(rk.StorageError, match="not found"):
        rk.Dataset.from_directory("s3://rk-no-such-bucket-x/raw", name="x", storage_options=opts)

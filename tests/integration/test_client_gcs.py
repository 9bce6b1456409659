"""The client end to end on GCS (fake-gcs-server) against the service over a real socket.

Users point gcsfs at the emulator with ``storage_options`` (``endpoint_url``, ``token="anon"``)
and ``STORAGE_EMULATOR_HOST``.  The emulator accepts any credentials, so "wrong credentials"
cannot be produced here; a wrong endpoint and a missing bucket are tested instead.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import recordkeeper as rk
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService
from tests.servers.retry_waits import scale_gcsfs_waits

pytestmark = pytest.mark.gcs


@pytest.fixture
def opts(gcs_server: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    return dict(gcs_server.storage_options)


@pytest.fixture
def gcs_service(live_service_factory: Callable[..., LiveService], gcs_bucket: str) -> LiveService:
    return live_service_factory(storage_root=f"{gcs_bucket}/datasets", allowed_roots=[gcs_bucket])


def test_publish_resolve_verify(gcs_service: LiveService, gcs_bucket: str, opts: dict) -> None:
    sc.publish_resolve_verify(gcs_service, gcs_bucket, opts)


def test_writer_and_diff(gcs_service: LiveService, gcs_bucket: str, opts: dict) -> None:
    v2 = sc.writer_and_diff(gcs_service, gcs_bucket, opts)
    identity = v2.splits["train"].shards[0].storage_identity
    assert identity["backend"] == "gcs" and identity["generation"] and identity["crc32c"]


def test_copies_under_committed_names(
    gcs_service: LiveService, gcs_bucket: str, opts: dict
) -> None:
    sc.copies_under_committed_names(gcs_service, gcs_bucket, opts)


def test_writer_failure_cleans_up(gcs_service: LiveService, gcs_bucket: str, opts: dict) -> None:
    sc.writer_failure_cleans_up(gcs_service, gcs_bucket, opts)


def test_corruption_is_reported(gcs_service: LiveService, gcs_bucket: str, opts: dict) -> None:
    sc.corruption_is_reported(gcs_service, gcs_bucket, opts)


def test_cli(gcs_service: LiveService, gcs_bucket: str, opts: dict) -> None:
    sc.cli_roundtrip(gcs_service, gcs_bucket, opts)


def test_tf_dataset_over_gcs(
    gcs_service: LiveService, gcs_bucket: str, opts: dict, tensorflow: ModuleType
) -> None:
    sc.tf_dataset_parses(gcs_service, gcs_bucket, opts, tensorflow)


def test_wrong_endpoint_and_missing_bucket(
    gcs_service: LiveService, gcs_bucket: str, opts: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gcsfs tries the refused endpoint six times, 1 s to 16 s apart (its "retries" option does
    # not change that): the same six attempts, a tenth of the ~33 s asleep
    scale_gcsfs_waits(monkeypatch, 0.1)
    client = gcs_service.client(storage_options=opts)
    with client.writer("coco") as w:
        w.write(sc.sample_examples(1)[0])
    bad = {**opts, "endpoint_url": "http://127.0.0.1:9", "retries": 1}
    with pytest.raises(rk.StorageError) as info:
        client.resolve("coco@latest").verify(storage_options=bad)
    assert info.value.extra["reason"] in ("unreachable", "error")
    with pytest.raises(rk.StorageError, match="not found"):
        rk.Dataset.from_directory("gs://rk-no-such-bucket-x/raw", name="x", storage_options=opts)

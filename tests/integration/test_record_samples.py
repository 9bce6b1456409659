"""Decoded samples of record diffs and leakage, ``@records:`` references: local disk and S3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration import _record_samples
from tests.integration.conftest import LiveService


def test_record_samples_local(live_service: LiveService, data_dir: Path) -> None:
    _record_samples.scenario(live_service, data_dir.as_uri(), {})


@pytest.mark.s3
def test_record_samples_s3(
    live_service_factory: Callable[..., LiveService], s3_bucket: str, s3_server: Any
) -> None:
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    _record_samples.scenario(service, s3_bucket, dict(s3_server.storage_options))

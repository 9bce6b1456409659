"""Record identity over real servers: local disk, and S3 (SeaweedFS)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration import _record_identity
from tests.integration.conftest import LiveService


def test_record_identity_local(live_service: LiveService, data_dir: Path) -> None:
    _record_identity.scenario(live_service, data_dir.as_uri(), {})


@pytest.mark.s3
def test_record_identity_s3(
    live_service_factory: Callable[..., LiveService], s3_bucket: str, s3_server: Any
) -> None:
    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    _record_identity.scenario(service, s3_bucket, dict(s3_server.storage_options))

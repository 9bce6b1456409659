"""The client's side of operations, against the real app in-process: request ids in errors,
failed verifications reported to the service (best-effort)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import recordkeeper as rk
from tests.apps import sqlite_app
from tests.client._records import sample_examples

pytest.importorskip("fastapi")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def http(tmp_path: Path) -> Iterator[httpx.Client]:
    with sqlite_app(tmp_path, raise_server_exceptions=False) as client:
        yield client


def test_each_call_sends_its_own_request_id_and_errors_carry_it(http: httpx.Client) -> None:
    sent: list[str] = []
    http.event_hooks["request"].append(lambda request: sent.append(request.headers["X-Request-ID"]))
    client = rk.Client(http_client=http)
    client.info()
    with pytest.raises(rk.VersionNotFound) as info:
        client.resolve("coco@latest")
    assert len(sent) == 2 and sent[0] != sent[1]
    assert info.value.request_id == sent[1]
    assert f"(request id {sent[1]})" in str(info.value)


def test_an_unreachable_service_error_names_the_request_id() -> None:
    client = rk.Client("http://127.0.0.1:9", retries=0)
    with pytest.raises(rk.ServiceUnavailable) as info:
        client.info()
    assert info.value.request_id is not None and len(info.value.request_id) == 32


def _published(client: rk.Client) -> rk.DatasetVersion:
    with client.writer("coco", shard_size=1000) as writer:
        for record in sample_examples(60):
            writer.write(record, split="train")
    return writer.version


def test_a_failed_verification_is_reported_to_the_service(http: httpx.Client) -> None:
    client = rk.Client(http_client=http)
    version = _published(client)
    assert version.verify().ok
    assert (
        http.get("/api/v1/events", params={"action": "version.verification_failed"}).json()["count"]
        == 0
    )
    lost = version.shards[0]
    Path(lost.uri.removeprefix("file://")).unlink()
    report = version.verify()
    assert not report.ok and report.problems[0].reason == "missing"
    events = http.get("/api/v1/events", params={"action": "version.verification_failed"}).json()
    (event,) = events["data"]
    assert event["version"] == version.name
    assert event["detail"]["reasons"] == {"missing": 1}
    assert event["detail"]["shards"] == [lost.name]
    metrics = http.get("/metrics").text
    assert 'recordkeeper_verification_failures_total{mode="fast",reason="missing"} 1.0' in metrics


def test_reporting_is_best_effort(http: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    client = rk.Client(http_client=http)
    version = _published(client)
    Path(version.shards[0].uri.removeprefix("file://")).unlink()
    report = version.verify()
    caplog.set_level(logging.WARNING, logger="recordkeeper")
    # The service refuses the report (no such version): nothing is raised, a warning is logged.
    assert client.registry.report_verification("nosuch@latest", report) is False
    assert "could not report the failed verification of nosuch@latest" in caplog.text


def test_the_cli_prints_the_request_id_of_a_service_error(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    sent: list[str] = []
    http.event_hooks["request"].append(lambda request: sent.append(request.headers["X-Request-ID"]))
    monkeypatch.setattr(common, "Client", lambda *a, **k: rk.Client(http_client=http))
    result = CliRunner().invoke(app, ["show", "coco@latest"])
    assert result.exit_code == common.ExitCode.NOT_FOUND
    assert result.output.strip().endswith(f"[dataset_not_found] (request id {sent[-1]})")

"""The serve machinery: the listening socket and the settings handed to worker processes."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from recordkeeper_service.server import listening_socket, metrics_directory, settings_environment
from recordkeeper_service.settings import Settings


@pytest.mark.skipif(sys.platform != "linux", reason="accepted sockets inherit options on Linux")
def test_accepted_connections_have_tcp_nodelay() -> None:
    """Without TCP_NODELAY, keep-alive answers of several workers stall ~40 ms (Nagle)."""
    server = listening_socket("127.0.0.1", 0)
    try:
        server.listen()
        assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        with socket.create_connection(server.getsockname()[:2]):
            accepted, _ = server.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        server.close()


def test_workers_rebuild_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(
        database_url="postgresql://u@db/rk",
        storage_root="s3://ml-data/datasets",
        allowed_roots=["s3://ml-data/", "gs://team-a/"],
        auth="required",
        host="0.0.0.0",
        port=9000,
        max_body_bytes=1 << 20,
        trusted_proxies=["127.0.0.1", "10.0.0.0/8"],
        log_format="text",
        request_log=False,
        metrics="public",
    )
    for name, value in settings_environment(settings).items():
        monkeypatch.setenv(name, value)
    assert Settings() == settings


def test_one_worker_keeps_metrics_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with metrics_directory(1) as directory:
        assert directory is None
        assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ


def test_several_workers_share_a_temporary_metrics_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    with metrics_directory(2) as directory:
        assert directory is not None and Path(directory).is_dir()
        assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == directory  # the workers inherit it
    assert not Path(directory).exists()
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ


def test_a_configured_metrics_directory_starts_empty(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "counter_123.db").write_bytes(b"stale")
    (tmp_path / "keep.txt").write_text("not ours")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    with metrics_directory(4) as directory:
        assert directory == str(tmp_path)
        assert not (tmp_path / "counter_123.db").exists()
    assert (tmp_path / "keep.txt").exists() and tmp_path.exists()


def test_a_worker_tunes_the_collector_once_its_app_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from recordkeeper_service import app as app_module

    built: list[Settings] = []
    monkeypatch.setattr(app_module, "create_app", lambda settings: built.append(settings) or "app")
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        assert app_module.app_from_env() == "app" and len(built) == 1
        assert gc.get_threshold() == (app_module.WORKER_GC_THRESHOLD, *threshold[1:])
        assert gc.get_freeze_count() > frozen  # what the worker loaded is out of sight
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)

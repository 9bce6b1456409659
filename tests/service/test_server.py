"""The serve machinery: the listening socket and the settings handed to worker processes."""

from __future__ import annotations

import socket
import sys

import pytest

from recordkeeper_service.server import listening_socket, settings_environment
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
    )
    for name, value in settings_environment(settings).items():
        monkeypatch.setenv(name, value)
    assert Settings() == settings

"""Fixtures for the lineage client tests: the real app in-process behind an unpluggable transport.

Import the fixtures into a test module (``from tests.client._lineage_app import client, ...``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from tests.apps import sqlite_app

__all__ = ["Switch", "app_http", "client", "publish", "runner", "switch"]


class Switch(httpx.BaseTransport):
    """A transport that can be 'unplugged': while down, every request fails to connect."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.down = False
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused (test switch)", request=request)
        self.requests.append((request.method, request.url.path))
        return self.inner.handle_request(request)


@pytest.fixture
def app_http(tmp_path: Path) -> Iterator[Any]:
    with sqlite_app(tmp_path) as http:
        yield http


@pytest.fixture
def switch(app_http: Any) -> Switch:
    return Switch(app_http._transport)


@pytest.fixture
def client(app_http: Any, switch: Switch) -> Iterator[rk.Client]:
    http = httpx.Client(transport=switch, base_url="http://testserver")
    with rk.Client(http_client=http, retries=1) as c:
        yield c
    http.close()


@pytest.fixture
def runner(client: rk.Client, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """The CLI, its commands talking to ``client`` (the in-process service)."""
    from recordkeeper import cli

    monkeypatch.setattr(cli.common, "Client", lambda *a, **k: client)
    return CliRunner()


def publish(
    client: rk.Client, tag: str, splits: tuple[str, ...] = ("train", "validation")
) -> rk.DatasetVersion:
    with client.writer("coco", desc=tag) as w:
        for split in splits:
            for i in range(5):
                w.write(f"{tag}-{split}-{i}".encode(), split=split)
    return client.resolve(w.version.name)

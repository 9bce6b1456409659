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
    """A transport to the in-process app that can be 'unplugged': while down, every request
    fails to connect.

    It hands each request to the app's ``TestClient`` and copies the answer back: Starlette's
    test client may be built on ``httpx2`` (when installed), whose transport cannot serve an
    ``httpx`` client directly.
    """

    def __init__(self, app_http: Any) -> None:
        self.app_http = app_http
        self.down = False
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused (test switch)", request=request)
        self.requests.append((request.method, request.url.path))
        answer = self.app_http.request(
            request.method,
            str(request.url),
            headers=list(request.headers.multi_items()),
            content=request.read(),
        )
        # the body is decoded already: its encoding and length headers no longer apply
        headers = [
            (k, v)
            for k, v in answer.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length")
        ]
        return httpx.Response(
            answer.status_code, headers=headers, content=answer.content, request=request
        )


@pytest.fixture
def app_http(tmp_path: Path) -> Iterator[Any]:
    with sqlite_app(tmp_path) as http:
        yield http


@pytest.fixture
def switch(app_http: Any) -> Switch:
    return Switch(app_http)


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

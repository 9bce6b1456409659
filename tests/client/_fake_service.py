"""A fake recordkeeper service: a real HTTP server on 127.0.0.1 answering crafted replies.

For tests of what the client does with answers the real service never gives (issue 21, item 7:
a server or proxy that lies).  Each route is ``(method, path)`` → a :class:`Reply`, or a
function of the :class:`Seen` request returning one; every request is recorded in
:attr:`FakeService.seen`.  A reply body is JSON-ready data, raw ``bytes``, or an iterable of
``bytes`` chunks sent with chunked transfer encoding (an endless body must still be bounded by
the test).  Unknown routes answer 404 ``not_found`` as the service does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from recordkeeper.core.shard_columns import COLUMNS

API = "/api/v1"
DIGEST = "sha256:" + "ab" * 32


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes


Route = Reply | Callable[[Seen], Reply]


class FakeService:
    """Start with ``with FakeService() as fake:``; ``fake.url`` is its base URL."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        #: answers every request the routes do not name (None: 404 not_found)
        self.fallback: Route | None = None
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def route(self, method: str, path: str, reply: Route) -> None:
        """Answer ``method API+path`` (``path`` as sent, percent-encoded) with ``reply``."""
        self.routes[(method, API + path)] = reply

    def requests(self, method: str | None = None, contains: str = "") -> list[Seen]:
        with self._lock:
            return [
                s
                for s in self.seen
                if (method is None or s.method == method) and contains in s.path
            ]

    def _answer(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
        route = self.routes.get((seen.method, seen.path), self.fallback)
        if route is None:
            return Reply(404, {"code": "not_found", "detail": f"no route {seen.path}"})
        return route(seen) if callable(route) else route


def _handler_for(service: FakeService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            reply = service._answer(Seen(self.command, parts.path, parse_qs(parts.query), body))
            payload = reply.body
            self.send_response(reply.status)
            headers = dict(reply.headers)
            if isinstance(payload, bytes | bytearray):
                chunks: Iterable[bytes] | None = None
                data = bytes(payload)
            elif isinstance(payload, Iterator):
                chunks, data = payload, b""
            elif payload is None:
                chunks, data = None, b""
            else:
                chunks, data = None, json.dumps(payload).encode()
                headers.setdefault("Content-Type", "application/json")
            if chunks is not None:
                headers["Transfer-Encoding"] = "chunked"
            else:
                headers.setdefault("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                if chunks is None:
                    self.wfile.write(data)
                    return
                for chunk in chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = _serve

    return Handler


# -- what the real service answers, to be bent by each test ------------------------------------


def info(roots: Sequence[str], storage_root: str | None = None) -> dict[str, Any]:
    return {
        "version": "0",
        "naming_convention": "rk1",
        "storage_root": storage_root or roots[0],
        "allowed_roots": list(roots),
        "auth": "open",
        "max_shards_per_request": 10_000,
        "max_body_bytes": 2**28,
        "max_small_body_bytes": 2**20,
        "max_json_object_bytes": 2**16,
    }


def version(
    name: str = "coco_20261201_v1",
    *,
    prefix: str = "file:///nowhere/coco/",
    shard_count: int = 1,
    state: str = "committed",
    **extra: Any,
) -> dict[str, Any]:
    number = None if state == "staged" else 1
    return {
        "name": name,
        "dataset": name.split("_", 1)[0],
        "number": number,
        "date": "2026-12-01",
        "desc": None,
        "state": state,
        "content_digest": DIGEST if state == "committed" else None,
        "schema_digest": None,
        "storage_prefix": prefix,
        "record_count": 10 * shard_count,
        "shard_count": shard_count,
        "size": 100 * shard_count,
        "convention": "rk1",
        "metadata": {},
        "staged_name": None,
        **extra,
    }


def shard_page(
    prefix: str,
    names: Sequence[str],
    *,
    version_name: str = "coco_20261201_v1",
    next: str | None = None,
    shard_count: int | None = None,
    first_index: int = 0,
) -> dict[str, Any]:
    """A compact page of shards ``prefix + name`` (split ``train``, indices from
    ``first_index``), as ``GET /versions/{name}/shards?form=compact`` answers it."""
    n = len(names)
    total = shard_count if shard_count is not None else n
    values: dict[str, list[Any]] = {
        "split": ["train"] * n,
        "index": list(range(first_index, first_index + n)),
        "count": [total] * n,
        "uri": list(names),
        "compression": ["none"] * n,
        "size": [100] * n,
        "sha256": ["ab" * 32] * n,
        "crc32c": ["0" * 8] * n,
        "records_sha256": ["cd" * 32] * n,
        "record_count": [10] * n,
        "format": ["tfrecord"] * n,
        "storage_identity": [None] * n,
        "schema_digest": [None] * n,
    }
    assert set(values) == set(COLUMNS)
    return {
        "version": version_name,
        "content_digest": DIGEST,
        "shard_count": total,
        "limit": 10_000,
        "next": next,
        "shards": None,
        "compact": {"uri_prefix": prefix, "columns": values},
    }

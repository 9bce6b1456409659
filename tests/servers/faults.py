"""A fault-injecting HTTP reverse proxy for the S3 server and the GCS emulator.

Standard library only (``http.server`` threads + ``http.client``): clients use the proxy's
``endpoint_url`` instead of the server's; each request is forwarded unchanged (its ``Host``
header too, so S3 signatures still match) unless a :class:`Rule` picks it, then one fault is
injected:

=============  ================================================================================
``503``        not forwarded; ``503`` with S3's ``SlowDown`` XML body or GCS's JSON error body
``reset``      forwarded; the answer's headers and half its body are sent, then the connection
               is reset (``SO_LINGER`` 0 → RST); an answer without a body is reset before any byte
``slow``       forwarded after ``delay`` seconds (at most :data:`MAX_DELAY`)
``truncate``   forwarded; headers with the full ``Content-Length``, half the body, then a clean
               close (FIN): the body is shorter than announced
``flip``       forwarded; one bit of the body's middle byte is flipped (length and headers
               unchanged): damage in transit that no TCP or HTTP check catches
=============  ================================================================================

A rule matches by method and a path regular expression (path + query), skips the first
``after`` matches and then fires ``times`` times (``None``: every match), or on a seeded
``fraction`` of matches: the same requests fail on every run.  Everything is bounded: upstream
calls time out, delays are capped, the server thread stops with :meth:`FaultProxy.stop`.

Locations and JSON bodies naming the upstream (fake-gcs-server's resumable-upload
``Location``, ``selfLink``/``mediaLink``) are rewritten to the proxy so every later request
goes through it too.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FAULTS", "MAX_DELAY", "FaultProxy", "Rule"]

FAULTS = ("503", "reset", "slow", "truncate", "flip")
#: the longest a ``slow`` fault may hold a request
MAX_DELAY = 5.0
_UPSTREAM_TIMEOUT = 30.0
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "expect"}

_S3_SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>"
)
_GCS_503 = (
    b'{"error":{"code":503,"message":"Backend Error (injected)",'
    b'"errors":[{"reason":"backendError","message":"Backend Error (injected)"}]}}'
)


@dataclass
class Rule:
    """Inject ``fault`` into requests matching ``method`` (None: any) and ``path`` (regex)."""

    fault: str
    method: str | None = None
    path: str = ""
    after: int = 0
    times: int | None = 1
    fraction: float | None = None
    seed: int = 0
    delay: float = 1.0
    matched: int = 0
    fired: int = 0
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r}; one of {FAULTS}")
        if not 0 <= self.delay <= MAX_DELAY:
            raise ValueError(f"delay must be within 0..{MAX_DELAY} s")
        self._random = random.Random(self.seed)
        self._pattern = re.compile(self.path)

    def pick(self, method: str, target: str) -> bool:
        """True when this request gets the fault (counts matches; call once per request)."""
        if self.method is not None and method.upper() != self.method.upper():
            return False
        if not self._pattern.search(target):
            return False
        self.matched += 1
        if self.matched <= self.after:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        if self.fraction is not None and self._random.random() >= self.fraction:
            return False
        self.fired += 1
        return True


@dataclass(frozen=True)
class Seen:
    """One request the proxy handled: what was asked, and which fault (if any) it got."""

    method: str
    target: str
    status: int
    fault: str | None


class FaultProxy:
    """A running proxy: ``endpoint_url``, :meth:`inject`, :meth:`clear`, ``log``, :meth:`stop`."""

    def __init__(self, upstream: str, kind: str) -> None:
        if kind not in ("s3", "gcs"):
            raise ValueError("kind is 's3' or 'gcs'")
        parts = urlsplit(upstream)
        self.upstream = upstream.rstrip("/")
        self.kind = kind
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self.log: list[Seen] = []
        handler = type("Handler", (_Handler,), {"proxy": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"fault-proxy:{kind}",
            daemon=True,
        )
        self._thread.start()

    def inject(self, fault: str, **match: Any) -> Rule:
        """Add a :class:`Rule` (keywords as its fields) and return it (``.fired`` counts)."""
        rule = Rule(fault, **match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self, *, log: bool = True) -> None:
        """Remove every rule (and forget the log): the proxy forwards everything again."""
        with self._lock:
            self._rules.clear()
            if log:
                self.log.clear()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _pick(self, method: str, target: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.pick(method, target):
                    return rule
        return None

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.log.append(seen)

    def _forward(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=_UPSTREAM_TIMEOUT)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() in _HOP or name.lower() == "content-length":
                    continue
                conn.putheader(name, value)
            if body or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            out = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
            return response.status, response.reason, out, data
        finally:
            conn.close()


class _Handler(BaseHTTPRequestHandler):
    proxy: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        proxy = self.proxy
        method, target = self.command, self.path
        body = self._body()
        rule = proxy._pick(method, target)
        fault = rule.fault if rule else None
        if fault == "503":
            payload, ctype = (
                (_S3_SLOWDOWN, "application/xml")
                if proxy.kind == "s3"
                else (_GCS_503, "application/json")
            )
            # recorded before the answer leaves, as below: once the client has its answer the
            # test may read the log at once
            proxy._record(Seen(method, target, 503, fault))
            self._send(503, "Slow Down", [("Content-Type", ctype), ("Retry-After", "0")], payload)
            return
        if fault == "slow":
            assert rule is not None
            time.sleep(min(rule.delay, MAX_DELAY))
        status, reason, headers, data = proxy._forward(
            method, target, list(self.headers.items()), body
        )
        headers, data = self._rewrite(headers, data)
        proxy._record(Seen(method, target, status, fault))
        if fault == "flip" and data and method != "HEAD":
            damaged = bytearray(data)
            damaged[len(data) // 2] ^= 0x10
            data = bytes(damaged)
        if fault in ("reset", "truncate"):
            self._send_partial(status, reason, headers, data, reset=fault == "reset")
            return
        self._send(status, reason, headers, data)

    def _rewrite(
        self, headers: list[tuple[str, str]], data: bytes
    ) -> tuple[list[tuple[str, str]], bytes]:
        up, mine = self.proxy.upstream, self.proxy.endpoint_url
        headers = [
            (k, v.replace(up, mine)) if k.lower() == "location" else (k, v) for k, v in headers
        ]
        ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "")
        if "json" in ctype and up.encode() in data:
            data = data.replace(up.encode(), mine.encode())
        return headers, data

    def _send(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> None:
        self._head(status, reason, headers, len(data))
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _head(self, status: int, reason: str, headers: list[tuple[str, str]], length: int) -> None:
        """Status line and headers; a HEAD answer keeps the upstream's Content-Length."""
        self.send_response(status, reason)
        keep = self.command == "HEAD"
        for name, value in headers:
            if keep or name.lower() != "content-length":
                self.send_header(name, value)
        if not keep:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def _send_partial(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes, *, reset: bool
    ) -> None:
        if reset and (not data or self.command == "HEAD"):
            self._abort(reset=True)
            return
        self._head(status, reason, headers, max(len(data), 1))
        if self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self._abort(reset=reset)

    def _abort(self, *, reset: bool) -> None:
        self.close_connection = True
        if reset:
            # l_onoff=1, l_linger=0: close() sends RST instead of FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            self.connection.shutdown(socket.SHUT_WR)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

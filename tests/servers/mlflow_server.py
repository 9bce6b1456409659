"""A real ``mlflow server`` (SQLite backend, local artifacts) on a free 127.0.0.1 port."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers.ports import LOCALHOST, ServerProcess, free_port, http_ok

__all__ = ["mlflow_server"]


@contextmanager
def mlflow_server(workdir: Path, timeout: float = 120.0) -> Iterator[str]:
    """Start ``mlflow server`` (the venv's) with its database and artifacts in ``workdir``;
    yields its URL once ``GET /health`` answers, stops it (and removes ``workdir``) after."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://{LOCALHOST}:{port}"
    argv = [
        str(Path(sys.executable).parent / "mlflow"),
        "server",
        "--host",
        LOCALHOST,
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{workdir / 'mlflow.db'}",
        "--default-artifact-root",
        (workdir / "artifacts").as_uri(),
    ]
    proc = ServerProcess("mlflow", argv, workdir / "mlflow.log", cwd=workdir)
    try:
        proc.wait_until(lambda: http_ok(f"{url}/health", timeout=1.0), timeout, f"GET {url}/health")
        yield url
    finally:
        proc.stop(grace=5.0)
        shutil.rmtree(workdir, ignore_errors=True)

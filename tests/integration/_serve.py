"""``recordkeeper serve`` as a separate process (``python -m recordkeeper_service serve``) on a
free loopback port, with its log (standard error) in a file: what an operator runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import answering, wait_for


@dataclass
class ServeProcess:
    """A running ``serve`` process: its URL, log file and the environment it was given."""

    url: str
    log: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]

    def log_lines(self) -> list[dict[str, Any]]:
        """The JSON lines of the log so far (other lines, e.g. the start banner, skipped; a last
        line the service is still writing is not one yet)."""
        text = self.log.read_text()
        complete = text[: text.rfind("\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.startswith("{")]

    def wait_for_log(
        self, match: Callable[[dict[str, Any]], bool], *, count: int = 1
    ) -> list[dict[str, Any]]:
        """The log's JSON lines for which ``match`` is true, once there are ``count`` of them:
        the service writes a request's log line after it sent the response."""

        def enough() -> list[dict[str, Any]]:
            found = [line for line in self.log_lines() if match(line)]
            return found if len(found) >= count else []

        return wait_for(enough, what=f"{count} matching log line(s) in {self.log}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(
    *,
    database_url: str,
    storage_root: str,
    log: Path,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServeProcess]:
    """Start ``serve`` and wait until ``/readyz`` answers; stop its process group at exit."""
    port = free_port()
    environment = {
        **os.environ,
        "RECORDKEEPER_DATABASE_URL": database_url,
        "RECORDKEEPER_STORAGE_ROOT": storage_root,
        "RECORDKEEPER_ALLOWED_ROOTS": storage_root,
        "RECORDKEEPER_LOG_LEVEL": "info",
        **(env or {}),
    }
    if "PROMETHEUS_MULTIPROC_DIR" not in (env or {}):  # never one inherited from the tests
        environment.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "recordkeeper_service", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", str(workers)]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    served = ServeProcess(f"http://127.0.0.1:{port}", log, environment, process)
    try:
        _wait_ready(served, workers)
        yield served
    finally:
        _stop(process)


def _wait_ready(served: ServeProcess, workers: int) -> None:
    answers = answering(f"{served.url}/readyz", process=served.process, log=served.log)

    def ready() -> bool:
        if served.process.poll() is not None:
            pytest.fail(f"serve exited ({served.process.returncode}):\n{served.log.read_text()}")
        # Every worker logs "Application startup complete." once its app is built.
        if served.log.read_text().count("Application startup complete") < workers:
            return False
        return answers()

    wait_for(ready, timeout=90, what=f"serve on {served.url} with {workers} worker(s) ready")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)

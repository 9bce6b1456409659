"""The quickstart's ``python3 dev.py serve`` behaves like the server it starts (issue 26, 7b): a
stop signal sent to it stops the service (it left the server running), and after ``dev.py test``
installed everything it starts without installing again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers.ports import LOCALHOST, free_port, tcp_port_open
from tests.waiting import answering, wait_for

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals to a POSIX process")


@pytest.mark.slow
def test_stopping_dev_py_serve_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),  # the embedded default's database and storage
        "PYTHONPATH": "",
    }
    log = tmp_path / "serve.log"
    installed = _dev_module().stamp("all,dev").exists()  # by `dev.py test`, as in CI
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "dev.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://{LOCALHOST}:{port}/api/v1/info"
        wait_for(answering(url, process=process, log=log), timeout=600, what="dev.py serve")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        wait_for(
            lambda: not tcp_port_open(LOCALHOST, port),
            timeout=30,
            what=f"the server on port {port} to stop after dev.py was stopped",
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    if installed:  # the test install has the server's extra: no second install
        assert "installing" not in log.read_text(errors="replace")


def _dev_module() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

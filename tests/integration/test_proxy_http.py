"""Issue 8, failures 3 and 7, over a real socket.

Failure 3: ``recordkeeper serve`` with ``RECORDKEEPER_AUTH=auto`` on a loopback bind behind a
same-host proxy served every caller as the anonymous admin (a request with ``X-Forwarded-For``
minted an admin token).  Now a request that came through a proxy — any forwarding header, or a
peer in ``RECORDKEEPER_TRUSTED_PROXIES`` — needs a token.

Failure 7: 503s carried no ``Retry-After`` and showed the database's connection text to
unauthenticated callers; a trailing slash was redirected (307) before authentication to a
``Location`` built from the ``Host`` header; the 405 ``Allow`` header was empty; the OpenAPI
document did not describe the extra fields of error bodies.

The service runs as users run it (``python -m recordkeeper_service serve``, which configures
uvicorn itself: ``server.py``), except for the 503 tests, which need a database that is down
while the app serves, so they run the app under ``uvicorn.Server`` with no start-up check.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from recordkeeper_service import migrate
from recordkeeper_service.db import Database
from tests.waiting import answering, started, wait_for

API = "/api/v1"
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """``serve(**env)`` → URL of ``recordkeeper serve`` on a fresh SQLite registry, auth=auto."""
    processes: list[subprocess.Popen[bytes]] = []

    def start(**extra_env: str) -> str:
        base = tmp_path_factory.mktemp("rk-proxy")
        url = f"sqlite:///{base / 'registry.db'}"
        database = Database(url, pool_size=1)
        try:
            migrate.upgrade(database)
        finally:
            database.dispose()
        store = (base / "store").as_uri() + "/"
        port = free_port()
        env = {
            **os.environ,
            "RECORDKEEPER_DATABASE_URL": url,
            "RECORDKEEPER_STORAGE_ROOT": store,
            "RECORDKEEPER_ALLOWED_ROOTS": store,
            "RECORDKEEPER_AUTH": "auto",
            "RECORDKEEPER_HOST": "127.0.0.1",
            "RECORDKEEPER_LOG_LEVEL": "warning",
            **extra_env,
        }
        log = base / "serve.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "recordkeeper_service", "serve", "--port", str(port)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        processes.append(process)
        service = f"http://127.0.0.1:{port}"
        wait_for(
            answering(f"{service}/healthz", process=process, log=log),
            timeout=60,
            what=f"the service on {service}",
        )
        return service

    yield start
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


# -- failure 3: a proxy makes everyone admin -----------------------------------------------------


@pytest.mark.parametrize(
    "forwarding",
    [
        {"X-Forwarded-For": "203.0.113.7"},
        {"X-Forwarded-For": "127.0.0.1"},  # a client claiming to be local changes nothing
        {"Forwarded": "for=203.0.113.7;proto=https"},
        {"X-Real-IP": "203.0.113.7"},
    ],
    ids=["x-forwarded-for", "x-forwarded-for-loopback", "forwarded", "x-real-ip"],
)
def test_a_proxied_request_cannot_mint_a_token(
    serve: Callable[..., str], forwarding: dict[str, str]
) -> None:
    url = serve()
    new_token = {"name": "intruder", "scope": "admin"}
    minted = httpx.post(f"{url}{API}/tokens", json=new_token, headers=forwarding)
    assert minted.status_code == 401, minted.text
    assert minted.json()["code"] == "unauthorized"
    assert "proxy" in minted.json()["detail"]
    for path in ("/datasets", "/tokens", "/events", "/info"):
        assert httpx.get(f"{url}{API}{path}", headers=forwarding).status_code == 401, path
    # the local user, talking to the loopback port directly, still works without a token
    tokens = httpx.get(f"{url}{API}/tokens")
    assert tokens.status_code == 200
    assert tokens.json()["count"] == 0  # nothing was minted
    assert httpx.get(f"{url}{API}/info").json()["auth"] == "open"


def test_requests_from_a_trusted_proxy_need_a_token(serve: Callable[..., str]) -> None:
    """A proxy on this host that adds no forwarding header is named in the trusted list."""
    url = serve(RECORDKEEPER_TRUSTED_PROXIES="127.0.0.1,::1")
    response = httpx.post(f"{url}{API}/tokens", json={"name": "x", "scope": "admin"})
    assert response.status_code == 401, response.text
    assert httpx.get(f"{url}{API}/datasets").status_code == 401
    assert httpx.get(f"{url}/healthz").status_code == 200  # probes stay open


def test_a_page_of_another_site_cannot_act_as_the_local_admin(serve: Callable[..., str]) -> None:
    """auth=auto, loopback: what a browser sends for a page of another site (a cross-site
    form or fetch; a page of a name rebound to 127.0.0.1) gets 401; the service's own pages
    and programs are served (tests/integration/test_ui.py drives the UI in Chromium)."""
    url = serve()
    host = url.removeprefix("http://")
    new_token = {"name": "intruder", "scope": "admin"}
    for headers in (
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
        {"Host": "attacker.example", "Origin": "http://attacker.example"},  # DNS rebinding
        {"Host": "attacker.example", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"},
    ):
        minted = httpx.post(f"{url}{API}/tokens", json=new_token, headers=headers)
        assert minted.status_code == 401, (headers, minted.text)
        assert "other sites" in minted.json()["detail"]
        assert minted.headers["WWW-Authenticate"].startswith("Bearer")
    own = {"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
    assert httpx.get(f"{url}{API}/tokens", headers=own).json()["count"] == 0  # nothing minted
    assert httpx.get(f"{url}{API}/info").json()["auth"] == "open"


# -- failure 7: HTTP details ---------------------------------------------------------------------


def test_trailing_slash_is_not_redirected(serve: Callable[..., str]) -> None:
    url = serve()
    for path in (f"{API}/datasets/", f"{API}/tokens/", "/healthz/"):
        response = httpx.get(f"{url}{path}", headers={"Host": "evil.example"})
        assert response.status_code == 404, (path, response.status_code, response.headers)
        assert "location" not in response.headers
        assert response.json()["code"] == "not_found"
        assert "no trailing slash" in response.json()["detail"]


def test_405_lists_every_allowed_method(serve: Callable[..., str]) -> None:
    url = serve()
    cases = {
        f"{API}/datasets": "GET, HEAD, POST",
        f"{API}/tokens": "GET, HEAD, POST",
        f"{API}/datasets/coco/versions": "GET, HEAD, POST",
        f"{API}/datasets/coco/aliases/prod": "DELETE, PUT",
        f"{API}/models/m/checkpoints/c": "GET, HEAD, PUT",
        "/healthz": "GET, HEAD",
    }
    for path, allow in cases.items():
        response = httpx.request("PATCH", f"{url}{path}")
        assert response.status_code == 405, path
        assert response.json()["code"] == "method_not_allowed"
        assert response.headers["Allow"] == allow, path
        for method in allow.split(", "):  # every method listed really answers (not 405)
            body = {} if method in ("POST", "PUT") else None
            assert httpx.request(method, f"{url}{path}", json=body).status_code != 405


def test_head_over_a_real_socket(serve: Callable[..., str]) -> None:
    """``curl -I``: uvicorn sends the GET's status and headers and no body (head.py)."""
    url = serve()
    for path in (f"{API}/datasets", "/healthz", f"{API}/versions/nosuch@latest"):
        get, head = httpx.get(f"{url}{path}"), httpx.head(f"{url}{path}")
        assert head.status_code == get.status_code, path
        assert head.content == b"", path
        assert head.headers["content-length"] == get.headers["content-length"], path
        assert head.headers.get("x-error-code") == get.headers.get("x-error-code"), path


def test_openapi_describes_every_extra_error_field(serve: Callable[..., str]) -> None:
    """Each extra field docs/rest-api.md lists for an error code is a property of ErrorOut."""
    url = serve()
    error_out = httpx.get(f"{url}/openapi.json").json()["components"]["schemas"]["ErrorOut"]
    properties = error_out["properties"]
    documented: dict[str, set[str]] = {}
    for line in (REPO / "docs" / "rest-api.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) < 6 or not re.fullmatch(r"\d{3}", cells[1]):
            continue
        code = cells[2].strip("`")
        for name in re.findall(r"`([a-z_]+)`", cells[4]):
            documented.setdefault(name, set()).add(code)
    assert {"state", "shard", "errors", "required_scope", "missing"} <= set(documented)
    for name, codes in documented.items():
        assert name in properties, f"ErrorOut does not describe {name!r} (sent by {codes})"
        for code in codes:
            assert f"`{code}`" in properties[name]["description"], (name, code)


# -- failure 7: 503 ------------------------------------------------------------------------------


@pytest.fixture
def database_down(tmp_path: Path) -> Iterator[str]:
    """The app (auth=required) served on a real socket while its PostgreSQL is unreachable."""
    uvicorn = pytest.importorskip("uvicorn")
    from recordkeeper_service.app import create_app
    from recordkeeper_service.settings import Settings

    dead = free_port()  # nothing listens there
    settings = Settings(
        database_url=f"postgresql://recordkeeper:secret@127.0.0.1:{dead}/registry",
        storage_root=(tmp_path / "store").as_uri(),
        auth="required",
        host="127.0.0.1",
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(settings),
        host="127.0.0.1",
        port=port,
        log_level="critical",
        lifespan="off",  # the start-up check would refuse to start on a dead database
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(started(server, thread), timeout=30, what="uvicorn started")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def _leaks(detail: str) -> bool:
    return any(word in detail.lower() for word in ("127.0.0.1", "port", "refused", "recordkeeper@"))


def test_503_has_retry_after_and_no_database_text(database_down: str) -> None:
    bad_token = {"Authorization": "Bearer rk_" + "x" * 40}
    for response in (
        httpx.get(f"{database_down}{API}/datasets", headers=bad_token),
        httpx.post(f"{database_down}{API}/tokens", json={}, headers=bad_token),
        httpx.get(f"{database_down}/readyz"),
    ):
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["code"] in ("service_unavailable", "not_ready")
        assert response.headers["X-Error-Code"] == body["code"]
        assert int(response.headers["Retry-After"]) > 0
        assert not _leaks(body["detail"]), body

"""Authentication: open only on loopback with auth=auto; tokens, scopes, revocation."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository, hash_secret
from recordkeeper_service.settings import Settings
from recordkeeper_service.startup import StartupError
from tests.service._helpers import API, error, stage


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def make_token(database_url: str, scope: str, name: str | None = None) -> str:
    database = Database(database_url, pool_size=1)
    try:
        _record, secret = TokenRepository(database).create(name or scope, scope, actor="test")
    finally:
        database.dispose()
    return secret


def test_open_on_loopback(client: TestClient) -> None:
    assert client.get(f"{API}/info").json()["auth"] == "open"
    assert stage(client)["created_by"] == "anonymous"


def test_token_sent_in_open_mode_is_still_checked(client: TestClient, database_url: str) -> None:
    error(client.get(f"{API}/datasets", headers=bearer("rk_wrong")), 401, "unauthorized")
    secret = make_token(database_url, "read", "reader")
    assert client.get(f"{API}/datasets", headers=bearer(secret)).status_code == 200
    body = error(
        client.post(f"{API}/datasets", json={"name": "x"}, headers=bearer(secret)), 403, "forbidden"
    )
    assert body["required_scope"] == "write"


def test_required_mode(make_client: Callable[..., TestClient], database_url: str) -> None:
    secrets = {scope: make_token(database_url, scope) for scope in ("read", "write", "admin")}
    client = make_client(auth="required")
    error(client.get(f"{API}/info"), 401, "unauthorized")
    error(client.get(f"{API}/datasets"), 401, "unauthorized")
    error(
        client.get(f"{API}/datasets", headers={"Authorization": "Basic abc"}), 401, "unauthorized"
    )
    error(client.get(f"{API}/datasets", headers={"Authorization": "Bearer "}), 401, "unauthorized")
    # probes need no token
    assert client.get("/healthz").status_code == 200

    read, write, admin = (bearer(secrets[s]) for s in ("read", "write", "admin"))
    assert client.get(f"{API}/info", headers=read).json()["auth"] == "token"
    error(client.post(f"{API}/datasets/coco/versions", json={}, headers=read), 403, "forbidden")
    staged = client.post(f"{API}/datasets/coco/versions", json={}, headers=write)
    assert staged.status_code == 201
    assert staged.json()["created_by"] == "write"
    body = error(client.get(f"{API}/tokens", headers=write), 403, "forbidden")
    assert body["required_scope"] == "admin"
    assert client.get(f"{API}/tokens", headers=admin).status_code == 200


def test_token_lifecycle_over_the_api(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    admin = bearer(make_token(database_url, "admin", "root"))
    client = make_client(auth="required")
    created = client.post(f"{API}/tokens", json={"name": "ci", "scope": "write"}, headers=admin)
    assert created.status_code == 201
    body = created.json()
    secret = body["token"]
    assert secret.startswith("rk_") and len(secret) > 40
    assert body["name"] == "ci" and body["scope"] == "write"

    listed = client.get(f"{API}/tokens", headers=admin)
    assert secret not in listed.text
    assert hash_secret(secret) not in listed.text
    assert {t["name"] for t in listed.json()["data"]} == {"root", "ci"}

    made = client.post(f"{API}/datasets", json={"name": "coco"}, headers=bearer(secret))
    assert made.status_code == 201
    assert made.json()["created_by"] == "ci"
    token = next(
        t for t in client.get(f"{API}/tokens", headers=admin).json()["data"] if t["name"] == "ci"
    )
    assert token["last_used_at"] is not None

    assert client.delete(f"{API}/tokens/{body['id']}", headers=admin).status_code == 204
    assert client.delete(f"{API}/tokens/{body['id']}", headers=admin).status_code == 204
    revoked = error(client.get(f"{API}/datasets", headers=bearer(secret)), 401, "unauthorized")
    assert "revoked" in revoked["detail"]
    error(client.delete(f"{API}/tokens/999999", headers=admin), 404, "token_not_found")
    error(
        client.post(f"{API}/tokens", json={"name": "x", "scope": "root"}, headers=admin),
        422,
        "invalid_request",
    )
    error(
        client.post(f"{API}/tokens", json={"name": "bad name!", "scope": "read"}, headers=admin),
        422,
        "invalid_request",
    )


def test_non_loopback_never_open(make_client: Callable[..., TestClient], database_url: str) -> None:
    secret = make_token(database_url, "write")
    client = make_client(host="0.0.0.0")
    error(client.get(f"{API}/datasets"), 401, "unauthorized")
    assert client.get(f"{API}/datasets", headers=bearer(secret)).status_code == 200


def test_non_loopback_without_tokens_refuses_to_start(
    make_settings: Callable[..., Settings],
) -> None:
    from recordkeeper_service.app import create_app

    app = create_app(make_settings(host="0.0.0.0"))
    with pytest.raises(StartupError, match="token create"), TestClient(app):
        pass


def test_required_on_loopback_without_tokens_starts(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(auth="required")
    error(client.get(f"{API}/datasets"), 401, "unauthorized")


@pytest.mark.parametrize(
    ("headers", "peer", "proxied"),
    [
        ([], "127.0.0.1", False),
        ([(b"x-forwarded-for", b"127.0.0.1")], "127.0.0.1", True),
        ([(b"forwarded", b"for=127.0.0.1")], "127.0.0.1", True),
        ([(b"via", b"1.1 nginx")], "127.0.0.1", True),
        ([], "10.1.2.3", True),  # a trusted proxy's peer address, no header
        ([], "::1", True),
        ([], "10.2.0.1", False),
        ([], "testclient", False),  # not an address: not a listed proxy
    ],
)
def test_proxied_requests(headers: list[tuple[bytes, bytes]], peer: str, proxied: bool) -> None:
    from recordkeeper.core.errors import AuthenticationRequired
    from recordkeeper_service.auth import Authenticator

    authenticator = Authenticator(
        None,  # type: ignore[arg-type]  # no token is looked up here
        open_access=True,
        trusted_proxies=["10.1.0.0/16", "::1"],
    )
    scope = {"type": "http", "headers": headers, "client": (peer, 5000)}
    assert authenticator.proxied(scope) is proxied
    refusal = authenticator.open_access_refusal(scope)
    if proxied:
        with pytest.raises(AuthenticationRequired, match="relayed by a proxy"):
            authenticator.authenticate(None, refusal=refusal)
    else:
        assert authenticator.authenticate(None, refusal=refusal).name == "anonymous"


OWN = [(b"host", b"127.0.0.1:8080")]


@pytest.mark.parametrize(
    ("headers", "foreign"),
    [
        ([], None),  # a program (client, curl): no browser headers
        ([(b"host", b"anything.example")], None),  # a program may name any host
        ([*OWN, (b"sec-fetch-site", b"same-origin"), (b"origin", b"http://127.0.0.1:8080")], None),
        ([*OWN, (b"sec-fetch-site", b"none"), (b"sec-fetch-mode", b"navigate")], None),
        ([(b"host", b"localhost:8080"), (b"origin", b"http://localhost:8080")], None),
        ([(b"host", b"[::1]:8080"), (b"origin", b"http://[::1]:8080")], None),
        ([(b"host", b"ui.localhost:8080"), (b"sec-fetch-site", b"same-origin")], None),
        ([*OWN, (b"origin", b"http://evil.example")], "another origin"),
        ([*OWN, (b"origin", b"null")], "another origin"),
        ([*OWN, (b"origin", b"http://127.0.0.1:9999")], "another origin"),
        ([*OWN, (b"sec-fetch-site", b"cross-site")], "another site"),
        ([*OWN, (b"sec-fetch-site", b"same-site")], "another site"),
        # DNS rebinding: the browser thinks the page and the service are one origin
        (
            [
                (b"host", b"attacker.example:8080"),
                (b"origin", b"http://attacker.example:8080"),
                (b"sec-fetch-site", b"same-origin"),
            ],
            "not a loopback name",
        ),
        ([(b"host", b"127.0.0.1.evil.example"), (b"sec-fetch-mode", b"cors")], "not a loopback"),
    ],
)
def test_pages_of_other_sites_are_never_open(
    headers: list[tuple[bytes, bytes]], foreign: str | None
) -> None:
    from recordkeeper.core.errors import AuthenticationRequired
    from recordkeeper_service.auth import Authenticator, foreign_page

    scope = {"type": "http", "scheme": "http", "headers": headers, "client": ("127.0.0.1", 1)}
    found = foreign_page(scope)
    assert (found is None) if foreign is None else (foreign in str(found)), found
    authenticator = Authenticator(None, open_access=True)  # type: ignore[arg-type]
    refusal = authenticator.open_access_refusal(scope)
    if foreign is None:
        assert authenticator.authenticate(None, refusal=refusal).name == "anonymous"
    else:
        with pytest.raises(AuthenticationRequired, match="pages of other sites"):
            authenticator.authenticate(None, refusal=refusal)


def test_a_cross_site_form_cannot_act_as_the_local_admin(client: TestClient) -> None:
    """auth=auto on loopback: a page of another site posting to the service gets 401 and
    changes nothing; the service's own pages (same origin) and programs are served."""
    from tests.service._helpers import stage

    staged = stage(client, "coco")["name"]
    abandon = f"{API}/versions/{staged}/abandon"
    cross = {
        "host": "127.0.0.1:8080",
        "origin": "http://evil.example",
        "sec-fetch-site": "cross-site",
    }
    error(client.post(abandon, headers=cross), 401, "unauthorized")
    rebound = {"host": "evil.example:8080", "origin": "http://evil.example:8080"}
    body = error(
        client.post(f"{API}/tokens", json={"name": "x", "scope": "admin"}, headers=rebound),
        401,
        "unauthorized",
    )
    assert "not a loopback name" in body["detail"]
    assert client.get(f"{API}/versions/{staged}").json()["state"] == "staged"
    info = client.get(f"{API}/info", headers={"host": "127.0.0.1:8080", "origin": "null"})
    assert info.status_code == 401
    own = {
        "host": "127.0.0.1:8080",
        "origin": "http://127.0.0.1:8080",
        "sec-fetch-site": "same-origin",
    }
    assert client.post(abandon, headers=own).status_code == 200


def test_one_authorization_header_and_no_token_named_anonymous(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    secret = make_token(database_url, "admin")
    client = make_client(auth="required")
    twice = [("authorization", f"Bearer {secret}"), ("authorization", "Bearer rk_other")]
    body = error(client.get(f"{API}/datasets", headers=twice), 401, "unauthorized")
    assert "one Authorization header" in body["detail"]
    assert client.get(f"{API}/datasets", headers=bearer(secret)).status_code == 200
    reserved = {"name": "anonymous", "scope": "read"}
    body = error(
        client.post(f"{API}/tokens", json=reserved, headers=bearer(secret)), 422, "invalid_request"
    )
    assert "reserved" in body["detail"]

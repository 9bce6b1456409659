"""Every route by every kind of caller: a new route cannot ship unprotected.

The routes are enumerated from the app itself.  Each must appear in :data:`ROUTE_SCOPES` (the
scope it needs; ``None`` = public probe) — a route missing from the table fails
:func:`test_every_route_is_in_the_table`, so whoever adds one decides its scope here.  Then every
route is called under ``RECORDKEEPER_AUTH=required`` with no token, a garbage token, a revoked
token and read / write / admin tokens:

* no token, garbage, revoked → ``401 unauthorized`` (public probes: never 401/403);
* a token below the route's scope → ``403 forbidden`` with ``required_scope``;
* a token at or above it → anything but 401/403 authentication answers (the dummy path values
  and the empty body then get 404/422/...).

Under ``RECORDKEEPER_AUTH=auto`` on loopback a request without a token carrying a forwarding
header (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``) gets 401 on every protected route:
it came through a proxy, the caller is not local (docs/security.md).

Every error body validates against the OpenAPI ``ErrorOut`` model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from recordkeeper_service.auth import SCOPE_RANK
from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository
from recordkeeper_service.routes.common import ErrorOut
from recordkeeper_service.routes.lineage import HotLineageRoute
from recordkeeper_service.routes.versions import HotResolveRoute
from tests.service._helpers import API

#: (method, path template) → the scope the route needs; ``None``: public (no token ever).
ROUTE_SCOPES: dict[tuple[str, str], str | None] = {
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", "/metrics"): "read",  # RECORDKEEPER_METRICS=read, the default
    ("GET", f"{API}/info"): "read",
    ("GET", f"{API}/whoami"): "read",
    ("GET", f"{API}/versions/{{ref}}/diff/{{other}}"): "read",
    ("GET", f"{API}/versions/{{ref}}/splits"): "read",
    # the web UI's page and assets: public like /docs, they hold no data
    ("GET", "/"): None,
    ("GET", "/ui/{asset:path}"): None,
    ("GET", f"{API}/datasets"): "read",
    ("POST", f"{API}/datasets"): "write",
    ("GET", f"{API}/datasets/{{name}}"): "read",
    ("GET", f"{API}/datasets/{{name}}/versions"): "read",
    ("POST", f"{API}/datasets/{{name}}/versions"): "write",
    ("GET", f"{API}/versions/{{ref}}"): "read",
    ("POST", f"{API}/versions/{{version_name}}/commit"): "write",
    ("POST", f"{API}/versions/{{version_name}}/abandon"): "write",
    ("PUT", f"{API}/versions/{{version_name}}/provenance"): "write",
    ("GET", f"{API}/datasets/{{name}}/log"): "read",
    ("GET", f"{API}/versions/{{ref}}/children"): "read",
    ("GET", f"{API}/sources/versions"): "read",
    ("POST", f"{API}/versions/{{ref}}/deprecate"): "write",
    ("POST", f"{API}/versions/{{version_name}}/shards"): "write",
    ("GET", f"{API}/versions/{{ref}}/shards"): "read",
    ("GET", f"{API}/versions/{{ref}}/schema"): "read",
    ("GET", f"{API}/versions/{{ref}}/consumers"): "read",
    ("POST", f"{API}/versions/{{version_name}}/gc-done"): "admin",
    ("POST", f"{API}/versions/{{version_name}}/gc-objects"): "admin",
    ("POST", f"{API}/versions/{{version_name}}/gc-preview"): "read",
    ("GET", f"{API}/datasets/{{name}}/aliases"): "read",
    ("PUT", f"{API}/datasets/{{name}}/aliases/{{alias}}"): "write",
    ("DELETE", f"{API}/datasets/{{name}}/aliases/{{alias}}"): "write",
    ("GET", f"{API}/datasets/{{name}}/aliases/{{alias}}/history"): "read",
    ("GET", f"{API}/schemas/{{digest}}"): "read",
    ("GET", f"{API}/events"): "read",
    ("GET", f"{API}/tokens"): "admin",
    ("POST", f"{API}/tokens"): "admin",
    ("DELETE", f"{API}/tokens/{{token_id}}"): "admin",
    ("GET", f"{API}/models"): "read",
    ("GET", f"{API}/models/{{model}}/checkpoints"): "read",
    ("GET", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}"): "read",
    ("PUT", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}"): "write",
    ("GET", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/lineage"): "read",
    ("PUT", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/deletion"): "write",
    ("GET", f"{API}/models/{{model}}/checkpoints/{{checkpoint}}/model-check"): "read",
    ("GET", f"{API}/shards/consumers"): "read",
    ("GET", f"{API}/lineage/graph"): "read",
    ("GET", f"{API}/lineage/impact"): "read",
    ("GET", f"{API}/gc/candidates"): "read",
    ("POST", f"{API}/gc/claims"): "admin",
    ("GET", f"{API}/retention/policies"): "read",
    ("GET", f"{API}/retention/policies/{{scope}}"): "read",
    ("PUT", f"{API}/retention/policies/{{scope}}"): "admin",
    ("DELETE", f"{API}/retention/policies/{{scope}}"): "admin",
    ("GET", f"{API}/retention/pins"): "read",
    ("POST", f"{API}/retention/pins"): "write",
    ("DELETE", f"{API}/retention/pins"): "write",
    ("GET", f"{API}/retention/plan"): "read",
    ("POST", f"{API}/retention/claims"): "admin",
    ("POST", f"{API}/retention/deletable"): "admin",
    ("POST", f"{API}/versions/{{version_name}}/retention-done"): "admin",
    ("POST", f"{API}/versions/{{ref}}/verifications"): "read",  # readers verify data
    ("PUT", f"{API}/versions/{{ref}}/record-sets"): "write",
    ("PUT", f"{API}/datasets/{{name}}/leakage-policy"): "write",
    ("GET", f"{API}/datasets/{{name}}/leakage-policy"): "read",
    ("GET", f"{API}/versions/{{ref}}/leakage"): "read",
    ("PUT", f"{API}/versions/{{ref}}/leakage"): "write",
    ("GET", f"{API}/versions/{{ref}}/record-sets"): "read",
    ("GET", f"{API}/record-sets/{{digest}}"): "read",
    ("PUT", f"{API}/versions/{{ref}}/record-diffs/{{other}}"): "write",
    ("GET", f"{API}/versions/{{ref}}/record-diffs/{{other}}"): "read",
    ("PUT", f"{API}/versions/{{ref}}/sample"): "write",
    ("GET", f"{API}/versions/{{ref}}/sample"): "read",
}

#: The documentation routes (not APIRoutes): public, they hold no data.  ``/docs/assets``
#: serves the Swagger UI / ReDoc files shipped in the package (routes/api_docs.py).
DOCUMENTATION_PATHS = {
    "/openapi.json",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/docs/assets/{name}",
}

#: Values for path parameters: well-formed but naming nothing (no route may act on them).
PATH_VALUES = {
    "name": "nosuchdataset",
    "ref": "nosuchdataset@latest",
    "version_name": "nosuchdataset_20240101_v1",
    "alias": "nosuchalias",
    "digest": "sha256:" + "0" * 64,
    "token_id": "999999999",
    "model": "nosuchmodel",
    "checkpoint": "nosuchcheckpoint",
    "other": "nosuchdataset@v1",
    "asset": "app.js",
    "scope": "nosuchdataset",
}

CALLERS = ("none", "garbage", "revoked", "read", "write", "admin")


def app_routes(client: TestClient) -> Iterator[tuple[str, str, Any]]:
    """(method, path template, route) for every route of the app, as it dispatches them."""
    app: Any = client.app
    for context in iter_route_contexts(app.routes):
        for method in sorted(context.methods or {"GET"}):
            if method == "HEAD":
                continue
            yield method, str(context.path), context.original_route


def _tokens(database_url: str) -> dict[str, str]:
    database = Database(database_url, pool_size=1)
    try:
        repository = TokenRepository(database)
        secrets = {
            scope: repository.create(f"matrix-{scope}", scope, actor="test")[1]
            for scope in ("read", "write", "admin")
        }
        revoked, secrets["revoked"] = repository.create("matrix-revoked", "admin", actor="test")
        repository.revoke(revoked.id, actor="test")
    finally:
        database.dispose()
    secrets["garbage"] = "rk_" + "x" * 40
    return secrets


def concrete_path(template: str) -> str:
    """A route's path template with :data:`PATH_VALUES` filled in."""
    # a converter in a template (`{asset:path}`) is not a format spec: drop it first
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", template).format(**PATH_VALUES)


def _call(
    client: TestClient, method: str, template: str, headers: dict[str, str]
) -> tuple[int, dict[str, Any] | None]:
    path = concrete_path(template)
    body = {} if method in ("POST", "PUT") else None
    response = client.request(method, path, json=body, headers=headers)
    if response.status_code < 400:
        return response.status_code, None
    payload = response.json()
    ErrorOut.model_validate(payload)  # every error body is what the OpenAPI document says
    assert response.headers["X-Error-Code"] == payload["code"]
    if response.status_code == 401:
        assert response.headers["WWW-Authenticate"].startswith("Bearer "), path
    return response.status_code, payload


def test_every_route_is_in_the_table(client: TestClient) -> None:
    seen = set()
    for method, path, route in app_routes(client):
        if isinstance(route, HotResolveRoute | HotLineageRoute):  # a faster front of a read route
            assert ROUTE_SCOPES[method, path] == "read", (method, path)
            continue
        if not isinstance(route, APIRoute):
            assert path in DOCUMENTATION_PATHS, f"unexpected non-API route {method} {path}"
            continue
        assert (method, path) in ROUTE_SCOPES, (
            f"{method} {path} is not in ROUTE_SCOPES: decide which scope it needs (and give it "
            "Reader/Writer/Admin from recordkeeper_service.deps)"
        )
        seen.add((method, path))
    assert seen == set(ROUTE_SCOPES), "ROUTE_SCOPES names routes that no longer exist"


def test_every_route_against_every_caller(
    make_client: Callable[..., TestClient], database_url: str
) -> None:
    secrets = _tokens(database_url)
    client = make_client(auth="required")
    checked = 0
    for method, path, route in app_routes(client):
        if not isinstance(route, APIRoute):
            continue
        needed = ROUTE_SCOPES[method, path]
        for caller in CALLERS:
            headers = {} if caller == "none" else {"Authorization": f"Bearer {secrets[caller]}"}
            status, body = _call(client, method, path, headers)
            where = f"{method} {path} as {caller}: {status} {body}"
            code = body["code"] if body else None
            assert status < 500, where
            if needed is None:
                assert code not in ("unauthorized", "forbidden"), where
            elif caller in ("none", "garbage", "revoked"):
                assert (status, code) == (401, "unauthorized"), where
            elif SCOPE_RANK[caller] < SCOPE_RANK[needed]:
                assert (status, code) == (403, "forbidden"), where
                assert body is not None and body["required_scope"] == needed, where
            else:
                assert code not in ("unauthorized", "forbidden"), where
            checked += 1
    assert checked == len(ROUTE_SCOPES) * len(CALLERS)


@pytest.mark.parametrize(
    "forwarding",
    [
        {"X-Forwarded-For": "203.0.113.7"},
        {"Forwarded": "for=203.0.113.7;proto=https"},
        {"X-Real-IP": "203.0.113.7"},
    ],
    ids=["x-forwarded-for", "forwarded", "x-real-ip"],
)
def test_auto_mode_never_serves_a_proxied_request_anonymously(
    client: TestClient, forwarding: dict[str, str]
) -> None:
    for method, path, route in app_routes(client):
        if not isinstance(route, APIRoute):
            continue
        status, body = _call(client, method, path, forwarding)
        where = f"{method} {path} via proxy: {status} {body}"
        if ROUTE_SCOPES[method, path] is None:
            assert status < 400 or (body and body["code"] != "unauthorized"), where
        else:
            assert (status, body and body["code"]) == (401, "unauthorized"), where

"""Authentication and scopes.

* A request carrying ``Authorization: Bearer <token>`` is always checked against the stored
  token hashes; unknown or revoked tokens get ``401 unauthorized``.
* A request without a token is served as the ``anonymous`` admin only when the service runs with
  ``RECORDKEEPER_AUTH=auto`` **and** binds a loopback address (see
  :attr:`recordkeeper_service.settings.Settings.open_access`) **and** the request did not come
  through a proxy (:meth:`Authenticator.proxied`: it carries a forwarding header such as
  ``X-Forwarded-For``/``Forwarded``, or its peer is in ``RECORDKEEPER_TRUSTED_PROXIES``)
  **and** it was not sent by a web page of another site (:func:`foreign_page`: a browser's
  ``Origin``/``Sec-Fetch-Site`` naming another origin, or a ``Host`` that is not a loopback
  name, as after DNS rebinding); otherwise it gets ``401``.  A same-host proxy would otherwise
  turn every remote caller into the local admin, and any web page the local user visits into
  one too (docs/security.md).
* Scopes are ordered ``read < write < admin``; too small a scope gets ``403 forbidden``.

*When* a request is authenticated: a request with a body is authenticated by the request gate
(:class:`recordkeeper_service.limits.RequestGate`) before a byte of the body is read, for the scope
its route declares (the dependencies marked with :func:`requires_scope`); the gate leaves the
principal in the ASGI scope under :data:`PRINCIPAL_KEY` and the route's dependency reuses it.  A
request without a body is authenticated by the route's dependency, as before.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from recordkeeper.core.errors import AuthenticationRequired, PermissionDenied
from recordkeeper_service.repository.tokens import ANONYMOUS_ACTOR, TokenRepository

__all__ = [
    "ANONYMOUS",
    "FORWARDING_HEADERS",
    "PRINCIPAL_KEY",
    "SCOPE_RANK",
    "Authenticator",
    "Principal",
    "foreign_page",
    "requires_scope",
]

SCOPE_RANK: dict[str, int] = {"read": 0, "write": 1, "admin": 2}

#: The ASGI scope key under which the request gate leaves the request's :class:`Principal`.
PRINCIPAL_KEY = "recordkeeper.principal"

F = TypeVar("F", bound=Callable[..., Any])


def requires_scope(scope: str) -> Callable[[F], F]:
    """Mark a dependency as needing a principal with ``scope``: the request gate reads the mark
    from each route's dependencies at start-up and authenticates before reading the body."""
    if scope not in SCOPE_RANK:
        raise ValueError(f"unknown scope {scope!r}")

    def mark(dependency: F) -> F:
        dependency.required_scope = scope  # type: ignore[attr-defined]
        return dependency

    return mark


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is making a request: the actor recorded in audit events, and their scope."""

    name: str
    scope: str
    token_id: int | None = None

    def require(self, scope: str) -> Principal:
        """Return self if the scope suffices, else raise :class:`PermissionDenied`."""
        if SCOPE_RANK[self.scope] < SCOPE_RANK[scope]:
            raise PermissionDenied(
                f"this needs a token with scope {scope!r}; {self.name!r} has {self.scope!r}",
                required_scope=scope,
            )
        return self


ANONYMOUS = Principal(name=ANONYMOUS_ACTOR, scope="admin")


#: Request headers (lower case, as in the ASGI scope) that a proxy adds; any of them means the
#: request was relayed, so the loopback peer is not the caller.
FORWARDING_HEADERS = frozenset(
    {
        b"forwarded",
        b"x-forwarded-for",
        b"x-forwarded-host",
        b"x-forwarded-proto",
        b"x-forwarded-port",
        b"x-forwarded-server",
        b"x-real-ip",
        b"x-client-ip",
        b"x-cluster-client-ip",
        b"true-client-ip",
        b"cf-connecting-ip",
        b"client-ip",
        b"via",
        b"forwarded-for",
        b"x-forwarded",
        b"x-original-forwarded-for",
        b"fastly-client-ip",
        b"x-envoy-external-address",
    }
)

#: ``Sec-Fetch-Site`` values of a request a browser made for a page of the same origin, or on
#: the user's own initiative (typing the URL, a bookmark).
_OWN_FETCH_SITES = frozenset({b"same-origin", b"none"})
#: Request headers only browsers send (``Origin`` also on cross-origin requests of any kind).
_BROWSER_HEADERS = frozenset({b"origin", b"sec-fetch-site", b"sec-fetch-mode"})
_HEADERS_READ = _BROWSER_HEADERS | {b"host"}


def foreign_page(scope: Mapping[str, Any]) -> str | None:
    """Why the ASGI request ``scope`` may come from a web page of another site, or None.

    Browsers send ``Origin`` (on every cross-origin request and every non-GET) and
    ``Sec-Fetch-Site``; programs (the client, curl) send neither.  A browser request is
    foreign when its ``Sec-Fetch-Site`` is not ``same-origin``/``none``, when its ``Origin`` is
    not the request's own origin (``null`` included), or when its ``Host`` is not a loopback
    name: a page of ``attacker.example`` whose name was rebound to ``127.0.0.1`` is
    "same-origin" to the browser but names its own host.
    """
    headers = {name: value for name, value in scope.get("headers", ()) if name in _HEADERS_READ}
    if not _BROWSER_HEADERS.intersection(headers):
        return None
    host = headers.get(b"host", b"").decode("latin-1").strip()
    if not _is_loopback_host(host):
        return f"a web page addressed the service as {host[:100]!r}, not a loopback name"
    site = headers.get(b"sec-fetch-site")
    if site is not None and site.strip().lower() not in _OWN_FETCH_SITES:
        return f"a web page of another site sent it (Sec-Fetch-Site: {site[:40].decode('latin-1')})"
    origin = headers.get(b"origin")
    if origin is not None:
        own = f"{scope.get('scheme', 'http')}://{host}".lower()
        if origin.decode("latin-1").strip().lower().rstrip("/") != own:
            return (
                f"a web page of another origin sent it (Origin: {origin[:100].decode('latin-1')})"
            )
    return None


def _is_loopback_host(host: str) -> bool:
    """True for ``localhost``, ``*.localhost``, ``127.x.x.x`` and ``[::1]``, with any port."""
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else ""
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Principal`."""

    def __init__(
        self,
        tokens: TokenRepository,
        *,
        open_access: bool,
        trusted_proxies: Iterable[str] = (),
    ) -> None:
        self._tokens = tokens
        self.open_access = open_access
        self._proxies = tuple(ipaddress.ip_network(p, strict=False) for p in trusted_proxies)

    def proxied(self, scope: Mapping[str, Any]) -> bool:
        """True if the ASGI request ``scope`` came through a proxy (never served anonymously).

        A forwarding header of any kind, or a peer address in the trusted proxy list, means a
        proxy relayed the request (uvicorn keeps the headers when it rewrites the peer).
        """
        if any(name in FORWARDING_HEADERS for name, _ in scope.get("headers", ())):
            return True
        client = scope.get("client")
        if not self._proxies or not client:
            return False
        try:
            peer = ipaddress.ip_address(str(client[0]).strip("[]"))
        except ValueError:
            return False
        return any(peer in network for network in self._proxies)

    def open_access_refusal(self, scope: Mapping[str, Any]) -> str | None:
        """Why a request without a token may not be served anonymously although the service
        runs with open access (:meth:`proxied`, :func:`foreign_page`), or None."""
        if self.proxied(scope):
            return "requests relayed by a proxy are never served without one"
        page = foreign_page(scope)
        if page is not None:
            return f"{page}; pages of other sites are never served without one"
        return None

    async def principal_for(self, scope: Mapping[str, Any]) -> Principal:
        """The principal of an ASGI request: its bearer token, else anonymous where open access
        applies (a loopback bind; not relayed by a proxy, not sent by another site's page:
        :meth:`open_access_refusal`).

        The one way the service authenticates a request: the request gate (before the body is
        read) and the route dependencies both call it.  A token lookup runs in a worker thread;
        no token costs no I/O.
        """
        given = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        if len(given) > 1:  # which one would a proxy or a log have believed?
            raise AuthenticationRequired("send one Authorization header, not several")
        header = given[0].decode("latin-1") if given else None
        if not header:
            refusal = self.open_access_refusal(scope) if self.open_access else None
            return self.authenticate(None, refusal=refusal)
        return await run_in_threadpool(self.authenticate, header)

    def authenticate(self, authorization: str | None, *, refusal: str | None = None) -> Principal:
        """The principal for ``authorization``; without one, anonymous if the service runs with
        open access and there is no ``refusal`` (:meth:`open_access_refusal`)."""
        if not authorization:
            if self.open_access and refusal is None:
                return ANONYMOUS
            raise AuthenticationRequired(
                "this service requires a token: send 'Authorization: Bearer <token>' "
                "(an admin creates one with `recordkeeper token create` where the service "
                "runs; the client reads it from RECORDKEEPER_TOKEN)"
                + (f"; {refusal}" if self.open_access and refusal else "")
            )
        scheme, _, secret = authorization.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise AuthenticationRequired("malformed Authorization header; use 'Bearer <token>'")
        token = self._tokens.authenticate(secret)
        return Principal(name=token.name, scope=token.scope, token_id=token.id)

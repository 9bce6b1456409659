"""Authentication and scopes.

* A request carrying ``Authorization: Bearer <token>`` is always checked against the stored
  token hashes; unknown or revoked tokens get ``401 unauthorized``.
* A request without a token is served as the ``anonymous`` admin only when the service runs with
  ``RECORDKEEPER_AUTH=auto`` **and** binds a loopback address (see
  :attr:`recordkeeper_service.settings.Settings.open_access`); otherwise it gets ``401``.
* Scopes are ordered ``read < write < admin``; too small a scope gets ``403 forbidden``.

*When* a request is authenticated: a request with a body is authenticated by the request gate
(:class:`recordkeeper_service.limits.RequestGate`) before a byte of the body is read, for the scope
its route declares (the dependencies marked with :func:`requires_scope`); the gate leaves the
principal in the ASGI scope under :data:`PRINCIPAL_KEY` and the route's dependency reuses it.  A
request without a body is authenticated by the route's dependency, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from recordkeeper.core.errors import AuthenticationRequired, PermissionDenied
from recordkeeper_service.repository.tokens import TokenRepository

__all__ = [
    "ANONYMOUS",
    "PRINCIPAL_KEY",
    "SCOPE_RANK",
    "Authenticator",
    "Principal",
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


ANONYMOUS = Principal(name="anonymous", scope="admin")


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Principal`."""

    def __init__(self, tokens: TokenRepository, *, open_access: bool) -> None:
        self._tokens = tokens
        self.open_access = open_access

    def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            if self.open_access:
                return ANONYMOUS
            raise AuthenticationRequired(
                "this service requires a token: send 'Authorization: Bearer <token>' "
                "(create one with `recordkeeper token create`)"
            )
        scheme, _, secret = authorization.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise AuthenticationRequired("malformed Authorization header; use 'Bearer <token>'")
        token = self._tokens.authenticate(secret)
        return Principal(name=token.name, scope=token.scope, token_id=token.id)

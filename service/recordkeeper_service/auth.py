"""Authentication and scopes.

* A request carrying ``Authorization: Bearer <token>`` is always checked against the stored
  token hashes; unknown or revoked tokens get ``401 unauthorized``.
* A request without a token is served as the ``anonymous`` admin only when the service runs with
  ``RECORDKEEPER_AUTH=auto`` **and** binds a loopback address (see
  :attr:`recordkeeper_service.settings.Settings.open_access`); otherwise it gets ``401``.
* Scopes are ordered ``read < write < admin``; too small a scope gets ``403 forbidden``.
"""

from __future__ import annotations

from dataclasses import dataclass

from recordkeeper.core.errors import AuthenticationRequired, PermissionDenied
from recordkeeper_service.repository.tokens import TokenRepository

__all__ = ["ANONYMOUS", "SCOPE_RANK", "Authenticator", "Principal"]

SCOPE_RANK: dict[str, int] = {"read": 0, "write": 1, "admin": 2}


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

"""API tokens: create (the secret is returned once), list, revoke, authenticate.

Only ``sha256(secret)`` is stored.  ``last_used_at`` is refreshed at most once a minute per token
so that authenticated reads do not turn into writes.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import secrets

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from recordkeeper.core.errors import (
    AuthenticationRequired,
    InvalidRequest,
    TokenNameTaken,
    TokenNotFound,
)
from recordkeeper_service import tables as m
from recordkeeper_service.db import Database
from recordkeeper_service.domain import Page, TokenRecord
from recordkeeper_service.repository import convert
from recordkeeper_service.repository.common import record_event

__all__ = ["ANONYMOUS_ACTOR", "TOKEN_PREFIX", "TokenRepository", "hash_secret", "new_secret"]

TOKEN_PREFIX = "rk_"
#: The actor of requests served without a token (open access): no token may take the name.
ANONYMOUS_ACTOR = "anonymous"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
_LAST_USED_RESOLUTION = datetime.timedelta(seconds=60)


def new_secret() -> str:
    """A fresh token secret: ``rk_`` + 43 URL-safe characters (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _aware(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


class TokenRepository:
    """Token operations; each public method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, name: str, scope: str, *, actor: str) -> tuple[TokenRecord, str]:
        """Create a token; returns its record and the secret (shown once, never stored)."""
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            raise InvalidRequest(
                f"token name {name!r} is invalid: 1-64 letters, digits, '_', '.', '@', '-'"
            )
        if name == ANONYMOUS_ACTOR:
            raise InvalidRequest(
                f"token name {name!r} is reserved: audit events name requests without a token so"
            )
        if scope not in m.SCOPES:
            raise InvalidRequest(f"scope must be one of {', '.join(m.SCOPES)}, got {scope!r}")
        secret = new_secret()
        with self._db.transaction() as session:
            _lock_name(session, name)
            taken = session.scalar(
                select(m.ApiToken.id).where(
                    m.ApiToken.name == name, m.ApiToken.revoked_at.is_(None)
                )
            )
            if taken is not None:
                raise TokenNameTaken(
                    f"an active token is already named {name!r} (id {taken}): audit events and "
                    "gc claims name tokens; choose another name or revoke that token first"
                )
            row = m.ApiToken(
                name=name, scope=scope, token_hash=hash_secret(secret), created_by=actor
            )
            session.add(row)
            session.flush()
            record_event(session, actor, "token.created", token_id=row.id, name=name, scope=scope)
            return convert.token_record(row), secret

    def list(self, *, limit: int, offset: int, include_revoked: bool = True) -> Page[TokenRecord]:
        """Tokens by id (without secrets or hashes)."""
        where = [] if include_revoked else [m.ApiToken.revoked_at.is_(None)]
        with self._db.transaction(write=False) as session:
            total = session.scalar(select(func.count(m.ApiToken.id)).where(*where)) or 0
            rows = session.scalars(
                select(m.ApiToken).where(*where).order_by(m.ApiToken.id).limit(limit).offset(offset)
            )
            data = [convert.token_record(row) for row in rows]
            return Page(data=data, count=total, limit=limit, offset=offset)

    def revoke(self, token_id: int, *, actor: str) -> TokenRecord:
        """Revoke a token (idempotent); :class:`TokenNotFound` for an unknown id."""
        if not 1 <= token_id <= 2**63 - 1:  # ids are 64-bit; the database cannot bind more
            raise TokenNotFound(f"there is no token with id {token_id}")
        with self._db.transaction() as session:
            row = session.get(m.ApiToken, token_id, with_for_update=True)
            if row is None:
                raise TokenNotFound(f"there is no token with id {token_id}")
            if row.revoked_at is None:
                row.revoked_at = m.utcnow()
                record_event(session, actor, "token.revoked", token_id=row.id, name=row.name)
                session.flush()
            return convert.token_record(row)

    def count_active(self) -> int:
        """How many tokens are not revoked."""
        with self._db.transaction(write=False) as session:
            stmt = select(func.count(m.ApiToken.id)).where(m.ApiToken.revoked_at.is_(None))
            return session.scalar(stmt) or 0

    def authenticate(self, secret: str) -> TokenRecord:
        """The token whose secret this is; :class:`AuthenticationRequired` if unknown/revoked."""
        digest = hash_secret(secret)
        with self._db.transaction(write=False) as session:
            row = session.scalars(
                select(m.ApiToken).where(m.ApiToken.token_hash == digest)
            ).one_or_none()
            if row is None:
                raise AuthenticationRequired("the token is not valid")
            if row.revoked_at is not None:
                raise AuthenticationRequired(f"the token {row.name!r} was revoked")
            record = convert.token_record(row)
        now = m.utcnow()
        if record.last_used_at is None or now - _aware(record.last_used_at) > _LAST_USED_RESOLUTION:
            with self._db.transaction() as session:
                session.execute(
                    update(m.ApiToken)
                    .where(m.ApiToken.id == record.id)
                    .values(last_used_at=now)
                    .execution_options(synchronize_session=False)
                )
        return record


def _lock_name(session: Session, name: str) -> None:
    """Serialise token creations of one name until the transaction ends: PostgreSQL takes a
    transaction-scoped advisory lock on the name's hash (SQLite serialises every write)."""
    if session.get_bind().dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(b"token-name:" + name.encode()).digest()[:8], "big")
        session.execute(select(func.pg_advisory_xact_lock(key - 2**63)))

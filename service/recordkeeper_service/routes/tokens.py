"""API tokens (admin only): create (secret shown once), list, revoke."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import Field

from recordkeeper_service.deps import Admin, Limit, Offset, RepositoryDep
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, ListOut, OutModel, errors

__all__ = ["TokenCreatedOut", "TokenIn", "TokenOut", "router"]


class TokenIn(InModel):
    name: str = Field(examples=["ci"])
    scope: Literal["read", "write", "admin"] = "read"


class TokenOut(OutModel):
    id: int
    name: str
    scope: str
    created_at: str
    created_by: str
    revoked_at: str | None
    last_used_at: str | None


class TokenCreatedOut(TokenOut):
    token: str = Field(description="the secret; shown only in this answer")


router = APIRouter(prefix="/tokens", tags=["tokens"], responses=AUTHENTICATED)


@router.post("", status_code=201, response_model=TokenCreatedOut, responses=errors(400, 409, 413))
def create_token(body: TokenIn, repository: RepositoryDep, who: Admin) -> dict[str, Any]:
    """Create a token; the answer holds the secret, which is never shown again."""
    record, secret = repository.tokens.create(body.name, body.scope, actor=who.name)
    return {**record.to_json(), "token": secret}


@router.get("", response_model=ListOut[TokenOut])
def list_tokens(
    repository: RepositoryDep, _who: Admin, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """Every token (never the secrets)."""
    return repository.tokens.list(limit=limit, offset=offset).to_json()


@router.delete("/{token_id}", status_code=204, response_class=Response, responses=errors(404))
def revoke_token(token_id: int, repository: RepositoryDep, who: Admin) -> Response:
    """Revoke a token (idempotent)."""
    repository.tokens.revoke(token_id, actor=who.name)
    return Response(status_code=204)

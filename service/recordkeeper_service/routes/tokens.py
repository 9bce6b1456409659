"""API tokens (admin only): create (secret shown once), list, revoke."""

from __future__ import annotations

from fastapi import APIRouter, Response

from recordkeeper_service.api_models import ListOut, TokenCreate, TokenCreatedOut, TokenOut
from recordkeeper_service.deps import Admin, Limit, Offset, RepositoryDep
from recordkeeper_service.responses import JSON

router = APIRouter(prefix="/tokens", tags=["tokens"])


@router.post("", status_code=201, response_model=TokenCreatedOut)
def create_token(body: TokenCreate, repository: RepositoryDep, who: Admin) -> JSON:
    """Create a token; the answer holds the secret, which is never shown again."""
    record, secret = repository.tokens.create(body.name, body.scope, actor=who.name)
    return JSON({**record.to_json(), "token": secret}, status_code=201)


@router.get("", response_model=ListOut[TokenOut])
def list_tokens(
    repository: RepositoryDep, _who: Admin, limit: Limit = 100, offset: Offset = 0
) -> JSON:
    """Every token (never the secrets)."""
    return JSON(repository.tokens.list(limit=limit, offset=offset).to_json())


@router.delete("/{token_id}", status_code=204, response_class=Response)
def revoke_token(token_id: int, repository: RepositoryDep, who: Admin) -> Response:
    """Revoke a token (idempotent)."""
    repository.tokens.revoke(token_id, actor=who.name)
    return Response(status_code=204)

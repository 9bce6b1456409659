"""Shards: bulk registration of a staged version's shards (``POST /versions/{name}/shards``).

A version's shards are answered inside the Version object (:class:`ShardOut`, in
:mod:`recordkeeper_service.routes.versions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import Field, create_model

from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.shards import INPUT_FIELDS, wire_fields
from recordkeeper_service.deps import RepositoryDep, Writer
from recordkeeper_service.limits import GatedRoute, counted_list, large_body
from recordkeeper_service.routes.common import AUTHENTICATED, InModel, OutModel, errors

__all__ = ["RegisterOut", "ShardBatchIn", "ShardIn", "ShardOut", "router"]

router = APIRouter(tags=["versions"], responses=AUTHENTICATED, route_class=GatedRoute)


class _ShardInBase(InModel):
    """A shard registration: the record's input fields plus its ``schema`` body."""

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")

    def as_mapping(self) -> dict[str, Any]:
        """The fields as the repository takes them (``schema`` under its wire name)."""
        out = {name: getattr(self, name) for name in INPUT_FIELDS}
        out["schema"] = self.schema_
        return out


def _shard_fields(*, output: bool) -> dict[str, Any]:
    """The pydantic fields of the core's shard record (types, docs, examples), in its order.

    Request models check only JSON *types* (wrong types -> ``422 invalid_request``); the rules
    with their own codes are checked by :func:`recordkeeper.core.shards.validate_shard`.
    """
    fields: dict[str, Any] = {}
    for f in wire_fields():
        if not (output or f.input):
            continue
        extra: dict[str, Any] = {"description": f.doc}
        if f.example is not None:
            extra["examples"] = [f.example]
        if f.required or output:
            fields[f.name] = (f.type, Field(**extra))
        else:
            fields[f.name] = (f.type, Field(default=None, **extra))
    if output:
        fields["registered_at"] = (str, Field(description="ISO 8601 UTC timestamp"))
    return fields


# Built from recordkeeper.core.shards.ShardRecord: a field added to the record appears in these
# models, in the OpenAPI document and in validation without editing this module.
if TYPE_CHECKING:
    ShardIn = _ShardInBase
    ShardOut = OutModel
else:
    ShardIn = create_model("ShardIn", __base__=_ShardInBase, **_shard_fields(output=False))
    ShardOut = create_model("ShardOut", __base__=OutModel, **_shard_fields(output=True))


class ShardBatchIn(InModel):
    shards: list[ShardIn] = Field(description="up to 10,000 shards per request")


def _too_many_shards() -> InvalidShard:
    return InvalidShard(
        f"more than {MAX_SHARDS_PER_REQUEST} shards in one request; at most "
        f"{MAX_SHARDS_PER_REQUEST} are allowed (send several requests)",
        shard=None,
    )


class RegisterOut(OutModel):
    registered: int
    unchanged: int
    shard_count: int


@router.post(
    "/versions/{version_name}/shards",
    response_model=RegisterOut,
    responses=errors(400, 404, 409, 413),
)
@large_body
@counted_list("shards", MAX_SHARDS_PER_REQUEST, _too_many_shards)
def register_shards(
    version_name: str, body: ShardBatchIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Register up to 10,000 shards of a staged version; identical repeats are no-ops."""
    result = repository.shards.register(
        version_name, [shard.as_mapping() for shard in body.shards], actor=who.name
    )
    return result.to_json()

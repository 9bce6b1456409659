"""Shards: bulk registration of a staged version's shards (``POST /versions/{name}/shards``)
and the paged shard list of any version (``GET /versions/{ref}/shards``).

A version's shards are also answered inside the Version object (:class:`ShardOut`, in
:mod:`recordkeeper_service.routes.versions`); the paged list is for versions too large for one
answer, and offers the compact form (:mod:`recordkeeper.core.shard_columns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import Field, TypeAdapter, create_model

from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.shard_columns import COLUMNS
from recordkeeper.core.shards import INPUT_FIELDS, wire_fields
from recordkeeper_service.deps import Reader, RepositoryDep, Writer
from recordkeeper_service.domain import VersionRecord
from recordkeeper_service.limits import GatedRoute, counted_list, large_body
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes.common import (
    AUTHENTICATED,
    NOT_MODIFIED,
    IfNoneMatch,
    InModel,
    Int64,
    OutModel,
    entity_tag,
    errors,
    etag_matches,
    not_modified,
)

__all__ = [
    "CompactShardsOut",
    "PackedShardsOut",
    "RegisterOut",
    "ShardBatchIn",
    "ShardIn",
    "ShardOut",
    "ShardPageOut",
    "router",
]

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
        type_: Any = f.type
        if not output and type_ is int:
            type_ = Int64  # the core's rules (index < count, size >= 0) give their own codes
        if f.example is not None:
            extra["examples"] = [f.example]
        if f.required or output:
            fields[f.name] = (type_, Field(**extra))
        else:
            fields[f.name] = (type_, Field(default=f.default, **extra))
    if output:
        fields["registered_at"] = (str, Field(description="ISO 8601 UTC timestamp"))
    return fields


# Built from recordkeeper.core.shards.ShardRecord: a field added to the record appears in these
# models, in the OpenAPI document and in validation without editing this module.
def _column_fields() -> dict[str, Any]:
    """One array per record field (the compact form's ``columns``)."""
    known: dict[str, Any] = {f.name: f for f in wire_fields()}
    fields: dict[str, Any] = {}
    for name in COLUMNS:
        item_type: Any = known[name].type
        fields[name] = (list[item_type], Field(description=f"{known[name].doc}; one per shard"))
    return fields


if TYPE_CHECKING:
    ShardIn = _ShardInBase
    ShardOut = OutModel
    ShardColumnsOut = OutModel
else:
    ShardIn = create_model("ShardIn", __base__=_ShardInBase, **_shard_fields(output=False))
    ShardOut = create_model("ShardOut", __base__=OutModel, **_shard_fields(output=True))
    ShardColumnsOut = create_model("ShardColumnsOut", __base__=OutModel, **_column_fields())


class CompactShardsOut(OutModel):
    """The compact form: ``columns`` hold one array per field; URIs follow ``uri_prefix``."""

    uri_prefix: str = Field(description="prepend to each value of columns.uri")
    columns: ShardColumnsOut


class PackedShardsOut(OutModel):
    """The packed form: the compact form's columns, each a plain array or an encoding object
    (:data:`recordkeeper.core.shard_columns.PACKED_ENCODINGS`): ``{"runs": [[value, repeat],
    ...]}``, ``{"lines": "a\\nb"}`` (strings joined by a newline), and for ``storage_identity``
    ``{"json_lines": ...}`` or ``{"json": [...]}`` (each object as JSON text)."""

    uri_prefix: str = Field(description="prepend to each value of the uri column")
    length: int = Field(description="shards in the page (values in each column)")
    columns: dict[str, Any] = Field(description="one entry per field (the compact columns)")


class ShardPageOut(OutModel):
    version: str = Field(description="the version's name")
    content_digest: str | None
    shard_count: int = Field(description="shards of the version in all pages")
    limit: int
    next: str | None = Field(description="pass as `after` for the next page; null on the last")
    shards: list[ShardOut] | None = Field(description="the page's shards (form=full)")
    compact: CompactShardsOut | None = Field(description="the page's shards (form=compact)")
    packed: PackedShardsOut | None = Field(
        default=None, description="the page's shards (form=packed)"
    )


_PAGE: TypeAdapter[ShardPageOut] = TypeAdapter(ShardPageOut)


class ShardBatchIn(InModel):
    shards: list[ShardIn] = Field(description="up to 10,000 shards per request")


def _too_many_shards() -> InvalidShard:
    return InvalidShard(
        f"more than {MAX_SHARDS_PER_REQUEST} shards in one request; at most "
        f"{MAX_SHARDS_PER_REQUEST} are allowed (send several requests)",
        shard=None,
    )


@router.get(
    "/versions/{ref}/shards",
    response_model=ShardPageOut,
    responses={**NOT_MODIFIED, **errors(400, 404)},
)
def list_shards(
    ref: str,
    repository: RepositoryDep,
    _who: Reader,
    after: Annotated[
        str | None, Query(description="cursor: the `next` of the previous page")
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_SHARDS_PER_REQUEST, description="shards per page (1-10,000)")
    ] = MAX_SHARDS_PER_REQUEST,
    form: Annotated[
        Literal["full", "compact", "packed"],
        Query(
            description="`full`: a list of Shard objects; `compact`: one array per field; "
            "`packed`: the compact columns with runs and joined strings"
        ),
    ] = "full",
    if_none_match: IfNoneMatch = None,
) -> Response:
    """One page of a version's shards, in split then index order.

    Pages of a published version never change: they carry an ``ETag`` (``If-None-Match`` →
    ``304``).  Resolve a reference once and page by the version's name.
    """
    record = repository.versions.resolve(ref, shards=False)
    etag = None
    if record.published:
        etag = entity_tag(record.name, record.content_digest, after, limit, form)
        if etag_matches(if_none_match, etag):
            return not_modified(etag)
    key = (record.id, record.content_digest, after, limit, form)
    data = repository.versions.rendered_pages.get(key) if record.published else None
    if data is None:
        data = _render_page(repository, record, after=after, limit=limit, form=form)
        if record.published:  # every form: a published version's pages never change
            repository.versions.rendered_pages.put(key, data)
    headers = {"ETag": etag, "Cache-Control": "no-cache"} if etag is not None else None
    return Response(data, media_type="application/json", headers=headers)


def _render_page(
    repository: Repository, record: VersionRecord, *, after: str | None, limit: int, form: str
) -> bytes:
    """The page's JSON in ``form``: the compact and packed forms straight from the rows as
    columns, the full form through the response model."""
    if form != "full":
        return repository.versions.compact_page(
            record, after=after, limit=limit, packed=form == "packed"
        )
    page = repository.versions.shard_page(record, after=after, limit=limit)
    return _PAGE.dump_json(_PAGE.validate_python(page.to_json()))


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

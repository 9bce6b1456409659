"""Versions: stage, commit, abandon, deprecate, get by any ref, list.

Shard registration is in :mod:`recordkeeper_service.routes.shards`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, BackgroundTasks, Query, Request, Response
from pydantic import ConfigDict, Field, TypeAdapter

from recordkeeper.core.lifecycle import VersionState
from recordkeeper_service.deps import Limit, Offset, Reader, RepositoryDep, Writer, get_principal
from recordkeeper_service.repository import Repository
from recordkeeper_service.routes.common import (
    AUTHENTICATED,
    NOT_MODIFIED,
    IfNoneMatch,
    InModel,
    JsonObject,
    ListOut,
    OutModel,
    entity_tag,
    errors,
    etag_matches,
    not_modified,
)
from recordkeeper_service.routes.hot import HOT_PARAMS, HotRoute, boolean, text
from recordkeeper_service.routes.leakage import LeakageResultIn, LeakageWarningOut
from recordkeeper_service.routes.provenance import ProvenanceIn, ProvenanceOut
from recordkeeper_service.routes.shards import ShardOut

__all__ = [
    "CommitIn",
    "DeprecateIn",
    "HotResolveRoute",
    "SplitCountsOut",
    "SplitOut",
    "StageIn",
    "VersionOut",
    "VersionSplitsOut",
    "hot_resolve_route",
    "resolve_response",
    "router",
    "version_etag",
]

State = VersionState


class StageIn(InModel):
    desc: str | None = Field(default=None, examples=["add_person"])
    date: str | None = Field(default=None, description="YYYYMMDD or YYYY-MM-DD; default today")
    root: str | None = Field(default=None, examples=["s3://ml-data/datasets"])
    metadata: JsonObject = Field(default_factory=dict)
    reserve: bool = Field(
        default=False,
        description="take the version number now: the storage prefix carries the committed "
        "name (coco_20231015_v3); a reserved number abandoned later is a gap",
    )
    content_digest: str | None = Field(
        default=None,
        description="the content about to be stored, known before staging (implies reserve): "
        "a committed version with this digest is checked for first, per on_duplicate",
        examples=["sha256:" + "0" * 64],
    )
    on_duplicate: Literal["error", "use_existing", "commit"] = Field(
        default="error",
        description="with content_digest: error (409 duplicate_content), use_existing (answer "
        "that version, with duplicate_of; nothing is staged) or commit (stage anyway)",
    )
    provenance: ProvenanceIn | None = Field(
        default=None,
        description="where the version comes from (parents, sources, producer, params...); "
        "may be replaced while staged, immutable once committed",
    )
    base: str | None = Field(
        default=None,
        max_length=300,
        description="stage a derived version: a reference to a committed version of this "
        "dataset whose shards it keeps (referenced, never copied) except as its commit's "
        "changes say; recorded as the provenance parent with role base",
        examples=["coco@v2"],
    )


class ChangesIn(InModel):
    """What a derived version's commit changes of its base.  Unknown fields are refused, not
    ignored (as in every body that cannot be undone): a misspelt ``remove_split`` would
    otherwise commit, for good, a version still holding the split it meant to leave out."""

    model_config = ConfigDict(extra="forbid")

    remove_splits: list[str] = Field(
        default_factory=list, max_length=10_000, description="base splits left out whole"
    )
    rename_splits: dict[str, str] = Field(
        default_factory=dict, description="base splits kept under another name: {old: new}"
    )
    remove_shards: list[str] = Field(
        default_factory=list,
        max_length=10_000,
        description="base shards left out: SPLIT:INDEX (a position in the base) or the URI",
        examples=[["train:41", "s3://ml-data/datasets/coco/coco_20231015_v2/x.tfrecord"]],
    )


class CommitIn(InModel):
    on_duplicate: Literal["error", "use_existing", "commit"] = "error"
    changes: ChangesIn | None = Field(
        default=None,
        description="a derived version only: what changes of its base besides the shards "
        "registered on it (appended to their split; a removed split's name makes it new)",
    )
    leakage: LeakageResultIn | None = Field(
        default=None,
        description="the client's leakage check of the staged splits (each evaluation split "
        "against each other split, other_ref the version's own name), judged by the dataset's "
        "leakage policy: 409 split_overlap under refuse, leakage_warning under warn; without "
        "it a policy that is not off refuses (409 leakage_check_missing) or warns",
    )


class DeprecateIn(InModel):
    reason: str | None = Field(default=None, examples=["labels were wrong"])
    force: bool = Field(default=False, description="admin only: deprecate even if in use")


class SplitOut(OutModel):
    shard_count: int
    record_count: int
    size: int
    shards: list[ShardOut]


class VersionOut(OutModel):
    name: str
    dataset: str
    number: int | None = Field(
        description="given at commit; null while staged (and for versions abandoned before)"
    )
    date: str
    desc: str | None
    convention: str
    state: State
    ref: str
    storage_prefix: str
    content_digest: str | None
    schema_digest: str | None
    record_count: int
    shard_count: int
    size: int
    created_at: str
    committed_at: str | None
    created_by: str
    deprecated_at: str | None
    deprecated_reason: str | None
    metadata: dict[str, Any]
    duplicate_of: str | None
    staged_name: str | None = Field(
        description="the name the version was staged under (coco_20231015_staged4); "
        "it keeps answering after the commit"
    )
    data_state: Literal["stored", "deleting", "deleted"] = Field(
        default="stored",
        description="whether the version's objects are stored; 'deleting' once gc or retention "
        "released them, 'deleted' after: its row, digests, schema and lineage stay, reading "
        "its records answers 409 version_data_deleted",
    )
    data_deleted_at: str | None = Field(default=None, description="when its data was deleted")
    data_deleted_reason: str | None = Field(
        default=None, description="what deleted (or is deleting) it: 'retention' or 'gc'"
    )
    provenance: ProvenanceOut = Field(
        description="parents, sources, producer, params, command, environment, note (empty "
        "parts when none was recorded); immutable once committed"
    )
    splits: dict[str, SplitOut] | None


_VERSION: TypeAdapter[VersionOut] = TypeAdapter(VersionOut)
_SPLITS: TypeAdapter[dict[str, SplitOut]] = TypeAdapter(dict[str, SplitOut])
#: How a Version serialised without shards ends (``splits`` is :class:`VersionOut`'s last field).
_NO_SPLITS = b',"splits":null}'


class RenderedSplits:
    """``splits`` of cached versions, validated against :class:`SplitOut` and serialised once.

    The version cache keeps each committed version's ``splits`` rendered once (shards of a
    committed version never change) and answers every resolve with that same object.  Checking
    and serialising it through :class:`SplitOut` on every request would cost ~4 us per shard
    (40 ms for 10,000 shards); here it is done once, and each answer is the Version's own fields
    (validated and serialised through :class:`VersionOut`) with these bytes as ``splits``.
    Entries are keyed by the rendering's identity and hold it, so an id is never reused while
    its entry lives; bounded by entries and by shards, least recently used first.
    """

    def __init__(self, max_entries: int = 1024, max_shards: int = 200_000) -> None:
        self.max_entries = max_entries
        self.max_shards = max_shards
        self._entries: OrderedDict[int, tuple[dict[str, Any], bytes, int]] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, rendered: dict[str, Any]) -> bytes:
        key = id(rendered)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is rendered:
                self._entries.move_to_end(key)
                return entry[1]
        validated = _SPLITS.validate_python(rendered)
        data = _SPLITS.dump_json(validated)
        weight = 1 + sum(split.shard_count for split in validated.values())
        if weight > self.max_shards // 4:
            return data
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._weight -= previous[2]
            self._entries[key] = (rendered, data, weight)
            self._weight += weight
            while len(self._entries) > self.max_entries or self._weight > self.max_shards:
                _, (_, _, evicted) = self._entries.popitem(last=False)
                self._weight -= evicted
        return data


_rendered_splits = RenderedSplits()


def version_json(body: dict[str, Any], splits: bytes | None = None) -> bytes:
    """``body`` validated and serialised through :class:`VersionOut`; ``splits``, if given, are
    already (see :class:`RenderedSplits`) and take the place of ``body``'s ``null``."""
    data = _VERSION.dump_json(_VERSION.validate_python(body))
    if splits is None:
        return data
    if not data.endswith(_NO_SPLITS):  # pragma: no cover - VersionOut's field order changed
        raise AssertionError("VersionOut must end with its splits")
    return b"".join((data[: -len(_NO_SPLITS)], b',"splits":', splits, b"}"))


router = APIRouter(tags=["versions"], responses=AUTHENTICATED)


#: Stands for the echoed ``ref`` in a rendered answer (never a valid reference).
_REF_SLOT = "\x00ref\x00"
_REF_SLOT_JSON = b'"ref":"\\u0000ref\\u0000"'


def version_etag(record: Any, shards: bool) -> str | None:
    """The ``ETag`` of a published version's answer (None for staged and abandoned ones).

    It covers everything the answer says except the echoed ``ref`` (hence a weak tag): the
    version's identity and content digest, which never change, and its state, deprecation and
    data state (retention deletes a version's data), which may.
    """
    if not record.published:
        return None
    parts = (
        record.name,
        record.content_digest,
        record.state,
        record.deprecated_at,
        record.deprecated_reason,
        record.data_state,
        record.collected_at,
        record.collected_reason,
        shards,
    )
    tag = _etags.get(parts)
    if tag is None:
        tag = entity_tag(*parts, weak=True)
        if len(_etags) >= _ETAGS_KEPT:
            _etags.clear()
        _etags[parts] = tag
    return tag


#: ETags computed lately, by what they cover: a held resolve asks for the same one again and
#: again (a hash over the parts' text, ~5 µs, saved); a tag depends only on its parts.
_etags: dict[tuple[Any, ...], str] = {}
_ETAGS_KEPT = 4096


# The hot path (resolve) comes first: routes are matched in order.
@router.get(
    "/versions/{ref}",
    response_model=VersionOut,
    responses={**NOT_MODIFIED, **errors(400, 404, 409)},
)
async def get_version(
    ref: str,
    repository: RepositoryDep,
    _who: Reader,
    shards: bool = True,
    expect_digest: Annotated[str | None, Query(description="sha256:<64 hex>")] = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Resolve any reference form to a version, with its shards unless ``shards=false``.

    A published version's answer carries an ``ETag``; sent back in ``If-None-Match``, it makes
    the service answer ``304`` while the reference still designates that version in that state.
    """
    return await resolve_response(repository, ref, shards, expect_digest, if_none_match)


async def resolve_response(
    repository: Repository,
    ref: str,
    shards: bool,
    expect_digest: str | None,
    if_none_match: str | None,
) -> Response:
    """The answer to ``GET /versions/{ref}`` (the declared route and :class:`HotResolveRoute`)."""
    record = await repository.versions.resolve_async(
        ref, shards=shards, expect_digest=expect_digest
    )
    etag = version_etag(record, shards)
    if etag is None:
        return Response(version_json(record.to_json(ref=ref)), media_type="application/json")
    if etag_matches(if_none_match, etag):
        return not_modified(etag)
    # A published version's answer differs between requests only by the echoed ``ref``: it is
    # rendered once per (version, state, deprecation, shards) — what its ETag covers.
    rendered = repository.versions.rendered_pages.get(("version", etag))
    if rendered is None:
        body = record.to_json(ref=_REF_SLOT)
        splits = None
        if record.shards is not None and record.rendered_splits is not None:
            splits = _rendered_splits.get(record.rendered_splits)
            body["splits"] = None
        rendered = version_json(body, splits)
        repository.versions.rendered_pages.put(("version", etag), rendered)
    data = rendered.replace(_REF_SLOT_JSON, b'"ref":' + orjson.dumps(ref), 1)
    return Response(
        data, media_type="application/json", headers={"ETag": etag, "Cache-Control": "no-cache"}
    )


class HotResolveRoute(HotRoute):
    """``GET /api/v1/versions/{ref}`` in its common forms, without FastAPI's per-request
    dependency and parameter machinery (issue 12: resolving ``coco@latest`` is the request the
    service answers most, and that machinery was ~45 % of its CPU).

    It is matched before the declared route (:func:`get_version`, which stays the one in the
    OpenAPI document) and takes only requests whose answer it gives exactly as that route
    would: a ``GET`` without a body, whose query holds ``shards=true|false`` and
    ``expect_digest=…`` at most once each and nothing else.  Anything else — another spelling
    of a boolean, an unknown or repeated parameter, ``HEAD`` — falls through to the declared
    route, so validation errors keep their one source.  Authentication, the answer and its
    errors are the declared route's own functions (:data:`~recordkeeper_service.deps.get_principal`,
    :func:`resolve_response`, the app's error handlers).
    """

    def __init__(self, path: str) -> None:
        super().__init__(path, self._endpoint, {"shards": boolean, "expect_digest": text})

    @staticmethod
    async def _endpoint(request: Request) -> Response:
        principal = await get_principal(request)
        principal.require("read")
        params: dict[str, Any] = request.scope[HOT_PARAMS]
        return await resolve_response(
            request.app.state.repository,
            request.path_params["ref"],
            params.get("shards", True),
            params.get("expect_digest"),
            request.headers.get("if-none-match"),
        )


def hot_resolve_route(prefix: str) -> HotResolveRoute:
    """The hot route for ``{prefix}/versions/{ref}`` (install it before the API router)."""
    return HotResolveRoute(f"{prefix}/versions/{{ref}}")


@router.post(
    "/datasets/{name}/versions",
    status_code=201,
    response_model=VersionOut,
    responses=errors(400, 404, 409, 413),
)
def stage_version(
    name: str, body: StageIn, repository: RepositoryDep, who: Writer
) -> dict[str, Any]:
    """Stage a new version under a staged name (with `reserve` or `content_digest`: under its
    number and committed name, or answer the committed duplicate); answer its storage prefix."""
    record = repository.versions.stage(
        name,
        actor=who.name,
        desc=body.desc,
        date=body.date,
        root=body.root,
        metadata=body.metadata,
        reserve=body.reserve,
        content_digest=body.content_digest,
        on_duplicate=body.on_duplicate,
        provenance=body.provenance.document() if body.provenance is not None else None,
        base=body.base,
    )
    return record.to_json()


@router.get(
    "/datasets/{name}/versions", response_model=ListOut[VersionOut], responses=errors(400, 404)
)
def list_versions(
    name: str,
    repository: RepositoryDep,
    _who: Reader,
    state: Annotated[
        list[State] | None,
        Query(
            description="only versions in these states (repeatable: "
            "`?state=committed&state=deprecated`)"
        ),
    ] = None,
    since: Annotated[str | None, Query(description="YYYYMMDD, inclusive")] = None,
    until: Annotated[str | None, Query(description="YYYYMMDD, inclusive")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Versions of a dataset, newest first, without shards."""
    page = repository.versions.list(
        name, state=state, since=since, until=until, limit=limit, offset=offset
    )
    return page.to_json()


class CommitOut(VersionOut):
    leakage_warning: LeakageWarningOut | None = Field(
        default=None,
        description="only when the dataset's leakage policy is warn and the splits overlap "
        "above its max_rate (pairs), or the commit carried no leakage check (missing)",
    )


@router.post(
    "/versions/{version_name}/commit",
    response_model=CommitOut,
    responses=errors(400, 404, 409, 413),
)
def commit_version(
    version_name: str,
    repository: RepositoryDep,
    who: Writer,
    background: BackgroundTasks,
    body: CommitIn | None = None,
) -> dict[str, Any]:
    """Check completeness, compute digests, merge schemas and make the version visible."""
    on_duplicate = body.on_duplicate if body is not None else "error"
    changes = body.changes.model_dump() if body is not None and body.changes else None
    leakage = body.leakage.model_dump() if body is not None and body.leakage else None
    record = repository.commits.commit(
        version_name,
        on_duplicate=on_duplicate,
        actor=who.name,
        changes=changes,
        leakage=leakage,
        defer=background.add_task,  # PostgreSQL's ANALYZE after a derived commit: once answered
    )
    answer = record.to_json()
    if record.leakage_warning is not None:
        answer["leakage_warning"] = record.leakage_warning
    return answer


@router.post(
    "/versions/{version_name}/abandon", response_model=VersionOut, responses=errors(400, 404, 409)
)
def abandon_version(version_name: str, repository: RepositoryDep, who: Writer) -> dict[str, Any]:
    """Abandon a staged version (idempotent)."""
    return repository.versions.abandon(version_name, actor=who.name).to_json()


@router.post(
    "/versions/{ref}/deprecate", response_model=VersionOut, responses=errors(400, 404, 409, 413)
)
def deprecate_version(
    ref: str, repository: RepositoryDep, who: Writer, body: DeprecateIn | None = None
) -> dict[str, Any]:
    """Deprecate a committed version: it stays resolvable by name/number, not via latest."""
    reason = body.reason if body is not None else None
    force = body.force if body is not None else False
    if force:
        who.require("admin")
    record = repository.versions.deprecate(ref, reason=reason, actor=who.name, force=force)
    return record.to_json()


class SplitCountsOut(OutModel):
    shard_count: int
    record_count: int
    size: int


class VersionSplitsOut(OutModel):
    name: str
    splits: dict[str, SplitCountsOut]


@router.get("/versions/{ref}/splits", response_model=VersionSplitsOut, responses=errors(400, 404))
def version_splits(ref: str, repository: RepositoryDep, _who: Reader) -> dict[str, Any]:
    """Shard count, record count and size per split, without the shards (a cheap summary for
    lists of versions); staged versions count the shards registered so far."""
    return repository.versions.split_counts(ref)

"""What every router shares: the request/response base models, lists, errors.

Each resource's router module (``routes/<resource>.py``) holds its own request models (``*In``)
and response models (``*Out``).  Request models check only JSON *types* (wrong types →
``422 invalid_request``); the rules with their own error codes (names, hashes, ranges, URIs) are
checked by the repository so that bad input gets the precise code from docs/rest-api.md.

Routes return the domain records' ``to_json()`` and declare the ``*Out`` model that FastAPI
validates it against and serialises it through (pydantic-core, straight to JSON bytes), so the
OpenAPI document describes exactly what is sent.  Response models forbid unknown fields: a field
added to a record but not to its model fails the tests instead of going undocumented.  The one
exception to "FastAPI serialises" is the hot path, ``GET /versions/{ref}``: it serialises through
:class:`~recordkeeper_service.routes.versions.VersionOut` itself, so that a cached version's
shards are validated and serialised once, not per request (see ``routes/versions.py``).
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from typing import Annotated, Any, Generic, TypeVar

import orjson
from fastapi import Header, Response
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    model_validator,
)
from pydantic_core import PydanticCustomError

from recordkeeper.core.limits import (
    MAX_INT64,
    MAX_JSON_OBJECT_BYTES,
    MIN_INT64,
    invalid_number_at,
    invalid_text_at,
)

__all__ = [
    "AUTHENTICATED",
    "NOT_MODIFIED",
    "ErrorOut",
    "IfNoneMatch",
    "InModel",
    "Int64",
    "JsonObject",
    "ListOut",
    "OutModel",
    "entity_tag",
    "errors",
    "etag_matches",
    "not_modified",
]

T = TypeVar("T")


def _renderable(value: dict[str, Any]) -> dict[str, Any]:
    # Free-form JSON is stored as sent and answered later.  Its text and numbers were checked
    # with the whole body (InModel); what is left is the size, and anything orjson cannot render.
    try:
        rendered = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as exc:
        raise ValueError(f"not plain JSON: {exc}") from None
    if len(rendered) > MAX_JSON_OBJECT_BYTES:
        raise ValueError(
            f"{len(rendered)} bytes as compact JSON; at most {MAX_JSON_OBJECT_BYTES} are allowed "
            "(keep large data in shards or storage and refer to it)"
        )
    return value


#: A free-form JSON object (metadata, metrics) that the service can render back.
JsonObject = Annotated[dict[str, Any], AfterValidator(_renderable)]

#: A declared integer field: 64-bit signed, as every integer the service stores (InModel
#: refuses any other integer anywhere in a body; the bounds also document it in OpenAPI).
#: A field with narrower bounds states them itself (``Field(ge=0, le=MAX_INT64)``).
Int64 = Annotated[int, Field(ge=MIN_INT64, le=MAX_INT64)]


def _text_is_plain(data: Any) -> bool:
    # orjson refuses lone surrogates (and integers beyond 64 bits) and escapes NUL as \u0000:
    # one C pass over the body answers the common case; only a refusal or an escape is looked
    # at again to say where (or to find that it was only a big integer, or a "\\u0000" that was
    # sent as text).
    try:
        rendered = orjson.dumps(data)
    except orjson.JSONEncodeError:
        return False
    return b"\\u0000" not in rendered


def _refuse_unstorable(data: Any) -> None:
    """Raise the ``invalid_text``/``invalid_number`` validation error if ``data`` (a decoded
    body) holds text or numbers that the databases would not store alike (see InModel)."""
    where = None if _text_is_plain(data) else invalid_text_at(data)
    if where is not None:
        raise PydanticCustomError(
            "invalid_text",
            "{where}: text must be Unicode text without NUL (not a lone surrogate such as "
            "\\ud800, nor \\u0000)",
            {"where": where},
        )
    where = invalid_number_at(data)
    if where is not None:
        raise PydanticCustomError(
            "invalid_number",
            "{where}: numbers are finite (not NaN, Infinity or beyond a double such as 1e400) "
            "and integers 64-bit signed (-2**63 to 2**63-1)",
            {"where": where},
        )


#: Set while an outer request model validates its nested models (whose text it has checked).
_TEXT_CHECKED: ContextVar[bool] = ContextVar("recordkeeper_text_checked", default=False)


class InModel(BaseModel):
    """Request bodies: the one text, number and type policy of the boundary.

    * Unknown fields are ignored (forward compatible clients).
    * Every string and key anywhere in the body, free-form JSON included, is valid Unicode
      text without NUL: a lone surrogate (JSON ``"\\ud800"``) or a NUL (``"\\u0000"``, which
      SQLite stores and PostgreSQL refuses) refuses the whole body with ``422
      invalid_request`` (``invalid_text``) naming where it is, before any field is looked at,
      so nothing that cannot be stored or rendered back alike on both databases reaches a
      repository.
    * Every number anywhere in the body, free-form JSON included, is finite and every integer
      64-bit signed: ``NaN``, ``Infinity`` (which Python's JSON decoder accepts) and ``1e400``
      (decoded as an infinity) would be stored as null by SQLite and refused by PostgreSQL;
      they, and integers beyond 64 bits, refuse the whole body the same way
      (``invalid_number``).
    * Types are strict: an ``int`` field takes a JSON integer only (not ``0.0``, ``false`` or
      ``"0"``), a ``str`` field a JSON string only, a ``bool`` field ``true``/``false`` only.
    """

    model_config = ConfigDict(extra="ignore", strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _text_and_numbers_are_storable(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any]
    ) -> Any:
        # The outermost model checks the whole body once; nested models (10,000 shards of a
        # registration) are validated inside that check and skip it.
        if _TEXT_CHECKED.get():
            return handler(data)
        _refuse_unstorable(data)
        token = _TEXT_CHECKED.set(True)
        try:
            return handler(data)
        finally:
            _TEXT_CHECKED.reset(token)


class OutModel(BaseModel):
    """Response bodies: exactly the documented fields."""

    model_config = ConfigDict(extra="forbid")


def _extra(codes: str, meaning: str) -> Any:
    return Field(default=None, description=f"only with {codes}: {meaning}")


class ErrorOut(BaseModel):
    """Every error: ``code`` (also in the ``X-Error-Code`` header), ``detail``, ``request_id``
    (also in the ``X-Request-ID`` header), and the extra
    fields its code documents (docs/rest-api.md, "Errors"); each extra field below says which
    codes send it, and no other code sends it."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="stable error code (docs/rest-api.md)")
    detail: str = Field(description="a sentence for people, at most 1,000 characters")
    request_id: str | None = Field(
        default=None,
        description="every code: the request's id, as in the `X-Request-ID` response header "
        "and the service's request log line",
    )
    errors: list[dict[str, Any]] | None = _extra(
        "`invalid_request`", "at most 50 `{loc, msg, type}` problems (never the input)"
    )
    shard: int | str | None = _extra(
        "`invalid_shard`, `invalid_hash`, `storage_root_not_allowed`, `shard_conflict`, "
        "`shard_not_found`",
        "position of the offending shard in the request (`null` for the request as a whole); "
        "for `shard_not_found` the base's shard asked for (`SPLIT:INDEX` or its URI)",
    )
    split: str | None = _extra(
        "`split_not_found`, `split_exists`",
        "the split a derived version's change names that the base lacks (`split_not_found`), or "
        "a rename's target the version already keeps (`split_exists`)",
    )
    max_bytes: int | None = _extra("`payload_too_large`", "the body limit in bytes")
    required_scope: str | None = _extra("`forbidden`", "the scope the route needs")
    allowed_roots: list[str] | None = _extra(
        "`storage_root_not_allowed`", "the URI prefixes where data may live"
    )
    state: str | None = _extra(
        "`version_not_found`, `version_immutable`, `version_not_staged`, `conflict`, "
        "`provenance_immutable`, `parent_not_committed`, `version_deprecated`",
        "the version's current state (`staged`, `committed`, `deprecated`, `abandoned`)",
    )
    parent: str | None = _extra(
        "`parent_not_found`, `parent_not_committed`, `provenance_cycle`, `invalid_provenance`",
        "the parent reference as sent",
    )
    claimed_by: str | None = _extra(
        "`conflict` (gc-done)", "the collector (token name) that claimed the version"
    )
    missing: dict[str, list[int]] | None = _extra(
        "`version_incomplete`", "split → its first 1,000 missing shard indices"
    )
    feature: str | None = _extra("`schema_conflict`", "the feature whose kinds disagree")
    kinds: list[str] | None = _extra("`schema_conflict`", "the kinds seen for `feature`")
    record_types: list[str] | None = _extra(
        "`schema_conflict`", "the record types seen (instead of `feature`/`kinds`)"
    )
    duplicate_of: str | None = _extra(
        "`duplicate_content`", "the committed version with the same content"
    )
    content_digest: str | None = _extra("`duplicate_content`", "the shared content digest")
    expected: str | None = _extra("`digest_mismatch`", "the `expect_digest` sent")
    actual: str | None = _extra("`digest_mismatch`", "the version's content digest")
    version: str | None = _extra(
        "`digest_mismatch`, `version_data_deleted`, `storage_released` (gc-done), "
        "`version_deprecated`, `sample_not_found`, `split_overlap`, `leakage_check_missing`",
        "the version the reference resolved to (`digest_mismatch`, `version_deprecated`, "
        "`sample_not_found`), whose data was deleted (`version_data_deleted`), whose gc-done "
        "found a shard in released storage, or whose commit the leakage policy refused",
    )
    max_rate: float | None = _extra(
        "`split_overlap`", "the leak rate the dataset's leakage policy tolerates per pair"
    )
    pairs: list[dict[str, Any]] | None = _extra(
        "`split_overlap`",
        "each split pair over `max_rate`: `split`, `other_ref`, `other_split`, `records`, "
        "`leaked`, `distinct`, `rate`",
    )
    deleted_at: str | None = _extra(
        "`version_data_deleted`", "when the version's data was deleted (null while deleting)"
    )
    reason: str | None = _extra(
        "`version_data_deleted`, `version_deprecated`",
        "which collector deleted it: `retention` or `gc` (`version_data_deleted`); why it was "
        "deprecated (`version_deprecated`)",
    )
    uri: str | None = _extra(
        "`storage_released`, `shard_conflict`",
        "the shard URI in released storage (`storage_released`); the object a derived version "
        "adds although it keeps it from its base (`shard_conflict`)",
    )
    released_by: str | None = _extra("`storage_released`", "the version that released it")
    checkpoints: list[str] | None = _extra(
        "`version_in_use`", "`model@run/checkpoint` names trained on the version (the first 50)"
    )
    count: int | None = _extra("`version_in_use`", "how many checkpoints in all")
    fields: list[str] | None = _extra(
        "`checkpoint_conflict`", "the fields that differ from the registered checkpoint"
    )
    candidates: list[str] | None = _extra(
        "`ambiguous_checkpoint`", "every `model@run/checkpoint` the reference could mean"
    )
    revision: str | None = _extra("`not_ready`", "the database's migration revision")
    head: str | None = _extra("`not_ready`", "the revision this release needs")


class ListOut(OutModel, Generic[T]):
    data: list[T]
    count: int
    limit: int
    offset: int


_WHEN = {
    400: "invalid input: `invalid_dataset_name`, `invalid_reference`, `invalid_shard`, ...",
    401: "`unauthorized`: token missing (when required), malformed, unknown or revoked",
    403: "`forbidden` (scope too small) or `storage_root_not_allowed`",
    404: "not found: `dataset_not_found`, `version_not_found`, ...",
    409: "conflict with the stored state: `dataset_exists`, `version_immutable`, ...",
    413: "`payload_too_large`: body larger than the route's limit (RECORDKEEPER_MAX_BODY_BYTES "
    "for shard registration, RECORDKEEPER_MAX_SMALL_BODY_BYTES for the rest)",
    422: "`invalid_request`: malformed JSON, wrong types, missing fields, bad query values",
    503: "`service_unavailable`: the database is unreachable (safe to retry after the "
    "`Retry-After` seconds; the detail is generic, the cause is in the service log)",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entries documenting ``statuses`` as :class:`ErrorOut` answers."""
    return {status: {"model": ErrorOut, "description": _WHEN[status]} for status in statuses}


#: Errors any route behind authentication may answer (routers pass it as ``responses=``).
AUTHENTICATED = errors(401, 403, 422, 503)


def entity_tag(*parts: object, weak: bool = False) -> str:
    """An HTTP entity tag over ``parts`` (``W/"..."`` when ``weak``)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:32]
    return f'W/"{digest}"' if weak else f'"{digest}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weak comparison, RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == wanted for tag in if_none_match.split(","))


#: The ``304`` entry of a conditional GET's ``responses=``.
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not Modified: `If-None-Match` names the current `ETag`"}
}

#: The ``If-None-Match`` request header of a conditional GET.
IfNoneMatch = Annotated[
    str | None,
    Header(description="entity tags from earlier answers' `ETag`; a match answers 304"),
]


def not_modified(etag: str) -> Response:
    """The ``304`` answer for ``etag``."""
    return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})

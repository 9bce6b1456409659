"""Every error recordkeeper raises, with the stable code the service answers with.

One error model runs end to end: the service answers ``{"code": ..., "detail": ...}`` plus an
``X-Error-Code`` header, the client turns the code back into the exception class below, and the
CLI prints the detail and exits non-zero.  The codes are part of the public contract; never
rename one.

Exception tree::

    RecordkeeperError
    ├── InvalidInput (ValueError)                 400/422
    │   ├── InvalidName                           invalid_dataset_name
    │   ├── InvalidVersionName                    invalid_version_name
    │   ├── InvalidReference                      invalid_reference
    │   ├── InvalidDate                           invalid_date
    │   ├── InvalidDescription                    invalid_desc
    │   ├── InvalidHash                           invalid_hash
    │   ├── InvalidShard                          invalid_shard
    │   ├── InvalidAlias                          invalid_alias
    │   ├── InvalidRequest                        invalid_request
    │   ├── InvalidCheckpoint                     invalid_checkpoint
    │   ├── InvalidProvenance                     invalid_provenance
    │   │   ├── InvalidParams                     invalid_params
    │   │   └── ProvenanceCycle                   provenance_cycle
    │   ├── InvalidRecord (TypeError)             invalid_record (client side)
    │   ├── UnsupportedFormat                     unsupported_format (client side)
    │   ├── InvalidIndex                          invalid_record_index (client side)
    │   ├── InvalidSample                         invalid_sample
    │   ├── InvalidRecordDiff                     invalid_record_diff
    │   └── PayloadTooLarge                       payload_too_large
    ├── NotFound (LookupError)                    404
    │   ├── DatasetNotFound                       dataset_not_found
    │   ├── VersionNotFound                       version_not_found
    │   │   └── ParentNotFound                    parent_not_found
    │   ├── AliasNotFound                         alias_not_found
    │   ├── SchemaNotFound                        schema_not_found
    │   ├── TokenNotFound                         token_not_found
    │   ├── ModelNotFound                         model_not_found
    │   ├── CheckpointNotFound                    checkpoint_not_found
    │   ├── SplitNotFound (KeyError)              split_not_found (not in the version/base)
    │   ├── ShardNotFound                         shard_not_found (derive: not in the base)
    │   └── RouteNotFound                         not_found
    ├── Conflict                                  409
    │   ├── DatasetExists                         dataset_exists
    │   ├── TokenNameTaken                        token_name_taken
    │   ├── VersionImmutable                      version_immutable
    │   │   └── ProvenanceImmutable               provenance_immutable
    │   ├── ParentNotCommitted                    parent_not_committed
    │   ├── VersionNotStaged                      version_not_staged
    │   ├── VersionIncomplete                     version_incomplete
    │   ├── ShardConflict                         shard_conflict
    │   ├── SplitExists                           split_exists (derive: a rename collides)
    │   ├── SchemaConflict                        schema_conflict
    │   ├── DuplicateContent                      duplicate_content
    │   ├── VersionInUse                          version_in_use
    │   ├── VersionDeprecated                     version_deprecated (pinned data, an alias target)
    │   ├── VersionDataDeleted                    version_data_deleted (its storage was deleted)
    │   ├── StaleLock                             stale_lock (client side: pinned data)
    │   ├── CheckpointConflict                    checkpoint_conflict
    │   ├── AmbiguousCheckpoint                   ambiguous_checkpoint
    │   ├── StorageReleased                       storage_released
    │   ├── SplitOverlap                          split_overlap (commit: leakage policy refuse)
    │   └── LeakageCheckMissing                   leakage_check_missing (commit: no check sent)
    ├── DigestMismatch                            digest_mismatch (409)
    ├── StorageRootNotAllowed (PermissionError)   storage_root_not_allowed (403)
    ├── AuthenticationRequired (PermissionError)  unauthorized (401)
    ├── PermissionDenied (PermissionError)        forbidden (403)
    ├── StorageError (OSError)                    storage_error (client side)
    │   ├── CorruptShard                          corrupt_shard (client side)
    │   ├── StorageCredentialsMissing             storage_credentials_missing (client side)
    │   └── UnsafeStoragePath                     unsafe_storage_path (client side)
    ├── ServiceUnavailable (ConnectionError)      service_unavailable (503 / no answer)
    └── ServerError                               internal_error (500; a bug)
        └── InvalidResponse                       invalid_response (client side: an answer it
            │                                       cannot use: not JSON, wrong shape, endless
            │                                       paging)
            ├── ResponseTooLarge                  response_too_large (client side)
            └── ServiceRedirected                 service_redirected (client side: a 3xx)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "STATUS_CODES",
    "AliasNotFound",
    "AmbiguousCheckpoint",
    "AuthenticationRequired",
    "CheckpointConflict",
    "CheckpointNotFound",
    "Conflict",
    "CorruptShard",
    "DatasetExists",
    "DatasetNotFound",
    "DeprecatedVersionWarning",
    "DiffNotDerived",
    "DigestMismatch",
    "DuplicateContent",
    "InvalidAlias",
    "InvalidCheckpoint",
    "InvalidDate",
    "InvalidDescription",
    "InvalidHash",
    "InvalidIndex",
    "InvalidInput",
    "InvalidName",
    "InvalidParams",
    "InvalidProvenance",
    "InvalidRecord",
    "InvalidRecordDiff",
    "InvalidReference",
    "InvalidRequest",
    "InvalidResponse",
    "InvalidSample",
    "InvalidShard",
    "InvalidVersionName",
    "LeakageCheckMissing",
    "LeakageWarning",
    "ModelNotFound",
    "NotFound",
    "NotStoredWarning",
    "ParentNotCommitted",
    "ParentNotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "ProvenanceCycle",
    "ProvenanceImmutable",
    "RecordkeeperError",
    "ResponseTooLarge",
    "RouteNotFound",
    "SampleNotFound",
    "SchemaConflict",
    "SchemaNotFound",
    "ServerError",
    "ServiceRedirected",
    "ServiceUnavailable",
    "ShardConflict",
    "ShardNotFound",
    "SplitExists",
    "SplitNotFound",
    "SplitOverlap",
    "StaleLock",
    "StorageCredentialsMissing",
    "StorageError",
    "StorageReleased",
    "StorageRootNotAllowed",
    "TokenNameTaken",
    "TokenNotFound",
    "UnsafeStoragePath",
    "UnsupportedFormat",
    "VersionDataDeleted",
    "VersionDeprecated",
    "VersionImmutable",
    "VersionInUse",
    "VersionIncomplete",
    "VersionNotFound",
    "VersionNotStaged",
    "code_for_status",
    "error_for_code",
]


class RecordkeeperError(Exception):
    """Base of every recordkeeper error.

    ``code`` is the stable machine-readable code, ``detail`` the human sentence, ``status`` the
    HTTP status the service uses for it, and ``extra`` any structured fields that came with it
    (for example ``duplicate_of`` or ``checkpoints``).  An error the service answered carries the
    call's request id (:attr:`request_id`, also shown by ``str(error)``): it names the service's
    log line for that call.
    """

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra: dict[str, Any] = extra

    def to_dict(self) -> dict[str, Any]:
        """The JSON body the service answers with."""
        return {"code": self.code, "detail": self.detail, **self.extra}

    @property
    def request_id(self) -> str | None:
        """The ``X-Request-ID`` of the call that failed (the service logs it), if any."""
        value = self.extra.get("request_id")
        return value if isinstance(value, str) else None

    def __str__(self) -> str:
        text = f"{self.detail} [{self.code}]"
        request_id = self.request_id
        return f"{text} (request id {request_id})" if request_id else text


class InvalidInput(RecordkeeperError, ValueError):
    code = "invalid_input"
    status = 400


class InvalidName(InvalidInput):
    code = "invalid_dataset_name"


class InvalidVersionName(InvalidInput):
    code = "invalid_version_name"


class InvalidReference(InvalidInput):
    code = "invalid_reference"


class InvalidDate(InvalidInput):
    code = "invalid_date"


class InvalidDescription(InvalidInput):
    code = "invalid_desc"


class InvalidHash(InvalidInput):
    code = "invalid_hash"


class InvalidShard(InvalidInput):
    code = "invalid_shard"


class InvalidAlias(InvalidInput):
    code = "invalid_alias"


class InvalidRequest(InvalidInput):
    code = "invalid_request"
    status = 422


class InvalidCheckpoint(InvalidInput):
    """A model or checkpoint name, checkpoint reference, role or data entry is malformed."""

    code = "invalid_checkpoint"


class InvalidRecord(InvalidInput, TypeError):
    """A record to write is neither bytes-like nor a message with ``SerializeToString``.

    Also a :class:`TypeError`, what ``VersionWriter.write`` raised before it was typed.
    """

    code = "invalid_record"


class UnsupportedFormat(InvalidInput):
    """A file recordkeeper cannot read as records, or a feature of a format it does not decode.

    ``extra["format"]`` names what the file looks like (``"parquet"``, ``"riegeli"``, ...) and
    the detail says it in words ("a Riegeli file with transposed chunks"); ``extra["offset"]``
    is where the unsupported part starts, when that is known.
    """

    code = "unsupported_format"


class InvalidProvenance(InvalidInput):
    """A version's provenance (parents, sources, producer, params, note) breaks its rules."""

    code = "invalid_provenance"
    status = 422


class InvalidParams(InvalidProvenance):
    """Parameters that are not a JSON object with a canonical form, or too large."""

    code = "invalid_params"


class ProvenanceCycle(InvalidProvenance):
    """A parent that is the version itself or descends from it."""

    code = "provenance_cycle"


class InvalidIndex(InvalidInput):
    """A record index (``.rkidx``) that is not one, is damaged, or is of another format version
    (:mod:`recordkeeper.core.record_index`)."""

    code = "invalid_record_index"


class InvalidSample(InvalidInput):
    """A sample records document of the wrong shape, text, numbers or size
    (:mod:`recordkeeper.core.record_sample`)."""

    code = "invalid_sample"
    status = 422


class InvalidRecordDiff(InvalidInput):
    """A stored record diff summary of the wrong shape, with counts that do not add up or do
    not agree with the versions, or identities that are not hex of its width
    (:mod:`recordkeeper.core.record_diff_summary`)."""

    code = "invalid_record_diff"
    status = 422


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"
    status = 413


class NotFound(RecordkeeperError, LookupError):
    code = "not_found"
    status = 404


class VersionNotFound(NotFound):
    code = "version_not_found"


class DatasetNotFound(VersionNotFound):
    """There is no dataset of that name (also a :class:`VersionNotFound`: a reference into a
    dataset that does not exist finds no version, so ``except VersionNotFound`` still holds)."""

    code = "dataset_not_found"


class ParentNotFound(VersionNotFound):
    """A parent named in a version's provenance does not exist."""

    code = "parent_not_found"


class AliasNotFound(NotFound):
    code = "alias_not_found"


class SchemaNotFound(NotFound):
    code = "schema_not_found"


class TokenNotFound(NotFound):
    code = "token_not_found"


class RouteNotFound(NotFound):
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class CheckpointNotFound(NotFound):
    code = "checkpoint_not_found"


class SplitNotFound(NotFound, KeyError):
    """A split the version does not have: a derived version's change naming a split of its
    base, or a split asked of a version (``v.split(name)``, ``recordkeeper pull --split``).
    Also a :class:`KeyError`, what ``v.split``/``v.files`` raised before it was typed."""

    code = "split_not_found"


class SampleNotFound(NotFound):
    """The version has no sample records (``recordkeeper head REF --record-sample`` adds one)."""

    code = "sample_not_found"


class ShardNotFound(NotFound):
    """A derived version's change removes a shard its base does not have."""

    code = "shard_not_found"


class Conflict(RecordkeeperError):
    code = "conflict"
    status = 409


class DatasetExists(Conflict):
    code = "dataset_exists"


class TokenNameTaken(Conflict):
    """An active token already has that name: audit events and gc claims name tokens, so two
    active tokens may not share one (a revoked token's name may be used again)."""

    code = "token_name_taken"


class VersionImmutable(Conflict):
    code = "version_immutable"


class ProvenanceImmutable(VersionImmutable):
    """The provenance of a committed version cannot change."""

    code = "provenance_immutable"


class ParentNotCommitted(Conflict):
    """A parent named in a version's provenance is staged or abandoned, not committed."""

    code = "parent_not_committed"


class VersionNotStaged(Conflict):
    code = "version_not_staged"


class VersionIncomplete(Conflict):
    code = "version_incomplete"


class ShardConflict(Conflict):
    code = "shard_conflict"


class SplitExists(Conflict):
    """A derived version would have two splits of one name (a rename onto a kept split)."""

    code = "split_exists"


class SchemaConflict(Conflict):
    code = "schema_conflict"


class DuplicateContent(Conflict):
    """Committing would create a version whose content equals ``extra["duplicate_of"]``."""

    code = "duplicate_content"


class VersionInUse(Conflict):
    """The version trained checkpoints (``extra["checkpoints"]``) and cannot be removed."""

    code = "version_in_use"


class VersionDeprecated(Conflict):
    """A deprecated version where only a committed one will do: pinned data or a lock that
    names it, an alias moved to it (``extra``: ``reason``, and ``version``/``state`` from the
    service)."""

    code = "version_deprecated"


class VersionDataDeleted(Conflict):
    """The version's storage was deleted (or is being deleted) by retention: its row, digests,
    schema and lineage are kept, its records cannot be read (``extra``: ``version``,
    ``deleted_at`` (None while the deletion runs), ``reason``)."""

    code = "version_data_deleted"


class StaleLock(Conflict):
    """A lock file no longer matches its config's data section (``extra["entries"]``: each
    entry added, removed or changed since the lock was written); re-run ``recordkeeper lock``."""

    code = "stale_lock"


class CheckpointConflict(Conflict):
    """A checkpoint was registered again with different lineage (parent, data, step, URI)."""

    code = "checkpoint_conflict"


class AmbiguousCheckpoint(Conflict):
    """``model/ckpt-N`` names checkpoints of several runs; ``extra["candidates"]`` lists each
    one's full reference (``model@run/ckpt-N``)."""

    code = "ambiguous_checkpoint"


class StorageReleased(Conflict):
    """A shard lies at or under storage released for deletion (a version gc claimed or
    collected), or is an object of such a version: it may be deleted at any moment, so no
    version may reference it (``extra["released_by"]``: the releasing version's name)."""

    code = "storage_released"


class DiffNotDerived(Conflict):
    """A diff asked for from the derivation only (``basis=derivation``) of two versions
    neither of which is derived from the other through ``base`` links with recorded prefixes:
    it needs both versions' shards (ask with ``basis=any``, the default)."""

    code = "diff_not_derived"


class SplitOverlap(Conflict):
    """A commit refused by its dataset's leakage policy (``refuse``): an evaluation split shares
    records with another split above the tolerated rate (``pairs``: each overlapping pair's
    ``split``, ``other_ref``, ``other_split``, ``records``, ``leaked``, ``distinct``,
    ``rate``; ``max_rate``).  The version stays staged."""

    code = "split_overlap"


class LeakageCheckMissing(Conflict):
    """A commit without a leakage check result under a ``refuse`` leakage policy (an older
    client, or a version written without record identity).  The version stays staged."""

    code = "leakage_check_missing"


class DigestMismatch(RecordkeeperError):
    code = "digest_mismatch"
    status = 409


class StorageRootNotAllowed(RecordkeeperError, PermissionError):
    code = "storage_root_not_allowed"
    status = 403


class AuthenticationRequired(RecordkeeperError, PermissionError):
    code = "unauthorized"
    status = 401


class PermissionDenied(RecordkeeperError, PermissionError):
    code = "forbidden"
    status = 403


class StorageError(RecordkeeperError, OSError):
    """Reading or writing object storage failed (missing object, bad credentials, ...)."""

    code = "storage_error"
    status = 502


class CorruptShard(StorageError):
    """A shard's bytes are not valid TFRecord framing; ``extra["offset"]`` is where it broke."""

    code = "corrupt_shard"


class StorageCredentialsMissing(StorageError):
    """No credentials for the object store were found (botocore's ``NoCredentialsError``,
    google-auth's ``DefaultCredentialsError``): the message says where they are looked for
    (``extra["reason"]`` is ``no_credentials``)."""

    code = "storage_credentials_missing"


class UnsafeStoragePath(StorageError):
    """A local path would be written, deleted or registered through a symbolic link, or
    resolves outside the allowed roots, or is a file recordkeeper did not create where it
    creates its own (``extra["path"]``, ``extra["reason"]``: ``symlink``, ``outside_roots``,
    ``exists``).  Nothing was written or deleted there."""

    code = "unsafe_storage_path"


class ServiceUnavailable(RecordkeeperError, ConnectionError):
    code = "service_unavailable"
    status = 503


class ServerError(RecordkeeperError):
    code = "internal_error"
    status = 500


class InvalidResponse(ServerError):
    """The client cannot use what the service (or a proxy in front of it) answered: a body that
    is not JSON, a value of the wrong type or a missing field, a page cursor that does not
    advance, more items than the list's count.  Raised by the client, never answered."""

    code = "invalid_response"
    status = 502


class ResponseTooLarge(InvalidResponse):
    """An answer's body is longer than the client accepts (``extra["limit"]``, bytes)."""

    code = "response_too_large"


class ServiceRedirected(InvalidResponse):
    """The service URL answered a redirect (``extra["location"]``): the client follows none
    (a proxy sending ``http://`` to ``https://`` means the URL to configure is the other one)."""

    code = "service_redirected"


def _all_subclasses(cls: type[RecordkeeperError]) -> list[type[RecordkeeperError]]:
    found: list[type[RecordkeeperError]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


_BY_CODE: dict[str, type[RecordkeeperError]] = {
    cls.code: cls for cls in _all_subclasses(RecordkeeperError)
}


def error_for_code(code: str, detail: str, **extra: Any) -> RecordkeeperError:
    """Build the typed exception for a service error ``code`` (unknown codes keep the base type)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = RecordkeeperError(detail, **extra)
        err.code = code  # type: ignore[misc]
        return err
    return cls(detail, **extra)


#: The code of an error answer that carries none (a proxy's page, a framework's own 404/405):
#: the client reads it to pick the exception class, the service writes it for the errors its
#: framework raises.  Statuses not listed give ``internal_error`` (5xx) or ``invalid_input``.
STATUS_CODES: dict[int, str] = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "invalid_request",
    422: "invalid_request",
    503: "service_unavailable",
}


def code_for_status(status: int) -> str:
    """The stable code of an HTTP error ``status`` that came without one."""
    return STATUS_CODES.get(status, "internal_error" if status >= 500 else "invalid_input")


class DeprecatedVersionWarning(UserWarning):
    """A deprecated version is used — resolved, read by ``tf_dataset``, or registered as the
    data of a checkpoint — where a lock or ``load_pinned`` would refuse it (the message gives
    the deprecation reason).  Importable from :mod:`recordkeeper` and ``recordkeeper.values``."""


class LeakageWarning(UserWarning):
    """A version was committed under a ``warn`` leakage policy although an evaluation split
    shares records with another split above the tolerated rate, or without a leakage check
    (the message names the pairs; the service recorded a ``version.leakage_warning`` event).
    Importable from :mod:`recordkeeper`."""


class NotStoredWarning(RuntimeWarning):
    """Work that was done but whose best-effort record in the registry was refused: a record
    diff computed but its summary not stored, a version committed but its sample records not
    stored (the message says why).  A ``RuntimeWarning``; the CLI shows it as a ``warning:``
    line.  Importable from :mod:`recordkeeper`."""

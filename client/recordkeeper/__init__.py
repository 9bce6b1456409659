"""recordkeeper: dataset versioning and lineage for TFRecord training data.

Import as ``import recordkeeper as rk``.  The base package never imports TensorFlow; the
TensorFlow integrations live in :mod:`recordkeeper.tf`.
"""

from __future__ import annotations

from recordkeeper.client import Client, DuplicateWarning
from recordkeeper.core.errors import (
    AliasNotFound,
    AmbiguousCheckpoint,
    AuthenticationRequired,
    CheckpointConflict,
    CheckpointNotFound,
    Conflict,
    CorruptShard,
    DatasetExists,
    DatasetNotFound,
    DigestMismatch,
    DuplicateContent,
    InvalidAlias,
    InvalidCheckpoint,
    InvalidDate,
    InvalidDescription,
    InvalidHash,
    InvalidIndex,
    InvalidInput,
    InvalidName,
    InvalidParams,
    InvalidProvenance,
    InvalidRecord,
    InvalidReference,
    InvalidRequest,
    InvalidResponse,
    InvalidShard,
    InvalidVersionName,
    ModelNotFound,
    NotFound,
    ParentNotCommitted,
    ParentNotFound,
    PayloadTooLarge,
    PermissionDenied,
    ProvenanceCycle,
    ProvenanceImmutable,
    RecordkeeperError,
    ResponseTooLarge,
    RouteNotFound,
    SchemaConflict,
    SchemaNotFound,
    ServerError,
    ServiceRedirected,
    ServiceUnavailable,
    ShardConflict,
    StaleLock,
    StorageError,
    StorageReleased,
    StorageRootNotAllowed,
    TokenNameTaken,
    TokenNotFound,
    UnsafeStoragePath,
    UnsupportedFormat,
    VersionDataDeleted,
    VersionDeprecated,
    VersionImmutable,
    VersionIncomplete,
    VersionInUse,
    VersionNotFound,
    VersionNotStaged,
)
from recordkeeper.core.lineage import CheckpointRef
from recordkeeper.core.manifest import ManifestEntry, content_digest
from recordkeeper.core.naming import VersionName, format_version_name, parse_version_name
from recordkeeper.core.refs import Reference, parse_reference
from recordkeeper.core.schema import Feature, Schema
from recordkeeper.core.version import __version__
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.diff import FeatureChange, ShardChange, VersionDiff
from recordkeeper.lineage import CheckpointInfo, Consumers, Lineage, LineageGraph
from recordkeeper.locking import lock_config
from recordkeeper.models import DatasetInfo, DatasetVersion, DeprecatedVersionWarning, Shard, Split
from recordkeeper.pinned import PinnedData, load_pinned
from recordkeeper.provenance import Parent, Producer, Provenance, Source, SourceIdentity
from recordkeeper.verify import ShardProblem, VerifyReport
from recordkeeper.writer import VersionWriter

__all__ = [
    "AliasNotFound",
    "AmbiguousCheckpoint",
    "AuthenticationRequired",
    "CheckpointConflict",
    "CheckpointInfo",
    "CheckpointNotFound",
    "CheckpointRef",
    "Client",
    "Conflict",
    "Consumers",
    "CorruptShard",
    "Dataset",
    "DatasetExists",
    "DatasetInfo",
    "DatasetNotFound",
    "DatasetVersion",
    "DeprecatedVersionWarning",
    "DigestMismatch",
    "DuplicateContent",
    "DuplicateWarning",
    "Feature",
    "FeatureChange",
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
    "InvalidReference",
    "InvalidRequest",
    "InvalidResponse",
    "InvalidShard",
    "InvalidVersionName",
    "Lineage",
    "LineageGraph",
    "ManifestEntry",
    "ModelNotFound",
    "NotFound",
    "Parent",
    "ParentNotCommitted",
    "ParentNotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "PinnedData",
    "Producer",
    "Provenance",
    "ProvenanceCycle",
    "ProvenanceImmutable",
    "RecordkeeperError",
    "Reference",
    "ResponseTooLarge",
    "RouteNotFound",
    "Schema",
    "SchemaConflict",
    "SchemaNotFound",
    "ServerError",
    "ServiceRedirected",
    "ServiceUnavailable",
    "Shard",
    "ShardChange",
    "ShardConflict",
    "ShardFile",
    "ShardProblem",
    "Source",
    "SourceIdentity",
    "Split",
    "StaleLock",
    "StorageError",
    "StorageReleased",
    "StorageRootNotAllowed",
    "TokenNameTaken",
    "TokenNotFound",
    "UnsafeStoragePath",
    "UnsupportedFormat",
    "VerifyReport",
    "VersionDataDeleted",
    "VersionDeprecated",
    "VersionDiff",
    "VersionImmutable",
    "VersionInUse",
    "VersionIncomplete",
    "VersionName",
    "VersionNotFound",
    "VersionNotStaged",
    "VersionWriter",
    "__version__",
    "content_digest",
    "format_version_name",
    "load_pinned",
    "lock_config",
    "parse_reference",
    "parse_version_name",
]


def __getattr__(name: str) -> object:
    """``rk.tf`` (checkpoint tracking, ``tf.data``) is imported on first use: no TensorFlow."""
    if name == "tf":
        import importlib

        return importlib.import_module("recordkeeper.tf")
    raise AttributeError(f"module 'recordkeeper' has no attribute {name!r}")

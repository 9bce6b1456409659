"""recordkeeper: dataset versioning and lineage for TFRecord training data.

Import as ``import recordkeeper as rk``.  The base package never imports TensorFlow; the
TensorFlow integrations live in :mod:`recordkeeper.tf`.
"""

from __future__ import annotations

from recordkeeper.client import Client, DuplicateWarning
from recordkeeper.dataset import Dataset, ShardFile
from recordkeeper.diff import FeatureChange, ShardChange, VersionDiff
from recordkeeper.errors import (
    AliasNotFound,
    AuthenticationRequired,
    Conflict,
    CorruptShard,
    DatasetExists,
    DatasetNotFound,
    DigestMismatch,
    DuplicateContent,
    InvalidAlias,
    InvalidDate,
    InvalidDescription,
    InvalidHash,
    InvalidInput,
    InvalidName,
    InvalidReference,
    InvalidRequest,
    InvalidShard,
    InvalidVersionName,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RecordkeeperError,
    RouteNotFound,
    SchemaConflict,
    SchemaNotFound,
    ServerError,
    ServiceUnavailable,
    ShardConflict,
    StorageError,
    StorageRootNotAllowed,
    TokenNotFound,
    VersionImmutable,
    VersionIncomplete,
    VersionInUse,
    VersionNotFound,
    VersionNotStaged,
)
from recordkeeper.manifest import ManifestEntry, content_digest
from recordkeeper.models import DatasetInfo, DatasetVersion, Shard, Split
from recordkeeper.naming import VersionName, format_version_name, parse_version_name
from recordkeeper.refs import Reference, parse_reference
from recordkeeper.schema import Feature, Schema
from recordkeeper.verify import ShardProblem, VerifyReport
from recordkeeper.writer import VersionWriter

__version__ = "0.1.0"

__all__ = [
    "AliasNotFound",
    "AuthenticationRequired",
    "Client",
    "Conflict",
    "CorruptShard",
    "Dataset",
    "DatasetExists",
    "DatasetInfo",
    "DatasetNotFound",
    "DatasetVersion",
    "DigestMismatch",
    "DuplicateContent",
    "DuplicateWarning",
    "Feature",
    "FeatureChange",
    "InvalidAlias",
    "InvalidDate",
    "InvalidDescription",
    "InvalidHash",
    "InvalidInput",
    "InvalidName",
    "InvalidReference",
    "InvalidRequest",
    "InvalidShard",
    "InvalidVersionName",
    "ManifestEntry",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "RecordkeeperError",
    "Reference",
    "RouteNotFound",
    "Schema",
    "SchemaConflict",
    "SchemaNotFound",
    "ServerError",
    "ServiceUnavailable",
    "Shard",
    "ShardChange",
    "ShardConflict",
    "ShardFile",
    "ShardProblem",
    "Split",
    "StorageError",
    "StorageRootNotAllowed",
    "TokenNotFound",
    "VerifyReport",
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
    "parse_reference",
    "parse_version_name",
]

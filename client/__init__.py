"""recordkeeper: dataset versioning and lineage for TFRecord training data.

Import as ``import recordkeeper as rk``.  The base package never imports TensorFlow; the
TensorFlow integrations live in :mod:`recordkeeper.tf`.
"""

from __future__ import annotations

from recordkeeper.errors import *  # noqa: F403
from recordkeeper.errors import __all__ as _error_names
from recordkeeper.manifest import ManifestEntry, content_digest
from recordkeeper.naming import VersionName, format_version_name, parse_version_name
from recordkeeper.refs import Reference, parse_reference
from recordkeeper.schema import Feature, Schema

__version__ = "0.1.0"

__all__ = sorted(
    [
        *_error_names,
        "Feature",
        "ManifestEntry",
        "Reference",
        "Schema",
        "VersionName",
        "__version__",
        "content_digest",
        "format_version_name",
        "parse_reference",
        "parse_version_name",
    ]
)

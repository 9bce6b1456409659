"""The one commit a Beam job makes: register every shard, then commit the staged version.

Runs in a single DoFn after a barrier (all shard descriptions gathered into one list), so the
version is committed exactly once, after every write finished.  Each step is idempotent, so a
retried commit bundle is harmless: registering identical shards again is a no-op, a version
that a previous attempt already committed refuses new shards (``version_not_staged``) and
answers the commit with itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recordkeeper.client import Client
from recordkeeper.core.errors import StorageError, VersionImmutable, VersionNotStaged
from recordkeeper.models import DatasetVersion, Shard
from recordkeeper.storage import remove
from recordkeeper.verify import verify_shards

__all__ = ["check_stored", "commit_version", "remove_quietly", "version_output"]


def check_stored(
    registrations: Sequence[Mapping[str, Any]], storage_options: Mapping[str, Any] | None
) -> None:
    """Fast-verify the registrations against the store before they are registered.

    The store's own checksum (S3 ChecksumSHA256 recomputed by the server-side copy, GCS CRC32C)
    must equal the digest the worker computed: bytes from another attempt of the same shard
    (two attempts racing on one name) cannot be registered under this attempt's digests.
    """
    shards = [Shard.from_dict(r) for r in registrations]
    verify_shards(shards, storage_options=storage_options).raise_for_problems()


def commit_version(
    client: Client,
    staged: str,
    registrations: Sequence[Mapping[str, Any]],
    *,
    force_new: bool,
) -> DatasetVersion:
    """Register ``registrations`` on ``staged`` and commit it; returns the committed version.

    Identical content keeps the existing version unless ``force_new`` (then the answer's name
    differs from ``staged``, which the service abandoned).
    """
    # VersionNotStaged: an earlier attempt of this bundle committed already; commit answers it
    with contextlib.suppress(VersionNotStaged, VersionImmutable):
        client.register_shards(staged, list(registrations))
    committed = client.commit(staged, on_duplicate="commit" if force_new else "use_existing")
    if not committed.splits:
        committed = client.resolve(committed.name)
    return committed


def remove_quietly(uris: Iterable[str], storage_options: Mapping[str, Any] | None) -> None:
    """Delete objects, ignoring failures (leftovers of a staged prefix are gc's to collect)."""
    for uri in uris:
        with contextlib.suppress(StorageError, OSError):
            remove(uri, storage_options)


def version_output(version: DatasetVersion) -> dict[str, Any]:
    """What the transforms emit for a version: its JSON summary (picklable, unlike the
    :class:`DatasetVersion`, which holds its client); ``client.resolve(v["name"])`` gets it back.
    """
    return version.to_dict()

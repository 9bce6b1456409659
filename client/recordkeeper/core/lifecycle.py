"""The states a dataset version goes through and what a commit does with a duplicate — written
once, for the client, the service's tables and its REST schema.

``staged`` (shards being added) → ``committed`` (immutable, numbered) → ``deprecated`` (still
readable, refused by pins and locks); ``abandoned`` is a staged version given up.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "LIVE_STATES",
    "ON_DUPLICATE",
    "PUBLISHED_STATES",
    "VERSION_STATES",
    "OnDuplicate",
    "VersionState",
]

VersionState = Literal["staged", "committed", "deprecated", "abandoned"]
VERSION_STATES: tuple[VersionState, ...] = get_args(VersionState)
#: States that resolution by number or alias can see; a version in them never changes its shards
#: (the service gives such a version's answer an ETag, and clients may keep its shards).
PUBLISHED_STATES: tuple[VersionState, ...] = ("committed", "deprecated")
#: States whose shard objects are live: storage under them is never deleted.
LIVE_STATES: tuple[VersionState, ...] = ("staged", "committed", "deprecated")

#: What committing content that an existing version already has does: refuse (``error``), answer
#: the existing version (``use_existing``) or commit a second version anyway (``commit``).
OnDuplicate = Literal["error", "use_existing", "commit"]
ON_DUPLICATE: tuple[OnDuplicate, ...] = get_args(OnDuplicate)

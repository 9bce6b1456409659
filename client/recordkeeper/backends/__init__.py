"""Storage backends: one profile per backend, found through one lookup.

================  =========================================================================
profile           identity recorded at registration, compared by fast verification
================  =========================================================================
``file``          ``mtime_ns``, ``ino``, ``size`` (no server-side checksum)
``s3``            ``etag``, ``version_id``, ``checksum_sha256`` (server-side, against the
                  shard's ``sha256``); listings and one-request small reads; the storage
                  retry policy
``gcs``           ``generation``, ``crc32c`` (server-side, against the shard's ``crc32c``),
                  ``md5``; gcsfs's own retries
any other scheme  the generic profile: whatever ``info()`` gives of a version, time or
                  checksum (``etag``, ``mtime``, ``created``, ``md5``…); when it gives none,
                  fast verification says that only deep verification can tell a same-size
                  rewrite
================  =========================================================================

Adding a backend is one profile::

    class AzureProfile(StorageProfile):
        name = "azure"
        schemes = ("abfs", "az")
        ...

    register_profile(AzureProfile())

(docs/client.md, "Storage backends", has the whole recipe.)  Everything else asks
:func:`profile_for` and never ``if backend == ...``.
"""

from __future__ import annotations

import re
import threading
from urllib.parse import urlsplit

from recordkeeper.backends.base import (
    ListedObject,
    Mismatch,
    ObjectStat,
    StorageProfile,
    b64_to_hex,
    gather_on_loop,
)
from recordkeeper.backends.gcs import GCSProfile
from recordkeeper.backends.local import LocalProfile
from recordkeeper.backends.s3 import S3Profile

__all__ = [
    "GCSProfile",
    "ListedObject",
    "LocalProfile",
    "Mismatch",
    "ObjectStat",
    "S3Profile",
    "StorageProfile",
    "b64_to_hex",
    "gather_on_loop",
    "profile_for",
    "profile_named",
    "profiles",
    "register_profile",
    "scheme_of",
    "unregister_profile",
]

_lock = threading.Lock()
_by_scheme: dict[str, StorageProfile] = {}
_generic: dict[str, StorageProfile] = {}


def register_profile(profile: StorageProfile, *, replace: bool = False) -> StorageProfile:
    """Serve ``profile.schemes`` with ``profile`` from now on (in this process).

    A scheme another profile serves raises ``ValueError`` unless ``replace=True``.  Returns
    the profile.  Register it where the filesystem is registered with fsspec (at import of
    your package, or before the first call), in every process that reads the shards.
    """
    if not profile.schemes:
        raise ValueError(f"{profile!r} names no URL scheme")
    with _lock:
        taken = [s for s in profile.schemes if s in _by_scheme and _by_scheme[s] is not profile]
        if taken and not replace:
            raise ValueError(
                f"scheme(s) {', '.join(taken)} already served by "
                f"{_by_scheme[taken[0]]!r}; pass replace=True"
            )
        for scheme in profile.schemes:
            _by_scheme[scheme] = profile
            _generic.pop(scheme, None)
    return profile


def unregister_profile(profile: StorageProfile) -> None:
    """Stop serving ``profile``'s schemes with it (they fall back to the generic profile)."""
    with _lock:
        for scheme in profile.schemes:
            if _by_scheme.get(scheme) is profile:
                del _by_scheme[scheme]


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def scheme_of(uri: str) -> str:
    """The URL scheme of ``uri`` (``file`` for a path without one)."""
    head, sep, _ = uri.partition("://")
    if not sep:
        return "file"
    if _SCHEME.fullmatch(head):  # what urlsplit finds, without its work per call (hot: per file)
        return head.lower()
    return urlsplit(uri).scheme.lower()


def profile_for(uri: str) -> StorageProfile:
    """The profile of ``uri``'s scheme: a registered one, else the generic profile named after
    the scheme."""
    scheme = scheme_of(uri)
    found = _by_scheme.get(scheme)
    if found is not None:
        return found
    with _lock:
        return _generic.setdefault(scheme, StorageProfile(name=scheme, schemes=(scheme,)))


def profile_named(name: str) -> StorageProfile:
    """The profile recorded as ``storage_identity["backend"] == name``."""
    for profile in profiles():
        if profile.name == name:
            return profile
    return profile_for(f"{name}://")


def profiles() -> list[StorageProfile]:
    """The registered profiles (each once)."""
    seen: dict[int, StorageProfile] = {}
    for profile in list(_by_scheme.values()):
        seen.setdefault(id(profile), profile)
    return list(seen.values())


for _builtin in (LocalProfile(), S3Profile(), GCSProfile()):
    register_profile(_builtin)
del _builtin

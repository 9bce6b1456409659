"""Many objects at once: metadata and small reads issued concurrently, listings instead of HEADs.

Verifying or publishing a thousand small shards is a thousand round trips per step; one at a
time (or one thread each) that costs seconds of waiting and of thread switching.  Here:

* :func:`stat_many` — :func:`~recordkeeper.storage.stat_object` for many URIs.  On S3 and GCS
  the requests run concurrently on the filesystem's own event loop (s3fs/gcsfs async APIs, at
  most ``concurrency`` in flight, no thread each); local files are stat'ed in a loop.  Each
  result is the same :class:`~recordkeeper.storage.ObjectStat` or
  :class:`~recordkeeper.errors.StorageError` one call would give.
* :func:`read_small_many` — whole small objects with their identity from the same response
  (one S3 ``GET`` with ``ChecksumMode=ENABLED`` answers the body, ETag, VersionId and
  ChecksumSHA256: the bytes and the identity are of one object version by construction).
* :func:`prefix_listing` — size and ETag of many objects from listings of their common prefix
  (on S3 ``ListObjectsV2`` pages, 1,000 objects a request), bounded so a crowded prefix is not
  walked; :func:`listing_or_nothing` when the listing is only a shortcut.

What each backend offers — async requests, one-request reads, listings — is its profile's
(:class:`~recordkeeper.backends.StorageProfile`: ``stat_async``, ``batch_reads``,
``lists_prefixes``); a backend without them is asked object by object on a few threads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from recordkeeper.backends import ListedObject, StorageProfile, gather_on_loop
from recordkeeper.core.errors import StorageError
from recordkeeper.storage import (
    LOOP_TIMEOUT,
    ObjectStat,
    forget_cached,
    profile_of,
    stat_object,
    storage_errors,
    to_uri,
    url_to_fs,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "ListedObject",
    "can_write_small_many",
    "listing_or_nothing",
    "prefix_listing",
    "read_small_many",
    "stat_many",
    "write_small_many",
]

#: requests in flight at once; more does not help on a 2-core client (botocore's parsing is
#: Python) and only queues on the server
DEFAULT_CONCURRENCY = 16

T = TypeVar("T")


def stat_many(
    uris: Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> list[ObjectStat | StorageError]:
    """``stat_object`` for each URI, in order; failures are returned, not raised."""
    if not uris:
        return []
    uris = [to_uri(u) for u in uris]
    profile = _one_profile(uris)
    if profile is None:
        return [*_stat_each(uris, storage_options, concurrency)]
    fs, _ = url_to_fs(uris[0], storage_options)
    if profile.local:
        stat = profile.stat  # a system call each: in a loop, no threads
        return [
            _captured(partial(stat, fs, u, fs._strip_protocol(u), timeout=None), u) for u in uris
        ]
    if getattr(fs, "async_impl", False):

        async def one(uri: str) -> ObjectStat:
            with storage_errors(uri):
                return await profile.stat_async(fs, uri, fs._strip_protocol(uri))

        return _gather(fs, [partial(one, u) for u in uris], concurrency)
    return [*_stat_each(uris, storage_options, concurrency)]


def _one_profile(uris: Sequence[str]) -> StorageProfile | None:
    """The profile of every URI of ``uris``, or None when they have several."""
    profile = profile_of(uris[0])
    return profile if all(profile_of(u) is profile for u in uris) else None


def read_small_many(
    uris: Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> list[tuple[bytes, ObjectStat] | StorageError]:
    """Each object's bytes and its identity, read whole (meant for small objects).

    Where the profile has one-request reads (S3: one ``GET`` answers both) they are used;
    elsewhere the identity is taken before and after the read and a change in between is an
    error (``reason="changed"``), as publishing checks it.
    """
    if not uris:
        return []
    uris = [to_uri(u) for u in uris]
    fs, _ = url_to_fs(uris[0], storage_options)
    profile = _one_profile(uris)
    if profile is not None and profile.batch_reads and getattr(fs, "async_impl", False):
        reader = profile

        async def one(uri: str) -> tuple[bytes, ObjectStat]:
            with storage_errors(uri):
                return await reader.read_whole_async(fs, uri, fs._strip_protocol(uri))

        return _gather(fs, [partial(one, u) for u in uris], concurrency)

    def read_checked(uri: str) -> tuple[bytes, ObjectStat]:
        before = stat_object(uri, storage_options)
        fs_, path = url_to_fs(uri, storage_options)
        forget_cached(fs_, path)
        with storage_errors(uri):
            data: bytes = fs_.cat_file(path)
        after = stat_object(uri, storage_options)
        if after.identity != before.identity or after.size != len(data):
            raise StorageError(
                f"{uri} changed while it was being read; publish again when writers have finished",
                uri=uri,
                reason="changed",
            )
        return data, after

    workers = max(1, min(len(uris), concurrency))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda u: _captured(lambda: read_checked(u), u), uris))


def can_write_small_many(uris: Sequence[str], storage_options: Mapping[str, Any] | None) -> bool:
    """Whether :func:`write_small_many` writes these objects one request each on the
    filesystem's event loop (one profile with :attr:`~StorageProfile.batch_writes`)."""
    if not uris:
        return False
    profile = _one_profile([to_uri(u) for u in uris])
    if profile is None or not profile.batch_writes:
        return False
    fs, _ = url_to_fs(uris[0], storage_options)
    return bool(getattr(fs, "async_impl", False))


def write_small_many(
    items: Sequence[tuple[str, bytes]],
    storage_options: Mapping[str, Any] | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> list[ObjectStat | StorageError]:
    """Write each ``(uri, data)`` whole (meant for small objects) and return the identity of
    what was written, in order; failures are returned, not raised.

    Only for URIs :func:`can_write_small_many` accepts: one request per object (S3: one
    ``PUT`` answering ETag, VersionId and ChecksumSHA256), ``concurrency`` at a time on the
    filesystem's event loop, no thread or upload stream per object.
    """
    if not items:
        return []
    uris = [to_uri(u) for u, _ in items]
    if not can_write_small_many(uris, storage_options):
        raise ValueError("write_small_many: these URIs have no one-request writes")
    fs, _ = url_to_fs(uris[0], storage_options)
    writer = profile_of(uris[0])

    async def one(uri: str, data: bytes) -> ObjectStat:
        with storage_errors(uri):
            return await writer.write_whole_async(fs, uri, fs._strip_protocol(uri), data)

    return _gather(
        fs, [partial(one, u, data) for u, (_, data) in zip(uris, items, strict=True)], concurrency
    )


def prefix_listing(
    uris: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ListedObject]:
    """Size and ETag of the listed ones among ``uris`` (all of one profile), keyed by URI.

    The profile lists (:meth:`~recordkeeper.backends.StorageProfile.listing`; S3: the keys'
    longest common prefix per bucket, page by page, stopping after twice the pages the URIs
    alone would fill, plus one).  URIs not in the result are asked for one by one.  A profile
    without listings (or URIs of several) gives an empty result.
    """
    uris = [to_uri(u) for u in uris]
    if not uris:
        return {}
    profile = _one_profile(uris)
    if profile is None or not profile.lists_prefixes:
        return {}
    fs, _ = url_to_fs(uris[0], storage_options)
    return profile.listing(fs, uris, timeout=LOOP_TIMEOUT)


def listing_or_nothing(
    uris: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ListedObject]:
    """:func:`prefix_listing` as a shortcut only: when the listing fails the result is empty and
    the caller asks for each object — a policy may allow reading objects but not listing the
    bucket, and a missing bucket is per-object news (``missing``).  An unreachable endpoint is
    raised at once: every request would fail the same way."""
    try:
        return prefix_listing(uris, storage_options)
    except StorageError as exc:
        if exc.extra.get("reason") == "unreachable":
            raise
        return {}


# -- internals ---------------------------------------------------------------------------


def _captured(call: Callable[[], T], uri: str) -> T | StorageError:
    try:
        with storage_errors(uri):
            return call()
    except StorageError as exc:
        return exc


def _stat_each(
    uris: Sequence[str], storage_options: Mapping[str, Any] | None, concurrency: int
) -> list[ObjectStat | StorageError]:
    """The generic way: one ``stat_object`` per URI on a few threads."""
    workers = max(1, min(len(uris), concurrency))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda u: _captured(lambda: stat_object(u, storage_options), u), uris))


def _gather(
    fs: Any, calls: Sequence[Callable[[], Awaitable[T]]], concurrency: int
) -> list[T | StorageError]:
    """Run the coroutines ``calls`` make on ``fs``'s event loop, ``concurrency`` at a time
    (each round bounded by :data:`~recordkeeper.storage.LOOP_TIMEOUT`)."""
    return gather_on_loop(fs, calls, concurrency, timeout=LOOP_TIMEOUT)

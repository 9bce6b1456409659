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
* :func:`s3_listing` — size and ETag of many S3 objects from ``ListObjectsV2`` pages of the
  keys' common prefix (1,000 objects a request), bounded so a crowded prefix is not walked;
  :func:`listing_or_nothing` when the listing is only a shortcut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from recordkeeper.core.errors import StorageError
from recordkeeper.storage import (
    LOOP_TIMEOUT,
    ObjectStat,
    backend_of,
    forget_cached,
    s3_head_request,
    stat_file,
    stat_from_info,
    stat_from_s3_head,
    stat_object,
    storage_errors,
    to_uri,
    url_to_fs,
)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "ListedObject",
    "listing_or_nothing",
    "read_small_many",
    "s3_listing",
    "stat_many",
]

#: requests in flight at once; more does not help on a 2-core client (botocore's parsing is
#: Python) and only queues on the server
DEFAULT_CONCURRENCY = 16
_LIST_PAGE = 1000  # keys per ListObjectsV2 page (S3's maximum)

T = TypeVar("T")


@dataclass(frozen=True)
class ListedObject:
    """What a listing says of an object: its size and ETag (no checksum, no version)."""

    uri: str
    size: int
    etag: str | None


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
    backend = backend_of(uris[0])
    if any(backend_of(u) != backend for u in uris):
        return [*_stat_each(uris, storage_options, concurrency)]
    fs, _ = url_to_fs(uris[0], storage_options)
    if backend == "file":
        return [_captured(partial(stat_file, u, u[len("file://") :]), u) for u in uris]
    if backend in ("s3", "gcs") and getattr(fs, "async_impl", False):

        async def one(uri: str) -> ObjectStat:
            path = fs._strip_protocol(uri)
            with storage_errors(uri):
                if backend == "s3":
                    head = await fs._call_s3("head_object", **s3_head_request(fs, path))
                    return stat_from_s3_head(uri, head)
                forget_cached(fs, path)
                return stat_from_info(uri, backend, await fs._info(path))

        return _gather(fs, [partial(one, u) for u in uris], concurrency)
    return [*_stat_each(uris, storage_options, concurrency)]


def read_small_many(
    uris: Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> list[tuple[bytes, ObjectStat] | StorageError]:
    """Each object's bytes and its identity, read whole (meant for small objects).

    On S3 one ``GET`` answers both; elsewhere the identity is taken before and after the read
    and a change in between is an error (``reason="changed"``), as publishing checks it.
    """
    if not uris:
        return []
    uris = [to_uri(u) for u in uris]
    fs, _ = url_to_fs(uris[0], storage_options)
    if all(backend_of(u) == "s3" for u in uris) and getattr(fs, "async_impl", False):

        async def one(uri: str) -> tuple[bytes, ObjectStat]:
            with storage_errors(uri):
                path = fs._strip_protocol(uri)
                response = await fs._call_s3("get_object", **s3_head_request(fs, path))
                body = response["Body"]
                try:
                    data: bytes = await body.read()
                finally:
                    body.close()
                stat = stat_from_s3_head(uri, response)
            if len(data) != stat.size:
                raise StorageError(
                    f"{uri}: read {len(data)} bytes of {stat.size}; the connection ended early",
                    uri=uri,
                    reason="error",
                )
            return data, stat

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


def s3_listing(
    uris: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ListedObject]:
    """Size and ETag of the listed ones among ``uris`` (all on S3), keyed by URI.

    Per bucket, the keys' longest common prefix is listed page by page.  Listing stops after
    twice the pages the URIs alone would fill, plus one: URIs not seen by then (or absent) are
    simply not in the result, and the caller asks for them one by one.
    """
    uris = [to_uri(u) for u in uris]
    if not uris:
        return {}
    fs, _ = url_to_fs(uris[0], storage_options)
    by_bucket: dict[str, dict[str, str]] = {}
    for uri in uris:
        bucket, key, version_id = fs.split_path(fs._strip_protocol(uri))
        if not version_id:  # a listing shows the current version only
            by_bucket.setdefault(bucket, {})[key] = uri
    found: dict[str, ListedObject] = {}

    async def list_bucket(bucket: str, keys: dict[str, str]) -> None:
        prefix = _common_prefix(keys)
        max_pages = 2 * (len(keys) // _LIST_PAGE + 1) + 1
        token = None
        for _ in range(max_pages):
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": _LIST_PAGE}
            if token:
                kwargs["ContinuationToken"] = token
            with storage_errors(f"s3://{bucket}/{prefix}"):
                page = await fs._call_s3("list_objects_v2", **kwargs)
            for entry in page.get("Contents", ()):
                uri = keys.get(entry["Key"])
                if uri is not None:
                    found[uri] = ListedObject(uri, int(entry["Size"]), entry.get("ETag"))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    calls = [partial(list_bucket, b, k) for b, k in by_bucket.items()]
    for result in _gather(fs, calls, DEFAULT_CONCURRENCY):
        if isinstance(result, StorageError):
            raise result
    return found


def listing_or_nothing(
    uris: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, ListedObject]:
    """:func:`s3_listing` as a shortcut only: when the listing fails the result is empty and
    the caller asks for each object — a policy may allow reading objects but not listing the
    bucket, and a missing bucket is per-object news (``missing``).  An unreachable endpoint is
    raised at once: every request would fail the same way."""
    try:
        return s3_listing(uris, storage_options)
    except StorageError as exc:
        if exc.extra.get("reason") == "unreachable":
            raise
        return {}


# -- internals ---------------------------------------------------------------------------


def _common_prefix(keys: Iterable[str]) -> str:
    """The longest string every key starts with (character by character, not by path)."""
    ordered = sorted(keys)
    first, last = ordered[0], ordered[-1]
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


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
    """Run the coroutines ``calls`` make on ``fs``'s event loop, ``concurrency`` at a time.

    A :class:`StorageError` is returned in its place; anything else propagates.
    """
    from fsspec.asyn import sync

    async def run_all() -> list[T | StorageError]:
        gate = asyncio.Semaphore(max(1, concurrency))

        async def guarded(call: Callable[[], Awaitable[T]]) -> T | StorageError:
            async with gate:
                try:
                    return await call()
                except StorageError as exc:
                    return exc

        return list(await asyncio.gather(*(guarded(c) for c in calls)))

    rounds = -(-len(calls) // max(1, concurrency))  # each round's requests are bounded in time
    result: list[T | StorageError] = sync(fs.loop, run_all, timeout=LOOP_TIMEOUT * max(1, rounds))
    return result

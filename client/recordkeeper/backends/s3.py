"""S3 (s3fs): identity is the ETag, the VersionId and the server-side ``ChecksumSHA256``.

* Uploads ask for ``ChecksumAlgorithm=SHA256``, so the object carries a full-object SHA-256
  that fast verification reads back with ``head_object(ChecksumMode=ENABLED)`` and compares
  with the shard's registered ``sha256`` without downloading anything.
* botocore's own retries are off unless ``config_kwargs.retries`` is given
  (:data:`S3_BOTOCORE_RETRIES`); every s3fs request goes through the storage retry policy
  (:data:`recordkeeper.core.retry.STORAGE_RETRY`), which replaces s3fs's own loop.
* Many objects are listed (``ListObjectsV2``, 1,000 keys a page) instead of one ``HEAD``
  each, and small objects are read whole with their identity in one ``GET``.
"""

from __future__ import annotations

import datetime
import email.utils
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import IO, Any, ClassVar

from recordkeeper.backends.base import (
    ListedObject,
    Mismatch,
    ObjectStat,
    StorageProfile,
    b64_to_hex,
    gather_on_loop,
)
from recordkeeper.backends.errors import storage_errors
from recordkeeper.core.errors import StorageError

__all__ = ["S3_BOTOCORE_RETRIES", "S3Profile", "parse_timestamp", "s3_head_request"]

#: botocore's own retries, when the caller sets none: one attempt per try of the retry
#: policy.  botocore's default (up to 5 attempts each, seconds apart) multiplies the policy's
#: attempts against a store that keeps failing (docs/reliability.md).
S3_BOTOCORE_RETRIES = {"mode": "standard", "total_max_attempts": 1}
_LIST_PAGE = 1000  # keys per ListObjectsV2 page (S3's maximum)


def s3_head_request(fs: Any, path: str) -> dict[str, Any]:
    """The ``head_object`` (or ``get_object``) arguments asking S3 for an object's checksum."""
    bucket, key, version_id = fs.split_path(path)
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}
    if version_id:
        kwargs["VersionId"] = version_id
    return kwargs


def stat_from_s3_head(uri: str, head: Mapping[str, Any]) -> ObjectStat:
    """An S3 object's identity from a ``head_object`` (or ``get_object``) response."""
    return ObjectStat(
        uri,
        int(head["ContentLength"]),
        {
            "backend": "s3",
            "etag": head.get("ETag"),
            "version_id": head.get("VersionId"),
            "checksum_sha256": head.get("ChecksumSHA256"),
        },
    )


def parse_timestamp(value: Any) -> Any:
    """A timestamp of an S3 answer as botocore's default parser gives it (an aware
    ``datetime``), taking the two forms S3 uses — RFC 1123 headers and ISO 8601 listings —
    without ``dateutil``; anything else (or a time without a zone) goes to botocore's parser."""
    if isinstance(value, str):
        try:
            parsed = (
                email.utils.parsedate_to_datetime(value)
                if "," in value
                else datetime.datetime.fromisoformat(value)
            )
        except (TypeError, ValueError, IndexError):
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    from botocore.utils import parse_timestamp as botocore_parse_timestamp

    return botocore_parse_timestamp(value)


class S3Profile(StorageProfile):
    """``s3://`` and ``s3a://`` through s3fs."""

    name = "s3"
    schemes = ("s3", "s3a")
    extra = "s3"
    batch_reads: ClassVar[bool] = True
    batch_writes: ClassVar[bool] = True
    lists_prefixes: ClassVar[bool] = True
    retried_by: ClassVar[str] = "recordkeeper"

    def prepare(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """One retry layer: the policy's; botocore's unless ``config_kwargs.retries`` is
        given."""
        options = dict(options or {})
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", dict(S3_BOTOCORE_RETRIES))
        return {**options, "config_kwargs": config}

    def configure(self, fs: Any, *, timeout: float) -> None:
        """Have botocore parse the timestamps of ``fs``'s answers with :func:`parse_timestamp`.

        Every S3 answer carries timestamps (``Last-Modified`` of each ``GET``/``HEAD``, one
        per object of a listing) that botocore parses with ``dateutil`` by default: ~0.1 ms
        each, a sixth of the client CPU of a small ``GET`` (issue 12).  botocore lets a session
        choose the parser; s3fs creates its session on first use, so this creates it now (no
        request is sent).  Once per filesystem instance.
        """
        if getattr(fs, "_recordkeeper_timestamps", False) or getattr(fs, "asynchronous", False):
            return
        if getattr(fs, "session", None) is None and hasattr(fs, "set_session"):
            import fsspec.asyn

            fsspec.asyn.sync(fs.loop, fs.set_session, timeout=timeout)
        session = getattr(fs, "session", None)
        if session is not None and hasattr(session, "get_component"):
            factory = session.get_component("response_parser_factory")
            factory.set_parser_defaults(timestamp_parser=parse_timestamp)
        fs._recordkeeper_timestamps = True

    def install_retry(self, call_with_policy: Callable[..., Awaitable[Any]]) -> None:
        """Have every s3fs request retried by the storage retry policy.

        s3fs sends each request through one module-level function, ``_error_wrapper(func, *,
        args, kwargs, retries)`` (``_call_s3``, ranged reads, ``cat``); this replaces it with
        one calling ``call_with_policy``, which keeps its contract (the final error translated
        by s3fs's ``translate_boto_error``).  Once per process; a s3fs without that function
        keeps its own loop.
        """
        try:
            import s3fs.core  # type: ignore[import-untyped]
            from s3fs.errors import translate_boto_error  # type: ignore[import-untyped]
        except ImportError:
            return
        current = getattr(s3fs.core, "_error_wrapper", None)
        if current is None or getattr(current, "_recordkeeper_policy", None) is call_with_policy:
            return

        async def error_wrapper(
            func: Any, *, args: Any = (), kwargs: Any = None, retries: int = 0
        ) -> Any:
            del retries  # s3fs's count: the policy bounds attempts and time
            return await call_with_policy(
                func, args=args, kwargs=kwargs or {}, translate=translate_boto_error
            )

        error_wrapper._recordkeeper_policy = call_with_policy  # type: ignore[attr-defined]
        s3fs.core._error_wrapper = error_wrapper

    # -- identity -----------------------------------------------------------------------------

    def stat(self, fs: Any, uri: str, path: str, *, timeout: float | None) -> ObjectStat:
        bounded = {"timeout": timeout} if timeout and getattr(fs, "async_impl", False) else {}
        head = fs.call_s3("head_object", **s3_head_request(fs, path), **bounded)
        return stat_from_s3_head(uri, head)

    async def stat_async(self, fs: Any, uri: str, path: str) -> ObjectStat:
        head = await fs._call_s3("head_object", **s3_head_request(fs, path))
        return stat_from_s3_head(uri, head)

    def stat_from_info(self, uri: str, info: Mapping[str, Any]) -> ObjectStat:
        if info.get("type") == "directory":
            raise FileNotFoundError(f"{uri} is a directory, not an object")
        return ObjectStat(
            uri,
            int(info.get("size") or 0),
            {
                "backend": "s3",
                "etag": info.get("ETag"),
                "version_id": info.get("VersionId"),
                "checksum_sha256": info.get("ChecksumSHA256"),
            },
        )

    def compare(
        self, registered: Mapping[str, Any], current: ObjectStat, *, sha256: str, crc32c: str
    ) -> Mismatch | None:
        ident = current.identity
        sha_now = ident.get("checksum_sha256")
        full = b64_to_hex(sha_now)
        if full is not None and full != sha256:
            return Mismatch(
                "checksum_mismatch", f"server-side sha256 is {full}, registered {sha256}"
            )
        before = registered.get("checksum_sha256")
        if before and sha_now and before != sha_now:
            return Mismatch(
                "checksum_mismatch",
                f"server-side ChecksumSHA256 is {sha_now}, registered {before}",
            )
        for key, label in (("etag", "ETag"), ("version_id", "VersionId")):
            if registered.get(key) and registered[key] != ident.get(key):
                return Mismatch(
                    "identity_changed",
                    f"{label} is {ident.get(key)}, registered {registered[key]} "
                    "(the object was rewritten)",
                )
        return None

    def blind_spot(self, registered: Mapping[str, Any]) -> str | None:
        if registered.get("etag") or registered.get("checksum_sha256"):
            return None
        return (
            "these S3 objects were registered without an ETag or checksum: fast verify "
            "compares sizes only, so a same-size rewrite is found by deep verify alone"
        )

    # -- reading and writing ----------------------------------------------------------------

    def open_read(self, fs: Any, path: str, *, size: int | None) -> IO[bytes]:
        if size is None:
            return super().open_read(fs, path, size=size)
        opened: IO[bytes] = fs.open(path, "rb", block_size=8 * 2**20, size=size)
        return opened

    def open_write(self, fs: Any, path: str) -> IO[bytes]:
        opened: IO[bytes] = fs.open(path, "wb", block_size=16 * 2**20, ChecksumAlgorithm="SHA256")
        return opened

    def rename(self, fs: Any, src: str, dst: str) -> None:
        bucket, key, _ = fs.split_path(src)
        dbucket, dkey, _ = fs.split_path(dst)
        # copy_object with ChecksumAlgorithm recomputes a full-object SHA256 on the copy.
        fs.call_s3(
            "copy_object",
            Bucket=dbucket,
            Key=dkey,
            CopySource={"Bucket": bucket, "Key": key},
            ChecksumAlgorithm="SHA256",
        )
        fs.rm(src)
        fs.invalidate_cache(dst)

    # -- many objects at once ---------------------------------------------------------------

    async def read_whole_async(self, fs: Any, uri: str, path: str) -> tuple[bytes, ObjectStat]:
        """One ``GET`` with ``ChecksumMode=ENABLED``: the body, ETag, VersionId and
        ChecksumSHA256 of one object version by construction."""
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

    async def write_whole_async(self, fs: Any, uri: str, path: str, data: bytes) -> ObjectStat:
        """One ``PUT`` with ``ChecksumAlgorithm=SHA256`` (as :meth:`open_write`'s uploads):
        its answer carries the ETag, VersionId and ChecksumSHA256 of the version written, so
        no ``HEAD`` follows."""
        bucket, key, _ = fs.split_path(path)
        response = await fs._call_s3(
            "put_object", Bucket=bucket, Key=key, Body=data, ChecksumAlgorithm="SHA256"
        )
        fs.invalidate_cache(path)
        return stat_from_s3_head(uri, {**response, "ContentLength": len(data)})

    def listing(self, fs: Any, uris: Sequence[str], *, timeout: float) -> dict[str, ListedObject]:
        """Per bucket, the keys' longest common prefix is listed page by page.  Listing stops
        after twice the pages the URIs alone would fill, plus one: URIs not seen by then (or
        absent) are simply not in the result."""
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
                kwargs: dict[str, Any] = {
                    "Bucket": bucket,
                    "Prefix": prefix,
                    "MaxKeys": _LIST_PAGE,
                }
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
        for result in gather_on_loop(fs, calls, 16, timeout=timeout):
            if isinstance(result, StorageError):
                raise result
        return found

    def listing_proves(
        self, registered: Mapping[str, Any], sha256: str, size: int, listed: ListedObject
    ) -> bool:
        """The ETag changes whenever an object is written with different bytes (S3 computes
        it from the content, or anew for each upload), and a listing names the current
        version.  So with the registered size and ETag, no registered VersionId (versioned
        objects are checked by request), and a registered checksum that matched the shard's
        sha256 (or none), a request for the object would find nothing either."""
        if registered.get("backend") != self.name or registered.get("version_id"):
            return False
        etag = registered.get("etag")
        checksum = registered.get("checksum_sha256")
        if checksum and "-" not in str(checksum) and b64_to_hex(checksum) != sha256:
            return False
        return bool(etag) and listed.etag == etag and listed.size == size


def _common_prefix(keys: Iterable[str]) -> str:
    """The longest string every key starts with (character by character, not by path)."""
    ordered = sorted(keys)
    first, last = ordered[0], ordered[-1]
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]

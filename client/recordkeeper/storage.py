"""fsspec helpers: one place that knows URLs, filesystems, object identity and storage errors.

* ``storage_options`` are passed to fsspec untouched (credentials, endpoint, ``token``…), but
  for one default on S3: botocore's own retries are off unless ``config_kwargs.retries`` is
  given, so s3fs's retries are the one bounded layer (:data:`S3_BOTOCORE_RETRIES`).
* Local paths become ``file://`` URIs so every shard has a URI.
* :func:`stat_object` records what each backend offers as identity, explicitly per backend
  (``info()`` is not content identity on its own):

  ========  ===========================================================================
  backend   identity
  ========  ===========================================================================
  ``gcs``   ``generation``, ``crc32c`` (server-side, base64 big-endian), ``md5``
  ``s3``    ``etag``, ``version_id``, ``checksum_sha256`` (``head_object`` with
            ``ChecksumMode=ENABLED``; present when uploaded with ``ChecksumAlgorithm``)
  ``file``  ``mtime_ns``, ``size``
  other     ``size`` (and whatever ``info()`` calls ``mtime``/``etag``)
  ========  ===========================================================================

* Missing objects, refused credentials and unreachable endpoints become
  :class:`~recordkeeper.errors.StorageError` with the URI and a ``reason``
  (``missing``, ``denied``, ``unreachable``, ``throttled``, ``transport``, ``error``).
* One retry policy (:data:`recordkeeper.core.retry.STORAGE_RETRY`: exponential backoff with
  full jitter, bounded in time) retries ``throttled`` and ``transport`` failures of every S3
  request: it replaces s3fs's own retry loop (which retried a ``SlowDown`` body but not a
  bodiless ``503`` answering a ``HEAD``, and no ``429``), so uploads, ranged reads, HEADs and
  listings all follow it.  gcsfs keeps its own loop (6 tries, exponential with jitter, on
  429/5xx and transport errors): it is fixed inside gcsfs.
* The waits of a calling thread on an async filesystem's event loop that this module makes
  are bounded (:data:`LOOP_TIMEOUT`).  s3fs's ranged reads inside an open file wait with no
  bound of their own; they are bounded by the retry policy and botocore's socket timeouts only.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import email.utils
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from recordkeeper import local_files
from recordkeeper.core.errors import StorageError, UnsupportedFormat
from recordkeeper.core.retry import STORAGE_RETRY

__all__ = [
    "LOOP_TIMEOUT",
    "ObjectStat",
    "backend_of",
    "discard_upload",
    "forget_cached",
    "join_uri",
    "list_files",
    "open_read",
    "open_write",
    "parse_timestamp",
    "remove",
    "rename",
    "s3_head_request",
    "stat_file",
    "stat_from_info",
    "stat_from_s3_head",
    "stat_object",
    "storage_errors",
    "to_uri",
    "url_to_fs",
]

#: the longest a thread waits for one call on a filesystem's event loop.  A request is bounded
#: by the retry policy and the clients' socket timeouts; this bounds the wait even when the
#: loop itself is stuck (a thread blocked there forever hangs every later call of the process).
LOOP_TIMEOUT = 120.0
_GCS_PROTOCOLS = {"gs", "gcs"}
_S3_PROTOCOLS = {"s3", "s3a"}


def to_uri(path_or_url: str | os.PathLike[str]) -> str:
    """``/data/x`` or ``./x`` → ``file:///abs/x``; URLs (``s3://…``, ``gs://…``) unchanged."""
    text = os.fspath(path_or_url)
    if "://" in text:
        if text.startswith("gcs://"):
            return "gs://" + text[len("gcs://") :]
        return text
    return "file://" + os.path.abspath(os.path.expanduser(text))


def backend_of(uri: str) -> str:
    """``file``, ``s3``, ``gcs`` or the URL scheme for other fsspec backends."""
    scheme = urlsplit(to_uri(uri)).scheme or "file"
    if scheme in _GCS_PROTOCOLS:
        return "gcs"
    if scheme in _S3_PROTOCOLS:
        return "s3"
    if scheme == "local":
        return "file"
    return scheme


def join_uri(prefix: str, name: str) -> str:
    """Join a directory URI and a relative name with exactly one ``/``."""
    return prefix.rstrip("/") + "/" + name.lstrip("/")


def _prepare_env(backend: str) -> None:
    # Recent gcsfs asks a gRPC control plane for the bucket type before the first access;
    # emulators do not serve it and every first access stalls ~60 s (docs/testing notes).
    if backend == "gcs" and os.environ.get("STORAGE_EMULATOR_HOST"):
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def url_to_fs(uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem and the backend path for ``uri`` (options passed untouched)."""
    import fsspec.core

    uri = to_uri(uri)
    backend = backend_of(uri)
    _prepare_env(backend)
    # Local files need no options; dropping them lets one set of object-store options serve
    # a copy from local disk to S3/GCS.
    options = {} if backend == "file" else dict(storage_options or {})
    if backend == "s3":
        options = _s3_retries(options)
        _install_s3_retry_policy()
    with storage_errors(uri):
        try:
            fs, path = fsspec.core.url_to_fs(uri, **options)
        except ImportError as exc:
            extra = {"s3": "s3", "gcs": "gcs"}.get(backend)
            hint = f"; install recordkeeper[{extra}]" if extra else ""
            raise StorageError(
                f"no filesystem for {uri}: {exc}{hint}", uri=uri, reason="error"
            ) from None
        if backend == "s3":
            _fast_s3_timestamps(fs)
    return fs, path


def _fast_s3_timestamps(fs: Any) -> None:
    """Have botocore parse the timestamps of ``fs``'s answers with :func:`parse_timestamp`.

    Every S3 answer carries timestamps (``Last-Modified`` of each ``GET``/``HEAD``, one per
    object of a listing) that botocore parses with ``dateutil`` by default: ~0.1 ms each, a
    sixth of the client CPU of a small ``GET`` (issue 12).  botocore lets a session choose the
    parser (``response_parser_factory.set_parser_defaults``); s3fs creates its session on first
    use, so this creates it now (no request is sent).  Once per filesystem instance.
    """
    if getattr(fs, "_recordkeeper_timestamps", False) or getattr(fs, "asynchronous", False):
        return
    if getattr(fs, "session", None) is None and hasattr(fs, "set_session"):
        import fsspec.asyn

        fsspec.asyn.sync(fs.loop, fs.set_session, timeout=LOOP_TIMEOUT)
    session = getattr(fs, "session", None)
    if session is not None and hasattr(session, "get_component"):
        factory = session.get_component("response_parser_factory")
        factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    fs._recordkeeper_timestamps = True


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


#: botocore's own retries, when the caller sets none: one attempt per s3fs try.  s3fs already
#: retries every call (5 tries, 0.1 s to 0.8 s apart, and SlowDown/5xx/connection errors);
#: botocore's default (up to 5 attempts each, seconds apart) multiplies that to 25 requests and
#: over a minute per call against a store that keeps failing (docs/reliability.md).
S3_BOTOCORE_RETRIES = {"mode": "standard", "total_max_attempts": 1}


def _install_s3_retry_policy() -> None:
    """Have every s3fs request retried by :data:`~recordkeeper.core.retry.STORAGE_RETRY`.

    s3fs sends each request through one module-level function, ``_error_wrapper(func, *,
    args, kwargs, retries)`` (``_call_s3``, ranged reads, ``cat``); this replaces it with
    :func:`_s3_call_with_policy`, which keeps its contract (the final error translated by
    s3fs's ``translate_boto_error``).  Once per process; a s3fs without that function keeps
    its own loop.
    """
    try:
        import s3fs.core  # type: ignore[import-untyped]
    except ImportError:
        return
    current = getattr(s3fs.core, "_error_wrapper", None)
    if current is not None and current is not _s3_call_with_policy:
        s3fs.core._error_wrapper = _s3_call_with_policy


def _bounded(fs: Any) -> dict[str, float]:
    """``timeout=`` for a blocking call of an async filesystem (fsspec's sync wrappers take it)."""
    return {"timeout": LOOP_TIMEOUT} if getattr(fs, "async_impl", False) else {}


async def _s3_call_with_policy(
    func: Any, *, args: Any = (), kwargs: Any = None, retries: int = 0
) -> Any:
    """One s3fs request under the storage retry policy (``retries``, s3fs's count, is not
    used: the policy bounds attempts and time)."""
    import asyncio
    import random
    import time

    from s3fs.errors import translate_boto_error  # type: ignore[import-untyped]

    del retries
    # s3fs nests calls (a ranged read retries "GET + read the body", whose GET is itself a
    # call): only the outermost retries, so one budget bounds the whole request.
    nested = _RETRYING.get()
    token = _RETRYING.set(True)
    try:
        started = time.monotonic()
        retry = 0
        while True:
            try:
                return await func(*args, **(kwargs or {}))
            except Exception as exc:
                wait = (
                    STORAGE_RETRY.wait(retry, time.monotonic() - started, random.random())
                    if not nested and STORAGE_RETRY.retries(_classify(exc))
                    else None
                )
                if wait is None:
                    error = translate_boto_error(exc)  # as s3fs does: with exc as its cause
                    if error is exc:
                        raise
                    raise error from exc
            await asyncio.sleep(wait)
            retry += 1
    finally:
        _RETRYING.reset(token)


#: True inside a request under the policy (see :func:`_s3_call_with_policy`)
_RETRYING: contextvars.ContextVar[bool] = contextvars.ContextVar("rk_retrying", default=False)


def _s3_retries(options: dict[str, Any]) -> dict[str, Any]:
    """One retry layer for S3: s3fs's; botocore's unless ``config_kwargs.retries`` is given."""
    config = dict(options.get("config_kwargs") or {})
    config.setdefault("retries", dict(S3_BOTOCORE_RETRIES))
    return {**options, "config_kwargs": config}


#: exception class names (anywhere in the chain) of an answer damaged or cut on the way
_TRANSPORT_NAMES = (
    "ConnectionClosedError",  # botocore: the connection closed before a whole answer
    "ServerDisconnectedError",
    "ClientPayloadError",  # aiohttp: a body shorter than its Content-Length, or broken
    "ContentLengthError",
    "ConnectionResetError",
    "BrokenPipeError",
    "IncompleteRead",
    "ResponseStreamingError",
    "ReadTimeoutError",
    "ResponseParserError",  # a listing cut mid-XML
    "ServerTimeoutError",
    "TimeoutError",
)
_TRANSPORT_TEXT = (
    "connection reset",
    "connection was closed",
    "server disconnected",
    "response payload is not completed",
    "not enough data to satisfy content length",
    "xamzcontentsha256mismatch",
)
_THROTTLED_TEXT = ("slowdown", "reduce your request rate", "toomanyrequests", "rate limit")


def _statuses(exc: BaseException) -> set[int]:
    """The HTTP statuses the exceptions in ``exc``'s chain carry (botocore, gcsfs, aiohttp)."""
    found: set[int] = set()
    for c in _chain(exc):
        response = getattr(c, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(status, int):
                found.add(status)
            code = response.get("Error", {}).get("Code")
            if isinstance(code, str) and code.isdigit():
                found.add(int(code))
        for attr in ("code", "status"):
            value = getattr(c, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                found.add(value)
    return found


def _classify(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "denied"
    names = " ".join(type(c).__name__ for c in _chain(exc))
    text = " ".join(str(c) for c in _chain(exc)).lower()
    if "FSTimeoutError" in names:  # the event loop did not answer in time: not the store's
        return "error"
    statuses = _statuses(exc)
    if statuses & {429, 503} or any(word in text for word in _THROTTLED_TEXT):
        return "throttled"
    if (
        statuses & {502, 504}
        or any(name in names for name in _TRANSPORT_NAMES)
        or any(word in text for word in _TRANSPORT_TEXT)
    ):
        return "transport"
    if "Connect" in names or "connection refused" in text or "cannot connect" in text:
        return "unreachable"
    code = getattr(exc, "code", None)
    if code in (401, 403) or any(
        word in text
        for word in (
            "accessdenied",
            "access denied",
            "invalidaccesskeyid",
            "signaturedoesnotmatch",
            "forbidden",
            "unauthorized",
            "invalid credentials",
        )
    ):
        return "denied"
    if code == 404 or "nosuchbucket" in text or "not found" in text or "nosuchkey" in text:
        return "missing"
    return "error"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_DENIED_DETAIL = (
    ("invalidaccesskeyid", "the access key id is unknown to the store"),
    ("access key id you provided does not exist", "the access key id is unknown to the store"),
    ("signaturedoesnotmatch", "the secret key does not match the access key"),
    ("signature we calculated does not match", "the secret key does not match the access key"),
    ("expiredtoken", "the session token has expired"),
)


def _denied_detail(exc: BaseException) -> str:
    """What exactly was refused, when the backend says (S3 error codes/messages)."""
    parts = []
    for c in _chain(exc):
        parts.append(str(c))
        error = getattr(c, "response", None)
        if isinstance(error, dict):
            parts.append(str(error.get("Error", {}).get("Code", "")))
    text = " ".join(parts).lower()
    for needle, detail in _DENIED_DETAIL:
        if needle in text:
            return f" ({detail})"
    return ""


_REASON_TEXT = {
    "missing": "not found",
    "denied": (
        "access denied: the storage credentials were refused or lack permission; check the "
        "credentials in storage_options or the environment"
    ),
    "unreachable": "storage endpoint unreachable; check the endpoint URL",
    "throttled": "the store is throttling requests (it asked to slow down) and kept doing so",
    "transport": (
        "the store answered, but the answer was cut or damaged on the way (a reset, a closed "
        "connection, a body shorter than announced), again on every retry"
    ),
    "error": "storage error",
}


@contextlib.contextmanager
def storage_errors(uri: str) -> Iterator[None]:
    """Turn backend exceptions raised inside the block into :class:`StorageError`."""
    try:
        yield
    except (StorageError, UnsupportedFormat):  # ours: a format's reader refusing what it read
        raise
    except Exception as exc:
        # Anything from botocore/aiohttp/gcsfs/OS counts as a storage failure here.
        if isinstance(exc, (KeyboardInterrupt, MemoryError)):
            raise
        reason = _classify(exc)
        message = str(exc).strip() or type(exc).__name__
        text = _REASON_TEXT[reason]
        if reason == "denied":
            text += _denied_detail(exc)
        raise StorageError(
            f"{uri}: {text} ({type(exc).__name__}: {message[:300]})",
            uri=uri,
            reason=reason,
        ) from exc


@dataclass(frozen=True)
class ObjectStat:
    """An object's current size and backend identity."""

    uri: str
    size: int
    identity: dict[str, Any]


def stat_object(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, fs: Any = None
) -> ObjectStat:
    """Current size and identity of one object; raises :class:`StorageError` (``missing``…)."""
    uri = to_uri(uri)
    backend = backend_of(uri)
    if fs is None:
        fs, path = url_to_fs(uri, storage_options)
    else:
        path = fs._strip_protocol(uri)
    with storage_errors(uri):
        if backend == "file":
            return stat_file(uri, path)
        if backend == "s3":
            head = fs.call_s3("head_object", **s3_head_request(fs, path), **_bounded(fs))
            return stat_from_s3_head(uri, head)
        forget_cached(fs, path)
        return stat_from_info(uri, backend, fs.info(path, **_bounded(fs)))


def stat_file(uri: str, path: str) -> ObjectStat:
    """A local file's size and identity (raises ``OSError`` when it is missing or a directory)."""
    st = os.stat(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is not a file")
    return ObjectStat(
        uri, st.st_size, {"backend": "file", "mtime_ns": st.st_mtime_ns, "size": st.st_size}
    )


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


def stat_from_info(uri: str, backend: str, info: Mapping[str, Any]) -> ObjectStat:
    """An object's identity from fsspec's ``info()`` (GCS and the other non-S3 backends)."""
    if info.get("type") == "directory":
        raise FileNotFoundError(f"{uri} is a directory, not an object")
    size = int(info.get("size") or 0)
    if backend == "gcs":
        return ObjectStat(
            uri,
            size,
            {
                "backend": "gcs",
                "generation": str(info.get("generation")) if info.get("generation") else None,
                "crc32c": info.get("crc32c"),
                "md5": info.get("md5Hash"),
            },
        )
    identity: dict[str, Any] = {"backend": backend, "size": size}
    for key in ("mtime", "etag", "ETag", "created"):
        if info.get(key) is not None:
            identity[key.lower()] = str(info[key])
    return ObjectStat(uri, size, identity)


def forget_cached(fs: Any, path: str) -> None:
    """Drop fsspec's cached listing for ``path``: identity and reads must see the object as it
    is now (another process may have replaced it; s3fs would read with a stale ETag)."""
    with contextlib.suppress(Exception):
        fs.invalidate_cache(path)


def open_read(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, size: int | None = None
) -> IO[bytes]:
    """Open an object for streaming reads (raises :class:`StorageError`).

    ``size``, when the caller already knows it, spares object stores a metadata request.
    """
    fs, path = url_to_fs(uri, storage_options)
    forget_cached(fs, path)
    with storage_errors(uri):
        if size is not None and backend_of(uri) in ("s3", "gcs"):
            return fs.open(path, "rb", block_size=8 * 2**20, size=size)
        return fs.open(path, "rb", block_size=8 * 2**20)


def open_write(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, root: str | None = None
) -> IO[bytes]:
    """Open an object for streaming writes.

    S3 uploads ask for ``ChecksumAlgorithm=SHA256`` so the object carries a server-side
    checksum that fast verification can read back without downloading.  ``root``: on local
    disk, the file is created exclusively inside this root's real path, never through a link
    (:func:`recordkeeper.local_files.create_exclusive`; shards of a version).
    """
    fs, path = url_to_fs(uri, storage_options)
    backend = backend_of(uri)
    if backend == "file" and root is not None:
        with storage_errors(uri):
            return local_files.create_exclusive(path, local_files.real_roots([root]))
    with storage_errors(uri):
        if backend == "file":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            return open(path, "wb")
        if backend == "s3":
            return fs.open(path, "wb", block_size=16 * 2**20, ChecksumAlgorithm="SHA256")
        return fs.open(path, "wb")


def discard_upload(sink: Any) -> None:
    """Drop a half-written object: abort the multipart upload where the backend has one."""
    with contextlib.suppress(Exception):
        discard = getattr(sink, "discard", None)
        if discard is not None:
            discard()
            sink.closed = True  # fsspec files would otherwise try to flush again on __del__
        else:
            sink.close()


def rename(
    src: str,
    dst: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    root: str | None = None,
) -> None:
    """Move ``src`` to ``dst`` on the same store (server-side copy + delete on object stores).

    ``root``: on local disk, both stay inside this root's real path, no link is followed, and
    an existing ``dst`` is refused (:func:`recordkeeper.local_files.move_exclusive`).
    """
    fs, src_path = url_to_fs(src, storage_options)
    _, dst_path = url_to_fs(dst, storage_options)
    if backend_of(src) == "file" and root is not None:
        with storage_errors(src):
            local_files.move_exclusive(src_path, dst_path, local_files.real_roots([root]))
        return
    with storage_errors(src):
        if backend_of(src) == "file":
            os.replace(src_path, dst_path)
        elif backend_of(src) == "s3":
            bucket, key, _ = fs.split_path(src_path)
            dbucket, dkey, _ = fs.split_path(dst_path)
            # copy_object with ChecksumAlgorithm recomputes a full-object SHA256 on the copy.
            fs.call_s3(
                "copy_object",
                Bucket=dbucket,
                Key=dkey,
                CopySource={"Bucket": bucket, "Key": key},
                ChecksumAlgorithm="SHA256",
            )
            fs.rm(src_path)
            fs.invalidate_cache(dst_path)
        elif backend_of(src) == "gcs":
            # Server-side rewrite + delete.  (gcsfs.mv first tries the hierarchical-namespace
            # move API, which emulators and flat buckets answer with an error.)
            fs.copy(src_path, dst_path)
            fs.rm(src_path)
        else:
            fs.mv(src_path, dst_path)


def remove(uri: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Delete one object; a missing object is not an error."""
    fs, path = url_to_fs(uri, storage_options)
    with storage_errors(uri), contextlib.suppress(FileNotFoundError):
        fs.rm(path)


def list_files(uri: str, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Every file under a directory URI (recursive), as URIs, sorted."""
    uri = to_uri(uri)
    fs, path = url_to_fs(uri, storage_options)
    with storage_errors(uri):
        if not fs.isdir(path, **_bounded(fs)):
            if fs.isfile(path, **_bounded(fs)):
                return [uri]
            raise FileNotFoundError(f"{uri} does not exist")
        found = fs.find(path, **_bounded(fs))
    out = []
    for p in found:
        full = fs.unstrip_protocol(p)
        if backend_of(uri) == "file":
            full = to_uri(fs._strip_protocol(p))
        out.append(full)
    return sorted(out)

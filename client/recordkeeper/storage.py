"""fsspec helpers: one place that knows URLs, filesystems, object identity and storage errors.

* ``storage_options`` are passed to fsspec untouched (credentials, endpoint, ``token``…), but
  for one default on S3: botocore's own retries are off unless ``config_kwargs.retries`` is
  given, so s3fs's retries are the one bounded layer (:data:`S3_BOTOCORE_RETRIES`).
* Local paths become ``file://`` URIs so every shard has a URI.
* Everything a backend does differently — identity, server-side checksums, listings, batched
  small reads, how files are opened and moved, who retries — is its profile's
  (:mod:`recordkeeper.backends`, found by :func:`~recordkeeper.backends.profile_for`); this
  module asks the profile and never which backend it is.  :func:`stat_object` records what
  each profile offers as identity (``info()`` is not content identity on its own):

  ========  ===========================================================================
  backend   identity
  ========  ===========================================================================
  ``gcs``   ``generation``, ``crc32c`` (server-side, base64 big-endian), ``md5``
  ``s3``    ``etag``, ``version_id``, ``checksum_sha256`` (``head_object`` with
            ``ChecksumMode=ENABLED``; present when uploaded with ``ChecksumAlgorithm``)
  ``file``  ``mtime_ns``, ``ino``, ``size``
  other     ``size`` and whatever ``info()`` gives of a version, time or checksum
            (``etag``, ``mtime``, ``created``, ``md5``…)
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
import os
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from recordkeeper import local_files
from recordkeeper.backends import ObjectStat, StorageProfile, profile_for
from recordkeeper.backends.errors import classify, storage_errors
from recordkeeper.backends.local import stat_file
from recordkeeper.backends.s3 import S3_BOTOCORE_RETRIES, parse_timestamp, s3_head_request
from recordkeeper.core.errors import StorageError
from recordkeeper.core.retry import STORAGE_RETRY

__all__ = [
    "LOOP_TIMEOUT",
    "S3_BOTOCORE_RETRIES",
    "ObjectStat",
    "backend_of",
    "discard_upload",
    "forget_cached",
    "join_uri",
    "list_files",
    "open_read",
    "open_write",
    "parse_timestamp",
    "profile_of",
    "remove",
    "rename",
    "s3_head_request",
    "stat_file",
    "stat_object",
    "storage_errors",
    "to_uri",
    "url_to_fs",
    "write_objects",
]

#: the longest a thread waits for one call on a filesystem's event loop.  A request is bounded
#: by the retry policy and the clients' socket timeouts; this bounds the wait even when the
#: loop itself is stuck (a thread blocked there forever hangs every later call of the process).
LOOP_TIMEOUT = 120.0


def to_uri(path_or_url: str | os.PathLike[str]) -> str:
    """``/data/x`` or ``./x`` → ``file:///abs/x``; URLs (``s3://…``, ``gs://…``) unchanged but
    for a profile's other spelling of its scheme (``gcs://`` → ``gs://``)."""
    text = os.fspath(path_or_url)
    if "://" in text:
        scheme, rest = text.split("://", 1)
        profile = profile_for(text)
        if scheme.lower() in profile.rewritten:
            return f"{profile.schemes[0]}://{rest}"
        return text
    return "file://" + os.path.abspath(os.path.expanduser(text))


def profile_of(uri: str) -> StorageProfile:
    """The storage profile of ``uri`` (:func:`recordkeeper.backends.profile_for`)."""
    return profile_for(uri if "://" in uri else "file://")


def backend_of(uri: str) -> str:
    """The name of ``uri``'s profile: ``file``, ``s3``, ``gcs``, or the URL scheme for other
    fsspec backends (unless a profile registered for it says otherwise)."""
    return profile_of(uri).name


def join_uri(prefix: str, name: str) -> str:
    """Join a directory URI and a relative name with exactly one ``/``."""
    return prefix.rstrip("/") + "/" + name.lstrip("/")


def url_to_fs(uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem and the backend path for ``uri`` (options passed untouched but
    for the profile's own: :meth:`~recordkeeper.backends.StorageProfile.prepare`)."""
    import fsspec.core

    uri = to_uri(uri)
    profile = profile_of(uri)
    options = profile.prepare(storage_options)
    if profile.retried_by == "recordkeeper":
        profile.install_retry(_call_with_policy)
    with storage_errors(uri):
        try:
            fs, path = fsspec.core.url_to_fs(uri, **options)
        except ImportError as exc:
            hint = f"; install recordkeeper[{profile.extra}]" if profile.extra else ""
            raise StorageError(
                f"no filesystem for {uri}: {exc}{hint}", uri=uri, reason="error"
            ) from None
        profile.configure(fs, timeout=LOOP_TIMEOUT)
    return fs, path


def _bounded(fs: Any) -> dict[str, float]:
    """``timeout=`` for a blocking call of an async filesystem (fsspec's sync wrappers take it)."""
    return {"timeout": LOOP_TIMEOUT} if getattr(fs, "async_impl", False) else {}


async def _call_with_policy(
    func: Any,
    *,
    args: Any = (),
    kwargs: Any = None,
    translate: Callable[[BaseException], BaseException] | None = None,
) -> Any:
    """One request under the storage retry policy (:data:`STORAGE_RETRY`): a profile whose
    requests recordkeeper retries sends each through this
    (:meth:`~recordkeeper.backends.StorageProfile.install_retry`).  The final error is
    ``translate(exc)`` (raised from ``exc``) when ``translate`` gives another exception."""
    import asyncio
    import random
    import time

    # Backends nest calls (s3fs: a ranged read retries "GET + read the body", whose GET is
    # itself a call): only the outermost retries, so one budget bounds the whole request.
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
                    if not nested and STORAGE_RETRY.retries(classify(exc))
                    else None
                )
                if wait is None:
                    error = translate(exc) if translate is not None else exc
                    if error is exc:
                        raise
                    raise error from exc
            await asyncio.sleep(wait)
            retry += 1
    finally:
        _RETRYING.reset(token)


#: True inside a request under the policy (see :func:`_s3_call_with_policy`)
_RETRYING: contextvars.ContextVar[bool] = contextvars.ContextVar("rk_retrying", default=False)


def stat_object(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, fs: Any = None
) -> ObjectStat:
    """Current size and identity of one object; raises :class:`StorageError` (``missing``…)."""
    uri = to_uri(uri)
    if fs is None:
        fs, path = url_to_fs(uri, storage_options)
    else:
        path = fs._strip_protocol(uri)
    with storage_errors(uri):
        return profile_of(uri).stat(fs, uri, path, timeout=LOOP_TIMEOUT)


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
        return profile_of(to_uri(uri)).open_read(fs, path, size=size)


def open_write(
    uri: str, storage_options: Mapping[str, Any] | None = None, *, root: str | None = None
) -> IO[bytes]:
    """Open an object for streaming writes.

    S3 uploads ask for ``ChecksumAlgorithm=SHA256`` so the object carries a server-side
    checksum that fast verification can read back without downloading
    (:meth:`~recordkeeper.backends.StorageProfile.open_write`).  ``root``: on local disk, the
    file is created exclusively inside this root's real path, never through a link
    (:func:`recordkeeper.local_files.create_exclusive`; shards of a version).
    """
    fs, path = url_to_fs(uri, storage_options)
    profile = profile_of(to_uri(uri))
    with storage_errors(uri):
        if profile.local and root is not None:
            return local_files.create_exclusive(path, local_files.real_roots([root]))
        return profile.open_write(fs, path)


def write_objects(
    items: Iterable[tuple[str, bytes]],
    storage_options: Mapping[str, Any] | None = None,
    *,
    keep_equal: bool = False,
) -> None:
    """Write each ``(uri, data)`` whole, as ``open_write(uri)`` and one ``write`` would.

    Local files (a record index beside each of 2,000 small shards) are written without a
    filesystem object and a buffered file each: every directory is made once, every file
    written by one ``open``, ``write`` and ``close`` (the same flags and mode as
    ``open(path, "wb")``).  Other backends go through :func:`open_write`.

    ``keep_equal``: a local file that already holds exactly ``data`` is left as it is instead
    of being truncated and written again (for content determined by its name, such as a
    shard's record index: the bytes are the same either way, and truncating a file costs the
    file system far more than reading it).
    """
    made: set[str] = set()
    for uri, data in items:
        if os.sep != "/" or not uri.startswith("file:///") or uri.endswith("/"):
            with open_write(uri, storage_options) as sink:
                sink.write(data)
            continue
        path = local_files.local_path(uri)
        directory = os.path.dirname(path)
        with storage_errors(uri):  # what open_write converts: making the directory, opening
            if directory not in made:
                os.makedirs(directory, exist_ok=True)
                made.add(directory)
            if keep_equal and _holds(path, data):
                continue
            fd = os.open(path, _WRITE_FLAGS, 0o666)
        _write_all(fd, data)


#: ``open(path, "wb")``'s flags
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def _holds(path: str, data: bytes) -> bool:
    """Whether the file at ``path`` holds exactly ``data`` (False when it cannot be read)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return False
    try:
        held = b""
        while len(held) <= len(data):
            more = os.read(fd, len(data) + 1 - len(held))
            if not more:
                break
            held += more
        return held == data
    except OSError:
        return False
    finally:
        os.close(fd)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to ``fd`` (as many ``write`` calls as the system needs), then close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


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
    profile = profile_of(to_uri(src))
    with storage_errors(src):
        if profile.local and root is not None:
            local_files.move_exclusive(src_path, dst_path, local_files.real_roots([root]))
        else:
            profile.rename(fs, src_path, dst_path)


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
        profile = profile_of(uri)
        found = profile.find(fs, path, **_bounded(fs))
    return sorted(profile.uri_of(fs, p, uri, path) for p in found)

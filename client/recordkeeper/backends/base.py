"""What a storage backend is to recordkeeper: one :class:`StorageProfile` per backend.

A profile answers every question the rest of the library used to answer with
``if backend == ...``: which fields identify an object version and how fast verification
compares them, which server-side checksum the store keeps, how to list many objects, whether
small objects are read whole with their identity in one request, how a file is opened and moved,
and who retries a failed request.  :class:`StorageProfile` itself is the generic fsspec
fallback; the built-in profiles (``file``, ``s3``, ``gcs``) subclass it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar, Literal, TypeVar

from recordkeeper.core.errors import StorageError

__all__ = [
    "ListedObject",
    "Mismatch",
    "ObjectStat",
    "StorageProfile",
    "b64_to_hex",
    "gather_on_loop",
]

T = TypeVar("T")


@dataclass(frozen=True)
class ObjectStat:
    """An object's current size and backend identity."""

    uri: str
    size: int
    identity: dict[str, Any]


@dataclass(frozen=True)
class ListedObject:
    """What a listing says of an object: its size and ETag (no checksum, no version)."""

    uri: str
    size: int
    etag: str | None


@dataclass(frozen=True)
class Mismatch:
    """Why fast verification finds an object is not the one registered."""

    reason: Literal["identity_changed", "checksum_mismatch"]
    detail: str


def b64_to_hex(value: Any) -> str | None:
    """A base64 checksum (S3 ``ChecksumSHA256``, GCS ``crc32c``) as hex; None for a composite
    (``…-3``) or malformed value."""
    if not value or not isinstance(value, str) or "-" in value:
        return None
    try:
        return base64.b64decode(value).hex()
    except (ValueError, binascii.Error):
        return None


#: keys of ``info()`` that change with each write of an object, on the fsspec backends that
#: give them (adlfs: ``etag``/``last_modified``/``version_id``; webdav/sftp/memory: ``mtime``
#: or ``created``; ...): the generic profile records and compares whichever it finds
GENERIC_VERSION_KEYS: tuple[str, ...] = (
    "etag",
    "ETag",
    "version_id",
    "VersionId",
    "generation",
    "mtime",
    "LastModified",
    "last_modified",
    "modified",
    "updated",
    "created",
    "creation_time",
)
#: keys of ``info()`` that are checksums of the content (compared as checksums)
GENERIC_CHECKSUM_KEYS: tuple[str, ...] = (
    "md5",
    "md5Hash",
    "content_md5",
    "crc32c",
    "sha256",
    "ChecksumSHA256",
    "checksum",
)


def _plain(value: Any) -> str:
    """An ``info()`` value as the text the registry stores and compares later: ``str()``, as
    the generic identity has always been recorded (bytes as hex)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


class StorageProfile:
    """One storage backend; this class is the generic fsspec fallback.

    Subclass it and :func:`~recordkeeper.backends.register_profile` an instance to teach
    recordkeeper a backend (see docs/client.md, "Storage backends").  Every method receives the
    fsspec filesystem; none asks which backend it is.
    """

    #: the name recorded as ``storage_identity["backend"]``
    name: str = "generic"
    #: the URL schemes this profile serves (the first is the canonical one)
    schemes: tuple[str, ...] = ()
    #: schemes :func:`~recordkeeper.storage.to_uri` writes as ``schemes[0]`` (one URI per
    #: object: ``gcs://b/x`` is registered as ``gs://b/x``)
    rewritten: tuple[str, ...] = ()
    #: the ``recordkeeper[...]`` extra that installs the fsspec implementation, if any
    extra: str | None = None
    #: objects are plain local files (``file://``): written and deleted inside the allowed
    #: roots by descriptor, never through a link, and stat'ed with ``os.stat``
    local: ClassVar[bool] = False
    #: small objects are read whole with their identity in one request
    #: (:meth:`read_whole_async`)
    batch_reads: ClassVar[bool] = False
    #: small objects are written whole in one request whose answer is their identity
    #: (:meth:`write_whole_async`): no upload stream, no request afterwards to ask for it
    batch_writes: ClassVar[bool] = False
    #: many objects are listed (size, ETag) in pages instead of one request each
    #: (:meth:`listing`); fast verify and publish use it from :attr:`listing_min_objects` on
    lists_prefixes: ClassVar[bool] = False
    #: from this many objects under one prefix on, listing it beats asking for each
    listing_min_objects: ClassVar[int] = 8
    #: who retries a failed request: ``"recordkeeper"`` (the storage retry policy, installed
    #: by :meth:`install_retry`), or a sentence naming the backend's own loop
    retried_by: ClassVar[str] = "the fsspec implementation's own retries, if any"

    def __init__(self, name: str | None = None, schemes: Sequence[str] | None = None) -> None:
        if name is not None:
            self.name = name
        if schemes is not None:
            self.schemes = tuple(schemes)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} schemes={list(self.schemes)}>"

    # -- opening a filesystem ---------------------------------------------------------------

    def prepare(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """The ``storage_options`` handed to fsspec (by default: passed through untouched)."""
        return dict(options or {})

    def configure(self, fs: Any, *, timeout: float) -> None:
        """Called with each filesystem :func:`~recordkeeper.storage.url_to_fs` returns."""

    def install_retry(self, call_with_policy: Callable[..., Awaitable[Any]]) -> None:
        """Route the backend's requests through ``call_with_policy(func, args, kwargs,
        translate)`` (the storage retry policy) where the backend allows it."""

    # -- identity -----------------------------------------------------------------------------

    def stat(self, fs: Any, uri: str, path: str, *, timeout: float | None) -> ObjectStat:
        """Current size and identity of one object (backend exceptions propagate)."""
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
        info = fs.info(path, **({"timeout": timeout} if timeout and _is_async(fs) else {}))
        return self.stat_from_info(uri, info)

    async def stat_async(self, fs: Any, uri: str, path: str) -> ObjectStat:
        """:meth:`stat` on the filesystem's event loop (async filesystems only)."""
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
        return self.stat_from_info(uri, await fs._info(path))

    def stat_from_info(self, uri: str, info: Mapping[str, Any]) -> ObjectStat:
        """An object's size and identity from fsspec's ``info()``."""
        if info.get("type") == "directory":
            raise FileNotFoundError(f"{uri} is a directory, not an object")
        size = int(info.get("size") or 0)
        return ObjectStat(uri, size, {"backend": self.name, **self.identity_from_info(info)})

    def identity_from_info(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """The identity fields of ``info()``: whichever of the version keys and checksums of
        :data:`GENERIC_VERSION_KEYS` / :data:`GENERIC_CHECKSUM_KEYS` it has (lower-cased)."""
        identity: dict[str, Any] = {"size": int(info.get("size") or 0)}
        for key in (*GENERIC_VERSION_KEYS, *GENERIC_CHECKSUM_KEYS):
            if info.get(key) is not None:
                identity.setdefault(key.lower(), _plain(info[key]))
        return identity

    def compare(
        self, registered: Mapping[str, Any], current: ObjectStat, *, sha256: str, crc32c: str
    ) -> Mismatch | None:
        """Fast verification: is ``current`` (same size as registered) still the object whose
        identity was ``registered``?  ``sha256``/``crc32c`` are the shard's registered hashes.

        Generic: every identity field recorded at registration and given now must be equal
        (checksum fields as checksums).  Fields only one side has are not compared.
        """
        ident = current.identity
        checksums = {k.lower() for k in GENERIC_CHECKSUM_KEYS}
        for key in sorted(set(registered) & set(ident) - {"backend", "size"}):
            before, now = registered[key], ident[key]
            if before is None or now is None or str(before) == str(now):
                continue
            reason: Literal["identity_changed", "checksum_mismatch"] = (
                "checksum_mismatch" if key in checksums else "identity_changed"
            )
            return Mismatch(
                reason,
                f"{key} is {now}, registered {before} (the object was rewritten after "
                "registration)",
            )
        return None

    def blind_spot(self, registered: Mapping[str, Any]) -> str | None:
        """Why fast verification cannot tell a same-size rewrite of an object registered with
        ``registered``, or None when it can."""
        comparable = set(registered) - {"backend", "size"}
        if any(registered[k] is not None for k in comparable):
            return None
        return (
            f"the {self.name} backend recorded no version, time or checksum for these objects "
            "(its info() gives only their size): fast verify compares sizes only, so a "
            "same-size rewrite is found by deep verify alone (verify(deep=True), CLI --deep)"
        )

    # -- reading and writing ----------------------------------------------------------------

    def open_read(self, fs: Any, path: str, *, size: int | None) -> IO[bytes]:
        """Open for streaming reads (``size``, when known, may spare a metadata request)."""
        opened: IO[bytes] = fs.open(path, "rb", block_size=8 * 2**20)
        return opened

    def open_write(self, fs: Any, path: str) -> IO[bytes]:
        """Open for a streaming write of a whole new object."""
        opened: IO[bytes] = fs.open(path, "wb")
        return opened

    def rename(self, fs: Any, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` on the same store."""
        fs.mv(src, dst)

    def find(self, fs: Any, path: str, **bounded: Any) -> list[str]:
        """Every file under the directory ``path``, recursively, as the filesystem's paths
        (``fs.find``; ``bounded``: its ``timeout`` on an async filesystem)."""
        return list(fs.find(path, **bounded))

    def uri_of(self, fs: Any, listed: str, base_uri: str, base_path: str) -> str:
        """The URI of ``listed`` (a path ``fs.find`` gave under ``base_path``, the path of
        ``base_uri``): the listed URI written like the one asked for."""
        base = base_path.rstrip("/")
        if listed.startswith(base + "/"):
            return base_uri.rstrip("/") + listed[len(base) :]
        unstripped: str = fs.unstrip_protocol(listed)
        return unstripped

    # -- many objects at once ---------------------------------------------------------------

    async def read_whole_async(self, fs: Any, uri: str, path: str) -> tuple[bytes, ObjectStat]:
        """One object's bytes and the identity of that very version, in one request
        (profiles with :attr:`batch_reads`)."""
        raise NotImplementedError(f"the {self.name} profile has no one-request reads")

    async def write_whole_async(self, fs: Any, uri: str, path: str, data: bytes) -> ObjectStat:
        """Write one object whole in one request; the identity of the version written, from
        that request's answer (profiles with :attr:`batch_writes`)."""
        raise NotImplementedError(f"the {self.name} profile has no one-request writes")

    def listing(self, fs: Any, uris: Sequence[str], *, timeout: float) -> dict[str, ListedObject]:
        """Size and ETag of the listed ones among ``uris`` (profiles with
        :attr:`lists_prefixes`); URIs not in the result are asked for one by one."""
        return {}

    def listing_proves(
        self, registered: Mapping[str, Any], sha256: str, size: int, listed: ListedObject
    ) -> bool:
        """True when a listing entry proves the object is the one registered (so fast
        verification needs no request for it)."""
        return False

    # -- other readers ----------------------------------------------------------------------

    def native_path(self, uri: str, options: Mapping[str, Any]) -> str | None:
        """The path TensorFlow's own file system opens for ``uri``, or None (read via
        fsspec)."""
        return None


def _is_async(fs: Any) -> bool:
    return bool(getattr(fs, "async_impl", False))


def gather_on_loop(
    fs: Any,
    calls: Sequence[Callable[[], Awaitable[T]]],
    concurrency: int,
    *,
    timeout: float,
) -> list[T | StorageError]:
    """Run the coroutines ``calls`` make on ``fs``'s event loop, ``concurrency`` at a time.

    A :class:`StorageError` is returned in its place; anything else propagates.  ``timeout``
    bounds each round of ``concurrency`` requests.
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

    rounds = -(-len(calls) // max(1, concurrency))
    result: list[T | StorageError] = sync(fs.loop, run_all, timeout=timeout * max(1, rounds))
    return result

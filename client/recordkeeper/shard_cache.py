"""A local, content-addressed cache of verified shards (``recordkeeper pull``, ``cache=True``).

Like huggingface_hub's cache, but keyed by what a shard *is*: its registered sha256.  Two
versions that share a shard share its cache entry; an alias that moves changes nothing here.

Layout under the cache directory (``$RECORDKEEPER_CACHE_DIR``, default the per-user cache dir,
``~/.cache/recordkeeper`` on Linux)::

    blobs/ab/ab12…ef          the shard's stored bytes, read-only (mode 0444)
    blobs/ab/ab12…ef.ok       JSON: size and mtime of the blob when its sha256 was checked
    versions/<name>.json      which shards a pulled version has (for ``cache ls`` / ``clear``)
    locks/ab12…ef.lock        one process downloads (or evicts) an entry at a time
    leases/<pid>-<id>.lease   the entries a live reader uses: eviction leaves them alone
    tmp/                      downloads in progress (renamed into blobs/ once verified,
                              deleted otherwise)
    evict.lock                one process evicts at a time

* **Verified before admitted.** A shard's bytes are written into ``tmp/`` while its sha256
  and size are computed (:class:`CacheFill`), and renamed into ``blobs/`` (atomic on one
  filesystem) only if both match the registered values; otherwise
  :class:`~recordkeeper.errors.CorruptShard` names it.  :meth:`ShardCache.pull` and
  ``tf_dataset(cache=True)`` read a shard only once it is admitted.
* **Checked when used.** ``verify="fast"`` (the default) compares an entry's size and mtime
  with its ``.ok`` record: a file written to since (corrupted, truncated) is re-hashed, and
  re-fetched if its bytes are wrong.  ``"deep"`` re-hashes every entry used; ``None`` checks
  only the size.
* **Bounded.** ``$RECORDKEEPER_CACHE_MAX_SIZE`` (default 50 GiB; ``"200GB"``, ``"10GiB"`` or
  bytes) bounds the blobs; adding one evicts the least recently used entries (by access time,
  set on each use) that no live reader holds.  Entries leased by live readers may keep the cache
  above its bound until they are released; a split larger than the bound is refused.
* **Safe across processes.** Per-entry ``flock`` locks make concurrent pulls of the same shard
  download it once (the others wait and use it); a :class:`CacheFill` used without that lock
  writes its own file and takes the lock to admit it (the first admitted wins); leases
  are files each holding an exclusive ``flock`` for as long as their reader lives, so eviction
  sees which are live (a crashed process's lease is unlocked, hence stale, and removed).
  POSIX only (``fcntl``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from recordkeeper.core.errors import CorruptShard, InvalidInput
from recordkeeper.storage import open_read, storage_errors
from recordkeeper.streaming import write_fd

if TYPE_CHECKING:
    from recordkeeper.values import DatasetVersion, Shard

__all__ = [
    "CACHE_DIR_ENV",
    "CACHE_MAX_SIZE_ENV",
    "DEFAULT_MAX_SIZE",
    "CacheEntry",
    "CacheFill",
    "CachedVersion",
    "Lease",
    "PullReport",
    "ShardCache",
    "parse_size",
]

CACHE_DIR_ENV = "RECORDKEEPER_CACHE_DIR"
CACHE_MAX_SIZE_ENV = "RECORDKEEPER_CACHE_MAX_SIZE"
DEFAULT_MAX_SIZE = 50 * 2**30
_READ = 32 << 20  # few requests per shard (one read in flight per download)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
Verify = Literal["fast", "deep"] | None


def parse_size(text: str | int) -> int:
    """``"50GiB"``, ``"200 GB"``, ``"1048576"`` → bytes (raises InvalidInput)."""
    if isinstance(text, int):
        if text < 0:
            raise InvalidInput(f"a cache size must not be negative, got {text}")
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise InvalidInput(
            f"not a size: {text!r} (expected bytes or a number with B, kB, MB, GB, TB, KiB, "
            "MiB, GiB or TiB)"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _default_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("recordkeeper", appauthor=False))


@dataclass(frozen=True)
class CacheEntry:
    """One cached shard: its sha256, size, path and when it was last used (epoch seconds)."""

    sha256: str
    size: int
    path: Path
    last_used: float


@dataclass(frozen=True)
class CachedVersion:
    """A version pulled into the cache: how many of its shards (and bytes) are still there."""

    name: str
    content_digest: str | None
    splits: tuple[str, ...]
    shards: int
    cached_shards: int
    size: int
    cached_size: int

    @property
    def complete(self) -> bool:
        return self.cached_shards == self.shards

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "content_digest": self.content_digest,
            "splits": list(self.splits),
            "shards": self.shards,
            "cached_shards": self.cached_shards,
            "size": self.size,
            "cached_size": self.cached_size,
            "complete": self.complete,
        }


@dataclass
class PullReport:
    """What a pull did: shards already cached, downloaded, and re-fetched (bad entry)."""

    version: str
    shards: int = 0
    cached: int = 0
    downloaded: int = 0
    refetched: int = 0
    downloaded_bytes: int = 0
    paths: dict[str, list[Path]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "shards": self.shards,
            "cached": self.cached,
            "downloaded": self.downloaded,
            "refetched": self.refetched,
            "downloaded_bytes": self.downloaded_bytes,
            "paths": {s: [str(p) for p in ps] for s, ps in self.paths.items()},
        }


@contextlib.contextmanager
def _locked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (created); yields False if not blocking and taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


class Lease:
    """The entries a reader uses, kept from eviction until :meth:`release` (or its process
    ends).  A file in ``leases/`` holding an exclusive ``flock`` for its whole life."""

    def __init__(self, cache: ShardCache, sha256s: Iterable[str]) -> None:
        self.sha256s = frozenset(sha256s)
        leases = cache.directory / "leases"
        leases.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex}.lease"
        tmp = leases / f".{name}"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # locked before it is visible: never seen as stale
        os.write(fd, "\n".join(sorted(self.sha256s)).encode())
        os.replace(tmp, leases / name)
        self.path = leases / name
        self._finalizer = weakref.finalize(self, Lease._close, fd, self.path)

    @staticmethod
    def _close(fd: int, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

    def release(self) -> None:
        self._finalizer()

    @property
    def live(self) -> bool:
        return self._finalizer.alive

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class CacheFill:
    """One shard's bytes on their way into the cache (:meth:`ShardCache.filling`).

    :meth:`write` appends each piece, as it arrives, to a new file in ``tmp/`` and to a running
    sha256; :meth:`admit` renames the file into ``blobs/`` only if the size and sha256 are the
    registered ones (else :class:`~recordkeeper.errors.CorruptShard`, and nothing is cached).
    A fill that is not admitted — the reader stopped early, failed, or was dropped — is
    discarded: its file goes, the cache never holds a partial shard.  Used as a context manager
    it is discarded on leaving unless admitted.  It takes no lock while it fills
    (:meth:`ShardCache.fetch` holds the entry's lock around its download; fills made without it
    each write their own file, the first admitted wins, the others are dropped at
    :meth:`admit`).
    """

    def __init__(self, cache: ShardCache, shard: Shard) -> None:
        self.cache = cache
        self.shard = shard
        self.tmp = cache.directory / "tmp" / f"{shard.sha256}.{os.getpid()}.{uuid.uuid4().hex}"
        self.received = 0  # bytes given to write()
        self._digest = hashlib.sha256()
        self._fd: int | None = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._finalizer = weakref.finalize(self, CacheFill._drop, self._fd, self.tmp)
        self.admitted: Path | None = None

    @staticmethod
    def _drop(fd: int | None, tmp: Path) -> None:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()

    def write(self, chunk: bytes | memoryview) -> None:
        """Append the next piece of the shard's stored bytes (hashed and written)."""
        if self._fd is None:
            raise ValueError("this cache fill is closed")
        self.received += len(chunk)
        if self.received <= self.shard.size:  # more than registered: already wrong, not kept
            self._digest.update(chunk)
            write_fd(self._fd, chunk)

    def problem(self) -> CorruptShard | None:
        """Why the bytes received are not the registered shard, or None if they are."""
        shard, got = self.shard, self.received
        if got != shard.size:
            what = f"{got} bytes where {shard.size} are registered"
        elif (digest := self._digest.hexdigest()) != shard.sha256:
            what = f"sha256 {digest} where {shard.sha256} is registered"
        else:
            return None
        return CorruptShard(
            f"shard {shard.name} read from {shard.uri} has {what}: not cached",
            uri=shard.uri,
            shard=shard.name,
            reason="sha256" if got == shard.size else "size",
        )

    def admit(self, *, locked: bool = False) -> Path:
        """Close the file and, if its bytes are the registered shard, rename it into the cache
        (under the entry's lock; ``locked``: the caller holds it) and return the blob's path.
        Raises :class:`~recordkeeper.errors.CorruptShard` (the fill discarded) if not."""
        if self.admitted is not None:
            return self.admitted
        fd, self._fd = self._fd, None
        if fd is None:
            raise ValueError("this cache fill is closed")
        os.close(fd)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, CacheFill._drop, None, self.tmp)
        try:
            problem = self.problem()
            if problem is not None:
                raise problem
            if locked:
                self.admitted = self.cache._admit(self)
            else:
                with _locked(self.cache._lock(self.shard.sha256)):
                    self.admitted = self.cache._admit(self)
        except BaseException:
            self.discard()
            raise
        self._finalizer.detach()
        return self.admitted

    def discard(self) -> None:
        """Drop what was received (the file in ``tmp/`` goes); idempotent."""
        self._fd = None
        self._finalizer()

    def __enter__(self) -> CacheFill:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.admitted is None:
            self.discard()


class ShardCache:
    """A content-addressed cache of verified shards in ``directory`` bounded to ``max_size``.

    ``directory`` defaults to ``$RECORDKEEPER_CACHE_DIR`` or the per-user cache directory,
    ``max_size`` to ``$RECORDKEEPER_CACHE_MAX_SIZE`` or 50 GiB (both read when the cache object
    is made).  See the module docstring for the layout and the rules.
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, max_size: int | str | None = None
    ) -> None:
        env_dir = os.environ.get(CACHE_DIR_ENV)
        self.directory = Path(directory or env_dir or _default_dir()).expanduser()
        env_size = os.environ.get(CACHE_MAX_SIZE_ENV)
        if max_size is None:
            max_size = env_size if env_size else DEFAULT_MAX_SIZE
        self.max_size = parse_size(max_size)
        self._usage: int | None = None  # this process's estimate of the blobs' total size
        self._added = 0  # blobs added since the last scan
        self._guard = threading.Lock()
        for sub in ("blobs", "tmp", "locks", "leases", "versions"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"ShardCache({str(self.directory)!r}, max_size={self.max_size})"

    # -- paths ------------------------------------------------------------------------------

    def path(self, sha256: str) -> Path:
        """Where the blob with this sha256 lives (whether or not it is there)."""
        if not _SHA256.fullmatch(sha256):
            raise InvalidInput(f"not a sha256 hex digest: {sha256!r}")
        return self.directory / "blobs" / sha256[:2] / sha256

    def _ok(self, sha256: str) -> Path:
        return self.path(sha256).with_suffix(".ok")

    def _lock(self, sha256: str) -> Path:
        return self.directory / "locks" / f"{sha256}.lock"

    # -- one entry --------------------------------------------------------------------------

    def lookup(self, sha256: str, size: int, *, verify: Verify = "fast") -> Path | None:
        """The blob's path if it holds the bytes with this sha256 and size (checked as
        ``verify`` says), marked as used now; None if absent.  A bad entry is removed."""
        blob = self.path(sha256)
        try:
            st = blob.stat()
        except FileNotFoundError:
            return None
        good = st.st_size == size
        if good and verify is not None:
            record = self._read_ok(sha256)
            fresh = record is not None and record == {
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
            }
            if verify == "deep" or not fresh:
                good = _file_sha256(blob) == sha256
                if good and not fresh:
                    self._write_ok(sha256, st)
        if not good:
            with _locked(self._lock(sha256)), contextlib.suppress(FileNotFoundError):
                if blob.stat().st_ino == st.st_ino:  # not replaced meanwhile
                    self._remove(sha256)
            return None
        with contextlib.suppress(OSError):  # last use = access time; mtime stays the check
            os.utime(blob, ns=(time.time_ns(), st.st_mtime_ns))
        return blob

    def _read_ok(self, sha256: str) -> dict[str, int] | None:
        try:
            data = json.loads(self._ok(sha256).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _write_ok(self, sha256: str, st: os.stat_result) -> None:
        ok = self._ok(sha256)
        tmp = self.directory / "tmp" / f"{sha256}.{uuid.uuid4().hex}.ok"
        tmp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns}))
        os.replace(tmp, ok)

    def _remove(self, sha256: str) -> int:
        """Delete an entry (its lock held); the bytes it freed."""
        blob = self.path(sha256)
        freed = 0
        with contextlib.suppress(FileNotFoundError):
            freed = blob.stat().st_size
            blob.unlink()
        with contextlib.suppress(FileNotFoundError):
            self._ok(sha256).unlink()
        with self._guard:
            if self._usage is not None:
                self._usage = max(self._usage - freed, 0)
        return freed

    def fetch(
        self,
        shard: Shard,
        storage_options: Mapping[str, Any] | None = None,
        *,
        verify: Verify = "fast",
        progress: Callable[[int], None] | None = None,
    ) -> tuple[Path, str]:
        """The cached path of ``shard``, downloading and verifying it if needed.

        Returns ``(path, how)`` with ``how`` one of ``"cached"``, ``"downloaded"`` and
        ``"refetched"`` (an entry was there but its bytes were wrong).  Concurrent fetches
        of one shard (threads or processes) download it once.
        """
        sha, size = shard.sha256, shard.size
        existed = self.path(sha).exists()
        found = self.lookup(sha, size, verify=verify)
        if found is not None:
            return found, "cached"
        with _locked(self._lock(sha)):
            found = self.lookup(sha, size, verify=None if not existed else verify)
            if found is not None:  # another process fetched it while we waited
                return found, "cached"
            self._make_room(size)
            self._download(shard, storage_options, progress)
        path = self.path(sha)
        return path, "refetched" if existed else "downloaded"

    def filling(self, shard: Shard) -> CacheFill:
        """A :class:`CacheFill` for ``shard``: its bytes, given as they arrive, go to ``tmp/``
        and are admitted into the cache only once their size and sha256 match (what
        :meth:`fetch` downloads into)."""
        return CacheFill(self, shard)

    def _download(
        self,
        shard: Shard,
        storage_options: Mapping[str, Any] | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        uri = shard.uri
        with self.filling(shard) as fill:
            with open_read(uri, storage_options, size=shard.size) as src, storage_errors(uri):
                while chunk := src.read(_READ):
                    fill.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
                    if fill.received > shard.size:
                        break
            fill.admit(locked=True)  # fetch holds the entry's lock

    def _admit(self, fill: CacheFill) -> Path:
        """Rename a verified fill's file into ``blobs/`` (the entry's lock held): or keep the
        entry already there, if it is good, and drop the fill's copy."""
        shard = fill.shard
        sha = shard.sha256
        blob = self.path(sha)
        try:
            there: os.stat_result | None = blob.stat()
        except FileNotFoundError:
            there = None
        if there is not None and self._read_ok(sha) == {
            "size": shard.size,
            "mtime_ns": there.st_mtime_ns,
        }:
            fill.discard()  # another reader or pull admitted it meanwhile (unchanged since)
            return blob
        if there is None:
            self._make_room(shard.size)
        os.chmod(fill.tmp, 0o444)
        st = fill.tmp.stat()
        blob.parent.mkdir(parents=True, exist_ok=True)
        self._write_ok(sha, st)  # before the blob appears: a seen blob has its record
        os.replace(fill.tmp, blob)  # over a damaged entry, if one was there
        if there is None:
            with self._guard:
                if self._usage is not None:
                    self._usage += shard.size
                self._added += 1
        return blob

    # -- many entries -----------------------------------------------------------------------

    def entries(self) -> list[CacheEntry]:
        """Every cached blob, least recently used first."""
        out = []
        blobs = self.directory / "blobs"
        for sub in sorted(blobs.iterdir()) if blobs.is_dir() else ():
            if not sub.is_dir():
                continue
            for blob in sub.iterdir():
                if not _SHA256.fullmatch(blob.name):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = blob.stat()
                    out.append(CacheEntry(blob.name, st.st_size, blob, st.st_atime))
        out.sort(key=lambda e: e.last_used)
        return out

    def usage(self) -> int:
        """The total size of the cached blobs (bytes)."""
        return sum(e.size for e in self.entries())

    def leased(self) -> set[str]:
        """The sha256s live readers hold; removes the leases of processes that are gone."""
        held: set[str] = set()
        leases = self.directory / "leases"
        for lease in leases.glob("*.lease"):
            try:
                fd = os.open(lease, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:  # locked: its reader lives
                    held.update(os.read(fd, 1 << 30).decode().split())
                    continue
                with contextlib.suppress(FileNotFoundError):
                    lease.unlink()  # stale: its process ended without releasing it
            finally:
                os.close(fd)
        return held

    def lease(self, sha256s: Iterable[str]) -> Lease:
        """Keep these entries from eviction until the lease is released or garbage."""
        return Lease(self, sha256s)

    def _make_room(self, incoming: int) -> None:
        if incoming > self.max_size:
            raise InvalidInput(
                f"a shard of {incoming} bytes does not fit in the shard cache "
                f"({self.max_size} bytes, {CACHE_MAX_SIZE_ENV})"
            )
        with self._guard:
            estimate = self._usage
            if estimate is not None and self._added < 64 and estimate + incoming <= self.max_size:
                return
        self.evict(self.max_size - incoming)

    def evict(self, target: int | None = None) -> list[CacheEntry]:
        """Remove least recently used entries, not leased nor locked, until the blobs take at
        most ``target`` bytes (default: the bound).  Returns what was removed."""
        target = self.max_size if target is None else target
        removed: list[CacheEntry] = []
        with _locked(self.directory / "evict.lock"):
            entries = self.entries()
            total = sum(e.size for e in entries)
            if total > target:
                held = self.leased()
                for entry in entries:
                    if total <= target:
                        break
                    if entry.sha256 in held:
                        continue
                    with _locked(self._lock(entry.sha256), blocking=False) as mine:
                        if mine:
                            total -= self._remove(entry.sha256)
                            removed.append(entry)
            with self._guard:
                self._usage = total
                self._added = 0
        return removed

    # -- versions ---------------------------------------------------------------------------

    def _manifest_path(self, name: str) -> Path:
        return self.directory / "versions" / f"{name}.json"

    def remember(self, version: DatasetVersion, splits: Sequence[str]) -> None:
        """Record which shards ``version``'s ``splits`` are (for ``ls`` and ``clear``)."""
        path = self._manifest_path(version.name)
        with _locked(self.directory / "versions.lock"):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            if data.get("content_digest") != version.content_digest:
                data = {"name": version.name, "content_digest": version.content_digest}
            known = data.setdefault("splits", {})
            for split in splits:
                known[split] = [[s.sha256, s.size] for s in version.splits[split].shards]
            tmp = self.directory / "tmp" / f"{version.name}.{uuid.uuid4().hex}.json"
            tmp.write_text(json.dumps(data, sort_keys=True))
            os.replace(tmp, path)

    def _manifests(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.directory / "versions").glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if isinstance(data, dict) and isinstance(data.get("splits"), dict):
                    out.append(data)
        return out

    def versions(self) -> list[CachedVersion]:
        """The versions pulled here (by ``pull`` or ``tf_dataset(cache=True)``)."""
        present = {e.sha256 for e in self.entries()}
        out = []
        for data in self._manifests():
            shards = [tuple(s) for split in data["splits"].values() for s in split]
            out.append(
                CachedVersion(
                    name=str(data.get("name")),
                    content_digest=data.get("content_digest"),
                    splits=tuple(sorted(data["splits"])),
                    shards=len(shards),
                    cached_shards=sum(1 for sha, _ in shards if sha in present),
                    size=sum(int(n) for _, n in shards),
                    cached_size=sum(int(n) for sha, n in shards if sha in present),
                )
            )
        return out

    def clear(self, names: Sequence[str] | None = None) -> tuple[int, int]:
        """Remove every entry (``names`` None) or the entries of the named versions that no
        other remembered version uses, and those versions' records.  Leased entries stay.
        Returns ``(entries removed, bytes freed)``."""
        manifests = self._manifests()
        if names is None:
            doomed = {e.sha256 for e in self.entries()}
            drop = [str(m.get("name")) for m in manifests]
        else:
            unknown = set(names) - {str(m.get("name")) for m in manifests}
            if unknown:
                raise InvalidInput(f"not in the shard cache: {', '.join(sorted(unknown))}")
            drop = list(names)
            mine: set[str] = set()
            others: set[str] = set()
            for m in manifests:
                shas = {s[0] for split in m["splits"].values() for s in split}
                (mine if m.get("name") in drop else others).update(shas)
            doomed = mine - others
        held = self.leased()
        count = freed = 0
        for sha in sorted(doomed - held):
            with _locked(self._lock(sha), blocking=False) as free:
                if free and self.path(sha).exists():
                    freed += self._remove(sha)
                    count += 1
        for name in drop:
            with contextlib.suppress(FileNotFoundError):
                self._manifest_path(name).unlink()
        return count, freed

    # -- pulling ----------------------------------------------------------------------------

    def check_fits(self, shards: Sequence[Shard]) -> None:
        """Refuse a set of shards that the bound cannot hold at once (a clear error)."""
        need = sum(s.size for s in {s.sha256: s for s in shards}.values())
        if need > self.max_size:
            raise InvalidInput(
                f"the shards asked for take {need} bytes, more than the shard cache's bound of "
                f"{self.max_size} bytes: raise {CACHE_MAX_SIZE_ENV} (or max_size)"
            )

    def pull(
        self,
        version: DatasetVersion,
        splits: Sequence[str] | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        verify: Verify = "fast",
        workers: int = 8,
        progress: bool | None = None,
    ) -> PullReport:
        """Bring ``version``'s shards (of ``splits``, default all) into the cache, verified.

        Shards already cached are checked (``verify``) and used; the others are downloaded
        ``workers`` at a time with a progress bar (on a terminal, or ``progress=True``).
        """
        from recordkeeper.progress import byte_progress

        version.ensure_readable()
        version.warn_if_deprecated("pulled", stacklevel=2)
        names = list(splits) if splits is not None else list(version.splits)
        for name in names:
            if name not in version.splits:
                version.files(name)  # raises SplitNotFound (a KeyError) naming the splits
        shards = [s for name in names for s in version.splits[name].shards]
        self.check_fits(shards)
        options = storage_options if storage_options is not None else version.storage_options
        report = PullReport(version.name, shards=len(shards))
        self.remember(version, names)
        missing = sum(s.size for s in shards if not self.path(s.sha256).exists())
        with (
            self.lease(s.sha256 for s in shards),
            byte_progress(f"pull {version.name}", missing, progress) as advance,
            ThreadPoolExecutor(max(1, workers), thread_name_prefix="recordkeeper-pull") as pool,
        ):
            results = list(
                pool.map(lambda s: self.fetch(s, options, verify=verify, progress=advance), shards)
            )
        for shard, (path, how) in zip(shards, results, strict=True):
            report.paths.setdefault(shard.split, []).append(path)
            if how == "cached":
                report.cached += 1
            else:
                report.downloaded += 1
                report.refetched += how == "refetched"
                report.downloaded_bytes += shard.size
        return report


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ):
            digest.update(chunk)
    return digest.hexdigest()

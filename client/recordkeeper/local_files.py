"""Local files that are never written, moved or deleted through a link out of a root.

Every local operation that could be turned by a planted symbolic link (the collector deleting
a version's prefix, the writer creating and renaming its shards) goes through here:

* A directory is opened by its *real* path, which must lie inside the real path of one of the
  roots (:func:`open_directory`).  It is reached from that real root one segment at a time with
  ``O_NOFOLLOW``, so a link planted after the check — or anywhere below the root — is refused
  (``ELOOP``), never followed.  The roots themselves are the operator's and may be reached
  through links.
* Files are created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``) in a directory held open by
  descriptor: a link (or file) planted where a shard is about to be written is refused
  (:class:`~recordkeeper.core.errors.UnsafeStoragePath`), its target untouched.  A finished
  shard is moved to its final name by a hard link that fails if the name exists.
* Walking a tree never descends into a link: a link inside a prefix is an object of its own
  (deleting it removes the link, never its target).

The pure rule of what lies inside what is :func:`recordkeeper.core.roots.path_is_inside`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from recordkeeper.core.errors import StorageError, UnsafeStoragePath
from recordkeeper.core.roots import path_is_inside

__all__ = [
    "LocalObject",
    "check_in_place",
    "create_exclusive",
    "delete_objects",
    "local_path",
    "move_exclusive",
    "open_directory",
    "real_roots",
    "remove_empty_directories",
    "walk_objects",
]

_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: errno values meaning "a link (or a non-directory) where a directory was expected".
_LINK_ERRNOS = {errno.ELOOP, errno.ENOTDIR, getattr(errno, "EMLINK", errno.ELOOP)}


def local_path(uri_or_path: str) -> str:
    """The absolute path of a ``file://`` URI (a path is returned as it is)."""
    return uri_or_path[len("file://") :] if uri_or_path.startswith("file://") else uri_or_path


def real_roots(roots: Iterable[str]) -> list[str]:
    """The real paths of the local (``file://``) roots, for :func:`open_directory`."""
    return [os.path.realpath(local_path(r)) for r in roots if r.startswith(("file://", "/"))]


def _unsafe(path: str, reason: str, why: str) -> UnsafeStoragePath:
    return UnsafeStoragePath(f"{path}: {why}", uri=f"file://{path}", path=path, reason=reason)


def _inside(real: str, roots: Iterable[str]) -> str | None:
    inside = [root for root in roots if path_is_inside(real, root)]
    return max(inside, key=len) if inside else None


def open_directory(path: str, roots: Iterable[str], *, create: bool = False) -> int:
    """A descriptor of directory ``path``, whose real path lies inside one of ``roots`` (real
    paths, see :func:`real_roots`), reached from that root without following any link.

    ``create``: make missing directories (never through a link).  Raises
    :class:`~recordkeeper.core.errors.UnsafeStoragePath` (``outside_roots``, ``symlink``),
    :class:`FileNotFoundError` when it does not exist and ``create`` is false.  The caller
    closes the descriptor.
    """
    roots = list(roots)
    real = os.path.realpath(path)
    root = _inside(real, roots)
    if root is None:
        shown = f" (it resolves to {real})" if real != os.path.normpath(path) else ""
        raise _unsafe(path, "outside_roots", f"lies outside the allowed roots{shown}")
    if create:
        os.makedirs(root, exist_ok=True)  # the root itself is the operator's
    fd = os.open(root, _DIR)
    try:
        for part in [p for p in real[len(root) :].split("/") if p]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                child = os.open(part, _DIR | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:
                    raise _unsafe(
                        path, "symlink", f"{part!r} is a symbolic link (or not a directory)"
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_in_place(
    path: str, roots: Iterable[str], real_dirs: dict[str, str] | None = None
) -> None:
    """Refuse to register a local file in place that is a symbolic link, or whose real path
    lies outside the real ``roots``: a shard is recorded as the file it is, and a link could be
    re-pointed after its digests were taken.  A missing file is left to the caller.

    ``real_dirs`` (directory → its real path) lets a caller checking many files of a few
    directories resolve each directory once: a file that is not a link is its real directory
    joined with its name."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise _unsafe(
            path,
            "symlink",
            f"is a symbolic link (to {os.readlink(path)}); publish the file "
            "it points to by its own path, or copy it (copy_to=True, CLI --copy)",
        )
    if real_dirs is None:
        real = os.path.realpath(path)
    else:
        directory, name = os.path.split(os.path.abspath(path))
        real_dir = real_dirs.get(directory)
        if real_dir is None:
            real_dir = real_dirs[directory] = os.path.realpath(directory)
        real = os.path.join(real_dir, name)
    if _inside(real, list(roots)) is None:
        raise _unsafe(
            path,
            "outside_roots",
            f"resolves to {real}, outside the allowed roots (a "
            "directory on its path is a link); copy it (copy_to=True, CLI --copy)",
        )


def create_exclusive(path: str, roots: Iterable[str]) -> IO[bytes]:
    """Create ``path`` for writing; it must not exist (not even as a link).  Its directory is
    created as needed, inside ``roots`` and never through a link."""
    directory, name = os.path.split(path)
    dfd = open_directory(directory, roots, create=True)
    try:
        try:
            fd = os.open(name, _NEW_FILE, 0o666, dir_fd=dfd)
        except FileExistsError:
            raise _existing(path, dfd, name) from None
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS:
                raise _unsafe(path, "symlink", "is a symbolic link; nothing was written") from None
            raise
    finally:
        os.close(dfd)
    return os.fdopen(fd, "wb")


def _existing(path: str, dfd: int, name: str) -> UnsafeStoragePath:
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link:
        return _unsafe(
            path,
            "symlink",
            "is a symbolic link someone else created; it was not followed and "
            "nothing was written (remove it, or stage a new version)",
        )
    return _unsafe(
        path,
        "exists",
        "already exists, and recordkeeper creates its files exclusively; "
        "it was left as it is (remove it, or stage a new version)",
    )


def move_exclusive(src: str, dst: str, roots: Iterable[str]) -> None:
    """Move ``src`` to ``dst`` (same file system) when ``dst`` does not exist; both
    directories inside ``roots``, reached without links.  A missing ``src`` raises
    :class:`StorageError` with reason ``missing`` (a retried move); a ``dst`` that is the same
    file as ``src`` (a move interrupted after linking) is finished."""
    roots = list(roots)
    sfd = open_directory(os.path.dirname(src), roots)
    try:
        dfd = open_directory(os.path.dirname(dst), roots, create=True)
        try:
            _move(src, dst, sfd, dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _move(src: str, dst: str, sfd: int, dfd: int) -> None:
    sname, dname = os.path.basename(src), os.path.basename(dst)
    try:
        source = os.stat(sname, dir_fd=sfd, follow_symlinks=False)
    except FileNotFoundError:
        raise StorageError(f"{src} is missing", uri=f"file://{src}", reason="missing") from None
    if not stat.S_ISREG(source.st_mode):
        raise _unsafe(src, "symlink", "is not a regular file recordkeeper wrote; not moved")
    try:
        os.link(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
    except FileExistsError:
        target = os.stat(dname, dir_fd=dfd, follow_symlinks=False)
        if (target.st_dev, target.st_ino) != (source.st_dev, source.st_ino):
            raise _existing(dst, dfd, dname) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV):
            raise
        # No hard links here (some network and FAT file systems): rename, unless taken.
        try:
            os.stat(dname, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
            return
        raise _existing(dst, dfd, dname) from None
    os.unlink(sname, dir_fd=sfd)


@dataclass(frozen=True)
class LocalObject:
    """One entry under a walked directory: ``relative`` path (``/``-separated), its size
    (a link's own size), and whether it is a symbolic link (never followed)."""

    relative: str
    size: int
    link: bool = False


def walk_objects(path: str, roots: Iterable[str]) -> list[LocalObject]:
    """Every file and link under directory ``path`` (inside ``roots``), sorted; a missing
    directory has none.  Links — to files or to directories — are listed, never entered."""
    try:
        fd = open_directory(path, roots)
    except FileNotFoundError:
        return []
    try:
        return sorted(_walk(fd, ""), key=lambda o: o.relative)
    finally:
        os.close(fd)


def _walk(fd: int, relative: str) -> Iterator[LocalObject]:
    with os.scandir(fd) as entries:
        listed = list(entries)
    for entry in listed:
        name = relative + entry.name
        info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            yield LocalObject(name, info.st_size, link=True)
        elif stat.S_ISDIR(info.st_mode):
            try:
                child = os.open(entry.name, _DIR | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:  # swapped for a link meanwhile: an object
                    yield LocalObject(name, 0, link=True)
                    continue
                raise
            try:
                yield from _walk(child, name + "/")
            finally:
                os.close(child)
        else:
            yield LocalObject(name, info.st_size)


def delete_objects(path: str, roots: Iterable[str], relatives: Iterable[str]) -> list[str]:
    """Unlink these entries (from :func:`walk_objects`) under directory ``path``, never
    through a link: a link is removed itself.  Returns the ones deleted (missing ones count:
    they are gone); an entry that became a directory, or whose directory became a link, is
    left and not returned."""
    deleted: list[str] = []
    fd = open_directory(path, roots)
    try:
        for relative in relatives:
            *parents, name = relative.split("/")
            try:
                parent = _descend(fd, parents)
            except (FileNotFoundError, UnsafeStoragePath):
                continue
            try:
                os.unlink(name, dir_fd=parent)
                deleted.append(relative)
            except FileNotFoundError:
                deleted.append(relative)
            except IsADirectoryError:
                pass
            finally:
                if parent != fd:
                    os.close(parent)
    finally:
        os.close(fd)
    return deleted


def _descend(fd: int, parts: list[str]) -> int:
    current = fd
    for part in parts:
        if part in ("", ".", ".."):
            raise UnsafeStoragePath(f"bad path segment {part!r}", reason="symlink")
        try:
            child = os.open(part, _DIR | _NOFOLLOW, dir_fd=current)
        except OSError as exc:
            if current != fd:
                os.close(current)
            if exc.errno in _LINK_ERRNOS:
                raise UnsafeStoragePath(f"{part!r} is a link", reason="symlink") from None
            raise
        if current != fd:
            os.close(current)
        current = child
    return current


def remove_empty_directories(path: str, roots: Iterable[str]) -> bool:
    """Remove the empty directories under ``path`` and ``path`` itself if it ends up empty
    (never following a link).  True when ``path`` is gone."""
    roots = list(roots)
    real = os.path.realpath(path).rstrip("/")
    parent, name = os.path.split(real)
    try:
        pfd = open_directory(parent, roots)
    except FileNotFoundError:
        return True
    try:
        try:
            fd = os.open(name, _DIR | _NOFOLLOW, dir_fd=pfd)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            _prune(fd)
        finally:
            os.close(fd)
        try:
            os.rmdir(name, dir_fd=pfd)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
    finally:
        os.close(pfd)


def _prune(fd: int) -> None:
    with os.scandir(fd) as entries:
        listed = list(entries)
    for entry in listed:
        if entry.is_dir(follow_symlinks=False):
            try:
                child = os.open(entry.name, _DIR | _NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            try:
                _prune(child)
            finally:
                os.close(child)
            with contextlib.suppress(OSError):
                os.rmdir(entry.name, dir_fd=fd)

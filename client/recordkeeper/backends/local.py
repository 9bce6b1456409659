"""Local disk (``file://``): identity is the file's inode, size and modification time."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import IO, Any, ClassVar

from recordkeeper.backends.base import Mismatch, ObjectStat, StorageProfile

__all__ = ["LocalProfile", "find_files", "stat_file"]


def stat_file(uri: str, path: str) -> ObjectStat:
    """A local file's size and identity (raises ``OSError`` when it is missing or a directory)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):  # what os.path.isfile asks, from the same stat
        raise FileNotFoundError(f"{path} is not a file")
    return ObjectStat(
        uri,
        st.st_size,
        {"backend": "file", "mtime_ns": st.st_mtime_ns, "size": st.st_size, "ino": st.st_ino},
    )


def find_files(path: str) -> list[str]:
    """fsspec's ``LocalFileSystem.find(path)`` (version 2026.9) without its ``info()``
    dictionary per entry: the same paths, sorted — every entry under ``path`` that is not a
    directory (links are entries, never followed below ``path``), a directory that cannot be
    listed left out, an entry gone before its ``lstat`` (or its link's ``readlink``) skipped.
    ``tests/client/test_small_files_overhead.py`` compares both on a tree with links."""
    found: list[str] = []
    pending = [path]
    while pending:
        listed = _list_directory(pending.pop())
        if listed is not None:
            found += listed[0]
            pending += listed[1]
    if not found and os.path.isfile(path):
        found = [path]
    return sorted(set(found))


def _list_directory(directory: str) -> tuple[list[str], list[str]] | None:
    """``(files, subdirectories)`` of one directory as fsspec's ``walk`` sees them; None when
    its listing fails (``walk`` leaves such a directory out)."""
    try:
        st = os.stat(directory, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(directory)
        if not stat.S_ISDIR(st.st_mode):
            return [directory], []  # no longer a directory: the path itself, as a file
        files: list[str] = []
        directories: list[str] = []
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    entry.stat(follow_symlinks=False)
                    if entry.is_symlink():
                        os.readlink(entry.path)  # fsspec's info() reads the link's target
                except FileNotFoundError:
                    continue
                name = entry.path.rstrip("/")
                if entry.is_dir(follow_symlinks=False):
                    directories.append(name)
                else:
                    files.append(name)
    except OSError:
        return None
    return files, directories


class LocalProfile(StorageProfile):
    """``file://`` (and fsspec's ``local://``).

    Identity: ``mtime_ns``, ``size`` and ``ino`` (a file replaced by a rename — what most
    writers do to rewrite a file — has a new inode even when its size and mtime were kept).
    There is no server-side checksum: a bit flip that kept size, mtime and inode is found by
    deep verification only.
    """

    name = "file"
    schemes = ("file", "local")
    local: ClassVar[bool] = True
    retried_by: ClassVar[str] = "nothing (local system calls are not retried)"

    def prepare(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        # Local files need no options; dropping them lets one set of object-store options
        # serve a copy from local disk to S3/GCS.
        return {}

    def stat(self, fs: Any, uri: str, path: str, *, timeout: float | None) -> ObjectStat:
        return stat_file(uri, path)

    def compare(
        self, registered: Mapping[str, Any], current: ObjectStat, *, sha256: str, crc32c: str
    ) -> Mismatch | None:
        ident = current.identity
        if registered.get("mtime_ns") is not None and registered["mtime_ns"] != ident["mtime_ns"]:
            return Mismatch(
                "identity_changed",
                f"file modified after registration (mtime_ns {ident['mtime_ns']}, registered "
                f"{registered['mtime_ns']}); run a deep verify to compare content",
            )
        if registered.get("ino") is not None and registered["ino"] != ident.get("ino"):
            return Mismatch(
                "identity_changed",
                f"file replaced after registration (inode {ident.get('ino')}, registered "
                f"{registered['ino']}); run a deep verify to compare content",
            )
        return None

    def blind_spot(self, registered: Mapping[str, Any]) -> str | None:
        if registered.get("mtime_ns") is not None:
            return None  # a flip keeping size, mtime and inode is documented: deep only
        return (
            "these files were registered without a modification time: fast verify compares "
            "sizes only, so a same-size rewrite is found by deep verify alone"
        )

    def find(self, fs: Any, path: str, **bounded: Any) -> list[str]:
        if os.sep != "/" or not path.startswith("/"):
            return super().find(fs, path, **bounded)
        return find_files(path)

    def open_write(self, fs: Any, path: str) -> IO[bytes]:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")

    def rename(self, fs: Any, src: str, dst: str) -> None:
        os.replace(src, dst)

    def uri_of(self, fs: Any, listed: str, base_uri: str, base_path: str) -> str:
        return "file://" + os.path.abspath(fs._strip_protocol(listed))

    def native_path(self, uri: str, options: Mapping[str, Any]) -> str | None:
        return uri[len("file://") :] if uri.startswith("file://") else uri

"""Local disk (``file://``): identity is the file's inode, size and modification time."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import IO, Any, ClassVar

from recordkeeper.backends.base import Mismatch, ObjectStat, StorageProfile

__all__ = ["LocalProfile", "stat_file"]


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

    def open_write(self, fs: Any, path: str) -> IO[bytes]:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")

    def rename(self, fs: Any, src: str, dst: str) -> None:
        os.replace(src, dst)

    def uri_of(self, fs: Any, listed: str, base_uri: str, base_path: str) -> str:
        return "file://" + os.path.abspath(fs._strip_protocol(listed))

    def native_path(self, uri: str, options: Mapping[str, Any]) -> str | None:
        return uri[len("file://") :] if uri.startswith("file://") else uri

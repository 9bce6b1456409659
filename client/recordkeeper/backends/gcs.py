"""Google Cloud Storage (gcsfs): identity is the object generation and the server-side CRC32C.

``info()`` gives ``generation`` (a new number for every write of the object), ``crc32c``
(base64 of the big-endian CRC32C of the bytes, which fast verification compares with the
shard's registered ``crc32c``) and ``md5Hash``.  gcsfs retries with its own loop (6 tries,
exponential backoff with jitter, on 429/5xx and transport errors).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO, Any, ClassVar

from recordkeeper.backends.base import Mismatch, ObjectStat, StorageProfile, b64_to_hex

__all__ = ["GCSProfile"]


class GCSProfile(StorageProfile):
    """``gs://`` (``gcs://`` is written ``gs://``)."""

    name = "gcs"
    schemes = ("gs", "gcs")
    rewritten = ("gcs",)
    extra = "gcs"
    retried_by: ClassVar[str] = (
        "gcsfs's own loop (6 tries, exponential with jitter, on 429/5xx and transport errors)"
    )

    def prepare(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        # Recent gcsfs asks a gRPC control plane for the bucket type before the first access;
        # emulators do not serve it and every first access stalls ~60 s (testing notes).
        if os.environ.get("STORAGE_EMULATOR_HOST"):
            os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        return dict(options or {})

    def identity_from_info(self, info: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "generation": str(info.get("generation")) if info.get("generation") else None,
            "crc32c": info.get("crc32c"),
            "md5": info.get("md5Hash"),
        }

    def compare(
        self, registered: Mapping[str, Any], current: ObjectStat, *, sha256: str, crc32c: str
    ) -> Mismatch | None:
        ident = current.identity
        crc_now = b64_to_hex(ident.get("crc32c"))
        if crc_now is not None and crc_now != crc32c:
            return Mismatch(
                "checksum_mismatch", f"server-side crc32c is {crc_now}, registered {crc32c}"
            )
        if registered.get("generation") and registered["generation"] != ident.get("generation"):
            return Mismatch(
                "identity_changed",
                f"object generation is {ident.get('generation')}, registered "
                f"{registered['generation']} (the object was rewritten)",
            )
        return None

    def blind_spot(self, registered: Mapping[str, Any]) -> str | None:
        return None  # the server-side crc32c is compared with the shard's own, always

    def open_read(self, fs: Any, path: str, *, size: int | None) -> IO[bytes]:
        if size is None:
            return super().open_read(fs, path, size=size)
        opened: IO[bytes] = fs.open(path, "rb", block_size=8 * 2**20, size=size)
        return opened

    def rename(self, fs: Any, src: str, dst: str) -> None:
        # Server-side rewrite + delete.  (gcsfs.mv first tries the hierarchical-namespace
        # move API, which emulators and flat buckets answer with an error.)
        fs.copy(src, dst)
        fs.rm(src)

    def native_path(self, uri: str, options: Mapping[str, Any]) -> str | None:
        emulated = os.environ.get("STORAGE_EMULATOR_HOST") or options.get("endpoint_url")
        if not emulated and not options.get("token"):
            return uri  # real GCS with ambient credentials: TensorFlow's own client
        return None

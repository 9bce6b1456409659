"""Record identities computed while records stream past: the writer, publish and deep verify.

:class:`RecordIds` collects the identity (``sha256(record)[:width]``, kind ``bytes``: see
:mod:`recordkeeper.core.record_identity`) of each record of one shard, in the order the shard
holds them, from whatever already has the record in hand:

* the TFRecord writer's C framing loop, which hashes each record as it frames it
  (:meth:`recordkeeper.tfrecord.TFRecordWriter.hash_records_into`: ``ids=`` of
  ``recordkeeper._speedups.frame_into``, appending to :attr:`buffer`);
* other writers' batches (``add(records)``; with ``background=True`` on a helper thread: the C
  hash releases the GIL, so it overlaps with the framing the writer does meanwhile);
* a TFRecord scan's C deframer, which hashes each record in the loop that checks its CRCs
  (``ids=`` of ``recordkeeper._speedups.deframe``/``deframe_keys``: :attr:`buffer`);
* a Riegeli/ArrayRecord scan's record batches (``add``).

:meth:`finish` sorts them (in C) and gives the index bytes of
:mod:`recordkeeper.core.record_index`, byte for byte what ``recordkeeper index`` builds from
the stored shard afterwards.  :func:`recordkeeper.record_sets.write_index` stores it beside the
shard.  Without the C extension (or built without OpenSSL) hashlib hashes and Python sorts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from recordkeeper import _native
from recordkeeper.core.record_identity import DEFAULT_WIDTH, validate_identity
from recordkeeper.core.record_index import HEADER_SIZE, TRAILER_SIZE, SetDigest, encode_index
from recordkeeper.storage import write_objects
from recordkeeper.streaming import Worker

__all__ = [
    "INDEX_DIR",
    "INDEX_SUFFIX",
    "RecordIds",
    "index_uri",
    "native_ids",
    "sort_identities",
    "split_digest",
    "write_index",
    "write_indexes",
]

INDEX_DIR = ".recordkeeper/index"
INDEX_SUFFIX = ".rkidx"


def index_uri(shard_uri: str) -> str:
    """Where the record index of the shard at ``shard_uri`` is stored."""
    head, _, name = shard_uri.rpartition("/")
    return f"{head}/{INDEX_DIR}/{name}{INDEX_SUFFIX}"


def write_index(
    shard_uri: str, data: bytes, storage_options: Mapping[str, Any] | None = None
) -> str:
    """Store an index (:meth:`RecordIds.finish`, or the core's builder) beside its shard;
    its URI."""
    uri = index_uri(shard_uri)
    write_objects([(uri, data)], storage_options)
    return uri


def write_indexes(
    indexes: Mapping[str, bytes], storage_options: Mapping[str, Any] | None = None
) -> None:
    """:func:`write_index` of many shards (``indexes``: shard URI -> index), each directory of
    local indexes made once, and a local index already stored with the same bytes kept as it
    is (an index is determined by its shard's records: publishing a shard again writes the
    same one; :func:`recordkeeper.storage.write_objects`)."""
    write_objects(
        [(index_uri(uri), data) for uri, data in indexes.items()], storage_options, keep_equal=True
    )


def native_ids() -> bool:
    """Whether the C extension hashes records (``record_ids`` and ``deframe(ids=...)``)."""
    speedups = _native.speedups
    return speedups is not None and hasattr(speedups, "record_ids")


class RecordIds:
    """One shard's record identities (kind ``bytes``), in the shard's order until finished."""

    def __init__(self, width: int = DEFAULT_WIDTH, *, background: bool = False) -> None:
        _, self.width = validate_identity("bytes", width)
        #: the identities joined; the C deframer appends to it directly
        self.buffer = bytearray()
        self._worker = Worker(depth=4) if background else None

    @property
    def count(self) -> int:
        """Identities collected so far (those still on the helper thread not counted)."""
        return len(self.buffer) // self.width

    def add(self, records: Sequence[bytes]) -> None:
        """Hash ``records`` (``bytes``, in shard order): now, or on the helper thread."""
        if self._worker is None:
            self._hash(records)
        else:
            self._worker.submit(self._hash, records)

    def _hash(self, records: Sequence[bytes]) -> None:
        speedups = _native.speedups
        record_ids = None if speedups is None else getattr(speedups, "record_ids", None)
        if record_ids is not None:
            self.buffer += record_ids(records, self.width)
            return
        w, sha256 = self.width, hashlib.sha256
        self.buffer += b"".join([sha256(r).digest()[:w] for r in records])

    def finish(self, records_sha256: str | None = None) -> bytes:
        """The shard's index (:func:`recordkeeper.core.record_index.encode_index`)."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.close()
        body = sort_identities(bytes(self.buffer), self.width)
        return encode_index("bytes", self.width, body, records_sha256)

    def abandon(self) -> None:
        """Stop the helper thread (a shard given up)."""
        if self._worker is not None:
            self._worker.abandon()
            self._worker = None


def sort_identities(data: bytes, width: int) -> bytes:
    """The ``width``-byte identities joined in ``data``, sorted (in C when it is built)."""
    speedups = _native.speedups
    sort_ids = None if speedups is None else getattr(speedups, "sort_ids", None)
    if sort_ids is not None:
        body: bytes = sort_ids(data, width)
        return body
    return b"".join(sorted(data[i : i + width] for i in range(0, len(data), width)))


def split_digest(indexes: Sequence[bytes], width: int = DEFAULT_WIDTH) -> SetDigest:
    """The set digest of a split from its shards' indexes held in memory (bytes of
    :func:`~recordkeeper.core.record_index.encode_index`, kind ``bytes``): their identities
    merged by one sort, what :func:`recordkeeper.record_sets.index_version` computes by a
    streaming merge of the stored indexes."""
    bodies = [bytes(i[HEADER_SIZE : len(i) - TRAILER_SIZE]) for i in indexes]
    digest = SetDigest("bytes", width)
    # one index is sorted already (a split of one shard: most splits the writer writes)
    digest.update_sorted_body(
        bodies[0] if len(bodies) == 1 else sort_identities(b"".join(bodies), width)
    )
    return digest

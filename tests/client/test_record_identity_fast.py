"""The fast paths of record identity (issue 25, item 7) against the reference definition.

A record's identity (kind ``bytes``) is ``sha256(record)[:width]``
(:func:`recordkeeper.core.record_identity.record_hash`, hashlib).  The C extension computes it
several ways — OpenSSL one record at a time, SHA-NI two records interleaved, AVX-512 sixteen
records at once, in the writer's framing loop (``frame_into``), in the scan's CRC loop
(``deframe``/``deframe_keys``) — and every one must give exactly the reference's bytes, for
any record lengths (the padding boundaries at 55/56 and 119/120 bytes mod 64 included), widths
and compressions.
"""

from __future__ import annotations

import gzip
import io
import random
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkeeper import _native
from recordkeeper.core.record_identity import record_hash
from recordkeeper.core.record_index import RecordIndexBuilder
from recordkeeper.record_ids import RecordIds
from recordkeeper.tfrecord import TFRecordWriter, scan_shard
from tests.client._records import sample_examples

speedups: Any = _native.speedups
if speedups is None or not hasattr(speedups, "record_ids"):
    pytest.skip("the C extension (with OpenSSL) is not built", allow_module_level=True)

#: record_ids implementations: 0 auto, 1 OpenSSL, 2 SHA-NI, 3 AVX-512 (where the CPU has it)
IMPLS = [0, 1] + [2] * bool(speedups.sha_ni) + [3] * bool(getattr(speedups, "sha_x16", 0))
#: lengths around the sha256 padding boundaries, and a few blocks long
EDGES = [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 121, 127, 128, 129, 1000, 1024, 4097]


def _reference(records: list[bytes], width: int = 16) -> bytes:
    return b"".join(record_hash(r, "bytes", width) for r in records)


def _random_records(n: int, seed: int) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.choice([*EDGES, rnd.randrange(0, 3000)])) for _ in range(n)]


records_strategy = st.lists(
    st.one_of(st.binary(max_size=300), st.sampled_from(EDGES).map(lambda n: b"\xa5" * n)),
    max_size=70,  # more than the 16 lanes and the 64 records queued at once
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, width=st.integers(16, 32))
def test_every_implementation_gives_the_reference_identities(
    records: list[bytes], width: int
) -> None:
    for impl in IMPLS:
        assert speedups.record_ids(records, width, impl) == _reference(records, width), impl


def test_many_records_of_mixed_lengths_in_every_lane() -> None:
    records = _random_records(3000, seed=1)
    for impl in IMPLS:
        assert speedups.record_ids(records, 32, impl) == _reference(records, 32), impl


def test_an_implementation_the_cpu_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="not available"):
        speedups.record_ids([b"x"], 16, 99)


@settings(max_examples=40, deadline=None)
@given(records=records_strategy, keys=st.booleans(), width=st.integers(16, 32))
def test_the_framing_loop_hashes_the_records_it_frames(
    records: list[bytes], keys: bool, width: int
) -> None:
    framed = speedups.frame(records)
    out, ids = bytearray(len(framed) + 5), bytearray(b"old")
    end, crc, _, _ = speedups.frame_into(records, out, 5, keys, 0, ids, width)
    assert bytes(out[5:end]) == framed
    assert crc == speedups.frame_into(records, bytearray(len(framed)), 0, False, 0)[1]
    assert bytes(ids) == b"old" + _reference(records, width)


@settings(max_examples=40, deadline=None)
@given(records=records_strategy, width=st.integers(16, 32))
def test_the_crc_loops_hash_the_good_records(records: list[bytes], width: int) -> None:
    framed = speedups.frame(records)
    ids = bytearray()
    _, _, count, error = speedups.deframe(framed, 0, True, False, ids, width)
    assert (count, error) == (len(records), None)
    assert bytes(ids) == _reference(records, width)
    ids = bytearray()
    speedups.deframe_keys(framed, 0, True, ids, width)
    assert bytes(ids) == _reference(records, width)
    if len(records) > 1:  # a bad CRC in the second frame: the first record's identity only
        damaged = bytearray(framed)
        damaged[len(records[0]) + 16 + 12 + len(records[1])] ^= 1
        ids = bytearray()
        _, _, count, error = speedups.deframe(bytes(damaged), 0, True, False, ids, width)
        assert count == 1 and error is not None
        assert bytes(ids) == _reference(records[:1], width)


def _expected_index(records: list[bytes], records_sha256: str) -> bytes:
    builder = RecordIndexBuilder()
    builder.add_many(records)
    return builder.finish(records_sha256)


@pytest.mark.parametrize("compression", ["none", "gzip", "zlib"])
def test_a_written_and_a_scanned_shard_give_the_reference_index(compression: str) -> None:
    """The writer's framing loop and the scan's CRC loop, over Examples and random records,
    through compression: the core's pure-Python index builder's bytes."""
    records = sample_examples(300) + _random_records(700, seed=2)
    sink = io.BytesIO()
    writer = TFRecordWriter(sink, compression)
    written = RecordIds()
    assert writer.hash_records_into(written)
    writer.write_many(records[:10])
    writer._write_batch(records[10:], sum(map(len, records[10:])))
    stats = writer.close()
    expected = _expected_index(records, stats.records_sha256)
    assert written.finish(stats.records_sha256) == expected
    stored = sink.getvalue()
    if compression == "gzip":
        assert gzip.decompress(stored) == speedups.frame(records)
    elif compression == "zlib":
        assert zlib.decompress(stored) == speedups.frame(records)
    for infer_schema in (False, True):
        scanned = RecordIds()
        again = scan_shard(
            io.BytesIO(stored), compression, infer_schema=infer_schema, record_ids=scanned
        )
        assert again.records_sha256 == stats.records_sha256
        assert scanned.finish(stats.records_sha256) == expected


def test_a_batch_bigger_than_a_framing_buffer_is_hashed_too() -> None:
    records = [bytes([i]) * (3 << 20) for i in range(4)]  # 12 MiB: framed on its own
    writer = TFRecordWriter(io.BytesIO())
    ids = RecordIds()
    assert writer.hash_records_into(ids)
    writer._write_batch(records, sum(map(len, records)))
    stats = writer.close()
    assert ids.finish(stats.records_sha256) == _expected_index(records, stats.records_sha256)

"""Per-file work of publishing small shards, session 12 (issue 23, item 7).

Each test pins one mechanism by counting what it does (calls, statements, collector state),
never by timing it: publish keeps the collector off the objects it did not make, a small
uncompressed shard is scanned by one C call (with the streaming scan's stats and errors), the
record lookup slices the indexes publish holds, indexes on an object store are written by one
batch of single-request writes, the service decodes a registration body in one call, and the
storage-released check reads no row per (URI, version) when nothing is released.
"""

from __future__ import annotations

import gc
import io
import json
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper import _collector, _native, record_sets, tfrecord
from recordkeeper import publish as publish_module
from recordkeeper.core.errors import CorruptShard, InvalidIndex, StorageError
from recordkeeper.core.record_index import encode_index, held_index_chunks, index_chunks
from recordkeeper.record_ids import RecordIds, index_uri
from recordkeeper.registry import Registry
from tests.client._records import example_bytes, frame
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)
from tests.client.test_publish_small_shards import _small_files

pytest.importorskip("fastapi")

native = pytest.mark.skipif(
    _native.speedups is None or not hasattr(_native.speedups, "deframe_keys"),
    reason="the C extension is not built",
)


@pytest.fixture
def unfrozen() -> None:
    """No objects frozen by an earlier test of this process (publish leaves a process that
    froze some alone, which these tests check separately)."""
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_publish_collects_only_the_objects_it_makes(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _small_files(tmp_path / "data", 3)
    seen: list[tuple[bool, tuple[int, ...]]] = []
    real = Registry.register_shards

    def spying(self: Registry, *args: Any, **kwargs: Any) -> Any:
        seen.append((gc.get_freeze_count() > 0, gc.get_threshold()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Registry, "register_shards", spying)
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    client.publish(rk.Dataset.from_directory(tmp_path / "data", name="small"), progress=False)
    # during the publish: the older objects frozen, young collections 20,000 allocations apart
    assert seen == [(True, (_collector.YOUNG_THRESHOLD, *before[1:]))]
    # after it: as before
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


@pytest.mark.usefixtures("unfrozen")
def test_a_process_that_froze_objects_or_stopped_the_collector_is_left_alone() -> None:
    before = gc.get_threshold()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _collector.older_objects_frozen():
            assert gc.get_freeze_count() == frozen
            assert gc.get_threshold() == before
        assert gc.get_freeze_count() == frozen  # not unfrozen by the block
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with _collector.older_objects_frozen():
            assert gc.get_freeze_count() == 0
            assert gc.get_threshold() == before
    finally:
        gc.enable()
    # nested blocks: the first freezes, the last unfreezes
    with _collector.older_objects_frozen():
        with _collector.older_objects_frozen():
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def _shard(i: int) -> bytes:
    return frame([example_bytes({"image": [bytes([i]) * 64], "label": [j]}) for j in range(4)])


def _both(data: bytes) -> list[Any]:
    """scan_whole's and the streaming scan's answers (stats and index, or the error and the
    identities gathered before it)."""
    out: list[Any] = []
    for scan in (
        lambda d, ids: tfrecord.scan_whole(d, "none", record_ids=ids),
        lambda d, ids: tfrecord.scan_shard(io.BytesIO(d), "none", size=len(d), record_ids=ids),
    ):
        ids = RecordIds()
        try:
            stats = scan(data, ids)
            out.append((stats, ids.finish(stats.records_sha256)))
        except CorruptShard as exc:
            out.append((str(exc), dict(exc.extra), bytes(ids.buffer)))
    return out


@native
def test_a_small_uncompressed_shard_is_scanned_by_one_c_call(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = _shard(1)
    cases = [good, good[:-1], good[:11], good + b"x", b""]
    for at in (0, 9, 14, len(good) // 2, len(good) - 1):  # length, its CRC, data, data CRC
        damaged = bytearray(good)
        damaged[at] ^= 0x10
        cases.append(bytes(damaged))
    for data in cases:
        ours, streaming = _both(data)
        assert ours == streaming
    _small_files(tmp_path / "data", 3)
    calls: list[Any] = []
    real = tfrecord.scan_shard

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(tfrecord, "scan_shard", counting)
    client.publish(rk.Dataset.from_directory(tmp_path / "data", name="small"), progress=False)
    assert calls == []  # was one streaming scan (reader, deframer, worker) per shard
    with pytest.raises(CorruptShard):
        tfrecord.scan_whole(good[:-1], "none")
    assert len(calls) == 1  # what the one call does not pass whole goes the streaming way


def test_held_indexes_are_sliced_with_the_readers_checks(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = b"".join(sorted(bytes([i]) * 16 for i in range(5)))
    index = encode_index("bytes", 16, body, "ab" * 32)
    unsorted = encode_index("bytes", 16, body[16:32] + body[:16] + body[32:], None)
    flipped = index[:70] + bytes([index[70] ^ 1]) + index[71:]
    for data in (index, index[:-1], index[:-40], index[:10], index + b"z", unsorted, flipped):
        for per in (1, 2, 256):
            held: list[Any] = []
            streamed: list[Any] = []
            for out, chunks in (
                (held, lambda d=data, p=per: held_index_chunks(d, p)),
                (streamed, lambda d=data, p=per: index_chunks(io.BytesIO(d).read, p)[1]),
            ):
                try:
                    out.extend(chunks())
                except InvalidIndex as exc:
                    out.append(str(exc))
            assert held == streamed
    _small_files(tmp_path / "data", 3)
    calls: list[Any] = []
    real = record_sets.index_chunks

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(record_sets, "index_chunks", counting)
    v = client.publish(rk.Dataset.from_directory(tmp_path / "data", name="small"), progress=False)
    assert calls == []  # the lookup was built from the indexes held, without a reader each
    assert rk.record_sets.is_registered(client.http, v)


def test_indexes_on_an_object_store_are_written_in_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    indexes = {f"s3://b/d/train-{i:05d}-of-00003.tfrecord": bytes([i]) * 8 for i in range(3)}
    batches: list[list[tuple[str, bytes]]] = []
    answers: list[Any] = [None, None, None]

    def batch(items: list[tuple[str, bytes]], options: Any, *, concurrency: int) -> list[Any]:
        assert concurrency == 16
        batches.append(items)
        return answers

    def no_stream(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an index was written through an upload stream")

    monkeypatch.setattr(publish_module, "can_write_small_many", lambda uris, options: True)
    monkeypatch.setattr(publish_module, "write_small_many", batch)
    monkeypatch.setattr(publish_module, "write_indexes", no_stream)
    publish_module._write_indexes(indexes, None)
    assert batches == [[(index_uri(uri), data) for uri, data in indexes.items()]]
    answers[1] = StorageError("denied", uri="s3://b/x", reason="forbidden")
    with pytest.raises(StorageError, match="denied"):
        publish_module._write_indexes(indexes, None)


def test_a_registration_body_is_decoded_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from recordkeeper_service import limits

    calls: list[int] = []
    real = limits._DECODER

    class Counting:
        def raw_decode(self, text: str, i: int) -> Any:
            calls.append(i)
            return real.raw_decode(text, i)

    monkeypatch.setattr(limits, "_DECODER", Counting())

    def too_many() -> Exception:
        return ValueError("too many")

    body = json.dumps({"shards": [{"split": "train", "index": i} for i in range(3)], "x": 1.5})
    assert limits.load_counted(body, "shards", 3, too_many) == json.loads(body)
    assert calls == []  # was one decoder call per key and per shard
    with pytest.raises(ValueError, match="too many"):
        limits.load_counted(body, "shards", 2, too_many)
    assert calls == []
    # what orjson refuses, and a repeated key, are decoded item by item as before
    for odd in ('{"shards": [NaN]}', '{"shards": [1e400]}', '{"shards": [1], "shards": []}'):
        calls.clear()
        assert limits.load_counted(odd, "shards", 3, too_many) == json.loads(odd)
        assert calls
    with pytest.raises(ValueError, match="too many"):
        limits.load_counted('{"shards": [1, 2, 3, 4], "shards": []}', "shards", 3, too_many)
    with pytest.raises(json.JSONDecodeError):
        limits.load_counted('{"shards": [1,', "shards", 3, too_many)


def test_registering_shards_reads_no_row_per_uri_and_version_when_nothing_is_released(
    client: rk.Client,  # noqa: F811
    tmp_path: Path,
) -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    _small_files(tmp_path / "data", 3)
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    dataset = rk.Dataset.from_directory(tmp_path / "data", name="small")
    client.publish(dataset, progress=False)  # the files are now referenced by a live version
    event.listen(Engine, "before_cursor_execute", record)
    try:
        client.publish(dataset, progress=False, force_new=True)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    joined = [s for s in statements if s.lstrip().startswith("SELECT shards.uri, versions.id")]
    assert joined == []  # was one row per (URI, version referencing it)
    assert any("versions.id IN (SELECT shards.version_id" in s for s in statements)

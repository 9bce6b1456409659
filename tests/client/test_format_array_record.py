"""ArrayRecord shards through the format seam, end to end on local storage with the real service
app: the writer (format="array_record"), publish in place of files the array-record wheel
wrote, deep verify naming the first bad offset, schema inference and v.record(split, i)."""

from __future__ import annotations

from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper.core.errors import UnsupportedFormat
from tests.client._records import frame
from tests.client.test_client_app import client, roots  # noqa: F401 (fixtures)
from tests.client.test_format_digests_pinned import fixed_records

pytest.importorskip("fastapi")
array_record_module = pytest.importorskip("array_record.python.array_record_module")


def _write_wheel(path: Path, records: list[bytes], options: str) -> None:
    writer = array_record_module.ArrayRecordWriter(str(path), options)
    for record in records:
        writer.write(record)
    writer.close()


def test_the_writer_writes_array_record_shards_with_the_tfrecord_digest(
    client: rk.Client,  # noqa: F811
) -> None:
    records = fixed_records(300)
    with client.writer("coco", shard_size=4000, date="2026-11-01") as w:
        for i, record in enumerate(records):
            w.write(record, split="train" if i % 5 else "validation")
    tfrecords = w.version
    with client.writer(
        "coco",
        shard_size=4000,
        date="2026-11-01",
        format="array_record",
        format_options={"group_size": 8},
        force_new=True,
    ) as w:
        for i, record in enumerate(records):
            w.write(record, split="train" if i % 5 else "validation")
    v = w.version
    assert {s.format for s in v.shards} == {"array_record"}
    assert all(u.endswith(".array_record") for u in v.files("train"))
    # the same records in the same shards: the same content digest as the TFRecord version
    assert v.content_digest == tfrecords.content_digest
    assert {f.name for f in v.schema.features} == {"image", "label", "score"}
    assert v.verify(deep=True).ok and v.verify().ok
    train = [r for i, r in enumerate(records) if i % 5]
    assert [v.record("train", i) for i in (0, 7, len(train) - 1)] == [
        train[0],
        train[7],
        train[-1],
    ]
    with pytest.raises(IndexError):
        v.record("train", len(train))
    with pytest.raises(UnsupportedFormat):
        tfrecords.record("train", 0)


def test_bad_format_options_are_refused_before_anything_is_written(
    client: rk.Client,  # noqa: F811
) -> None:
    with pytest.raises(rk.InvalidInput, match="group_size"):
        client.writer("coco", format="array_record", format_options={"group_size": 0})
    with pytest.raises(rk.InvalidInput, match="unknown record format"):
        client.writer("coco", format="parquet")
    with pytest.raises(rk.InvalidInput):
        client.writer("coco", format="riegeli")  # read, verify and publish only


@pytest.mark.parametrize("options", ["group_size:1", "group_size:16,zstd:3", "uncompressed"])
def test_publish_in_place_detects_array_record_files(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    options: str,
) -> None:
    data = roots[1]
    parts = [fixed_records(70, salt=1), fixed_records(40, salt=2)]
    for i, part in enumerate(parts):
        _write_wheel(data / f"train-{i:05d}-of-00002.array_record", part, options)
    v = client.publish(rk.Dataset.from_directory(data, name="pets"), progress=False)
    assert [s.format for s in v.shards] == ["array_record", "array_record"]
    assert [s.compression for s in v.shards] == ["none", "none"]
    # the same records as TFRecord files give the same content digest
    tf_dir = roots[0] / "tf"
    tf_dir.mkdir()
    for i, part in enumerate(parts):
        (tf_dir / f"train-{i:05d}-of-00002.tfrecord").write_bytes(frame(part))
    as_tfrecord = client.publish(rk.Dataset.from_directory(tf_dir, name="pets2"), progress=False)
    assert as_tfrecord.content_digest == v.content_digest
    assert v.schema.feature("label").kind == "int64"
    assert v.record("train", 75) == parts[1][5]
    assert v.verify(deep=True).ok


def _damaged(path: Path, damage: str) -> int | None:
    """Damage an ArrayRecord file in place; the first bad offset deep verify must name (None
    when only the kind of damage is certain)."""
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        del data[len(data) // 2 :]
        path.write_bytes(bytes(data))
        return None
    if damage == "block_header":  # the header of the second block
        data[65536 + 3] ^= 0x10
        path.write_bytes(bytes(data))
        return 65536
    if damage == "chunk_header_hash":  # the first data chunk's header hash (after signature)
        data[64 + 2] ^= 0x01
        path.write_bytes(bytes(data))
        return 64
    if damage == "chunk_data":  # a byte inside the first data chunk's data
        data[64 + 40 + 30] ^= 0x04
        path.write_bytes(bytes(data))
        return 64 + 40
    if damage == "signature":
        data[5] ^= 0x01
        path.write_bytes(bytes(data))
        return 5
    if damage == "tail_garbage":
        data += b"\0" * 100
        path.write_bytes(bytes(data))
        return None
    if damage == "zeroed_block":
        data[65536 : 2 * 65536] = bytes(65536)
        path.write_bytes(bytes(data))
        return 65536
    if damage == "footer":  # a byte of the last block (the postscript)
        data[-65536 + 70] ^= 0x01
        path.write_bytes(bytes(data))
        return None
    raise AssertionError(damage)


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "block_header",
        "chunk_header_hash",
        "chunk_data",
        "signature",
        "tail_garbage",
        "zeroed_block",
        "footer",
    ],
)
def test_deep_verify_names_the_first_bad_offset(
    client: rk.Client,  # noqa: F811
    roots: tuple[Path, Path],  # noqa: F811
    damage: str,
) -> None:
    path = roots[1] / "train.array_record"
    records = [bytes([i % 251]) * 700 for i in range(400)]  # ~280 KB: several blocks
    _write_wheel(path, records, "group_size:32,uncompressed")
    v = client.publish(rk.Dataset.from_file(path, name="coco"), progress=False)
    assert v.verify(deep=True).ok
    offset = _damaged(path, damage)
    report = v.verify(deep=True)
    assert not report.ok
    (problem,) = report.problems
    assert problem.reason in ("corrupt", "size_changed"), problem
    if offset is not None:
        assert problem.reason == "corrupt"
        assert problem.offset == offset, problem.detail


def test_the_registry_agrees_with_the_core_and_the_listings() -> None:
    """One entry per format: the names the service accepts, and the suffixes directories list."""
    from recordkeeper import formats
    from recordkeeper.core.shards import RECORD_FORMATS
    from recordkeeper.core.splits import RECORD_EXTENSIONS

    assert formats.format_names() == RECORD_FORMATS
    for name in RECORD_FORMATS:
        fmt = formats.get(name)
        assert fmt.name == name
        assert fmt.suffix in RECORD_EXTENSIONS
    with pytest.raises(rk.InvalidInput, match="unknown record format"):
        formats.get("parquet")


def test_a_version_is_a_grain_data_source(client: rk.Client) -> None:  # noqa: F811
    import grain  # the dev extra has it: this must run, not skip

    records = fixed_records(120)
    with client.writer(
        "coco", shard_size=3000, format="array_record", format_options={"group_size": 8}
    ) as w:
        for record in records:
            w.write(record)
    v = w.version
    source = v.data_source("train")
    assert len(source) == 120 and len(v.shards) > 2
    assert source[37] == records[37] and source[-1] == records[-1]
    got = list(grain.MapDataset.source(source).map(len))
    assert got == [len(r) for r in records]
    loader = grain.DataLoader(
        data_source=source,
        sampler=grain.samplers.IndexSampler(
            num_records=len(source), shuffle=True, seed=3, num_epochs=1
        ),
        worker_count=0,
    )
    assert sorted(loader) == sorted(records)
    import pickle

    assert pickle.loads(pickle.dumps(source))[5] == records[5]
    source.close()
    with client.writer("pets") as w:
        w.write(records[0])
    with pytest.raises(UnsupportedFormat, match="no index"):
        w.version.data_source("train")


def test_convert_keeps_the_content_digest_and_the_shards(client: rk.Client) -> None:  # noqa: F811
    records = fixed_records(200)
    with client.writer("coco", shard_size=3000, compression="gzip", date="2026-11-01") as w:
        for i, record in enumerate(records):
            w.write(record, split="train" if i % 4 else "test")
    v1 = w.version

    class Read:
        bytes = 0

        def advance(self, nbytes: int) -> None:
            self.bytes += nbytes

    read = Read()  # converting a large version took minutes without a word: it shows progress
    converted = client.convert(
        v1.name, to="array_record", format_options={"group_size": 2}, progress=read
    )
    assert read.bytes == sum(s.size for s in v1.shards)
    assert converted.name != v1.name and converted.content_digest == v1.content_digest
    assert {s.format for s in converted.shards} == {"array_record"}
    assert [(s.split, s.index, s.records_sha256) for s in converted.shards] == [
        (s.split, s.index, s.records_sha256) for s in v1.shards
    ]
    assert converted.verify(deep=True).ok
    # its source is its base parent: `recordkeeper log` says where it came from
    parents = converted.provenance.parents
    assert [(p.name, p.role) for p in parents] == [(v1.name, "base")]
    back = client.convert(converted, to="tfrecord", progress=read)
    assert back.content_digest == v1.content_digest
    assert {(s.format, s.compression) for s in back.shards} == {("tfrecord", "none")}


def test_the_convert_command(
    client: rk.Client,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from recordkeeper.cli import app
    from recordkeeper.cli import versions as cli_versions

    with client.writer("coco", shard_size=3000) as w:
        for record in fixed_records(50):
            w.write(record)
    monkeypatch.setattr(cli_versions, "connect", lambda storage_options=None: client)
    result = CliRunner().invoke(
        app, ["convert", w.version.name, "--to", "array_record", "--group-size", "4"]
    )
    assert result.exit_code == 0, result.output
    name, digest = result.output.strip().split("\t")
    assert digest == w.version.content_digest and name != w.version.name

"""Beam transforms on local disk with the in-process DirectRunner (fast): several splits in one
transform, identical content, an empty input, and publishing in place."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import apache_beam as beam
import pytest

import recordkeeper as rk
from recordkeeper.beam import PublishExisting, ReadVersion, WriteVersionedTFRecords
from recordkeeper.record_ids import index_uri
from tests.client._records import frame, sample_examples
from tests.integration import _beam as tb
from tests.integration.conftest import LiveService

IN_PROCESS = ["--runner=DirectRunner"]


def _records(version: rk.DatasetVersion, split: str) -> list[bytes]:
    out: list[bytes] = []
    for shard in version.splits[split].shards:
        with open(shard.uri[len("file://") :], "rb") as fh:
            out += rk.tfrecord.iter_records(fh, shard.compression)
    return out


def test_split_pairs_write_every_split_and_identical_content_keeps_the_version(
    live_service: LiveService, tmp_path: Path
) -> None:
    client = live_service.client()
    train, validation = sample_examples(90), sample_examples(30, 500)
    pairs = [("train", r) for r in train] + [("validation", r) for r in validation]

    def run(write: WriteVersionedTFRecords, out: str) -> dict:
        with beam.Pipeline(options=tb.options(IN_PROCESS)) as p:
            tb.write_json_lines(p | beam.Create(pairs) | write, tmp_path / out, out)
        [emitted] = tb.read_lines(tmp_path / out)
        return emitted

    first = run(WriteVersionedTFRecords("coco", split=None, num_shards=3, client=client), "a")
    version = client.resolve(first["name"])
    assert sorted(version.splits) == ["train", "validation"]
    assert Counter(_records(version, "train")) == Counter(train)
    assert Counter(_records(version, "validation")) == Counter(validation)

    # The same records again, one key per split: same shards in the same order → same content.
    one = WriteVersionedTFRecords("coco", split=None, num_shards=1, client=client)
    again = WriteVersionedTFRecords("coco", split=None, num_shards=1, client=client)
    kept = run(one, "b")
    second = run(again, "c")
    assert again.staged is not None
    assert second["name"] == kept["name"] != again.staged.name
    assert client.versions("coco", state="abandoned")[0].name == again.staged.name
    assert not list(Path(again.staged.storage_prefix[len("file://") :]).rglob("*.tfrecord"))


def test_empty_input_commits_nothing(live_service: LiveService) -> None:
    client = live_service.client()
    write = WriteVersionedTFRecords("coco", client=client)
    pipeline = beam.Pipeline(options=tb.options(IN_PROCESS))
    _ = pipeline | beam.Create([]) | write
    with pytest.raises(Exception, match="nothing was written"):
        pipeline.run().wait_until_finish()
    with pytest.raises(rk.VersionNotFound):
        client.resolve("coco@latest")


def test_publish_in_place_outside_the_allowed_roots_is_refused_before_staging(
    live_service: LiveService, tmp_path: Path, data_dir: Path
) -> None:
    client = live_service.client()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "train-00000-of-00001.tfrecord").write_bytes(frame(sample_examples(5)))
    with (
        pytest.raises(rk.StorageRootNotAllowed),
        beam.Pipeline(options=tb.options(IN_PROCESS)) as p,
    ):
        _ = p | PublishExisting(str(outside), name="coco", client=client)
    assert not _has_dataset(client)  # refused before a version was staged

    (data_dir / "train-00000-of-00001.tfrecord").write_bytes(frame(sample_examples(5)))
    with beam.Pipeline(options=tb.options(IN_PROCESS)) as p:
        _ = p | PublishExisting(str(data_dir), name="coco", client=client)
    version = client.resolve("coco@latest")
    assert version.record_count == 5 and version.verify(deep=True).ok


def _has_dataset(client: rk.Client) -> bool:
    return any(d.name == "coco" for d in client.datasets())


def test_a_derived_version_records_the_pinned_version_it_read(
    live_service: LiveService, tmp_path: Path
) -> None:
    client = live_service.client()
    with client.writer("raw") as w:
        for record in sample_examples(20):
            w.write(record)
    source = client.resolve("raw@latest")
    read = ReadVersion("raw@latest", "train", client=client)
    with beam.Pipeline(options=tb.options(IN_PROCESS)) as p:
        records = p | read
        _ = records | WriteVersionedTFRecords("clean", sources=[read], client=client)
    derived = client.resolve("clean@latest")
    assert derived.metadata["sources"] == [
        {"version": source.name, "content_digest": source.content_digest, "split": "train"}
    ]
    assert Counter(_records(derived, "train")) == Counter(sample_examples(20))


def test_a_source_read_later_in_the_pipeline_is_refused() -> None:
    read = ReadVersion("raw@latest", "train")
    with pytest.raises(rk.InvalidRequest, match="applied"), beam.Pipeline() as p:
        _ = p | beam.Create([b"x"]) | WriteVersionedTFRecords("clean", sources=[read])


def test_a_beam_write_records_its_provenance(
    live_service: LiveService, tmp_path: Path, data_dir: Path
) -> None:
    """Versions read by the job become source parents; a raw URI a source with its listing
    identity; parents, params and note as given."""
    client = live_service.client()
    with client.writer("coco", code=None) as w:
        for record in sample_examples(20):
            w.write(record)
    base = w.version
    with client.writer("labels", code=None) as w:
        for record in sample_examples(5, 100):
            w.write(record)
    labels = w.version
    raw = data_dir / "raw"
    raw.mkdir()
    (raw / "a.json").write_text("{}")
    write = WriteVersionedTFRecords(
        "coco",
        client=client,
        parents=[base.name],
        sources=[labels, raw.as_uri() + "/"],
        params={"min_area": 32},
        note="beam job",
    )
    with beam.Pipeline(options=tb.options(IN_PROCESS)) as p:
        tb.write_json_lines(p | beam.Create(sample_examples(30, 200)) | write, tmp_path / "o", "o")
    [emitted] = tb.read_lines(tmp_path / "o")
    provenance = client.resolve(emitted["name"]).provenance
    assert [(p.name, p.role) for p in provenance.parents] == [
        (base.name, "base"),
        (labels.name, "source"),
    ]
    assert provenance.sources[0].uri == raw.as_uri() + "/"
    assert provenance.sources[0].identity is not None
    assert provenance.params == {"min_area": 32} and provenance.note == "beam job"


def test_a_beam_written_version_has_record_identity(
    live_service: LiveService, tmp_path: Path
) -> None:
    """Each worker hashes the records it writes: the commit registers the version's record
    identity, and a record diff against the same records written by ``client.writer``
    (other shards, other order) finds every record in common."""
    client = live_service.client()
    train, test = sample_examples(60), sample_examples(20, 700)
    pairs = [("train", r) for r in train] + [("test", r) for r in test]
    write = WriteVersionedTFRecords("beamids", split=None, num_shards=3, client=client)
    with beam.Pipeline(options=tb.options(IN_PROCESS)) as p:
        tb.write_json_lines(p | beam.Create(pairs) | write, tmp_path / "out", "out")
    [emitted] = tb.read_lines(tmp_path / "out")
    (beam_set,) = client.record_sets(emitted["name"])
    version = client.resolve(emitted["name"])
    for shard in version.shards:  # each index beside its shard, none left under _incomplete
        assert Path(index_uri(shard.uri)[len("file://") :]).is_file()
    temp = Path(version.storage_prefix[len("file://") :]) / "_incomplete"
    assert not [p for p in temp.rglob("*") if not p.is_dir()]

    with client.writer("beamids", shard_size="2KB") as w:
        for split, record in reversed(pairs):
            w.write(record, split=split)
    assert client.record_sets(w.version.name)[0]["records_digest"] == beam_set["records_digest"]
    d = client.diff(emitted["name"], w.version.name, records=True)
    assert d.identical and (d.new, d.gone) == (0, 0)
    assert (d.splits["train"].common, d.splits["test"].common) == (60, 20)

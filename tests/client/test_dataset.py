"""Dataset.from_files / from_directory / from_tfds: which files become which shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import recordkeeper as rk


def _touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def _layout(ds: rk.Dataset) -> dict[str, list[tuple[int, int, str, str | None]]]:
    return {
        split: [(s.index, s.count, s.uri.rsplit("/", 1)[-1], s.compression) for s in shards]
        for split, shards in ds.splits.items()
    }


def test_tfds_style_names(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        *(f"coco-train.tfrecord-{i:05d}-of-00003" for i in range(3)),
        "coco-validation.tfrecord-00000-of-00001",
        "dataset_info.json",
        "features.json",
    )
    ds = rk.Dataset.from_directory(tmp_path, name="coco")
    assert _layout(ds) == {
        "train": [(i, 3, f"coco-train.tfrecord-{i:05d}-of-00003", None) for i in range(3)],
        "validation": [(0, 1, "coco-validation.tfrecord-00000-of-00001", None)],
    }
    assert ds.splits["train"][0].uri == (tmp_path / "coco-train.tfrecord-00000-of-00003").as_uri()


def test_versioned_layout_names_with_gzip(tmp_path: Path) -> None:
    _touch(
        tmp_path,
        "train-00001-of-00002.tfrecord.gz",
        "train-00000-of-00002.tfrecord.gz",
        "test-00000-of-00001.tfrecord",
    )
    ds = rk.Dataset.from_directory(tmp_path, name="coco")
    assert _layout(ds) == {
        "test": [(0, 1, "test-00000-of-00001.tfrecord", None)],
        "train": [
            (0, 2, "train-00000-of-00002.tfrecord.gz", "gzip"),
            (1, 2, "train-00001-of-00002.tfrecord.gz", "gzip"),
        ],
    }


def test_plain_files_are_one_shard_each(tmp_path: Path) -> None:
    _touch(tmp_path, "train.tfrecord", "data/validation_v2.tfrecord", "README.md")
    ds = rk.Dataset.from_directory(tmp_path, name="coco")
    assert _layout(ds) == {
        "train": [(0, 1, "train.tfrecord", None)],
        "validation": [(0, 1, "validation_v2.tfrecord", None)],
    }


def test_write_small_dataset_outputs(tmp_path: Path) -> None:
    # official/core/file_writers.write_small_dataset writes exactly output_path: any name,
    # compressed or not, no .gz suffix (compression is detected from the bytes at publish).
    _touch(tmp_path / "a", "examples")
    assert _layout(rk.Dataset.from_directory(tmp_path / "a", name="x")) == {
        "examples": [(0, 1, "examples", None)]
    }
    _touch(tmp_path / "b", "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002")
    assert _layout(rk.Dataset.from_directory(tmp_path / "b", name="x"))["train"][1][:2] == (1, 2)


def test_several_unsharded_files_of_a_split_in_natural_order(tmp_path: Path) -> None:
    _touch(tmp_path, "train_10.tfrecord", "train_2.tfrecord", "train_1.tfrecord")
    ds = rk.Dataset.from_directory(tmp_path, name="x")
    assert [s.uri.rsplit("/", 1)[-1] for s in ds.splits["train"]] == [
        "train_1.tfrecord",
        "train_2.tfrecord",
        "train_10.tfrecord",
    ]


def test_missing_shard_is_named(tmp_path: Path) -> None:
    _touch(tmp_path, "train-00000-of-00003.tfrecord", "train-00002-of-00003.tfrecord")
    with pytest.raises(rk.InvalidShard, match=r"misses indices 1"):
        rk.Dataset.from_directory(tmp_path, name="x")


def test_empty_or_missing_directory(tmp_path: Path) -> None:
    _touch(tmp_path, "notes.txt")
    with pytest.raises(rk.InvalidShard, match="no TFRecord files"):
        rk.Dataset.from_directory(tmp_path, name="x")
    with pytest.raises(rk.StorageError, match="not found"):
        rk.Dataset.from_directory(tmp_path / "nope", name="x")


def test_name_is_derived_or_validated(tmp_path: Path) -> None:
    d = tmp_path / "coco"
    _touch(d, "train.tfrecord")
    assert rk.Dataset.from_directory(d).name == "coco"
    with pytest.raises(rk.InvalidName):
        rk.Dataset.from_directory(d, name="Bad Name")


def test_from_files_mapping_and_list(tmp_path: Path) -> None:
    ds = rk.Dataset.from_files(
        "coco",
        {"train": [tmp_path / "a.tfrecord.gz", "s3://b/c"], "validation": [str(tmp_path / "v")]},
    )
    assert [(s.index, s.count, s.compression) for s in ds.splits["train"]] == [
        (0, 2, "gzip"),
        (1, 2, None),
    ]
    assert ds.splits["train"][1].uri == "s3://b/c"
    assert rk.Dataset.from_files("coco", ["s3://b/x"]).splits["train"][0].uri == "s3://b/x"
    with pytest.raises(rk.InvalidShard):
        rk.Dataset.from_files("coco", {"Train!": ["a"]})


def _tfds(tmp_path: Path, lengths: list[int], template: str | None = None) -> Path:
    split = {"name": "train", "shardLengths": [str(n) for n in lengths], "numBytes": "1"}
    if template:
        split["filepathTemplate"] = template
    (tmp_path / "dataset_info.json").write_text(
        json.dumps({"name": "mnist", "fileFormat": "tfrecord", "splits": [split]})
    )
    return tmp_path


def test_from_tfds_reads_dataset_info(tmp_path: Path) -> None:
    _tfds(tmp_path, [5, 7])
    _touch(tmp_path, "mnist-train.tfrecord-00000-of-00002", "mnist-train.tfrecord-00001-of-00002")
    ds = rk.Dataset.from_tfds(tmp_path)
    assert ds.name == "mnist"
    assert [(s.index, s.expected_records) for s in ds.splits["train"]] == [(0, 5), (1, 7)]


def test_from_tfds_custom_template_and_missing_file(tmp_path: Path) -> None:
    _tfds(tmp_path, [1, 1], template="{SPLIT}/{DATASET}.{FILEFORMAT}-{SHARD_X_OF_Y}")
    _touch(tmp_path, "train/mnist.tfrecord-00000-of-00002")
    with pytest.raises(rk.InvalidShard, match=r"shard 1 as train/mnist.tfrecord-00001-of-00002"):
        rk.Dataset.from_tfds(tmp_path)


@pytest.mark.parametrize(
    "name",
    ["validation.tfrecord", "examples", "mnist_eval.tfrecord.gz", "train.tfrecord-00000-of-00001"],
)
def test_a_file_alone_gets_the_split_it_gets_in_its_directory(tmp_path: Path, name: str) -> None:
    _touch(tmp_path / "data", name)
    alone = rk.Dataset.from_file(tmp_path / "data" / name, name="x")
    in_dir = rk.Dataset.from_directory(tmp_path / "data", name="x")
    assert _layout(alone) == _layout(in_dir)
    assert len(alone.shards) == 1


def test_a_file_alone_is_taken_even_with_an_unknown_extension(tmp_path: Path) -> None:
    _touch(tmp_path, "part.bin")
    assert list(rk.Dataset.from_file(tmp_path / "part.bin", name="x").splits) == ["part_bin"]
    assert list(rk.Dataset.from_file(tmp_path / "0001.rec", name="x").splits) == ["train"]


def test_record_indexes_beside_shards_are_never_shards(tmp_path: Path) -> None:
    # recordkeeper index writes <dir>/.recordkeeper/index/<shard>.rkidx (record_sets.index_uri)
    from recordkeeper.record_sets import index_uri

    names = [f"train-{i:05d}-of-00002.tfrecord" for i in range(2)]
    _touch(tmp_path, *names)
    for name in names:
        index = index_uri((tmp_path / name).as_uri())
        _touch(tmp_path, index[len(tmp_path.as_uri()) + 1 :])
    ds = rk.Dataset.from_directory(tmp_path, name="coco")
    assert _layout(ds) == {"train": [(i, 2, names[i], None) for i in range(2)]}


def test_files_under_hidden_directories_are_never_shards(tmp_path: Path) -> None:
    # `publish .` in a git work tree: .git/config, .git/index, .git/HEAD… are not splits, and
    # neither is what a Hadoop/Beam job leaves under _temporary/
    _touch(tmp_path, "train.tfrecord", ".git/config", ".git/index", ".git/HEAD")
    _touch(tmp_path, ".git/objects/d3/36b5437d", "_temporary/0/train-part.tfrecord")
    _touch(tmp_path, "data/.cache/validation.tfrecord", "data/test.tfrecord")
    ds = rk.Dataset.from_directory(tmp_path, name="coco")
    assert _layout(ds) == {
        "test": [(0, 1, "test.tfrecord", None)],
        "train": [(0, 1, "train.tfrecord", None)],
    }
    # a file named explicitly is taken wherever it is
    alone = rk.Dataset.from_file(tmp_path / "data/.cache/validation.tfrecord", name="coco")
    assert list(alone.splits) == ["validation"]

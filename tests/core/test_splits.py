"""The one split grammar (registration, lineage data entries, file names)."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.splits import (
    MAX_SPLIT_NAME_LENGTH,
    ShardedName,
    is_split_name,
    parse_sharded_name,
    shard_file_name,
    split_from_path,
    strip_record_suffixes,
    validate_split_name,
)

#: (name, valid) — the table the client and service agreement tests use too.
SPLITS: list[tuple[object, bool]] = [
    ("train", True),
    ("validation", True),
    ("test_hard", True),
    ("eval-2", True),
    ("a" * MAX_SPLIT_NAME_LENGTH, True),
    ("a" * (MAX_SPLIT_NAME_LENGTH + 1), False),
    ("Train", False),
    ("", False),
    ("1st", False),
    ("a/b", False),
    ("train.v2", False),
    ("_train", False),
    (None, False),
]


@pytest.mark.parametrize(("name", "valid"), SPLITS)
def test_split_grammar(name: object, valid: bool) -> None:
    assert is_split_name(name) is valid
    if valid:
        assert validate_split_name(name) == name
    else:
        with pytest.raises(InvalidShard):
            validate_split_name(name)


def test_shard_file_name() -> None:
    assert shard_file_name("train", 3, 16) == "train-00003-of-00016.tfrecord"
    assert shard_file_name("train", 0, 1, ".tfrecord.gz") == "train-00000-of-00001.tfrecord.gz"


#: (path relative to what is published, split) — one rule for a file alone and in a directory.
FILE_SPLITS: list[tuple[str, str]] = [
    ("validation.tfrecord", "validation"),
    ("data/validation.tfrecord", "validation"),
    ("examples", "examples"),
    ("train.tfrecord", "train"),
    ("coco-train.tfrecord-00003-of-00016", "train"),
    ("train-00003-of-00016.tfrecord.gz", "train"),
    ("valid_v2.tfrec", "valid"),
    ("test/part-00000.tfrecord", "test"),
    ("mnist_eval.tfrecord.gz", "eval"),
    ("Holdout.TFRecord", "holdout"),
    ("objects.tfrecord", "objects"),
    ("0001.tfrecord", "train"),
]


@pytest.mark.parametrize(("path", "split"), FILE_SPLITS)
def test_split_from_path(path: str, split: str) -> None:
    assert split_from_path(path) == split


def test_record_suffixes_and_sharded_names() -> None:
    assert strip_record_suffixes("train.tfrecord.gz") == ("train", ".tfrecord.gz")
    assert strip_record_suffixes("examples") == ("examples", "")
    assert strip_record_suffixes("notes.txt") == ("notes.txt", None)
    sharded = parse_sharded_name("coco-train.tfrecord-00003-of-00016")
    assert sharded == ShardedName("coco-train.tfrecord", 3, 16)
    assert parse_sharded_name("train-00001-of-00002.tfrecord.gz") == ShardedName("train", 1, 2)
    assert parse_sharded_name("log-00001-of-00002.txt") is None
    assert parse_sharded_name("train.tfrecord") is None

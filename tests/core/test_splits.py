"""The one split grammar (registration, lineage data entries, file names)."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidShard
from recordkeeper.core.splits import (
    MAX_SPLIT_NAME_LENGTH,
    is_split_name,
    shard_file_name,
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

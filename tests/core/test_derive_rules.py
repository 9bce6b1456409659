"""The rule of a derived version's change set (recordkeeper.core.derive), and the root check
of shard pages whose common prefix lies above two roots (a derived version's)."""

from __future__ import annotations

import pytest

from recordkeeper.core.derive import Changes, SplitPlan, plan_changes
from recordkeeper.core.errors import (
    InvalidRequest,
    ShardNotFound,
    SplitExists,
    SplitNotFound,
    StorageRootNotAllowed,
)
from recordkeeper.core.roots import AllowedRoots

BASE = {"test": 2, "train": 5, "validation": 3}


def test_append_keeps_every_base_shard() -> None:
    plans = plan_changes(BASE, {"train": 2}, Changes())
    assert plans == [
        SplitPlan("test", "test", (), 2, 0),
        SplitPlan("train", "train", (), 5, 2),
        SplitPlan("validation", "validation", (), 3, 0),
    ]
    assert plans[1].count == 7


def test_remove_rename_replace() -> None:
    changes = Changes(
        remove_splits=("test",),
        rename_splits={"validation": "val"},
        remove_shards=("train:1", "train:3"),
    )
    plans = plan_changes(BASE, {"test": 1}, changes, [("train", 4)])
    assert plans == [
        SplitPlan("test", None, (), 0, 1),
        SplitPlan("train", "train", (1, 3, 4), 2, 0),
        SplitPlan("val", "validation", (), 3, 0),
    ]


def test_swap_is_allowed_and_collisions_are_not() -> None:
    swapped = plan_changes(BASE, {}, Changes(rename_splits={"test": "train", "train": "test"}))
    assert [(p.split, p.base_split) for p in swapped] == [
        ("test", "train"),
        ("train", "test"),
        ("validation", "validation"),
    ]
    with pytest.raises(SplitExists):
        plan_changes(BASE, {}, Changes(rename_splits={"test": "train"}))
    assert plan_changes(
        BASE, {}, Changes(remove_splits=("train",), rename_splits={"test": "train"})
    )


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        (Changes(remove_splits=("nope",)), SplitNotFound),
        (Changes(rename_splits={"nope": "x"}), SplitNotFound),
        (Changes(remove_splits=("test",), rename_splits={"test": "x"}), SplitNotFound),
        (Changes(remove_shards=("train:5",)), ShardNotFound),
        (Changes(remove_shards=("nope:0",)), ShardNotFound),
        (Changes(remove_splits=("test",), remove_shards=("test:0",)), InvalidRequest),
    ],
)
def test_bad_changes(changes: Changes, error: type[Exception]) -> None:
    with pytest.raises(error):
        plan_changes(BASE, {}, changes)


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"remove_splits": "train"},
        {"rename_splits": {"a": 1}},
        {"remove_shards": ["no position"]},
        {"remove_splits": ["Bad Name"]},
        {"other": []},
    ],
)
def test_malformed_change_sets(value: object) -> None:
    with pytest.raises(InvalidRequest):
        Changes.from_json(value)  # type: ignore[arg-type]


def test_round_trip() -> None:
    changes = Changes(("a",), {"b": "c"}, ("train:0", "s3://x/y.tfrecord"))
    assert Changes.from_json(changes.to_json()) == changes


def test_pages_with_a_common_prefix_above_two_roots() -> None:
    roots = AllowedRoots.of(["file:///data/store/", "file:///data/raw/"])
    roots.check_objects("file:///data/", ["store/a.tfrecord", "raw/b.tfrecord"], "shard")
    with pytest.raises(StorageRootNotAllowed):
        roots.check_objects("file:///data/", ["store/a.tfrecord", "etc/passwd"], "shard")

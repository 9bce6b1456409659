"""DatasetVersion as built from the service's Version JSON."""

from __future__ import annotations

from typing import Any

from recordkeeper.values import DatasetVersion


def _version(**fields: Any) -> DatasetVersion:
    data = {
        "name": "coco_20261130_v3_add_person",
        "dataset": "coco",
        "number": 3,
        "date": "2026-11-30",
        "desc": "add_person",
        "state": "committed",
        "storage_prefix": "file:///store/coco/coco_20261130_staged5_add_person/",
        "record_count": 0,
        "shard_count": 0,
        "size": 0,
        "staged_name": "coco_20261130_staged5_add_person",
    }
    data.update(fields)
    return DatasetVersion.from_dict(data)


def test_a_committed_version_was_staged_under_its_staged_name() -> None:
    version = _version()
    assert version.was_staged_as("coco_20261130_staged5_add_person")
    assert version.was_staged_as("coco_20261130_v3_add_person")
    assert not version.was_staged_as("coco_20261130_staged6_add_person")  # another staging


def test_a_version_staged_before_numbers_moved_to_commit_has_only_its_name() -> None:
    version = _version(staged_name=None)
    assert version.was_staged_as("coco_20261130_v3_add_person")
    assert not version.was_staged_as("coco_20261130_staged5_add_person")

"""The lineage grammar: model and checkpoint names, ``model/checkpoint`` references."""

from __future__ import annotations

from typing import Any

import pytest

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import MAX_CHECKPOINT_NAME_LENGTH, MAX_MODEL_NAME_LENGTH
from recordkeeper.core.lineage import (
    DEFAULT_RUN,
    LINEAGE_COLUMNS,
    PARENT_KINDS,
    ROLES,
    CheckpointRef,
    Consumer,
    LineageEntry,
    Segment,
    ambiguous_checkpoint_message,
    checkpoint_directory,
    entries_from_columns,
    parse_checkpoint_ref,
    parse_deleted_at,
    run_for_directory,
    run_of,
    validate_checkpoint_name,
    validate_model_name,
    validate_parent_kind,
    validate_role,
    validate_run_name,
)


def test_run_refs_and_derived_runs() -> None:
    ref = parse_checkpoint_ref("det@sweep-7/ckpt-1")
    assert ref == CheckpointRef("det", "ckpt-1", "sweep-7") and str(ref) == "det@sweep-7/ckpt-1"
    assert ref.without_run() == CheckpointRef("det", "ckpt-1")
    for bad in ("det@/ckpt-1", "det@a@b/ckpt-1", "det@-x/ckpt-1", "@r/ckpt-1"):
        with pytest.raises(InvalidCheckpoint):
            parse_checkpoint_ref(bad)
    assert checkpoint_directory("file:///ck/run1/ckpt-3") == "file:///ck/run1"
    assert checkpoint_directory("gs://bucket/ckpt-3") == "gs://bucket"
    run = run_for_directory("file:///ck/run1")
    assert run.startswith("run1-") and len(run) == len("run1-") + 10
    assert run_for_directory("file:///ck/run1/") == run  # trailing slash ignored
    assert run_for_directory("file:///other/run1") != run  # another directory, another run
    assert validate_run_name(run_for_directory("gs://b/Weird dir+name")).startswith(
        "Weird-dir-name-"
    )
    assert run_of(None, "file:///ck/run1/ckpt-3") == run
    assert run_of("explicit", "file:///ck/run1/ckpt-3") == "explicit"
    assert run_of(None, None) == DEFAULT_RUN == "default"
    with pytest.raises(InvalidCheckpoint):
        validate_run_name("a/b")
    message = ambiguous_checkpoint_message(
        CheckpointRef("det", "ckpt-1"),
        [CheckpointRef("det", "ckpt-1", "a"), CheckpointRef("det", "ckpt-1", "b")],
    )
    assert "det@a/ckpt-1, det@b/ckpt-1" in message and "model@run/checkpoint" in message
    assert parse_deleted_at("2026-11-30T12:00:00Z").isoformat() == "2026-11-30T12:00:00+00:00"
    assert parse_deleted_at("0001-01-01T00:00:00Z").year == 1
    outside_utc = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999-00:01")
    for bad_time in ("yesterday", "2026-11-30T12:00:00", 5, *outside_utc):
        with pytest.raises(InvalidCheckpoint):
            parse_deleted_at(bad_time)


def test_checkpoint_refs() -> None:
    assert parse_checkpoint_ref("det/ckpt-1") == CheckpointRef("det", "ckpt-1")
    assert str(parse_checkpoint_ref(" coco_detection/ckpt-1234 ")) == "coco_detection/ckpt-1234"
    ref = CheckpointRef("det", "ckpt-1")
    assert parse_checkpoint_ref(ref) is ref
    for bad_ref in ("det", "det/a/b", "Det/ckpt", "det/", "/ckpt-1", 5):
        with pytest.raises(InvalidCheckpoint):
            parse_checkpoint_ref(bad_ref)  # type: ignore[arg-type]


def test_names() -> None:
    assert validate_model_name("coco.det-v2_a") == "coco.det-v2_a"
    assert validate_checkpoint_name("CKPT.1-a_b") == "CKPT.1-a_b"
    for bad in ("", "1det", "Det", "a/b", "m" * (MAX_MODEL_NAME_LENGTH + 1)):
        with pytest.raises(InvalidCheckpoint):
            validate_model_name(bad)
    for bad in ("", "-ckpt", "a/b", "c" * (MAX_CHECKPOINT_NAME_LENGTH + 1)):
        with pytest.raises(InvalidCheckpoint):
            validate_checkpoint_name(bad)


def test_roles_and_parent_kinds() -> None:
    assert ROLES == ("train", "eval", "test")
    assert PARENT_KINDS == ("restored_from", "initialized_from")
    for role in ROLES:
        assert validate_role(role, "data[0]") == role
    with pytest.raises(InvalidCheckpoint, match=r"data\[0\]: role 'finetune'"):
        validate_role("finetune", "data[0]")
    for kind in PARENT_KINDS:
        assert validate_parent_kind(kind) == kind
    with pytest.raises(InvalidCheckpoint):
        validate_parent_kind("forked_from")


def test_consumer_round_trips_through_json() -> None:
    child = Consumer("det", "ckpt-2", 2, None, False, (), (), CheckpointRef("det", "ckpt-1"))
    body = child.to_json()
    assert body["ref"] == "det/ckpt-2" and body["parent"] == "det/ckpt-1"
    assert Consumer.from_json(body) == child
    assert child.ref == CheckpointRef("det", "ckpt-2")
    root = Consumer("det", "ckpt-1", 1, "s3://m/ckpt-1", True, ("train",), ("train",), None)
    assert root.to_json()["parent"] is None and Consumer.from_json(root.to_json()) == root


def test_lineage_entry_round_trips_through_json() -> None:
    seg = Segment("det", "ckpt-1", 1, 0, ("train",), "r1", "deleted")
    entry = LineageEntry("coco@v1", "coco", 1, None, "committed", "train", ("train",), (seg,))
    assert entry.to_json()["segments"] == [
        {
            "model": "det",
            "run": "r1",
            "checkpoint": "ckpt-1",
            "ref": "det@r1/ckpt-1",
            "state": "deleted",
            "step": 1,
            "depth": 0,
            "splits": ["train"],
        }
    ]
    assert LineageEntry.from_json(entry.to_json()) == entry
    assert seg.ref == CheckpointRef("det", "ckpt-1", "r1")


def one_entry_columns(uses: list[Any]) -> dict[str, Any]:
    """The compact columns of one entry (coco v1 in role train) with these ``uses``."""
    return {
        "version": ["coco_20231015_v1"],
        "dataset": ["coco"],
        "number": [1],
        "content_digest": [None],
        "state": ["committed"],
        "role": ["train"],
        "uses": [uses],
    }


def _links(depth: int) -> list[Segment]:
    return [
        Segment("det", f"ckpt-{depth - d}", 1000 * (depth - d), d, (), "r1", "present")
        for d in range(depth)
    ]


def test_entries_from_columns() -> None:
    links = _links(3)
    columns = {
        "version": ["coco_20231015_v1", "coco_20231015_v1", "coco_20231016_v2"],
        "dataset": ["coco", "coco", "coco"],
        "number": [1, 1, 2],
        "content_digest": ["sha256:" + "a" * 64, "sha256:" + "a" * 64, None],
        "state": ["deprecated", "deprecated", "committed"],
        "role": ["eval", "train", "train"],
        # v1 train: two splits at depth 2, one at depth 0; v2: one use
        "uses": [[2, "test"], [2, "train", 2, "validation", 0, "train"], [1, "train"]],
    }
    eval_v1, train_v1, train_v2 = entries_from_columns(links, columns)
    assert eval_v1 == LineageEntry(
        "coco_20231015_v1",
        "coco",
        1,
        "sha256:" + "a" * 64,
        "deprecated",
        "eval",
        ("test",),
        (links[2]._replace(splits=("test",)),),
    )
    assert train_v1.splits == ("train", "validation")
    assert train_v1.segments == (
        links[2]._replace(splits=("train", "validation")),
        links[0]._replace(splits=("train",)),
    )
    assert train_v2.segments[0].ref == CheckpointRef("det", "ckpt-2", "r1")
    assert train_v2.content_digest is None and train_v2.number == 2
    assert entries_from_columns(links, {name: [] for name in LINEAGE_COLUMNS}) == ()


def test_entries_carry_the_data_state_and_read_older_answers_as_stored() -> None:
    links = _links(1)
    columns = {
        **one_entry_columns([0, "train"]),
        "data_state": ["deleted"],
        "data_deleted_at": ["2026-12-01T10:00:00Z"],
        "data_deleted_reason": ["retention"],
    }
    (entry,) = entries_from_columns(links, columns)
    assert (entry.data_state, entry.data_deleted_at, entry.data_deleted_reason) == (
        "deleted",
        "2026-12-01T10:00:00Z",
        "retention",
    )
    assert entry.data_deleted and entry.data_status() == "data deleted 2026-12-01 (retention)"
    assert LineageEntry.from_json(entry.to_json()) == entry  # the full form says the same
    assert entry.to_json()["data_state"] == "deleted"
    releasing = entry._replace(data_state="deleting", data_deleted_at=None)
    assert releasing.data_status() == "data being deleted (retention)"
    # an answer of a service from before retention: no data-state columns, no fields
    (old,) = entries_from_columns(links, one_entry_columns([0, "train"]))
    assert (old.data_state, old.data_deleted_at, old.data_deleted_reason) == ("stored", None, None)
    assert not old.data_deleted and old.data_status() == "stored"
    body = {k: v for k, v in entry.to_json().items() if not k.startswith("data_")}
    assert LineageEntry.from_json(body).data_state == "stored"
    with pytest.raises(ValueError, match="different lengths"):
        entries_from_columns(links, {**columns, "data_state": []})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"uses": [[3, "train"]]}, "depth 3: not in the chain"),
        ({"uses": [[-1, "train"]]}, "depth -1: not in the chain"),
        ({"uses": [[0, "train", 1]]}, "not \\[depth, split\\] pairs"),
        ({"role": []}, "different lengths"),
    ],
)
def test_malformed_columns_are_refused(change: dict[str, Any], message: str) -> None:
    columns = one_entry_columns([0, "train"])
    with pytest.raises(ValueError, match=message):
        entries_from_columns(_links(2), {**columns, **change})
    with pytest.raises(ValueError, match="without the column 'uses'"):
        entries_from_columns(_links(2), {k: v for k, v in columns.items() if k != "uses"})

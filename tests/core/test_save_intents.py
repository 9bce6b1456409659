"""The rules that finish a checkpoint save a crash interrupted (recordkeeper.core.save_intents)."""

from __future__ import annotations

import json

import pytest

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.save_intents import SaveIntent, dropped, written


def test_written_is_the_newest_checkpoint_not_kept_before() -> None:
    assert written(["ckpt-1", "ckpt-2"], ["ckpt-2", "ckpt-3"]) == "ckpt-3"
    assert written([], ["ckpt-1"]) == "ckpt-1"
    # killed before the manager's state named the new checkpoint: nothing was written
    assert written(["ckpt-1", "ckpt-2"], ["ckpt-1", "ckpt-2"]) is None
    assert written(["ckpt-1"], []) is None


def test_dropped_needs_the_files_gone() -> None:
    gone = {"ckpt-1"}
    before, kept = ["ckpt-1", "ckpt-2", "ckpt-3"], ["ckpt-3", "ckpt-4"]
    # ckpt-2 left the list but its files stay (keep_checkpoint_every_n_hours)
    assert dropped(before, kept, "ckpt-4", lambda n: n not in gone) == ["ckpt-1"]
    # the checkpoint a save rewrote under its own name is not a deletion
    assert dropped(["ckpt-4"], [], "ckpt-4", lambda n: False) == []


def test_an_intent_round_trips_through_json() -> None:
    intent = SaveIntent(
        model="det",
        run="run1-abc",
        before=("ckpt-1", "ckpt-2"),
        data=({"version": "coco_v1", "role": "train", "splits": None},),
        parent="det@run1-abc/ckpt-2",
        parent_kind="restored_from",
        metrics={"loss": 0.5},
        known={"ckpt-2": "det@run1-abc/ckpt-2"},
        host="h",
        pid=12,
    )
    assert SaveIntent.from_json(json.loads(json.dumps(intent.to_json()))) == intent


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        {"model": "det"},
        {"format": "other", "model": "det", "run": "r"},
        {"format": "rk-save-intent-1", "run": "r"},
        {"format": "rk-save-intent-1", "model": "det", "run": "r", "before": [1]},
    ],
)
def test_a_malformed_intent_is_invalid(body: object) -> None:
    with pytest.raises(InvalidCheckpoint):
        SaveIntent.from_json(body)

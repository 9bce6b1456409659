"""The lineage grammar: model and checkpoint names, ``model/checkpoint`` references."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidCheckpoint
from recordkeeper.core.limits import MAX_CHECKPOINT_NAME_LENGTH, MAX_MODEL_NAME_LENGTH
from recordkeeper.core.lineage import (
    PARENT_KINDS,
    ROLES,
    CheckpointRef,
    parse_checkpoint_ref,
    validate_checkpoint_name,
    validate_model_name,
    validate_parent_kind,
    validate_role,
)


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

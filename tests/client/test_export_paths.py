"""Local checkpoint and export paths as registered URIs: literal, never percent-encoded."""

from __future__ import annotations

from pathlib import Path

from recordkeeper.core.lineage import run_for_directory
from recordkeeper.tf.checkpoints import checkpoint_uri, legacy_checkpoint_uri
from recordkeeper.tf.exports import _local_path


def test_a_class_of_reserved_characters_is_kept_as_written(tmp_path: Path) -> None:
    for name in ("data_version=coco_20231015_v3", "lr+0.1,bs@32:x", "énorme", "100%25"):
        path = tmp_path / "ckpt-1234_saved_modules" / name
        assert checkpoint_uri(str(path)) == f"file://{path}"
        path.mkdir(parents=True)
        assert _local_path(checkpoint_uri(str(path))) == str(path)  # a literal '%' stays
    assert checkpoint_uri("gs://models/run/ckpt-1") == "gs://models/run/ckpt-1"


def test_registrations_and_runs_of_the_encoded_form_still_match(tmp_path: Path) -> None:
    export = tmp_path / "data_version=coco_v3"
    export.mkdir()
    encoded = legacy_checkpoint_uri(str(export))
    assert encoded == export.as_uri() and "%3D" in encoded
    assert _local_path(encoded) == str(export)  # an export registered before loads
    directory = tmp_path / "lr=0.1"
    # runs are derived from the encoded form, as before: a resumed job keeps its run
    assert run_for_directory(legacy_checkpoint_uri(str(directory))) == run_for_directory(
        directory.as_uri()
    )

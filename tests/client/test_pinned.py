"""Pinned training configs: lock, load, and the loud failures (digest, deprecation, aliases)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import recordkeeper as rk
from recordkeeper import locking, pinned
from recordkeeper.checkpoint_lineage import DataUse

pytest.importorskip("fastapi")


def publish(client: rk.Client, dataset: str, tag: str) -> rk.DatasetVersion:
    with client.writer(dataset, desc=tag) as w:
        for split in ("train", "validation"):
            for i in range(3):
                w.write(f"{dataset}-{tag}-{split}-{i}".encode(), split=split)
    return client.resolve(w.version.name)


def write_yaml(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_lock_writes_exact_names_and_digests_beside_the_config(
    client: rk.Client, tmp_path: Path
) -> None:
    v1 = publish(client, "coco", "first")
    objects = publish(client, "objects", "one")
    config = write_yaml(
        tmp_path / "train.yaml",
        {
            "model": {"layers": 3},
            "data": {
                "train": "coco@latest",
                "eval": v1.name,
                "extra": {"ref": "objects@v1", "role": "train", "splits": ["validation"]},
            },
        },
    )
    target, _ = locking.lock_config(client, config)
    assert target == tmp_path / "train.lock.yaml"
    locked = yaml.safe_load(target.read_text())
    assert locked["model"] == {"layers": 3}  # the rest of the config is kept
    assert locked["data"] == {
        "train": {"version": v1.name, "digest": v1.content_digest, "locked_from": "coco@latest"},
        "eval": {"version": v1.name, "digest": v1.content_digest},
        "extra": {
            "version": objects.name,
            "digest": objects.content_digest,
            "locked_from": "objects@v1",
            "role": "train",
            "splits": ["validation"],
        },
    }
    assert yaml.safe_load(config.read_text())["data"]["train"] == "coco@latest"  # untouched
    # a newer version does not move the pin
    publish(client, "coco", "second")
    data = pinned.resolve_pinned(client, config)  # reads train.lock.yaml beside it
    assert data.path == target
    assert data["train"].name == v1.name and data["train"].splits["train"].shards
    assert data.lineage_data() == [
        DataUse(v1.name, "train"),
        DataUse(v1.name, "eval"),
        DataUse(objects.name, "train", ("validation",)),
    ]
    assert pinned.current() is data
    # --update re-resolves from where each entry was locked from
    target, updated = locking.lock_config(client, target, update=True)
    assert updated["train"].name.endswith("_second")
    assert updated["eval"].name == v1.name


def test_digest_mismatch_and_deprecation_fail_loudly(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    target, _ = locking.lock_config(
        client, write_yaml(tmp_path / "t.yaml", {"data": {"train": "coco@v1"}})
    )
    tampered = yaml.safe_load(target.read_text())
    tampered["data"]["train"]["digest"] = "sha256:" + "0" * 64
    write_yaml(target, tampered)
    with pytest.raises(rk.DigestMismatch):
        pinned.resolve_pinned(client, target)
    with pytest.raises(rk.DigestMismatch):  # locking again keeps (and checks) the pin
        locking.lock_config(client, tmp_path / "t.yaml")
    target, _ = locking.lock_config(client, tmp_path / "t.yaml", update=True)
    client.deprecate(v1, "labels were wrong")
    with pytest.raises(rk.VersionDeprecated, match="labels were wrong"):
        pinned.resolve_pinned(client, target)
    assert (
        pinned.resolve_pinned(client, target, allow_deprecated=True)["train"].state == "deprecated"
    )
    with pytest.raises(rk.VersionDeprecated):
        locking.lock_config(client, tmp_path / "t.yaml")


def test_unlocked_aliases_need_a_lock_unless_not_strict(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"data": {"train": "coco@latest", "test": "coco@v1"}}))
    with pytest.raises(rk.InvalidReference, match="recordkeeper lock"):
        pinned.resolve_pinned(client, config)
    loose = pinned.resolve_pinned(client, config, strict=False)
    assert loose["train"].name == v1.name and loose.entries[1].role == "test"
    target, _ = locking.lock_config(client, config, inplace=True)
    assert target == config
    assert json.loads(config.read_text())["data"]["train"]["digest"] == v1.content_digest
    assert (
        pinned.resolve_pinned(client, {"data": json.loads(config.read_text())["data"]})["test"].name
        == v1.name
    )


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"model": {}}, "no 'data' section"),
        ({"data": {"finetune": "coco@v1"}}, "cannot tell the role"),
        ({"data": {"train": 3}}, "reference or a mapping"),
        ({"data": {"train": {"ref": "coco@v1", "colour": "red"}}}, "unknown keys"),
        ({"data": {"train": "coco@@"}}, "data.train"),
        ({"data": {"train": {"version": "coco@v1", "digest": "md5:abc"}}}, "digest"),
    ],
)
def test_malformed_configs(client: rk.Client, config: dict[str, Any], match: str) -> None:
    with pytest.raises(rk.InvalidInput, match=match):
        pinned.resolve_pinned(client, config)


def test_unreadable_config_files(client: rk.Client, tmp_path: Path) -> None:
    with pytest.raises(rk.InvalidInput, match="cannot read"):
        pinned.resolve_pinned(client, tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("data: [unclosed")
    with pytest.raises(rk.InvalidInput, match="not valid YAML"):
        pinned.resolve_pinned(client, tmp_path / "bad.yaml")


# -- pins never move silently (issue 9, point 3) ------------------------------------------


def _changes(data: pinned.PinnedData) -> dict[str, tuple[str, str | None, str | None]]:
    return {c.key: (c.change, c.old_version, c.new_version) for c in data.changes}


def test_locking_again_keeps_pins_until_update(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    config = write_yaml(tmp_path / "train.yaml", {"data": {"train": "coco@latest"}})
    _, first = locking.lock_config(client, config)
    assert _changes(first) == {"train": ("added", None, v1.name)}
    v2 = publish(client, "coco", "second")

    _, again = locking.lock_config(client, config)
    assert again["train"].name == v1.name
    assert _changes(again) == {"train": ("unchanged", v1.name, v1.name)}
    assert again.changes[0].available == v2.name  # said, not done
    assert pinned.load_pinned(config, client=client)["train"].name == v1.name

    _, updated = locking.lock_config(client, config, update=True)
    assert _changes(updated) == {"train": ("updated", v1.name, v2.name)}
    assert "→" in updated.changes[0].describe()
    assert pinned.load_pinned(config, client=client)["train"].name == v2.name


def test_editing_the_config_makes_its_lock_stale(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    mnist = publish(client, "mnist", "one")
    config = write_yaml(
        tmp_path / "train.yaml", {"seed": 1, "data": {"train": "coco@latest", "test": "coco@v1"}}
    )
    locking.lock_config(client, config)
    # outside the data section, or reformatted: still fresh
    write_yaml(config, {"data": {"test": "coco@v1", "train": "coco@latest"}, "seed": 2})
    assert pinned.load_pinned(config, client=client)["train"].name == v1.name

    write_yaml(config, {"data": {"train": "coco@latest", "eval": "mnist@latest"}})
    with pytest.raises(rk.StaleLock) as caught:
        pinned.load_pinned(config, client=client)
    assert caught.value.code == "stale_lock"
    assert set(caught.value.extra["entries"]) == {"eval", "test"}
    assert "data.eval: added (mnist@latest)" in caught.value.detail
    assert "data.test: removed" in caught.value.detail
    status = locking.check_lock(client, config)
    assert not status.ok and set(status.stale) == {"eval", "test"}

    _, relocked = locking.lock_config(client, config)
    assert _changes(relocked) == {
        "train": ("unchanged", v1.name, v1.name),
        "eval": ("added", None, mnist.name),
        "test": ("removed", v1.name, None),
    }
    assert pinned.load_pinned(config, client=client)["eval"].name == mnist.name

    write_yaml(
        config, {"data": {"train": "coco@latest", "eval": {"ref": "mnist@v1", "splits": ["train"]}}}
    )
    with pytest.raises(rk.StaleLock, match=r"data\.eval: changed: ref 'mnist@latest' → 'mnist@v1'"):
        pinned.load_pinned(config, client=client)
    _, relocked = locking.lock_config(client, config)
    assert relocked.changes[1].change == "relocked"


def test_a_config_locked_in_place_knows_when_it_was_edited(
    client: rk.Client, tmp_path: Path
) -> None:
    publish(client, "coco", "first")
    config = write_yaml(tmp_path / "train.yaml", {"data": {"train": "coco@latest"}})
    locking.lock_config(client, config, inplace=True)
    assert locking.check_lock(client, config).ok
    edited = yaml.safe_load(config.read_text())
    edited["data"]["eval"] = "coco@v1"
    write_yaml(config, edited)
    with pytest.raises(rk.StaleLock, match=r"data\.eval: added \(coco@v1\) without a pin"):
        pinned.load_pinned(config, client=client)
    assert not locking.check_lock(client, config).ok


def test_check_lock_for_ci(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    config = write_yaml(tmp_path / "train.yaml", {"data": {"train": "coco@latest"}})
    assert locking.check_lock(client, config).missing
    locking.lock_config(client, config)
    assert locking.check_lock(client, config).ok
    publish(client, "coco", "second")
    status = locking.check_lock(client, config)
    assert status.ok and status.entries[0].available is not None  # newer is not a failure
    client.deprecate(v1, "bad labels")
    status = locking.check_lock(client, config)
    assert not status.ok
    assert (status.entries[0].code, status.entries[0].version) == ("version_deprecated", v1.name)
    assert "bad labels" in (status.entries[0].problem or "")


def test_loading_verifies_the_shards(client: rk.Client, tmp_path: Path) -> None:
    v1 = publish(client, "coco", "first")
    config = write_yaml(tmp_path / "train.yaml", {"data": {"train": "coco@latest"}})
    locking.lock_config(client, config)
    shard = Path(v1.splits["train"].shards[0].uri.removeprefix("file://"))
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF  # same size: only a deep read finds it once the mtime is restored
    stat = shard.stat()
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert pinned.load_pinned(config, client=client)["train"].name == v1.name  # fast: identity
    with pytest.raises(rk.CorruptShard, match=v1.name):
        pinned.load_pinned(config, client=client, verify="deep")
    shard.write_bytes(b"")  # size changed: fast verification sees it
    with pytest.raises(rk.CorruptShard):
        pinned.load_pinned(config, client=client)
    assert pinned.load_pinned(config, client=client, verify=None)["train"].name == v1.name
    eval_only = write_yaml(
        tmp_path / "eval.yaml", {"data": {"eval": {"ref": v1.name, "splits": ["validation"]}}}
    )
    assert pinned.load_pinned(eval_only, client=client, verify="deep")  # its splits only

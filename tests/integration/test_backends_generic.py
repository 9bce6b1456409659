"""Backends without a built-in profile: the generic fsspec fallback and a registered profile.

Real fsspec filesystems, registered under their own protocols as a plugin would register them:
fsspec's ``memory://`` (``info()`` gives ``created``, new on every write), a memory filesystem
whose ``info()`` gives only the size, and one that names its object versions ``revision`` (a key
the generic profile does not know).  Shards are published through a live service, rewritten
with the same size, and verified.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, ClassVar

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.backends import StorageProfile, profile_for, register_profile, unregister_profile
from recordkeeper.cli import app
from tests.integration import _scenarios as sc
from tests.integration.conftest import LiveService


class _SizeOnlyFS(MemoryFileSystem):
    """An in-memory store whose ``info()`` tells nothing but the size (no time, no version)."""

    protocol = "rksizeonly"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        return super()._strip_protocol(str(path).removeprefix(f"{cls.protocol}://"))

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        out = dict(super().info(path, **kwargs))
        out.pop("created", None)
        return out


class _RevisionFS(_SizeOnlyFS):
    """An in-memory store that names each written version of an object ``revision``."""

    protocol = "rkrevision"
    store: ClassVar[dict[str, Any]] = {}
    pseudo_dirs: ClassVar[list[str]] = [""]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        out = dict(MemoryFileSystem.info(self, path, **kwargs))
        created = out.pop("created", None)
        if out.get("type") == "file" and created is not None:
            out["revision"] = created.isoformat()
        return out


class RevisionProfile(StorageProfile):
    """The whole profile of the ``rkrevision`` store: its identity is ``info()["revision"]``."""

    name = "rkrevision"
    schemes = ("rkrevision",)

    def identity_from_info(self, info: Any) -> dict[str, Any]:
        return {"revision": info.get("revision")}


fsspec.register_implementation("rksizeonly", _SizeOnlyFS, clobber=True)
fsspec.register_implementation("rkrevision", _RevisionFS, clobber=True)
_BUCKET = f"rk-{uuid.uuid4().hex[:8]}"
_ROOTS = [f"memory://{_BUCKET}/", f"rksizeonly://{_BUCKET}/", f"rkrevision://{_BUCKET}/"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    from tests.integration.conftest import start_live_service

    base = tmp_path_factory.mktemp("rk-generic")
    (base / "store").mkdir()
    store = (base / "store").as_uri()
    live = start_live_service(
        storage_root=store,
        allowed_roots=[store, *_ROOTS],
        database_url=f"sqlite:///{base / 'registry.db'}",
    )
    yield live
    live.stop()


def _publish(service: LiveService, scheme: str, name: str) -> rk.DatasetVersion:
    raw = f"{scheme}://{_BUCKET}/{name}/raw"
    uris = [f"{raw}/train-{i:05d}-of-00003.tfrecord" for i in range(3)]
    for i, uri in enumerate(uris):
        sc.put_bytes(uri, sc.frame(sc.sample_examples(20, i * 20)), {})
    client = service.client()
    return client.publish(rk.Dataset.from_files(name, uris), progress=False)


def _rewrite_same_size(uri: str) -> None:
    """Write the shard again with one bit flipped in a record's payload: same size."""
    data = bytearray(sc.get_bytes(uri, {}))
    data[len(data) // 2] ^= 0x10
    sc.put_bytes(uri, bytes(data), {})


def _deep_finds(version: rk.DatasetVersion, shard: rk.Shard) -> None:
    deep = version.verify(deep=True)
    assert [(p.shard.name, p.reason) for p in deep.problems] == [(shard.name, "corrupt")]


def test_a_directory_lists_as_the_uris_it_was_named_with(service: LiveService) -> None:
    """memory:// paths start with '/': listing gave memory:///bucket/… URIs, outside every
    allowed root, so a directory on such a store could not be published."""
    v = _publish(service, "memory", "memlisted")
    raw = f"memory://{_BUCKET}/memlisted/raw"
    listed = rk.Dataset.from_directory(raw, name="memlisted")
    assert [s.uri for s in listed.shards] == [s.uri for s in v.shards]
    with pytest.warns(rk.DuplicateWarning):
        again = service.client().publish(listed, progress=False)
    assert again.name == v.name  # the same content: the existing version


def test_memory_same_size_rewrite_is_caught_by_fast_verify(service: LiveService) -> None:
    v = _publish(service, "memory", "memgeneric")
    assert profile_for(v.shards[0].uri).name == "memory"  # the generic fallback, by scheme
    identity = dict(v.shards[0].storage_identity or {})
    assert identity["backend"] == "memory" and identity.get("created")
    clean = v.verify()
    assert clean.ok
    victim = v.splits["train"].shards[1]
    _rewrite_same_size(victim.uri)
    fast = v.verify()
    assert [(p.shard.name, p.reason) for p in fast.problems] == [(victim.name, "identity_changed")]
    assert "created" in fast.problems[0].detail
    _deep_finds(v, victim)
    assert clean.notes == ()  # what was compared could tell: nothing to say


def test_a_store_that_gives_only_sizes_says_only_deep_verify_can_tell(
    service: LiveService,
) -> None:
    v = _publish(service, "rksizeonly", "sizeonly")
    assert set(v.shards[0].storage_identity or {}) == {"backend", "size"}
    victim = v.splits["train"].shards[0]
    _rewrite_same_size(victim.uri)
    fast = v.verify()
    assert fast.ok  # nothing to compare but the size...
    (note,) = fast.notes  # ...and the report says so
    assert "3 shard(s)" in note and "deep verify" in note and "rksizeonly" in note
    assert fast.to_dict()["notes"] == [note]
    _deep_finds(v, victim)
    shown = CliRunner().invoke(app, ["--url", service.url, "verify", v.name])
    assert shown.exit_code == 0, shown.output
    words = " ".join(shown.output.split())  # the console wraps long lines
    assert (
        words.startswith(f"ok {v.name}") and "note 3 shard(s)" in words and "deep verify" in words
    )


def test_a_registered_profile_teaches_fast_verify_a_new_store(service: LiveService) -> None:
    """Adding a backend is one profile: here, one method naming its version field."""
    blind = _publish(service, "rkrevision", "revblind")
    assert set(blind.shards[0].storage_identity or {}) == {"backend", "size"}
    profile = register_profile(RevisionProfile())
    try:
        assert profile_for(f"rkrevision://{_BUCKET}/x") is profile
        v = _publish(service, "rkrevision", "revision")
        identity = dict(v.shards[0].storage_identity or {})
        assert identity["backend"] == "rkrevision" and identity["revision"]
        assert v.verify().notes == ()
        victim = v.splits["train"].shards[2]
        _rewrite_same_size(victim.uri)
        fast = v.verify()
        assert [(p.shard.name, p.reason) for p in fast.problems] == [
            (victim.name, "identity_changed")
        ]
        assert "revision" in fast.problems[0].detail
        _deep_finds(v, victim)
        # shards registered before the profile carry no revision: still said, not hidden
        assert blind.verify().notes
    finally:
        unregister_profile(profile)
    assert profile_for(f"rkrevision://{_BUCKET}/x").name == "rkrevision"
    assert not isinstance(profile_for(f"rkrevision://{_BUCKET}/x"), RevisionProfile)

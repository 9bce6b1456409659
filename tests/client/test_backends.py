"""The storage profiles: one lookup from URL scheme to profile, and nobody else asks which
backend a URI is on."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from recordkeeper import backends
from recordkeeper.backends import (
    GCSProfile,
    LocalProfile,
    ObjectStat,
    S3Profile,
    StorageProfile,
    profile_for,
    register_profile,
    unregister_profile,
)
from recordkeeper.storage import backend_of, stat_object, to_uri

PACKAGE = Path(backends.__file__).resolve().parents[1]


def test_builtin_profiles_by_scheme() -> None:
    assert isinstance(profile_for("s3://b/k"), S3Profile)
    assert isinstance(profile_for("s3a://b/k"), S3Profile)
    assert isinstance(profile_for("gs://b/k"), GCSProfile)
    assert isinstance(profile_for("gcs://b/k"), GCSProfile)
    assert isinstance(profile_for("file:///x"), LocalProfile)
    assert isinstance(profile_for("local:///x"), LocalProfile)
    assert isinstance(profile_for("/plain/path"), LocalProfile)
    generic = profile_for("memory://b/k")
    assert type(generic) is StorageProfile and generic.name == "memory"
    assert profile_for("memory://other") is generic  # one fallback per scheme
    assert [backend_of(u) for u in ("s3://b/k", "gcs://b/k", "/x", "abfs://c/k")] == [
        "s3",
        "gcs",
        "file",
        "abfs",
    ]
    assert to_uri("gcs://b/k") == "gs://b/k"  # the profile's other spelling


def test_registering_a_taken_scheme_is_refused_unless_replaced() -> None:
    class Other(StorageProfile):
        name = "other-s3"
        schemes = ("s3",)

    with pytest.raises(ValueError, match="already served"):
        register_profile(Other())
    with pytest.raises(ValueError, match="names no URL scheme"):
        register_profile(StorageProfile(name="nothing", schemes=()))
    other = register_profile(Other(), replace=True)
    try:
        assert profile_for("s3://b/k") is other
    finally:
        unregister_profile(other)
        register_profile(S3Profile(), replace=True)
    assert isinstance(profile_for("s3://b/k"), S3Profile)


def test_generic_identity_compares_what_info_gives() -> None:
    profile = StorageProfile(name="webdav", schemes=("webdav",))
    info = {"size": 5, "type": "file", "ETag": '"abc"', "mtime": 1.5, "md5": b"\x01\x02"}
    stat = profile.stat_from_info("webdav://h/x", info)
    assert stat.identity == {
        "backend": "webdav",
        "size": 5,
        "etag": '"abc"',
        "mtime": "1.5",
        "md5": "0102",
    }
    same = profile.compare(stat.identity, stat, sha256="", crc32c="")
    assert same is None and profile.blind_spot(stat.identity) is None
    rewritten = ObjectStat(stat.uri, 5, {**stat.identity, "md5": "0303"})
    found = profile.compare(stat.identity, rewritten, sha256="", crc32c="")
    assert found is not None and found.reason == "checksum_mismatch" and "md5" in found.detail
    touched = ObjectStat(stat.uri, 5, {**stat.identity, "mtime": "2.5"})
    found = profile.compare(stat.identity, touched, sha256="", crc32c="")
    assert found is not None and found.reason == "identity_changed"
    sizes_only = {"backend": "webdav", "size": 5}
    assert profile.compare(sizes_only, rewritten, sha256="", crc32c="") is None
    note = profile.blind_spot(sizes_only)
    assert note is not None and "deep verify" in note


def test_local_identity_has_the_inode(tmp_path: Path) -> None:
    """A file replaced by a rename with its size and mtime kept is a new inode."""
    import os

    path = tmp_path / "shard"
    path.write_bytes(b"x" * 10)
    before = stat_object(str(path))
    st = os.stat(path)
    (tmp_path / "new").write_bytes(b"y" * 10)
    os.utime(tmp_path / "new", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp_path / "new", path)
    after = stat_object(str(path))
    assert after.identity["mtime_ns"] == before.identity["mtime_ns"]
    found = LocalProfile().compare(before.identity, after, sha256="", crc32c="")
    assert found is not None and "inode" in found.detail


#: modules allowed to name backends: the profiles themselves, and the pure URI rules of the
#: core (a ``file`` URI has a path where other schemes have a bucket)
_ALLOWED = {"backends", "core"}
_NAMES = {"s3", "s3a", "gs", "gcs", "file", "local"}


def test_no_module_outside_the_profiles_asks_which_backend() -> None:
    """``x == "s3"`` / ``backend_of(u) != "file"`` outside recordkeeper.backends is the
    pattern the profiles replaced: adding a backend would mean editing every such line."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in _ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Compare):
                continue
            values = [node.left, *node.comparators]
            literals = {
                v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            }
            for v in values:
                if isinstance(v, (ast.Tuple, ast.Set, ast.List)):
                    literals |= {
                        e.value
                        for e in v.elts
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    }
            if literals & _NAMES:
                found.append(f"{relative}:{node.lineno}")
    assert not found, f"backend names compared outside recordkeeper.backends: {found}"

"""URI normalisation and the storage-root allow-list."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import StorageRootNotAllowed
from recordkeeper.core.roots import AllowedRoots, UriError, as_root, normalize_uri


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "no-scheme",
        "/abs/path",
        "s3://",
        "s3:///key",
        "file://relative",
        "s3://b/a b",
        "s3://b/a\\b",
        "s3://b/a\nb",
        "s3://b/a//b",
        "s3://b/x?versionId=1",
        "s3://b/" + "x" * 3000,
    ],
)
def test_malformed(uri: str) -> None:
    with pytest.raises(UriError):
        normalize_uri(uri)


def test_normalisation() -> None:
    assert normalize_uri("S3://bucket/Key") == "s3://bucket/Key"
    assert as_root("file:///data/store") == "file:///data/store/"
    assert as_root("gs://team-a/") == "gs://team-a/"


def test_allow_list() -> None:
    roots = AllowedRoots.of(["s3://ml-data", "file:///srv/store/"])
    assert roots.allows("s3://ml-data/a/b.tfrecord")
    assert roots.allows("s3://ml-data")
    assert roots.allows("file:///srv/store/coco/x")
    assert not roots.allows("s3://ml-data-evil/x")
    assert not roots.allows("file:///srv/storefront/x")
    assert not roots.allows("file:///etc/passwd")
    for escape in [
        "s3://ml-data/../other",
        "s3://ml-data/a/%2e%2e/%2E%2E/x",
        "file:///srv/store/./x",
    ]:
        with pytest.raises(StorageRootNotAllowed):
            roots.check(escape, "uri")
        assert not roots.allows(escape)  # the client's pre-check answers the same
    for malformed in ["no-scheme", "s3://ml-data//x", "s3://ml-data/a b", ""]:
        assert not roots.allows(malformed)
        with pytest.raises(UriError):
            roots.check(malformed, "uri")
    assert roots.allows("S3://ml-data/x")  # schemes are case-insensitive
    with pytest.raises(StorageRootNotAllowed) as info:
        roots.check("file:///etc/passwd", "shard URI")
    assert info.value.extra["allowed_roots"] == ["s3://ml-data/", "file:///srv/store/"]

"""URI normalisation and the storage-root allow-list."""

from __future__ import annotations

from typing import Any

import pytest

from recordkeeper.core.errors import StorageRootNotAllowed
from recordkeeper.core.roots import (
    AllowedRoots,
    UriError,
    allowed_root,
    as_root,
    check_object_uri,
    normalize_uri,
)


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


NAMES = [
    "train-00000-of-00001.tfrecord",
    "a/b/c.gz",
    "../x",
    "a/../../x",
    "a/./b",
    "./a",
    "a//b",
    "a/",
    "%2e%2e/x",
    "a/%2E%2E/%2e%2e/x",
    "a%2Fb",
    "a b",
    "a\\b",
    "a?b",
    "a#b",
    "é/ü.tfrecord",
    "x" * 3000,
    "",
]


@pytest.mark.parametrize("prefix", ["file:///data/coco/", "s3://ml/coco/", "file:///data/", ""])
@pytest.mark.parametrize("name", NAMES)
def test_check_objects_answers_as_check_and_check_object_uri(prefix: str, name: str) -> None:
    """The fast path for a page of names under one prefix refuses exactly what checking each
    full URI refuses (issue 21: shard URIs a service answers)."""
    roots = AllowedRoots.of(["file:///data/", "s3://ml/"])
    full = prefix + name if prefix else "file:///data/" + name

    def outcome(check: object) -> type[BaseException] | None:
        try:
            check()  # type: ignore[operator]
        except (UriError, StorageRootNotAllowed) as exc:
            return StorageRootNotAllowed if isinstance(exc, StorageRootNotAllowed) else UriError
        return None

    one_by_one = outcome(lambda: check_object_uri(roots.check(full, "shard"), (), "shard"))
    paged = outcome(lambda: roots.check_objects(prefix, [name] if prefix else [full], "shard"))
    assert paged == one_by_one


def test_allowed_root_refuses_a_whole_scheme() -> None:
    for root in ("file:///", "file:////", "s3://", "gs://bucket/.."):
        with pytest.raises(UriError):
            allowed_root(root)
    with pytest.raises(UriError, match="would allow every file location"):
        allowed_root("file:///")
    assert allowed_root("s3://ml-data") == "s3://ml-data/"


def test_batched_plain_names_never_pass_what_the_per_name_check_refuses(
    monkeypatch: Any,
) -> None:
    """check_objects first scans a page's names joined (one pass, not a regex per name); a
    name it lets through must be one the per-name check accepts, and one bad name among
    10,000 good ones is still refused."""
    import pytest

    from recordkeeper.core import roots as roots_module
    from recordkeeper.core.roots import AllowedRoots, UriError

    roots = AllowedRoots.of(["s3://b/data/"])
    prefix = "s3://b/data/coco/v1/"
    tricky = [
        "",
        ".",
        "..",
        "./a",
        "../a",
        "a/.",
        "a/..",
        "a/./b",
        "a/../b",
        "a//b",
        "/a",
        "a/",
        "a\nb",
        "a b",
        "a%2e",
        "a?x",
        "a#x",
        "a\\b",
        "a\x7f",
        "a\u200bb",
        "x" * 3000,
        "train-00000.tfrecord",
        "sub/dir/f.tfrecord",
        ".hidden",
        "a..b",
        "...",
    ]
    good = [f"train-{i:05d}.tfrecord" for i in range(10_000)]
    for name in tricky:
        with monkeypatch.context() as m:  # the per-name check only
            m.setattr(roots_module, "_plain_names", lambda names, room: False)
            try:
                roots.check_objects(prefix, [name], "shard")
                alone = None
            except Exception as exc:
                alone = type(exc)
        in_batch: type[Exception] | None
        try:
            roots.check_objects(prefix, [*good[:50], name, *good[50:]], "shard")
            in_batch = None
        except Exception as exc:
            in_batch = type(exc)
        assert in_batch == alone, name
    roots.check_objects(prefix, iter(good), "shard")  # an iterator is read once
    with pytest.raises(UriError):
        roots.check_objects(prefix, [*good, 3], "shard")  # type: ignore[list-item]

"""The pure rules gc and the writer use: which roots a deletion may use, what lies inside what."""

from __future__ import annotations

import pytest

from recordkeeper.core.roots import (
    UriError,
    configured_roots,
    enclosing_prefixes,
    intersect_roots,
    path_is_inside,
    storage_root_of,
)


def test_intersection_never_widens_either_side() -> None:
    assert intersect_roots(["file:///data"], ["file:///"]) == ("file:///data/",)
    assert intersect_roots(["file:///data"], ["file:///data/a", "s3://b"]) == ("file:///data/a/",)
    assert intersect_roots(["file:///d/", "file:///d/x/"], ["file:///d/"]) == ("file:///d/",)
    assert intersect_roots(["file:///data"], ["file:///data-evil"]) == ()
    assert intersect_roots([], ["file:///"]) == ()
    assert intersect_roots(["s3://b/x"], ["s3://b/"]) == ("s3://b/x/",)


def test_configured_roots_refuse_everything_roots() -> None:
    assert configured_roots(["file:///data"], "--root") == ("file:///data/",)
    for wide in ("file:///", "s3://", "gs:///"):
        with pytest.raises(UriError):
            configured_roots([wide], "--root")
    with pytest.raises(UriError, match="--root"):
        configured_roots(["/no/scheme"], "--root")


def test_enclosing_prefixes() -> None:
    assert enclosing_prefixes("s3://b/ds/v/x.tfrecord") == (
        "s3://b/",
        "s3://b/ds/",
        "s3://b/ds/v/",
        "s3://b/ds/v/x.tfrecord/",
    )
    assert enclosing_prefixes("file:///d/x")[0] == "file:///"
    with pytest.raises(UriError):
        enclosing_prefixes("file:///d/../x")


def test_storage_root_of_and_path_is_inside() -> None:
    assert storage_root_of("file:///store/coco/coco_20260101_staged1/") == "file:///store/"
    assert storage_root_of("s3://b/coco/v/") == "s3://b/"
    with pytest.raises(UriError):
        storage_root_of("s3://b/")
    assert path_is_inside("/data/a", "/data") and path_is_inside("/data", "/data/")
    assert not path_is_inside("/data-evil/a", "/data")
    assert path_is_inside("/anything", "/")

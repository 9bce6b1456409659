"""The TFDS export's rules, without TFDS: feature mapping, names, version numbers, inflating.

Reading an export back with the real tensorflow-datasets is tests/integration/test_tfds_export.py.
"""

from __future__ import annotations

import datetime
import gzip
import zlib

import pytest

import recordkeeper as rk
from recordkeeper.errors import UnsupportedFormat
from recordkeeper.tfds_export import (
    _Inflater,
    tfds_features,
    tfds_file_name,
    tfds_name_of,
    tfds_version_of,
)


def feature(name: str, kind: str, lo: int, hi: int, present: int, **kw: object) -> rk.Feature:
    return rk.Feature(name, kind, lo, hi, present, **kw)  # type: ignore[arg-type]


def test_features_follow_the_feature_spec_rules() -> None:
    schema = rk.Schema(
        "example",
        10,
        (
            feature("label", "int64", 1, 1, 10),
            feature("embedding", "float", 3, 3, 10),
            feature("tokens", "bytes", 0, 5, 10),  # counts vary
            feature("optional", "int64", 1, 1, 7),  # missing from some records
            feature("empty", "float", 0, 0, 10),  # always an empty list
        ),
    )
    got = {f.name: (f.dtype, f.shape) for f in tfds_features(schema)}
    assert got == {
        "label": ("int64", ()),
        "embedding": ("float32", (3,)),
        "tokens": ("string", (None,)),
        "optional": ("int64", (None,)),
        "empty": ("float32", (None,)),
    }
    assert tfds_features(rk.Schema()) == ()  # no records yet: no features


def test_what_tfds_cannot_describe_has_a_stable_reason() -> None:
    with pytest.raises(UnsupportedFormat) as info:
        tfds_features(rk.Schema("opaque", 3))
    assert (info.value.code, info.value.extra) == (
        "unsupported_format",
        {"format": "tfds", "reason": "opaque_records"},
    )
    sequences = rk.Schema(
        "sequence_example",
        2,
        (
            feature("id", "int64", 1, 1, 2, scope="context"),
            feature("frames", "float", 2, 2, 2, scope="feature_lists", min_steps=1, max_steps=4),
        ),
    )
    with pytest.raises(UnsupportedFormat, match="SequenceExample") as info:
        tfds_features(sequences)
    assert info.value.extra["reason"] == "sequence_example"
    assert info.value.extra["features"] == ["frames"]


def _version(
    number: int | None, dataset: str = "coco", state: str = "committed"
) -> rk.DatasetVersion:
    return rk.DatasetVersion(
        ref=f"{dataset}@latest",
        name=f"{dataset}_20261201_v{number}",
        dataset=dataset,
        number=number,
        date=datetime.date(2026, 12, 1),
        desc=None,
        state=state,
        content_digest="sha256:" + "0" * 64,
        schema_digest=None,
        storage_prefix="file:///x/",
        record_count=0,
        shard_count=0,
        size=0,
    )


def test_version_numbers_and_names() -> None:
    assert tfds_version_of(_version(3)) == "3.0.0"
    assert tfds_version_of(_version(3), "1.2.10") == "1.2.10"
    for bad in ("3", "1.2", "v1.0.0", "01.0.0", "1.0.0-rc1"):
        with pytest.raises(rk.InvalidVersionName, match=r"X\.Y\.Z"):
            tfds_version_of(_version(3), bad)
    with pytest.raises(rk.VersionIncomplete, match="no version number"):
        tfds_version_of(_version(None, state="staged"))
    assert tfds_name_of("my-data") == "my_data"
    assert tfds_name_of("coco", "coco_rk") == "coco_rk"
    with pytest.raises(rk.InvalidName, match="not a TFDS dataset name"):
        tfds_name_of("coco", "coco-rk")
    assert tfds_file_name("coco", "train", 3, 16) == "coco-train.tfrecord-00003-of-00016"


def test_staged_versions_are_refused_before_anything_is_read(tmp_path: object) -> None:
    from recordkeeper.tfds_export import export_tfds

    with pytest.raises(rk.VersionIncomplete, match="staged") as info:
        export_tfds(_version(None, state="staged"), str(tmp_path))
    assert info.value.code == "version_incomplete"


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_inflater_reads_every_gzip_member_and_refuses_a_cut_stream(compression: str) -> None:
    data = bytes(range(256)) * 500
    if compression == "gzip":
        stored = gzip.compress(data[:60000]) + gzip.compress(data[60000:])  # two members
    else:
        stored = zlib.compress(data)
    inflater = _Inflater(compression)
    out = b"".join(inflater.feed(stored[i : i + 777]) for i in range(0, len(stored), 777))
    assert out + inflater.finish() == data
    if compression == "gzip":  # a member ending exactly where a piece ends
        whole = _Inflater("gzip")
        first = gzip.compress(data[:60000])
        out = whole.feed(first) + whole.feed(stored[len(first) :])
        assert out + whole.finish() == data
    cut = _Inflater(compression)
    cut.feed(stored[: len(stored) // 2])
    with pytest.raises(zlib.error):
        cut.finish()


def test_a_feature_override_must_be_a_tfds_feature() -> None:
    from recordkeeper.tfds_export import check_override

    schema = rk.Schema("example", 2, (feature("label", "int64", 1, 1, 2),))
    with pytest.raises(UnsupportedFormat, match="not a TFDS feature") as info:
        check_override(schema, "label", "ClassLabel")
    assert info.value.extra == {"format": "tfds", "reason": "feature_override", "feature": "label"}
    with pytest.raises(UnsupportedFormat, match="do not have") as info:
        check_override(schema, "lable", object())
    assert info.value.extra["reason"] == "feature_override"

"""The shard record: fields, validation, wire forms."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from types import MappingProxyType
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidHash, InvalidShard, StorageRootNotAllowed
from recordkeeper.core.limits import MAX_INT64, MAX_SHARD_COUNT
from recordkeeper.core.roots import AllowedRoots
from recordkeeper.core.shards import (
    CONTENT_FIELDS,
    INPUT_FIELDS,
    ShardRecord,
    validate_shard,
    wire_fields,
)

H = hashlib.sha256(b"a").hexdigest()
R = hashlib.sha256(b"r").hexdigest()


def wire(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "split": "train",
        "index": 1,
        "count": 4,
        "uri": "S3://ml-data/coco/train-00001-of-00004.tfrecord",
        "compression": "gzip",
        "size": 100,
        "sha256": H,
        "crc32c": "0a1b2c3d",
        "records_sha256": R,
        "record_count": 7,
        "format": "tfrecord",
        "storage_identity": {"backend": "s3", "etag": '"x"'},
        "schema": None,
    }
    body.update(overrides)
    return body


def test_validate_and_wire_round_trip() -> None:
    record = validate_shard(wire(), AllowedRoots.of(["s3://ml-data"]))
    assert record.uri == "s3://ml-data/coco/train-00001-of-00004.tfrecord"  # scheme normalised
    assert record.name == "train-00001-of-00004" and record.key == ("train", 1)
    assert record.to_wire() == {**wire(), "uri": record.uri}
    assert ShardRecord.from_json(record.to_json()) == record
    assert ShardRecord.from_json({**record.to_wire(), "registered_at": "2026-01-01T00:00:00Z"})


def test_every_field_round_trips_through_validation() -> None:
    """A value sent for any input field comes back: none is replaced by its default."""
    body = wire(format="array_record", compression="none")
    record = validate_shard(body, AllowedRoots.of(["s3://ml-data"]))
    assert record.format == "array_record"
    assert record.to_wire() == {**body, "uri": record.uri}
    sent = {f.name for f in wire_fields() if f.input}
    assert sent <= set(body), "wire() must send every input field"


def test_a_field_without_a_value_takes_its_default() -> None:
    body = wire()
    del body["format"]
    assert validate_shard(body).format == "tfrecord"  # registrations made before formats


def test_a_field_added_to_the_record_is_validated_and_kept() -> None:
    """validate_shard is derived from the field definitions: a new field round-trips, and its
    own check runs, without editing validate_shard."""
    checked: list[object] = []

    def check(value: object, name: str) -> object:
        checked.append(value)
        if value == "bad":
            raise InvalidShard(f"{name} is bad")
        return value

    meta = {**dataclasses.fields(ShardRecord)[0].metadata, "check": check, "wire": str}
    extended = dataclasses.make_dataclass(
        "Extended",
        [("added", str, dataclasses.field(default="the default", metadata=meta))],
        bases=(ShardRecord,),
        frozen=True,
    )
    record = validate_shard(wire(added="sent"), record_type=extended)
    assert record.added == "sent" and checked == ["sent"]  # type: ignore[attr-defined]
    assert validate_shard(wire(), record_type=extended).added == "the default"  # type: ignore[attr-defined]
    with pytest.raises(InvalidShard, match="added is bad"):
        validate_shard(wire(added="bad"), record_type=extended)


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"split": "Train"}, InvalidShard),
        ({"index": -1}, InvalidShard),
        ({"index": 4}, InvalidShard),
        ({"count": 0}, InvalidShard),
        ({"count": MAX_SHARD_COUNT + 1}, InvalidShard),
        ({"compression": "bzip2"}, InvalidShard),
        ({"size": -1}, InvalidShard),
        ({"record_count": MAX_INT64 + 1}, InvalidShard),
        ({"uri": "no-scheme"}, InvalidShard),
        ({"uri": "s3://ml-data/a/../../etc"}, StorageRootNotAllowed),
        ({"uri": "s3://ml-data-evil/x"}, StorageRootNotAllowed),
        ({"storage_identity": "etag"}, InvalidShard),
        ({"sha256": H.upper()}, InvalidHash),
        ({"crc32c": "0A1B2C3D"}, InvalidHash),
        ({"records_sha256": "sha256:" + R}, InvalidHash),
        ({"format": "parquet"}, InvalidShard),
        ({"format": None}, InvalidShard),
        ({"format": "array_record"}, InvalidShard),  # with gzip: compresses inside the file
        ({"uri": 3}, InvalidShard),
    ],
)
def test_validation_errors(overrides: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        validate_shard(wire(**overrides), AllowedRoots.of(["s3://ml-data"]))


def test_without_roots_only_the_uri_form_is_checked() -> None:
    assert validate_shard(wire(uri="file:///anywhere/x")).uri == "file:///anywhere/x"
    with pytest.raises(InvalidShard):  # a '..' URI is never valid
        validate_shard(wire(uri="file:///a/../x"))


def test_same_content_compares_the_content_fields() -> None:
    record = validate_shard(wire())
    assert record.same_content(record.to_json())
    assert record.same_content(dataclasses.replace(record, storage_identity=None))
    for name in CONTENT_FIELDS:
        value = getattr(record, name)
        other = {**record.to_json(), name: value + 1 if isinstance(value, int) else value + "x"}
        assert not record.same_content(other)


def test_pickles_with_a_read_only_identity() -> None:
    record = validate_shard(wire())
    assert pickle.loads(pickle.dumps(record)) == record
    frozen = dataclasses.replace(record, storage_identity=MappingProxyType({"etag": "x"}))
    assert pickle.loads(pickle.dumps(frozen)).storage_identity == {"etag": "x"}


def test_field_metadata_is_complete() -> None:
    names = [f.name for f in dataclasses.fields(ShardRecord)]
    assert [w.name for w in wire_fields()] == names
    assert set(CONTENT_FIELDS) < set(INPUT_FIELDS) < set(names)
    assert [n for n in names if n not in INPUT_FIELDS] == ["schema_digest"]
    for f in wire_fields():
        assert f.doc and f.type is not None

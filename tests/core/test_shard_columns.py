"""The packed form of shard columns (``form=packed``): what is packed unpacks to the same
columns, whatever encoding each column takes; anything else is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recordkeeper.core.shard_columns import (
    COLUMNS,
    ShardColumns,
    pack_columns,
    to_columns,
    unpack_columns,
)
from recordkeeper.core.shards import ShardRecord


def _records(n: int, *, splits: tuple[str, ...] = ("train",)) -> list[ShardRecord]:
    out = []
    for split in splits:
        for i in range(n):
            out.append(
                ShardRecord.from_json(
                    {
                        "split": split,
                        "index": i,
                        "count": n,
                        "uri": f"s3://b/ds/v1/{split}-{i:05d}.tfrecord",
                        "compression": "gzip" if i % 3 else "none",
                        "size": 100 + i,
                        "sha256": f"{i:064x}",
                        "crc32c": f"{i:08x}",
                        "records_sha256": f"{i + 1:064x}",
                        "record_count": 10,
                        "schema_digest": None if i == 1 else "sha256:" + "a" * 64,
                        "storage_identity": {"backend": "s3", "etag": f'"{i}\\n"'}
                        if i % 2
                        else None,
                    }
                )
            )
    return out


def _round_trip(records: list[ShardRecord]) -> list[ShardRecord]:
    compact = to_columns(records)
    columns: dict[str, Any] = dict(compact["columns"])
    columns["storage_identity"] = [  # as a service reads them: JSON text or null
        None if v is None else json.dumps(v) for v in columns["storage_identity"]
    ]
    packed = json.loads(json.dumps(pack_columns(columns)))  # through the wire
    unpacked = unpack_columns(packed, len(records))
    return list(ShardColumns(ShardRecord, compact["uri_prefix"], unpacked))


@pytest.mark.parametrize("n", [0, 1, 2, 9, 40])
def test_packed_columns_unpack_to_the_same_records(n: int) -> None:
    records = _records(n, splits=("train", "validation"))
    assert _round_trip(records) == records


def test_each_column_takes_the_cheapest_encoding_it_can() -> None:
    records = _records(64)
    columns: dict[str, Any] = dict(to_columns(records)["columns"])
    columns["storage_identity"] = ['{"backend": "file"}'] * 64
    packed = pack_columns(columns)
    assert packed["split"] == {"runs": [["train", 64]]}
    assert packed["count"] == {"runs": [[64, 64]]}
    assert set(packed["sha256"]) == {"lines"} and packed["index"] == list(range(64))
    digest = "sha256:" + "a" * 64
    assert packed["schema_digest"] == {"runs": [[digest, 1], [None, 1], [digest, 62]]}
    assert set(packed["compression"]) == {"lines"}  # many runs: joined
    assert set(packed["storage_identity"]) == {"json_lines"}
    columns["uri"] = [*columns["uri"][:-1], "a\nb"]  # a newline in a value: not joined
    assert pack_columns(columns)["uri"] == columns["uri"]
    assert set(pack_columns(columns)) == set(COLUMNS)


def test_unpacking_refuses_what_is_not_the_packed_form() -> None:
    records = _records(3)
    columns: dict[str, Any] = dict(to_columns(records)["columns"])
    columns["storage_identity"] = [None] * 3
    packed = pack_columns(columns)
    with pytest.raises(ValueError, match="values, not 4"):
        unpack_columns(packed, 4)
    for bad in (
        {"zip": "x"},
        {"runs": [["a", -1]]},
        {"runs": [["a", 1.5]]},
        {"lines": 3},
        "train",
        {"runs": [], "lines": ""},
    ):
        with pytest.raises((ValueError, TypeError)):
            unpack_columns({**packed, "split": bad}, 3)
    with pytest.raises(TypeError, match="JSON text"):
        unpack_columns({**packed, "storage_identity": {"json": [{"a": 1}, None, None]}}, 3)
    with pytest.raises(KeyError):
        unpack_columns({k: v for k, v in packed.items() if k != "uri"}, 3)

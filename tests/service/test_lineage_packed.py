"""The upstream answer's packed form (``form=packed``), on SQLite and PostgreSQL: the same
entries and the same consumption as the full and compact forms, in fewer bytes; and the
consumption read with the walk (counts, split sizes, epochs)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core.lineage import (
    LineageEntry,
    Segment,
    consumed_from_columns,
    entries_from_columns,
    unpack_lineage_columns,
)
from tests.service._helpers import API, publish
from tests.service.test_lineage import _history, ok, put

LINEAGE = API + "/models/{model}/checkpoints/{checkpoint}/lineage"


def _answer(client: TestClient, ref: str, form: str) -> Any:
    model, checkpoint = ref.split("/")
    return client.get(LINEAGE.format(model=model, checkpoint=checkpoint), params={"form": form})


def _counted_chain(client: TestClient) -> dict[str, str]:
    """``cnt@r/ckpt-1..3`` on two versions, some segments counting what they read (one
    version in two roles, one segment over two splits)."""
    v1 = publish(client, "coco", count=3, splits=("train", "validation"), content="x")["name"]
    v2 = publish(client, "coco", count=2, splits=("train", "validation"), content="y")["name"]
    bodies: list[list[dict[str, Any]]] = [
        [
            {"version": v1, "role": "train", "splits": ["train", "validation"], "records": 10},
            {"version": v2, "role": "eval"},
        ],
        [{"version": v1, "role": "train", "records": 7}, {"version": v2, "records": 3}],
        [{"version": v1, "role": "train"}, {"version": v2, "role": "eval", "records": 4}],
    ]
    for k, data in enumerate(bodies, 1):
        ok(
            put(
                client,
                f"cnt@r/ckpt-{k}",
                step=k,
                parent=f"cnt@r/ckpt-{k - 1}" if k > 1 else None,
                data=data,
            ),
            201,
        )
    return {"v1": v1, "v2": v2}


def _chain_pairs(body: dict[str, Any]) -> list[tuple[str, int | None]]:
    return [(link["ref"], link["step"]) for link in body["chain"]]


@pytest.mark.parametrize("ref", ["cnt/ckpt-3", "cnt/ckpt-1", "det/ckpt-4", "ft/ckpt-1"])
def test_packed_form_carries_the_full_answer(client: TestClient, ref: str) -> None:
    _history(client)
    _counted_chain(client)
    full = ok(_answer(client, ref, "full"))
    compact = ok(_answer(client, ref, "compact"))
    packed_response = _answer(client, ref, "packed")
    packed = ok(packed_response)
    assert packed["data"] is None and "compact" not in packed
    assert packed["versions"] is None and packed["consumed"] is None
    for key in ("checkpoint", "chain", "history", "history_truncated"):
        assert packed[key] == full[key] == compact[key]
    columns = unpack_lineage_columns(packed["packed"]["columns"], packed["packed"]["length"])
    # the compact columns, exactly
    assert {k: v for k, v in columns.items() if k != "consumed"} == compact["compact"]["columns"]
    links = [Segment.from_json({**link, "splits": []}) for link in full["chain"]]
    assert list(entries_from_columns(links, columns)) == [
        LineageEntry.from_json(e) for e in full["data"]
    ]
    assert list(dict.fromkeys(columns["version"])) == full["versions"]
    # what each segment read, expanded as the client does, is the other forms' `consumed`
    assert consumed_from_columns(_chain_pairs(full), columns) == full["consumed"]
    assert compact["consumed"] == full["consumed"]
    assert len(packed_response.content) < len(_answer(client, ref, "compact").content)


def test_consumption_counts_split_sizes_and_epochs(client: TestClient) -> None:
    names = _counted_chain(client)
    body = ok(_answer(client, "cnt/ckpt-3", "full"))
    consumed = {(c["version"], c["role"]): c for c in body["consumed"]}
    # v1 (3 shards of 2 records per split, as publish registers them): read as train by the
    # three segments, the oldest over both splits
    v1 = consumed[(names["v1"], "train")]
    sizes = [s["split_records"] for s in v1["segments"]]
    assert [s["checkpoint"] for s in v1["segments"]] == [
        "cnt@r/ckpt-1",
        "cnt@r/ckpt-2",
        "cnt@r/ckpt-3",
    ]
    assert [s["splits"] for s in v1["segments"]] == [["train", "validation"], ["train"], ["train"]]
    assert sizes[0] == 2 * sizes[1] and sizes[1] == sizes[2] > 0
    assert [s["records"] for s in v1["segments"]] == [10, 7, None]
    assert [s["epochs"] for s in v1["segments"]] == [10 / sizes[0], 7 / sizes[1], None]
    assert (v1["records"], v1["counted_segments"], v1["unknown_segments"]) == (17, 2, 1)
    assert v1["epochs"] == 10 / sizes[0] + 7 / sizes[1]
    # v2 in two roles: eval (ckpt-1 uncounted, ckpt-3 counted) and train (ckpt-2, counted)
    v2_eval = consumed[(names["v2"], "eval")]
    assert [s["records"] for s in v2_eval["segments"]] == [None, 4]
    assert (v2_eval["counted_segments"], v2_eval["unknown_segments"]) == (1, 1)
    assert consumed[(names["v2"], "train")]["records"] == 3
    # in entry order, like `data`
    assert [(c["version"], c["role"]) for c in body["consumed"]] == [
        (e["version"], e["role"]) for e in body["data"]
    ]

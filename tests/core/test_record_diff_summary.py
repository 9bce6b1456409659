"""The stored record diff summary: built from any real diff it is valid; anything that does not
add up is refused with ``invalid_record_diff``."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkeeper.core.errors import InvalidRecordDiff
from recordkeeper.core.record_diff import diff_records
from recordkeeper.core.record_diff_summary import (
    MAX_DIFF_SAMPLE,
    diff_summary,
    validate_record_diff,
)
from recordkeeper.core.record_identity import record_hash
from recordkeeper.core.record_index import RecordIndexBuilder, index_chunks

records_st = st.lists(st.binary(max_size=4), max_size=40)
splits_st = st.dictionaries(st.sampled_from(["train", "test", "validation"]), records_st)


def _streams(side: dict[str, list[bytes]]) -> list[tuple[str, Any]]:
    out = []
    for name, records in side.items():
        builder = RecordIndexBuilder()
        builder.add_many(records)
        out.append((name, index_chunks(io.BytesIO(builder.finish()).read, 3)[1]))
    return out


@settings(max_examples=150, deadline=None)
@given(splits_st, splits_st, st.integers(0, 12))
def test_every_real_diff_summarises_to_a_valid_document(a, b, sample) -> None:
    diff = diff_records(_streams(a), _streams(b), 16, sample=sample)
    document = diff_summary(diff, "bytes", 16)
    assert validate_record_diff(document) == document  # splits already in name order
    for entry in document["splits"]:
        d = diff.splits[entry["split"]]
        assert (entry["added"], entry["removed"], entry["common"]) == (d.added, d.removed, d.common)
        assert len(entry["sample_added"]) <= MAX_DIFF_SAMPLE
    moved = sum(diff.moved.values())
    assert sum(s["moved_in"] for s in document["splits"]) == moved


def _changed() -> dict[str, Any]:
    a = {"train": [b"1", b"2", b"3"], "test": [b"4"]}
    b = {"train": [b"1", b"2"], "test": [b"4", b"3", b"5", b"5"]}
    return diff_summary(diff_records(_streams(a), _streams(b), 16), "bytes", 16)


def test_moves_and_samples_come_from_the_diffs_fields() -> None:
    document = _changed()
    test, train = document["splits"]
    assert (train["moved_out"], test["moved_in"], test["duplicates_b"]) == (1, 1, 1)
    assert train["sample_removed"] == [record_hash(b"3").hex()]
    assert (document["new"], document["gone"]) == (1, 0)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(kind="text"),
        lambda d: d.update(width=8),
        lambda d: d.update(extra=1),
        lambda d: d.pop("new"),
        lambda d: d.update(new=True),
        lambda d: d.update(new=-1),
        lambda d: d.update(new=2**63),
        lambda d: d.update(new=99),
        lambda d: d.update(splits={}),
        lambda d: d["splits"].append(copy.deepcopy(d["splits"][0])),
        lambda d: d["splits"][0].update(split="Not A Split"),
        lambda d: d["splits"][0].update(common=0),
        lambda d: d["splits"][0].update(moved_in=0),
        # moves that add up, but out of a split that removed nothing and into one that added
        # nothing (test: +3 -0, train: +0 -1)
        lambda d: (d["splits"][0].update(moved_out=1), d["splits"][1].update(moved_in=1)),
        # more moves than the records removed times the other splits
        lambda d: (d["splits"][0].update(moved_in=2), d["splits"][1].update(moved_out=2)),
        lambda d: d["splits"][0].update(duplicates_b=4),
        lambda d: d["splits"][0].update(sample_added=["00" * 16, "00" * 16]),
        lambda d: d["splits"][0].update(sample_added=["0" * 31]),
        lambda d: d["splits"][0].update(sample_added=["G" * 32]),
        lambda d: d["splits"][0].update(sample_added=[1]),
        lambda d: d["splits"][1].update(sample_added=["00" * 16]),  # train added nothing
        lambda d: d["splits"][0].pop("sample_removed"),
        lambda d: d.update(splits=[d["splits"][0]] * 257),
    ],
)
def test_what_does_not_add_up_is_refused(edit) -> None:
    document = _changed()
    edit(document)
    with pytest.raises(InvalidRecordDiff) as raised:
        validate_record_diff(document)
    assert raised.value.code == "invalid_record_diff" and raised.value.status == 422

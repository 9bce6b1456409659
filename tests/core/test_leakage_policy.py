"""The leakage policy's pure rules: which pairs a check covers, which overlap, the verdict."""

from __future__ import annotations

import math

import pytest

from recordkeeper.core.errors import InvalidRequest
from recordkeeper.core.leakage_policy import (
    LeakagePolicy,
    leakage_pairs,
    leakage_warning_text,
    overlapping,
    policy_verdict,
)


def test_pairs_are_each_evaluation_split_against_every_other_and_others_training() -> None:
    pairs = leakage_pairs("v", ["train", "test", "valid"], [("o", ["train_extra", "test"])])
    assert pairs == [
        (("v", "test"), ("v", "train")),
        (("v", "test"), ("v", "valid")),
        (("v", "test"), ("o", "train_extra")),
        (("v", "valid"), ("v", "train")),
        (("v", "valid"), ("v", "test")),
        (("v", "valid"), ("o", "train_extra")),
    ]
    assert leakage_pairs("v", ["train", "train_extra"]) == []  # nothing evaluates
    custom = leakage_pairs("v", ["a", "b"], training=lambda s: s == "a")
    assert custom == [(("v", "b"), ("v", "a"))]


def _pair(leaked: int, records: int = 100) -> dict[str, object]:
    return {"split": "test", "other_split": "train", "records": records, "leaked": leaked}


def test_a_pair_overlaps_when_it_leaks_above_the_rate() -> None:
    assert overlapping([_pair(0), _pair(1)], 0.0) == [{**_pair(1), "rate": 0.01}]
    assert overlapping([_pair(1)], 0.01) == []  # at the rate: tolerated
    assert overlapping([_pair(2)], 0.01)[0]["rate"] == 0.02
    assert overlapping([_pair(0, records=0)], 0.0) == []


@pytest.mark.parametrize(
    ("mode", "pairs", "verdict"),
    [
        ("off", None, "pass"),
        ("off", [_pair(50)], "pass"),
        ("warn", [_pair(0)], "pass"),
        ("warn", [_pair(1)], "warn"),
        ("warn", None, "missing_warn"),
        ("refuse", [_pair(1)], "refuse"),
        ("refuse", [], "pass"),
        ("refuse", None, "missing_refuse"),
    ],
)
def test_verdicts(mode: str, pairs: list[dict[str, object]] | None, verdict: str) -> None:
    got, over = policy_verdict(LeakagePolicy(mode), pairs)  # type: ignore[arg-type]
    assert got == verdict
    assert bool(over) == (verdict in ("warn", "refuse"))


@pytest.mark.parametrize("rate", [-0.1, 1.1, math.nan, math.inf, True, "0"])
def test_bad_policies_are_refused(rate: object) -> None:
    with pytest.raises(InvalidRequest):
        LeakagePolicy("refuse", rate)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest):
        LeakagePolicy("block")  # type: ignore[arg-type]


def test_warning_text_names_the_pairs_or_the_missing_check() -> None:
    over = {**_pair(3, 48), "distinct": 2, "rate": 3 / 48}
    text = leakage_warning_text({"name": "c_v1"}, {"max_rate": 0.0, "pairs": [over]})
    assert "c_v1" in text and "test in train: 3/48 records (6.25%), 2 distinct" in text
    text = leakage_warning_text({"name": "c_v1"}, {"missing": True, "pairs": []})
    assert "without a leakage check" in text and "recordkeeper index c_v1" in text

"""Which way is better for a metric, by its name (recordkeeper.core.metric_direction)."""

from __future__ import annotations

import pytest

from recordkeeper.core.metric_direction import metric_direction, parse_direction


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("loss", "min"),
        ("val_loss", "min"),
        ("sparse_categorical_crossentropy", "min"),
        ("RMSE", "min"),
        ("top_5_error", "min"),  # an error, though "top5"-like words read as success
        ("perplexity", "min"),
        ("accuracy", "max"),
        ("val_sparse_categorical_accuracy", "max"),
        ("AUC", "max"),
        ("val_mAP", "max"),
        ("mean_iou", "max"),
        ("f1", "max"),
        ("precision@5", "max"),
    ],
)
def test_the_name_says_the_direction(name: str, direction: str) -> None:
    assert metric_direction(name) == (direction, True)


def test_a_name_that_says_nothing_is_lower_is_better_not_inferred() -> None:
    assert metric_direction("kpi") == ("min", False)
    assert metric_direction("") == ("min", False)


def test_parse_direction() -> None:
    assert parse_direction("max") == parse_direction("HIGHER") == "max"
    assert parse_direction("min") == parse_direction("lower") == "min"
    with pytest.raises(ValueError, match="min"):
        parse_direction("up")
    with pytest.raises(ValueError):
        parse_direction(None)

"""Which way is better for a training metric: lower (a loss) or higher (an accuracy).

``compare`` calls a group's *best* value by this rule, so an accuracy's best is its highest value
and a loss's its lowest.  The rule reads the metric's name as Keras, TensorFlow and most training
scripts write it, split into words at anything that is not a letter or a digit
(``val_sparse_categorical_accuracy`` → ``val``, ``sparse``, ``categorical``, ``accuracy``):

* a word naming an error or a distance (``loss``, ``error``, ``mse``, ``perplexity``, …) makes it
  **lower is better** — also where a better-sounding word comes with it (``top_5_error``);
* else a word naming a rate of success (``accuracy``, ``auc``, ``f1``, ``iou``, ``bleu``, …)
  makes it **higher is better**;
* a name with neither is taken as lower is better (losses are what training scripts log most)
  and said so: :func:`metric_direction` returns it with ``inferred=False``.

Pass ``direction="max"`` or ``"min"`` to ``compare`` when the name does not say.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

__all__ = ["DIRECTIONS", "Direction", "MetricDirection", "metric_direction", "parse_direction"]

Direction = Literal["min", "max"]
#: the two directions, as ``compare`` and the CLI spell them
DIRECTIONS: tuple[str, ...] = ("min", "max")

_LOWER_IS_BETTER = frozenset(
    {
        "loss", "error", "err", "errors", "mse", "mae", "rmse", "msle", "mape", "smape",
        "perplexity", "ppl", "wer", "cer", "ter", "fpr", "fnr", "far", "frr", "eer",
        "distance", "dist", "divergence", "kl", "nll", "hinge", "logcosh", "crossentropy",
        "latency", "regret", "cost",
    }
)  # fmt: skip
_HIGHER_IS_BETTER = frozenset(
    {
        "accuracy", "acc", "auc", "roc", "pr", "precision", "recall", "f1", "fscore",
        "fbeta", "map", "ap", "iou", "miou", "dice", "r2", "bleu", "rouge", "meteor", "chrf",
        "ndcg", "mrr", "hits", "hit", "tpr", "tnr", "specificity", "sensitivity", "kappa",
        "top1", "top5", "psnr", "ssim", "reward", "return", "score", "coverage", "agreement",
    }
)  # fmt: skip
_WORD = re.compile(r"[a-z0-9]+")


class MetricDirection(NamedTuple):
    """Which way is better for a metric, and whether its name said so (``inferred``) or the
    default was taken."""

    direction: Direction
    inferred: bool


def metric_direction(name: str) -> MetricDirection:
    """The direction of the metric called ``name`` by the module's rule."""
    words = set(_WORD.findall(name.lower()))
    if words & _LOWER_IS_BETTER:
        return MetricDirection("min", True)
    if words & _HIGHER_IS_BETTER:
        return MetricDirection("max", True)
    return MetricDirection("min", False)


def parse_direction(value: object) -> Direction:
    """``"min"`` or ``"max"`` (also ``lower``/``higher``); raises ``ValueError`` otherwise."""
    spelled = {"min": "min", "lower": "min", "max": "max", "higher": "max"}
    if isinstance(value, str) and value.lower() in spelled:
        return "min" if spelled[value.lower()] == "min" else "max"
    raise ValueError(f"a metric direction is 'min' (lower is better) or 'max', not {value!r}")

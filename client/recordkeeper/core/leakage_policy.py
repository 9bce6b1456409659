"""Leakage checks and the per-dataset leakage policy: which split pairs a check covers, which
pairs overlap, and what a policy makes of a commit's check result.

*Which pairs.*  A leakage check of a version compares each evaluation split E (a split that
does not train, :func:`recordkeeper.core.record_diff.is_training_split`) with every other split
of the version, and with the training splits of each ``against`` version
(:func:`leakage_pairs`).  ``recordkeeper check-leakage``, the check a client makes before a
commit under a policy, and the service's completeness check of that result all take their pairs
from here.

*Which pairs overlap.*  A pair overlaps when records of E occur in the other split and their
rate (leaked / records of E) is above the tolerated ``max_rate`` (:func:`overlapping`): the
rule of ``check-leakage --max-rate`` (exit 4) and of the policy.

*The policy* of a dataset (``off``, the default; ``warn``; ``refuse``) says what the service
does when a version is committed (:func:`policy_verdict`): nothing; commit and say which pairs
overlap; refuse the commit.  The service never reads the data: the client sends the check's
result with the commit, so a policy guards against mistakes, not against a client that sends a
false result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from recordkeeper.core.errors import InvalidRequest
from recordkeeper.core.record_diff import is_training_split

__all__ = [
    "DEFAULT_MAX_RATE",
    "LEAKAGE_MODES",
    "LeakageMode",
    "LeakagePolicy",
    "leakage_pairs",
    "leakage_warning_text",
    "overlapping",
    "policy_verdict",
]

LeakageMode = Literal["off", "warn", "refuse"]
LEAKAGE_MODES: Final[tuple[LeakageMode, ...]] = ("off", "warn", "refuse")
DEFAULT_MAX_RATE: Final = 0.0

Tag = tuple[str, str]  # (ref, split)


@dataclass(frozen=True)
class LeakagePolicy:
    """A dataset's leakage policy: ``mode`` and the leak rate tolerated per pair."""

    mode: LeakageMode = "off"
    max_rate: float = DEFAULT_MAX_RATE

    def __post_init__(self) -> None:
        if self.mode not in LEAKAGE_MODES:
            raise InvalidRequest(
                f"leakage policy mode must be one of {', '.join(LEAKAGE_MODES)}, got {self.mode!r}"
            )
        rate = self.max_rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
            raise InvalidRequest(f"max_rate must be a number from 0 to 1, got {rate!r}")
        if not 0.0 <= float(rate) <= 1.0:
            raise InvalidRequest(f"max_rate must be from 0 to 1, got {rate}")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "max_rate": float(self.max_rate)}


def leakage_pairs(
    ref: str,
    splits: Iterable[str],
    against: Sequence[tuple[str, Iterable[str]]] = (),
    *,
    training: Callable[[str], bool] = is_training_split,
) -> list[tuple[Tag, Tag]]:
    """The ``((ref, E), (other_ref, S))`` pairs a leakage check of ``ref`` covers: each
    evaluation split E of ``ref`` against each other split of ``ref`` and each training split
    of every ``(other_ref, splits)`` in ``against``."""
    own = list(splits)
    others = [(name, list(names)) for name, names in against]
    pairs: list[tuple[Tag, Tag]] = []
    for e in own:
        if training(e):
            continue
        pairs += [((ref, e), (ref, s)) for s in own if s != e]
        for other, names in others:
            pairs += [((ref, e), (other, s)) for s in names if training(s)]
    return pairs


def _rate(pair: Mapping[str, Any]) -> float:
    records = int(pair.get("records") or 0)
    return int(pair.get("leaked") or 0) / records if records else 0.0


def overlapping(pairs: Iterable[Mapping[str, Any]], max_rate: float) -> list[dict[str, Any]]:
    """The pairs (``records``, ``leaked``, ...) whose evaluation records occur in the other
    split at a rate above ``max_rate``, each with its ``rate``."""
    return [
        {**p, "rate": _rate(p)}
        for p in pairs
        if int(p.get("leaked") or 0) > 0 and _rate(p) > max_rate
    ]


Verdict = Literal["pass", "warn", "refuse", "missing_warn", "missing_refuse"]


def policy_verdict(
    policy: LeakagePolicy, pairs: Sequence[Mapping[str, Any]] | None
) -> tuple[Verdict, list[dict[str, Any]]]:
    """What ``policy`` makes of a commit's check result (``pairs``; None: no result sent):
    ``pass``; ``warn``/``refuse`` with the overlapping pairs; ``missing_warn``/
    ``missing_refuse`` when a policy that is not off got no result."""
    if policy.mode == "off":
        return "pass", []
    if pairs is None:
        return ("missing_refuse" if policy.mode == "refuse" else "missing_warn"), []
    over = overlapping(pairs, policy.max_rate)
    if not over:
        return "pass", []
    return ("refuse" if policy.mode == "refuse" else "warn"), over


def leakage_warning_text(version: Mapping[str, Any], warning: Mapping[str, Any]) -> str:
    """The sentence of a commit's ``leakage_warning`` (``version``: the commit's answer)."""
    name = version.get("name", "the version")
    if warning.get("missing"):
        return (
            f"{name} was committed without a leakage check (its dataset's leakage policy is "
            "warn): write or publish it with record identity on (record_index=True) so its "
            f"splits are checked, or run `recordkeeper check-leakage {name}` after "
            f"`recordkeeper index {name}`"
        )
    pairs = "; ".join(
        f"{p['split']} in {p['other_split']}: {p['leaked']}/{p['records']} records "
        f"({float(p['rate']):.2%}), {p['distinct']} distinct"
        for p in warning.get("pairs", ())
    )
    return (
        f"{name} was committed although its splits overlap above "
        f"{float(warning.get('max_rate', 0.0)):.2%} (its dataset's leakage policy is warn): "
        f"{pairs}"
    )

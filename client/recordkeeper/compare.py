"""Compare a model's checkpoints by the data they trained on: "did v4 of the data help?".

``client.compare("coco_detection", metric="loss")`` reads the metrics recorded with each
checkpoint (``manager.save(metrics=...)``, the Keras callback's epoch logs) and groups them by the
data version each checkpoint's own segment trained on (role ``train`` by default), per run:

>>> table = client.compare("coco_detection", metric="loss")
>>> print(table.to_text())
>>> table.best_group                      # the (data, run) whose best value is the best
>>> table.plot("loss_by_data.png")       # needs matplotlib (extra ``plot``)

A segment is what one checkpoint trained on since its parent, so a run that switched data
halfway shows up as two groups, one per version.

A group's ``best`` is its lowest value for a loss and its highest for an accuracy: the direction
comes from the metric's name (:mod:`recordkeeper.core.metric_direction`) unless ``direction=``
says ``"min"`` or ``"max"``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recordkeeper.checkpoint_lineage import CheckpointInfo, checkpoints
from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.metric_direction import Direction, metric_direction, parse_direction
from recordkeeper.http import HttpCore

__all__ = ["Comparison", "ComparisonGroup", "ComparisonPoint", "compare"]


@dataclass(frozen=True)
class ComparisonPoint:
    """One checkpoint's value of the metric."""

    ref: str
    run: str | None
    step: int | None
    value: float
    data: str  # the versions of the compared role, joined with "+"
    deleted: bool


@dataclass(frozen=True)
class ComparisonGroup:
    """The checkpoints of one run that trained on one data version (of the compared role)."""

    data: str
    run: str | None
    points: tuple[ComparisonPoint, ...]
    #: which way is better for the metric: ``"min"`` (a loss) or ``"max"`` (an accuracy)
    direction: Direction = "min"

    @property
    def count(self) -> int:
        return len(self.points)

    @property
    def first(self) -> float:
        return self.points[0].value

    @property
    def last(self) -> float:
        return self.points[-1].value

    @property
    def best(self) -> float:
        """The best value: the lowest where lower is better (``direction="min"``), else the
        highest."""
        return self.lowest if self.direction == "min" else self.highest

    @property
    def lowest(self) -> float:
        return min(p.value for p in self.points)

    @property
    def highest(self) -> float:
        return max(p.value for p in self.points)

    @property
    def mean(self) -> float:
        return statistics.fmean(p.value for p in self.points)

    @property
    def steps(self) -> tuple[int | None, int | None]:
        return self.points[0].step, self.points[-1].step

    def to_json(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "run": self.run,
            "count": self.count,
            "steps": list(self.steps),
            "first": self.first,
            "last": self.last,
            "best": self.best,
            "min": self.lowest,
            "max": self.highest,
            "mean": self.mean,
            "checkpoints": [p.ref for p in self.points],
        }


@dataclass(frozen=True)
class Comparison:
    """A metric of a model's checkpoints, grouped by (data version, run)."""

    model: str
    metric: str
    role: str
    groups: tuple[ComparisonGroup, ...]
    without_metric: int  # checkpoints that recorded no value of the metric
    #: which way is better: ``"min"`` or ``"max"`` (every group has the same)
    direction: Direction = "min"
    #: False when neither the caller nor the metric's name said, and ``"min"`` was assumed
    direction_known: bool = True

    @property
    def best_group(self) -> ComparisonGroup | None:
        """The group with the best ``best`` value (None without groups)."""
        if not self.groups:
            return None
        if self.direction == "min":
            return min(self.groups, key=lambda g: g.best)
        return max(self.groups, key=lambda g: g.best)

    @property
    def points(self) -> list[ComparisonPoint]:
        return [p for g in self.groups for p in g.points]

    def to_pandas(self) -> Any:
        """One row per checkpoint's value (``pandas.DataFrame``)."""
        from recordkeeper.integrations.pandas import to_pandas

        return to_pandas(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "metric": self.metric,
            "role": self.role,
            "direction": self.direction,
            "direction_known": self.direction_known,
            "groups": [g.to_json() for g in self.groups],
            "without_metric": self.without_metric,
        }

    def rows(self) -> list[list[str]]:
        """The table: data, run, checkpoints, steps, first, last, best, mean."""
        out = []
        for g in self.groups:
            first_step, last_step = g.steps
            out.append(
                [
                    g.data,
                    g.run or "",
                    str(g.count),
                    f"{first_step}-{last_step}",
                    f"{g.first:.4g}",
                    f"{g.last:.4g}",
                    f"{g.best:.4g}",
                    f"{g.mean:.4g}",
                ]
            )
        return out

    HEADER = ("data", "run", "checkpoints", "steps", "first", "last", "best", "mean")

    @property
    def title(self) -> str:
        """``det: accuracy by train data (best = highest)``, and why when it was assumed."""
        which = "lowest" if self.direction == "min" else "highest"
        assumed = "" if self.direction_known else "; assumed: pass direction= to say"
        return f"{self.model}: {self.metric} by {self.role} data (best = {which}{assumed})"

    def to_text(self) -> str:
        """A plain-text table (what ``recordkeeper compare`` prints without a terminal)."""
        rows = [list(self.HEADER), *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.HEADER))]
        lines = [self.title]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        if self.without_metric:
            lines.append(f"({self.without_metric} checkpoint(s) recorded no {self.metric!r})")
        return "\n".join(lines)

    def plot(self, path: str | Path, *, title: str | None = None) -> Path:
        """Draw the metric against the step, one line per (data version, run), coloured by
        data version, into ``path`` (PNG, SVG, PDF: by suffix).  Needs matplotlib."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise InvalidInput(
                "plotting needs matplotlib: pip install 'recordkeeper[plot]'"
            ) from None
        figure, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
        colours = plt.get_cmap("tab10")
        by_data = list(dict.fromkeys(g.data for g in self.groups))
        for group in self.groups:
            colour = colours(by_data.index(group.data) % 10)
            steps = [p.step if p.step is not None else i for i, p in enumerate(group.points)]
            label = f"{group.data}" + (f" ({group.run})" if group.run else "")
            axes.plot(steps, [p.value for p in group.points], "o-", color=colour, label=label)
        from matplotlib.ticker import MaxNLocator

        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_xlabel("step")
        axes.set_ylabel(self.metric)
        axes.set_title(title or f"{self.model}: {self.metric} by {self.role} data version")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        target = Path(path)
        figure.savefig(target)
        plt.close(figure)
        return target


def compare(
    http: HttpCore,
    model: str,
    *,
    metric: str = "loss",
    role: str = "train",
    runs: Sequence[str] | None = None,
    direction: str | None = None,
) -> Comparison:
    """``metric`` of ``model``'s checkpoints (of ``runs``, default all), grouped by the version
    of ``role`` data each checkpoint's own segment trained on, per run, in step order.

    ``direction`` (``"min"``: lower is better, ``"max"``) decides each group's ``best``; by
    default the metric's name decides (:func:`recordkeeper.core.metric_direction.metric_direction`).
    """
    if direction is None:
        way, known = metric_direction(metric)
    else:
        try:
            way, known = parse_direction(direction), True
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    found: list[CheckpointInfo] = checkpoints(http, model)
    if runs is not None:
        wanted = set(runs)
        found = [c for c in found if c.run in wanted]
    return _group(model, metric, role, found, way, known)


def _group(
    model: str,
    metric: str,
    role: str,
    found: Iterable[CheckpointInfo],
    direction: Direction,
    direction_known: bool,
) -> Comparison:
    groups: dict[tuple[str, str | None], list[ComparisonPoint]] = {}
    without = 0
    ordered = sorted(found, key=lambda c: (c.run or "", c.step if c.step is not None else -1))
    for info in ordered:
        value = info.metrics.get(metric)
        if not isinstance(value, int | float) or isinstance(value, bool):
            without += 1
            continue
        versions = [str(d["version"]) for d in info.data if d.get("role") == role]
        data = "+".join(dict.fromkeys(versions)) or f"(no {role} data)"
        point = ComparisonPoint(
            str(info.ref), info.run, info.step, float(value), data, info.deleted
        )
        groups.setdefault((data, info.run), []).append(point)
    ordered_groups = sorted(
        (
            ComparisonGroup(data, run, tuple(points), direction)
            for (data, run), points in groups.items()
        ),
        key=lambda g: (g.data, g.run or ""),
    )
    return Comparison(
        model, metric, role, tuple(ordered_groups), without, direction, direction_known
    )

"""Compare a model's checkpoints by the data they trained on: "did v4 of the data help?".

``client.compare("coco_detection", metric="loss")`` reads the metrics recorded with each
checkpoint (``manager.save(metrics=...)``, the Keras callback's epoch logs) and groups them by the
data version each checkpoint's own segment trained on (role ``train`` by default), per run:

>>> table = client.compare("coco_detection", metric="loss")
>>> print(table.to_text())
>>> table.plot("loss_by_data.png")       # needs matplotlib (extra ``plot``)

A segment is what one checkpoint trained on since its parent, so a run that switched data
halfway shows up as two groups, one per version.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recordkeeper.checkpoint_lineage import CheckpointInfo, checkpoints
from recordkeeper.core.errors import InvalidInput
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
        """The lowest value (for a loss; read ``highest`` for an accuracy)."""
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
            "min": self.best,
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
            "groups": [g.to_json() for g in self.groups],
            "without_metric": self.without_metric,
        }

    def rows(self) -> list[list[str]]:
        """The table: data, run, checkpoints, steps, first, last, min, mean."""
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

    HEADER = ("data", "run", "checkpoints", "steps", "first", "last", "min", "mean")

    def to_text(self) -> str:
        """A plain-text table (what ``recordkeeper compare`` prints without a terminal)."""
        rows = [list(self.HEADER), *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.HEADER))]
        lines = [f"{self.model}: {self.metric} by {self.role} data"]
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
) -> Comparison:
    """``metric`` of ``model``'s checkpoints (of ``runs``, default all), grouped by the version
    of ``role`` data each checkpoint's own segment trained on, per run, in step order."""
    found: list[CheckpointInfo] = checkpoints(http, model)
    if runs is not None:
        wanted = set(runs)
        found = [c for c in found if c.run in wanted]
    return _group(model, metric, role, found)


def _group(model: str, metric: str, role: str, found: Iterable[CheckpointInfo]) -> Comparison:
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
        (ComparisonGroup(data, run, tuple(points)) for (data, run), points in groups.items()),
        key=lambda g: (g.data, g.run or ""),
    )
    return Comparison(model, metric, role, tuple(ordered_groups), without)

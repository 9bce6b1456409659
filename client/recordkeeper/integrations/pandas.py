"""Listings and answers as ``pandas.DataFrame`` (pandas; part of the extra ``hf``).

:func:`to_pandas` takes what the client answers: a list of versions
(``Client.versions``), of shards (``v.shards``), of checkpoints (``Client.checkpoints``), a
:class:`~recordkeeper.checkpoint_lineage.Lineage`,
:class:`~recordkeeper.checkpoint_lineage.Consumers`, a
:class:`~recordkeeper.compare.Comparison` or a version diff; one row per item.  The same is
``.to_pandas()`` on each of those answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import pandas

__all__ = ["rows", "to_pandas"]


def _row(item: Any) -> dict[str, Any]:
    from recordkeeper.values import DatasetVersion

    if isinstance(item, DatasetVersion):
        row = item.to_dict()
        row.pop("splits", None)
        row["splits"] = ",".join(sorted(item.splits))
        row["deprecated_reason"] = item.deprecated_reason
        row["created_at"], row["created_by"] = item.created_at, item.created_by
        return row
    if hasattr(item, "to_dict"):
        return dict(item.to_dict())
    if hasattr(item, "to_json"):
        return dict(item.to_json())
    if hasattr(item, "_asdict"):
        return dict(item._asdict())
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        out = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
        if "run" in out and "checkpoint" in out and "model" in out:
            out["ref"] = f"{out['model']}@{out['run']}/{out['checkpoint']}"
        return out
    return dict(item)


def rows(answer: Any) -> list[dict[str, Any]]:
    """The rows :func:`to_pandas` makes of ``answer``."""
    from recordkeeper.checkpoint_lineage import Consumers, Lineage
    from recordkeeper.compare import Comparison
    from recordkeeper.core.diff import VersionDiff

    if isinstance(answer, Lineage):
        return [
            {
                "checkpoint": str(answer.checkpoint.ref),
                **{k: v for k, v in e._asdict().items() if k != "segments"},
            }
            for e in answer.data
        ]
    if isinstance(answer, Consumers):
        return [_row(c) for c in answer.checkpoints]
    if isinstance(answer, Comparison):
        return [_row(p) for p in answer.points]
    if isinstance(answer, VersionDiff):
        return [
            {
                "split": c.split,
                "index": c.index,
                "change": c.change,
                "old_uri": c.old.uri if c.old is not None else None,
                "new_uri": c.new.uri if c.new is not None else None,
            }
            for c in answer.shards
        ]
    if isinstance(answer, Iterable):
        return [_row(item) for item in answer]
    raise TypeError(f"cannot make a DataFrame of {type(answer).__name__}")


def to_pandas(answer: Any) -> pandas.DataFrame:
    """``answer`` (see the module docstring) as a DataFrame, one row per item."""
    return pandas.DataFrame(rows(answer))

"""Versions built as changes of another: the rules of a derived version's change set, once.

A derived version starts from its *base* (a committed version): its splits and shards, which
are referenced, never copied.  The change set says what differs:

* ``remove_splits`` — base splits left out whole;
* ``rename_splits`` — ``{old: new}`` base splits kept under another name;
* ``remove_shards`` — base shards left out, each ``"SPLIT:INDEX"`` (the base's position) or
  the shard's URI;
* the shards registered on the staged derived version are *added*: appended after the base's
  kept shards of their split (a split the base does not have, or removed, is new: that is how
  a split is *replaced*).

Kept shards keep their order; a split with shards removed is renumbered ``0..n-1`` in that
order, and the added shards follow.  Refused, with nothing stored: a split the base does not
have (``split_not_found``), a shard position it does not have (``shard_not_found``), a rename
onto a split that is kept (``split_exists``), an invalid split name (``invalid_request``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.errors import (
    InvalidRequest,
    ShardNotFound,
    SplitExists,
    SplitNotFound,
    VersionIncomplete,
)
from recordkeeper.core.splits import is_split_name

__all__ = [
    "MAX_CHANGE_ITEMS",
    "Changes",
    "SplitPlan",
    "parse_shard_position",
    "plan_changes",
    "refuse_staged_derived",
    "summary",
]

#: Most entries one change list may carry (removing more shards is removing a split).
MAX_CHANGE_ITEMS = 10_000


def refuse_staged_derived(name: str, state: str, has_base: bool) -> None:
    """Refuse to compare a derived version still staged (``version_incomplete``): it holds only
    the shards added to it until its commit joins the base's kept ones, so a diff would show
    every kept shard removed."""
    if state == "staged" and has_base:
        raise VersionIncomplete(
            f"{name} is a derived version still staged: it holds only the shards added to it "
            "until its commit joins its base's; commit it, then compare"
        )


def _is_uri(text: str) -> bool:
    return "/" in text


def parse_shard_position(text: str) -> tuple[str, int] | None:
    """``("train", 5)`` of ``"train:5"``; None for a URI; :class:`InvalidRequest` otherwise."""
    if _is_uri(text):
        return None
    split, sep, index = text.rpartition(":")
    if not sep or not is_split_name(split) or not index.isascii() or not index.isdigit():
        raise InvalidRequest(
            f"remove_shards: {text[:100]!r} is neither SPLIT:INDEX (a position in the base) "
            "nor a shard URI"
        )
    if len(index) > 10 or int(index) > 2**31 - 1:
        raise InvalidRequest(f"remove_shards: shard index {index[:20]} is out of range")
    return split, int(index)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{what} must be a list of strings")
    if len(value) > MAX_CHANGE_ITEMS:
        raise InvalidRequest(f"{what}: at most {MAX_CHANGE_ITEMS} entries")
    return tuple(dict.fromkeys(value))


@dataclass(frozen=True)
class Changes:
    """What a derived version changes of its base (besides the shards it adds)."""

    remove_splits: tuple[str, ...] = ()
    rename_splits: Mapping[str, str] = field(default_factory=dict)
    remove_shards: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> Changes:
        """Parse a change set as sent (``invalid_request`` on anything malformed)."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise InvalidRequest("changes must be an object")
        unknown = set(value) - {"remove_splits", "rename_splits", "remove_shards"}
        if unknown:
            raise InvalidRequest(f"changes: unknown field(s) {', '.join(sorted(unknown))}")
        renames = value.get("rename_splits") or {}
        if not isinstance(renames, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in renames.items()
        ):
            raise InvalidRequest("changes.rename_splits must map split names to split names")
        remove_splits = _strings(value.get("remove_splits"), "changes.remove_splits")
        remove_shards = _strings(value.get("remove_shards"), "changes.remove_shards")
        for name in [*remove_splits, *renames, *renames.values()]:
            if not is_split_name(name):
                raise InvalidRequest(f"changes: {name[:80]!r} is not a split name")
        for text in remove_shards:
            parse_shard_position(text)
        return cls(remove_splits, dict(renames), remove_shards)

    def to_json(self) -> dict[str, Any]:
        return {
            "remove_splits": list(self.remove_splits),
            "rename_splits": dict(self.rename_splits),
            "remove_shards": list(self.remove_shards),
        }

    @property
    def empty(self) -> bool:
        return not (self.remove_splits or self.rename_splits or self.remove_shards)

    def digest(self) -> str:
        """``sha256:<hex>`` of the change set as a set (order and repeats do not count): what
        a retried commit of a committed derived version must send again to be answered it."""
        body = {
            "remove_splits": sorted(self.remove_splits),
            "rename_splits": dict(sorted(self.rename_splits.items())),
            "remove_shards": sorted(self.remove_shards),
        }
        return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True)
class SplitPlan:
    """One split of the derived version: where its shards come from."""

    split: str
    #: The base split its kept shards come from (None: only added shards).
    base_split: str | None
    #: Base positions left out (sorted); the kept ones are renumbered in order.
    removed: tuple[int, ...]
    kept: int
    added: int

    @property
    def count(self) -> int:
        return self.kept + self.added

    @property
    def base_prefix(self) -> int:
        """How many leading positions of the split hold the very shards of the base's split of
        the same name, at the same index: the kept shards before the first one removed (all
        kept ones when none was); 0 for a split renamed or new.  A diff of the two versions
        may count these unchanged without reading them (:mod:`recordkeeper.core.diff`)."""
        if self.base_split != self.split:
            return 0
        return self.removed[0] if self.removed else self.kept


def plan_changes(
    base_splits: Mapping[str, int],
    added: Mapping[str, int],
    changes: Changes,
    removed_positions: Iterable[tuple[str, int]] = (),
) -> list[SplitPlan]:
    """The derived version's splits from the base's ``{split: shard count}``, the added
    shards' ``{split: count}`` and the change set.

    ``removed_positions`` are the ``(split, index)`` of shards removed by URI (the caller
    looked them up in the base); positions given as ``SPLIT:INDEX`` are read from ``changes``.
    """
    for split in changes.remove_splits:
        if split not in base_splits:
            raise SplitNotFound(
                f"remove_splits: the base has no split {split!r} "
                f"(it has {', '.join(sorted(base_splits)) or 'none'})",
                split=split,
            )
    removed_splits = set(changes.remove_splits)
    for old in changes.rename_splits:
        if old not in base_splits or old in removed_splits:
            raise SplitNotFound(
                f"rename_splits: the base has no split {old!r} to rename"
                + (" (it is removed)" if old in removed_splits else ""),
                split=old,
            )
    removed: dict[str, set[int]] = {}
    positions: list[tuple[str, int]] = list(removed_positions)
    for text in changes.remove_shards:
        position = parse_shard_position(text)
        if position is not None:
            positions.append(position)
    for split, index in positions:
        if split not in base_splits or index >= base_splits[split]:
            raise ShardNotFound(
                f"remove_shards: the base has no shard {split}:{index}",
                shard=f"{split}:{index}",
            )
        if split in removed_splits:
            raise InvalidRequest(
                f"remove_shards: {split}:{index} is in the removed split {split!r}"
            )
        removed.setdefault(split, set()).add(index)
    plans: dict[str, SplitPlan] = {}
    for split, count in sorted(base_splits.items()):
        if split in removed_splits:
            continue
        name = changes.rename_splits.get(split, split)
        if name in plans:
            raise SplitExists(
                f"rename_splits: {split!r} -> {name!r} collides with the kept split {name!r}",
                split=name,
            )
        gone = tuple(sorted(removed.get(split, ())))
        plans[name] = SplitPlan(name, split, gone, count - len(gone), added.get(name, 0))
    for split, count in sorted(added.items()):
        if split not in plans:
            plans[split] = SplitPlan(split, None, (), 0, count)
    return [p for _, p in sorted(plans.items()) if p.count > 0]


def summary(plans: Sequence[SplitPlan], base_splits: Mapping[str, int]) -> dict[str, int]:
    """``{"kept", "added", "removed"}`` shard counts of a plan (what the audit event says)."""
    kept = sum(p.kept for p in plans)
    return {
        "kept": kept,
        "added": sum(p.added for p in plans),
        "removed": sum(base_splits.values()) - kept,
    }

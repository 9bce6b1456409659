"""Retention of committed versions: the policy, and which versions keep their data and why.

A *policy* (per dataset, or one service-wide default a dataset without its own falls back to)
says what to keep; every committed or deprecated version whose data is still stored that no
rule keeps *expires*: a retention run may delete its objects (never an object another live
version references: that is the deletion rule, on the service).  The rules:

=============  ============================================================================
rule           keeps
=============  ============================================================================
``alias``      a version an alias points at, ``latest`` included (``keep_aliased``)
``trained``    a version a checkpoint that is not deleted trained on, directly or through
               its parent chain (``keep_trained``)
``pinned``     a version a registered pin names (``recordkeeper retention pin LOCKFILE``
               registers the versions a lock file names; ``keep_pinned``)
``last``       the ``keep_last`` highest-numbered versions
``newer_than`` versions committed less than ``keep_days`` days ago
``no_policy``  everything, when neither the dataset nor the service has a policy
=============  ============================================================================

A version a checkpoint trained on that the policy does not keep (``keep_trained=False``)
expires *with force only*: :attr:`Decision.needs_force`; deleting it takes an explicit force
with a reason, recorded in the audit log.

Everything here is pure: the service gathers the facts (:class:`VersionFacts`) and calls
:func:`decide`; the client and the CLI read the same names.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recordkeeper.core.errors import InvalidRequest
from recordkeeper.core.limits import MAX_REASON_LENGTH, is_valid_text

__all__ = [
    "DATA_STATES",
    "DEFAULT_SCOPE",
    "KEEP_RULES",
    "MAX_KEEP_DAYS",
    "MAX_KEEP_LAST",
    "MAX_PIN_LABEL_LENGTH",
    "Decision",
    "Keep",
    "RetentionPolicy",
    "VersionFacts",
    "data_status",
    "decide",
    "validate_force_reason",
    "validate_pin_label",
]

#: Whether a version's objects are stored: ``deleting`` once retention (or gc, for staged
#: storage) released them for deletion, ``deleted`` after.  A version in either keeps its row,
#: digests, schema, provenance and lineage; its records cannot be read.  Every answer naming a
#: version with its data state calls the fields ``data_state``, ``data_deleted_at`` (when it was
#: deleted, ISO 8601; null while deleting) and ``data_deleted_reason`` (``retention`` or ``gc``).
DATA_STATES: tuple[str, ...] = ("stored", "deleting", "deleted")


def data_status(data_state: str, deleted_at: str | None, reason: str | None) -> str:
    """How the CLI and the UI show a version's data state: ``stored``, ``data deleted
    2026-12-01 (retention)`` or ``data being deleted (retention)``."""
    why = reason or "retention"
    if data_state == "deleted":
        return f"data deleted {(deleted_at or '')[:10]} ({why})"
    if data_state == "deleting":
        return f"data being deleted ({why})"
    return "stored"


#: The rules that keep a version, in the order a plan names them.
KEEP_RULES: tuple[str, ...] = ("alias", "trained", "pinned", "last", "newer_than", "no_policy")
#: The scope of the service-wide policy (``*`` is no dataset name).
DEFAULT_SCOPE = "*"
MAX_KEEP_LAST = 1_000_000
MAX_KEEP_DAYS = 100 * 366
MAX_PIN_LABEL_LENGTH = 200


def _optional_count(data: Mapping[str, Any], key: str, maximum: int) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidRequest(f"{key} must be a whole number from 1 to {maximum}, or null (off)")
    return value


def _flag(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, True)
    if not isinstance(value, bool):
        raise InvalidRequest(f"{key} must be true or false")
    return value


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What to keep; ``None`` turns ``keep_last``/``keep_days`` off.  The three flags default on."""

    keep_last: int | None = None
    keep_days: int | None = None
    keep_aliased: bool = True
    keep_trained: bool = True
    keep_pinned: bool = True

    _FIELDS = ("keep_last", "keep_days", "keep_aliased", "keep_trained", "keep_pinned")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetentionPolicy:
        """Validate a policy body (unknown keys refused: a typo must not keep nothing)."""
        if not isinstance(data, Mapping):
            raise InvalidRequest("a retention policy is a JSON object")
        unknown = sorted(set(data) - set(cls._FIELDS))
        if unknown:
            raise InvalidRequest(
                f"unknown retention policy field(s) {', '.join(map(repr, unknown))}; "
                f"fields: {', '.join(cls._FIELDS)}"
            )
        return cls(
            keep_last=_optional_count(data, "keep_last", MAX_KEEP_LAST),
            keep_days=_optional_count(data, "keep_days", MAX_KEEP_DAYS),
            keep_aliased=_flag(data, "keep_aliased"),
            keep_trained=_flag(data, "keep_trained"),
            keep_pinned=_flag(data, "keep_pinned"),
        )

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._FIELDS}

    def describe(self) -> str:
        """``keep aliased, trained, pinned, last 5, newer than 30 days; expire the rest``."""
        parts = [
            name
            for name, on in (
                ("aliased", self.keep_aliased),
                ("trained", self.keep_trained),
                ("pinned", self.keep_pinned),
            )
            if on
        ]
        if self.keep_last is not None:
            parts.append(f"last {self.keep_last}")
        if self.keep_days is not None:
            parts.append(f"newer than {self.keep_days} days")
        return f"keep {', '.join(parts) or 'nothing'}; expire the rest"


@dataclass(frozen=True, slots=True)
class VersionFacts:
    """What the rules look at for one version whose data is stored.

    ``aliases``: the aliases pointing at it (``latest`` included when it is the latest);
    ``trained``: names of checkpoints not deleted that trained on it (directly or through a
    parent chain); ``pins``: labels of registered pins naming it.
    """

    name: str
    number: int
    committed_at: datetime.datetime
    aliases: tuple[str, ...] = ()
    trained: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Keep:
    """One reason a version is kept: ``rule`` (one of :data:`KEEP_RULES`) and its detail."""

    rule: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Decision:
    """The plan for one version: kept (``kept_by`` non-empty) or expired.

    ``needs_force``: it expires, but checkpoints that are not deleted trained on it
    (``trained`` names them); deleting it takes force with a reason.
    """

    name: str
    kept_by: tuple[Keep, ...] = ()
    trained: tuple[str, ...] = field(default=())

    @property
    def expires(self) -> bool:
        return not self.kept_by

    @property
    def needs_force(self) -> bool:
        return self.expires and bool(self.trained)


def _listed(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def decide(
    policy: RetentionPolicy | None, versions: Sequence[VersionFacts], now: datetime.datetime
) -> list[Decision]:
    """One :class:`Decision` per version, in the order given.

    ``versions`` are every version of one dataset whose data is stored (``keep_last`` counts
    among them, by number); ``now`` is timezone-aware.  ``policy`` None keeps everything.
    """
    if policy is None:
        keep = (Keep("no_policy", "no retention policy for this dataset or the service"),)
        return [Decision(v.name, keep, v.trained) for v in versions]
    last: set[str] = set()
    if policy.keep_last is not None:
        newest = sorted(versions, key=lambda v: v.number, reverse=True)[: policy.keep_last]
        last = {v.name for v in newest}
    cutoff = None
    if policy.keep_days is not None:
        cutoff = now - datetime.timedelta(days=policy.keep_days)
    decisions = []
    for v in versions:
        kept: list[Keep] = []
        if policy.keep_aliased and v.aliases:
            kept.append(Keep("alias", _listed(sorted(v.aliases))))
        if policy.keep_trained and v.trained:
            kept.append(Keep("trained", f"{len(v.trained)} checkpoint(s): {_listed(v.trained)}"))
        if policy.keep_pinned and v.pins:
            kept.append(Keep("pinned", _listed(sorted(v.pins))))
        if v.name in last:
            kept.append(Keep("last", f"among the last {policy.keep_last}"))
        if cutoff is not None and _aware(v.committed_at) > cutoff:
            kept.append(Keep("newer_than", f"committed less than {policy.keep_days} days ago"))
        decisions.append(Decision(v.name, tuple(kept), v.trained))
    return decisions


def _aware(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def _text(value: object, what: str, maximum: int) -> str:
    if not isinstance(value, str) or not value.strip() or not is_valid_text(value):
        raise InvalidRequest(f"{what} must be a non-empty string of Unicode text without NUL")
    if len(value) > maximum:
        raise InvalidRequest(f"{what} is limited to {maximum} characters")
    return value


def validate_force_reason(reason: object) -> str:
    """Why data checkpoints trained on is deleted anyway (required with force)."""
    return _text(reason, "a force reason", MAX_REASON_LENGTH)


def validate_pin_label(label: object) -> str:
    """What a pin is called (a lock file's path, a release name)."""
    return _text(label, "a pin label", MAX_PIN_LABEL_LENGTH)

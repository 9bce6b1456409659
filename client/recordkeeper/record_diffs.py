"""Stored record diffs: the summary of a record diff kept by the registry for the UI.

The record diff itself is computed here, in the client, from the versions' per-shard record
indexes (:func:`recordkeeper.record_sets.record_diff`); the service never reads storage.  After
computing one, :meth:`recordkeeper.registry.Registry.diff` sends its summary
(:func:`recordkeeper.core.record_diff_summary.diff_summary`) with :func:`save_record_diff`
(``PUT /versions/{a}/record-diffs/{b}``) so the UI's compare page can show it.  Saving is best
effort: with a read-only token the service answers ``403 forbidden`` and nothing is stored,
silently (the diff is still returned and printed); any other refusal warns.
"""

from __future__ import annotations

import warnings
from typing import Any

from recordkeeper.core.errors import NotStoredWarning, PermissionDenied, RecordkeeperError
from recordkeeper.core.record_diff import RecordDiff
from recordkeeper.core.record_diff_summary import diff_summary, validate_record_diff
from recordkeeper.http import HttpCore, quote_segment

__all__ = ["record_diffs", "save_record_diff"]


def _path(a: str, b: str) -> str:
    return f"/versions/{quote_segment(a)}/record-diffs/{quote_segment(b)}"


def save_record_diff(
    http: HttpCore, a: str, b: str, diff: RecordDiff, kind: str, width: int
) -> dict[str, Any] | None:
    """Store the summary of the record diff ``a`` → ``b`` (computed with ``kind``/``width``
    identities); the stored diff, or None when it was not stored (a read-only token: quietly;
    any other refusal: with a warning)."""
    try:
        # the service's own rule first: a summary it would refuse (more splits than it keeps)
        # is not sent, and the warning says why in its words, not a request validator's
        summary = validate_record_diff(diff_summary(diff, kind, width))
        answer: dict[str, Any] = http.api("PUT", _path(a, b), json=summary)
    except PermissionDenied:
        return None
    except RecordkeeperError as exc:
        warnings.warn(
            f"the record diff {a} → {b} was computed but not stored in the registry: {exc}",
            NotStoredWarning,
            stacklevel=3,
        )
        return None
    return answer


def record_diffs(http: HttpCore, a: str, b: str) -> list[dict[str, Any]]:
    """The record diffs stored for ``a`` → ``b``, one per identity kind and width (empty: none
    was computed with a token allowed to write)."""
    answer = http.api("GET", _path(a, b))
    data: list[dict[str, Any]] = answer["data"]
    return data

"""Leakage policies of datasets and leakage check results of versions, client side.

A dataset's leakage policy (``off``, the default; ``warn``; ``refuse``; and ``max_rate``, the
leak rate tolerated per split pair: :mod:`recordkeeper.core.leakage_policy`) is kept by the
service (``PUT/GET /datasets/{name}/leakage-policy``).  When it is not ``off``, whoever commits
a version — the writer, publish, the distributed commit — first checks the staged version's
splits for overlap (:func:`commit_check`: each evaluation split against each other split, the
rule ``check-leakage`` uses) from the record identities it already has, never a second read of
the data, and sends the result with the commit; the service refuses the commit (``409
split_overlap``), or commits it with a warning (:class:`~recordkeeper.errors.LeakageWarning`).
A version without record identity sends no result: refused under ``refuse``
(``leakage_check_missing``), committed with a warning under ``warn``.

The service cannot read the data, so a policy guards against mistakes, not against a client
that sends a false result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from recordkeeper.core.errors import NotFound, PermissionDenied, RecordkeeperError
from recordkeeper.core.leakage_policy import LEAKAGE_MODES, LeakagePolicy
from recordkeeper.core.naming import validate_dataset_name
from recordkeeper.core.record_diff import LeakPair
from recordkeeper.core.record_identity import DEFAULT_WIDTH
from recordkeeper.core.record_index import HEADER_SIZE, TRAILER_SIZE
from recordkeeper.http import HttpCore, quote_segment, reading_answer
from recordkeeper.record_sets import chunk_records, staged_leakage

__all__ = [
    "commit_check",
    "leakage_policy",
    "memory_sources",
    "save_leakage",
    "set_leakage_policy",
    "version_leakage",
]

Sources = Sequence[tuple[str, Iterator[bytes]]]


def leakage_policy(http: HttpCore, dataset: str) -> dict[str, Any]:
    """``dataset``'s leakage policy: ``mode`` (``off``, ``warn``, ``refuse``), ``max_rate``,
    ``source`` (``dataset``, or ``default`` when none was set: ``off``), ``updated_at``/``by``."""
    validate_dataset_name(dataset)
    answer: dict[str, Any] = http.api("GET", f"/datasets/{quote_segment(dataset)}/leakage-policy")
    return answer


def set_leakage_policy(
    http: HttpCore, dataset: str, mode: str, *, max_rate: float = 0.0
) -> dict[str, Any]:
    """Set ``dataset``'s leakage policy (a ``write`` token; the dataset need not exist yet):
    ``mode`` ``off`` | ``warn`` | ``refuse``, ``max_rate`` the leak rate tolerated per split
    pair (0: none).  Enforced when its versions are committed."""
    validate_dataset_name(dataset)
    policy = LeakagePolicy(mode, max_rate)  # type: ignore[arg-type]
    answer: dict[str, Any] = http.api(
        "PUT",
        f"/datasets/{quote_segment(dataset)}/leakage-policy",
        json=policy.to_dict(),
        idempotent=True,
    )
    return answer


def version_leakage(http: HttpCore, ref: str) -> list[dict[str, Any]]:
    """The leakage check results stored for a version, one per split pair (``split``,
    ``other_ref``, ``other_split``, ``records``, ``leaked``, ``distinct``, ``rate``,
    ``source``, ``computed_at``, ``computed_by``); empty when none was stored."""
    answer = http.api("GET", f"/versions/{quote_segment(ref)}/leakage")
    with reading_answer("a version's leakage results"):
        data = answer["data"]
        if not isinstance(data, list):
            raise TypeError("data is not a list")
        return data


def _result(pairs: Sequence[LeakPair], kind: str, width: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "width": width,
        "pairs": [
            {
                "split": p.split,
                "other_ref": p.other_ref,
                "other_split": p.other_split,
                "records": p.records,
                "leaked": p.leaked,
                "distinct": p.distinct,
            }
            for p in pairs
        ],
    }


def save_leakage(
    http: HttpCore,
    ref: str,
    pairs: Sequence[LeakPair],
    *,
    kind: str = "bytes",
    width: int = DEFAULT_WIDTH,
) -> bool:
    """Store a check of a committed version (``PUT /versions/{ref}/leakage``), best effort:
    False when the service did not take it (a read-only token, an older service)."""
    if not pairs:
        return False
    try:
        http.api(
            "PUT",
            f"/versions/{quote_segment(ref)}/leakage",
            json=_result(pairs, kind, width),
            idempotent=True,
        )
    except (PermissionDenied, NotFound):
        return False
    return True


def memory_sources(
    indexes: Mapping[str, Sequence[bytes]], width: int = DEFAULT_WIDTH
) -> list[tuple[str, Iterator[bytes]]]:
    """``(split, chunks)`` sources of the record indexes held in memory (``{split: [index
    bytes of each shard]}``, as :meth:`recordkeeper.record_ids.RecordIds.finish` gives them),
    each body cut into the merge's chunks as it asks (no copy of a whole index)."""
    count = sum(len(found) for found in indexes.values())
    per = chunk_records(count, width) * width
    return [(split, _chunked(data, per)) for split, found in indexes.items() for data in found]


def _chunked(data: bytes, per: int) -> Iterator[bytes]:
    body = memoryview(data)[HEADER_SIZE : len(data) - TRAILER_SIZE]
    for start in range(0, len(body), per):
        yield bytes(body[start : start + per])


def _mode(http: HttpCore, dataset: str) -> str:
    """The dataset's policy mode; ``off`` for a service that keeps none (an older one)."""
    try:
        answer = leakage_policy(http, dataset)
    except NotFound:
        return "off"
    with reading_answer("a leakage policy"):
        mode = answer["mode"]
        if mode not in LEAKAGE_MODES:
            raise ValueError(f"unknown leakage policy mode {mode!r}")
        return str(mode)


def commit_check(
    http: HttpCore,
    dataset: str,
    staged: str,
    sources: Callable[[], Sources] | None,
    *,
    width: int = DEFAULT_WIDTH,
) -> dict[str, Any] | None:
    """The leakage result to send with the commit of ``staged`` (None: the dataset's policy
    is ``off``, or there is nothing to check from: ``sources`` None, a version without
    record identity).  ``sources`` gives the staged splits' sorted identities: in memory
    (:func:`memory_sources`) or the stored indexes
    (:func:`recordkeeper.record_sets.index_streams`); called only when the policy asks."""
    if sources is None or _mode(http, dataset) == "off":
        return None
    try:
        pairs = staged_leakage(staged, sources(), width, sample=0)
    except RecordkeeperError:
        return None  # an index missing or not this version's: the service decides
    return _result(pairs, "bytes", width)

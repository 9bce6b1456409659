"""Verification failures reported by clients: an audit event per report, and the metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from recordkeeper.core.refs import parse_reference
from recordkeeper.core.verification import MAX_REPORTED_SHARDS
from recordkeeper_service.db import Database
from recordkeeper_service.domain import VerificationRecord
from recordkeeper_service.metrics import ServiceMetrics
from recordkeeper_service.repository.common import record_event
from recordkeeper_service.repository.resolve import find_version

__all__ = ["VerificationRepository"]


class VerificationRepository:
    """Records failed verifications; one transaction per report."""

    def __init__(self, db: Database, *, metrics: ServiceMetrics | None = None) -> None:
        self._db = db
        self._metrics = metrics

    def report(
        self,
        ref_text: str,
        *,
        mode: str,
        checked: int,
        problems: Sequence[tuple[str, str]],
        actor: str,
    ) -> VerificationRecord:
        """Record that a verification of ``ref_text`` in ``mode`` found ``problems``
        (``(shard name, reason)`` pairs; reasons and mode checked by the route's model).

        The audit event ``version.verification_failed`` keeps the counts by reason and the first
        :data:`MAX_REPORTED_SHARDS` shard names; the metrics count every problem.
        """
        ref = parse_reference(ref_text)
        reasons = Counter(reason for _, reason in problems)
        with self._db.transaction() as session:
            version = find_version(session, ref)
            if problems:
                record_event(
                    session,
                    actor,
                    "version.verification_failed",
                    dataset=ref.dataset,
                    version=version.name,
                    mode=mode,
                    checked=checked,
                    problems=len(problems),
                    reasons=dict(sorted(reasons.items())),
                    shards=[name for name, _ in problems[:MAX_REPORTED_SHARDS]],
                )
            record = VerificationRecord(
                version=version.name, mode=mode, checked=checked, problems=len(problems)
            )
        if self._metrics is not None:  # counted once the event is stored
            for reason, count in reasons.items():
                self._metrics.verification_failed(reason, mode, count)
        return record

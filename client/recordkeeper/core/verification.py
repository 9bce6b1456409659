"""What a verification reports: the reasons a shard fails it, and the two modes.

The client's verification (``recordkeeper.verify``) reports a problem per shard with one of
:data:`REASONS`; a failed verification is reported to the service
(``POST /api/v1/versions/{ref}/verifications``), which accepts these reasons and modes only
and counts them in its metrics (``recordkeeper_verification_failures_total``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["MAX_REPORTED_SHARDS", "MODES", "REASONS", "Mode", "Reason"]

#: Why a shard failed verification.
Reason = Literal[
    "missing",
    "size_changed",
    "identity_changed",
    "checksum_mismatch",
    "corrupt",
    "records_changed",
]
REASONS: Final[tuple[str, ...]] = get_args(Reason)

#: ``fast`` compares storage identities, ``deep`` re-reads the bytes.
Mode = Literal["fast", "deep"]
MODES: Final[tuple[str, ...]] = get_args(Mode)

#: The service keeps the names of at most this many failed shards per report (its audit event);
#: every problem is counted.
MAX_REPORTED_SHARDS: Final = 50

"""Hashes and digests: one parser, one formatter.

=====================  ==================================  =======================================
value                  written                             parsed by
=====================  ==================================  =======================================
a shard's sha256       64 lowercase hex digits             :func:`validate_sha256`
a shard's crc32c       8 lowercase hex digits (big-endian)  :func:`validate_crc32c`
a digest               ``sha256:`` + 64 lowercase hex      :func:`parse_digest` (the ``sha256:``
(content, schema,                                          prefix may be left out; the answer
shard sha256 lookups)                                      always carries it)
a digest prefix        12 to 64 lowercase hex digits       :mod:`recordkeeper.core.refs`
=====================  ==================================  =======================================

Hex is lowercase everywhere, as the reference grammar writes it (``coco@sha256:9f2c…``) and as
docs/rest-api.md documents ``invalid_hash``: an uppercase digit is refused, never folded, so one
digest has exactly one spelling.  :func:`format_digest` is the only place that writes the
``sha256:`` prefix.
"""

from __future__ import annotations

import re

from recordkeeper.core.errors import InvalidHash

__all__ = [
    "DIGEST_PREFIX",
    "MIN_DIGEST_PREFIX",
    "digest_hex",
    "format_digest",
    "is_hex",
    "is_sha256_hex",
    "parse_digest",
    "validate_crc32c",
    "validate_sha256",
]

DIGEST_PREFIX = "sha256:"
#: The fewest hex digits a digest prefix in a reference may have (``coco@sha256:9f2c4e1a7b3d``).
MIN_DIGEST_PREFIX = 12
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CRC32C_RE = re.compile(r"[0-9a-f]{8}")
_HEX_RE = re.compile(r"[0-9a-f]+")


def _shown(value: object) -> str:
    return repr(value if isinstance(value, str) and len(value) < 80 else type(value).__name__)


def is_sha256_hex(value: object) -> bool:
    """True if ``value`` is 64 lowercase hex digits."""
    return isinstance(value, str) and _SHA256_RE.fullmatch(value) is not None


def validate_sha256(value: object, field: str = "sha256") -> str:
    """Return ``value`` if it is 64 lowercase hex digits, else raise :class:`InvalidHash`."""
    if not isinstance(value, str) or not _SHA256_RE.fullmatch(value):
        raise InvalidHash(f"{field} must be 64 lowercase hex digits, got {_shown(value)}")
    return value


def validate_crc32c(value: object, field: str = "crc32c") -> str:
    """Return ``value`` if it is 8 lowercase hex digits (big-endian CRC32C), else raise."""
    if not isinstance(value, str) or not _CRC32C_RE.fullmatch(value):
        raise InvalidHash(f"{field} must be 8 lowercase hex digits, got {_shown(value)}")
    return value


def format_digest(hex_digest: str) -> str:
    """``sha256:<hex>``: the one spelling of a digest (``hex_digest`` is checked)."""
    return DIGEST_PREFIX + validate_sha256(hex_digest, "digest")


def parse_digest(value: object, field: str = "digest") -> str:
    """Parse ``sha256:<64 hex>`` or bare ``<64 hex>`` (lowercase) into ``sha256:<64 hex>``.

    Raises :class:`InvalidHash` naming ``field`` for anything else (uppercase, wrong length,
    another algorithm, not a string).
    """
    text = value.removeprefix(DIGEST_PREFIX) if isinstance(value, str) else value
    if not is_sha256_hex(text):
        raise InvalidHash(
            f"{field} must be '{DIGEST_PREFIX}' followed by 64 lowercase hex digits "
            f"(the prefix may be left out), got {_shown(value)}"
        )
    assert isinstance(text, str)
    return DIGEST_PREFIX + text


def digest_hex(value: object, field: str = "digest") -> str:
    """The 64 hex digits of a digest given in either form accepted by :func:`parse_digest`."""
    return parse_digest(value, field).removeprefix(DIGEST_PREFIX)


def is_hex(value: object) -> bool:
    """True if ``value`` is a non-empty run of lowercase hex digits (a digest prefix's body)."""
    return isinstance(value, str) and _HEX_RE.fullmatch(value) is not None

"""Hashes and digests: the one parser and formatter every side uses.

``DIGESTS`` is the table of accepted and refused spellings; tests/service/test_core_rules.py and
tests/client/test_core_rules.py check that the service's endpoints and the client's entry points
answer exactly as this table says.
"""

from __future__ import annotations

import hashlib

import pytest

from recordkeeper.core.digests import (
    DIGEST_PREFIX,
    digest_hex,
    format_digest,
    is_hex,
    parse_digest,
    validate_crc32c,
    validate_sha256,
)
from recordkeeper.core.errors import InvalidHash

HEX = hashlib.sha256(b"x").hexdigest()

#: (text, canonical digest or None when refused)
DIGESTS: list[tuple[object, str | None]] = [
    ("sha256:" + HEX, "sha256:" + HEX),
    (HEX, "sha256:" + HEX),  # the prefix may be left out
    ("sha256:" + HEX.upper(), None),  # hex is lowercase: one digest, one spelling
    (HEX.upper(), None),
    ("SHA256:" + HEX, None),
    ("sha256:" + HEX[:-1], None),
    ("sha256:" + HEX + "0", None),
    ("sha256:abc", None),
    ("md5:" + HEX[:32], None),
    ("sha512:" + HEX, None),
    ("sha256:sha256:" + HEX, None),
    (" sha256:" + HEX, None),
    ("sha256:" + "g" * 64, None),
    ("", None),
    (None, None),
    (5, None),
]


@pytest.mark.parametrize(("text", "canonical"), DIGESTS)
def test_parse_digest(text: object, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(InvalidHash):
            parse_digest(text)
    else:
        assert parse_digest(text) == canonical
        assert digest_hex(text) == canonical.removeprefix(DIGEST_PREFIX)
        assert format_digest(digest_hex(text)) == canonical


def test_errors_name_the_field() -> None:
    with pytest.raises(InvalidHash, match="expect_digest must be 'sha256:'"):
        parse_digest("nope", "expect_digest")
    with pytest.raises(InvalidHash):
        format_digest("sha256:" + HEX)  # the formatter takes the bare hex only


def test_validators() -> None:
    assert validate_sha256(HEX) == HEX
    assert validate_crc32c("0a1b2c3d") == "0a1b2c3d"
    for bad in ("abc", HEX.upper(), HEX + "0", "sha256:" + HEX, 5):
        with pytest.raises(InvalidHash):
            validate_sha256(bad)
    for bad in ("0a1b2c3", "0A1B2C3D", "zzzzzzzz"):
        with pytest.raises(InvalidHash):
            validate_crc32c(bad)


def test_is_hex() -> None:
    assert is_hex("9f2c4e1a7b3d")
    assert not is_hex("") and not is_hex("9F2C") and not is_hex(None)

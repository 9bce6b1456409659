"""S3 answers' timestamps: parsed without dateutil, exactly as botocore's default parser."""

from __future__ import annotations

import datetime

import pytest

from recordkeeper.storage import parse_timestamp

botocore_utils = pytest.importorskip("botocore.utils")

SAMPLES = [
    "Mon, 30 Nov 2026 18:58:26 GMT",  # Last-Modified of GET/HEAD
    "Mon, 30 Nov 2026 18:58:26 +0000",
    "Sun, 01 Mar 2026 00:00:00 GMT",
    "2026-11-30T18:58:26.000Z",  # LastModified in a listing
    "2026-11-30T18:58:26Z",
    "2026-11-30T18:58:26.123456789Z",
    "2026-11-30T18:58:26+02:00",
    "1700000000",  # an epoch (not S3's, but botocore parses it): falls back
    "2026-11-30T18:58:26",  # no zone: falls back (botocore decides)
    "Mon, 30 Nov 2026 18:58:26 -0000",  # "unknown zone" in RFC 2822: falls back
]


@pytest.mark.parametrize("text", SAMPLES)
def test_same_datetime_as_botocore(text: str) -> None:
    ours, theirs = parse_timestamp(text), botocore_utils.parse_timestamp(text)
    assert ours == theirs
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)
    assert ours.utcoffset() == theirs.utcoffset()


def test_numbers_and_garbage_go_to_botocore() -> None:
    assert parse_timestamp(1700000000) == botocore_utils.parse_timestamp(1700000000)
    with pytest.raises(ValueError):
        botocore_utils.parse_timestamp("not a time")
    with pytest.raises(ValueError):
        parse_timestamp("not a time")


def test_aware_result_for_s3_forms() -> None:
    parsed = parse_timestamp("Mon, 30 Nov 2026 18:58:26 GMT")
    assert parsed == datetime.datetime(2026, 11, 30, 18, 58, 26, tzinfo=datetime.UTC)

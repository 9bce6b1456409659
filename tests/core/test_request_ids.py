"""The X-Request-ID rule shared by client and service."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import VersionNotFound
from recordkeeper.core.request_ids import MAX_REQUEST_ID_LENGTH, new_request_id, valid_request_id


@pytest.mark.parametrize(
    "value",
    [
        "0c6f3c1e9a2b4d5e8f7a6b5c4d3e2f1a",
        "123e4567-e89b-12d3-a456-426614174000",
        "svc:api/7+AbC=",
        "a",
        "x" * MAX_REQUEST_ID_LENGTH,
    ],
)
def test_well_formed_ids_are_kept(value: str) -> None:
    assert valid_request_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "x" * (MAX_REQUEST_ID_LENGTH + 1),
        "two words",
        "line\nbreak",
        'quote"d',
        "naïve",
        "tab\there",
        "{json}",
    ],
)
def test_malformed_ids_are_refused(value: str) -> None:
    assert not valid_request_id(value)


def test_new_ids_are_well_formed_and_distinct() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(valid_request_id(i) and len(i) == 32 for i in ids)


def test_an_error_names_its_request_id() -> None:
    err = VersionNotFound("no such version", request_id="abc-123")
    assert err.request_id == "abc-123"
    assert str(err) == "no such version [version_not_found] (request id abc-123)"
    plain = VersionNotFound("no such version")
    assert plain.request_id is None
    assert str(plain) == "no such version [version_not_found]"

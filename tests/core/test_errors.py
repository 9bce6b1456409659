"""Typed errors with stable codes, and the one HTTP status → code map."""

from __future__ import annotations

import recordkeeper.errors
from recordkeeper.core import errors
from recordkeeper.core.errors import (
    STATUS_CODES,
    DatasetNotFound,
    RecordkeeperError,
    code_for_status,
    error_for_code,
)


def test_recordkeeper_errors_is_the_core_module_re_exported() -> None:
    assert recordkeeper.errors.__all__ == errors.__all__
    for name in errors.__all__:
        assert getattr(recordkeeper.errors, name) is getattr(errors, name)


def test_codes_round_trip() -> None:
    err = error_for_code("dataset_not_found", "no coco", dataset="coco")
    assert isinstance(err, DatasetNotFound) and err.extra == {"dataset": "coco"}
    unknown = error_for_code("brand_new_code", "later")
    assert type(unknown) is RecordkeeperError and unknown.code == "brand_new_code"


def test_status_map() -> None:
    assert code_for_status(404) == "not_found"
    assert code_for_status(405) == "method_not_allowed"
    assert code_for_status(422) == "invalid_request"
    assert code_for_status(418) == "invalid_input"
    assert code_for_status(502) == "internal_error"
    # every code the map gives for a status is either a typed error or a documented extra
    typed = {cls.code for cls in errors._BY_CODE.values()}
    assert set(STATUS_CODES.values()) - typed <= {"method_not_allowed"}

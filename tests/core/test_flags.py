"""On/off settings: one parser for every spelling (recordkeeper.core.flags)."""

from __future__ import annotations

import pytest

from recordkeeper.core.errors import InvalidInput
from recordkeeper.core.flags import parse_flag


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "True", "yes", "YES", "on", "On", " on "])
def test_the_usual_spellings_of_true(text: str) -> None:
    assert parse_flag("X", text) is True


@pytest.mark.parametrize("text", [None, "", "0", "false", "FALSE", "no", "off", "Off"])
def test_the_usual_spellings_of_false(text: str | None) -> None:
    assert parse_flag("X", text) is False


@pytest.mark.parametrize("text", ["2", "y", "enabled", "truee", "-1"])
def test_anything_else_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_flag("RECORDKEEPER_PURE_PYTHON", text)
    assert err.value.extra["setting"] == "RECORDKEEPER_PURE_PYTHON"
    assert f"RECORDKEEPER_PURE_PYTHON={text!r}" in err.value.detail

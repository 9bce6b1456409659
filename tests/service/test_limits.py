"""``load_counted``: json.loads with the capped list counted while it is parsed."""

from __future__ import annotations

import json

import pytest

from recordkeeper_service.limits import load_counted


class TooMany(Exception):
    pass


def _load(text: str, cap: int = 3) -> object:
    return load_counted(text, "shards", cap, TooMany)


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        " { } ",
        '{"shards": []}',
        '{"shards": [ ]}',
        '{"shards": [1, {"a": [1, 2]}, "x"]}',
        '\n{ "x" : 1 , "shards" : [ {} , {} ] , "y": {"shards": [1,2,3,4,5]} }\n',
        '{"shards": "not a list"}',
        '{"sh\\u0061rds": [1, 2]}',
        "[1, 2]",
        '"text"',
        "null",
        # integers orjson would turn into floats: kept as the integers the number policy refuses
        '{"shards": [{"etag": 18446744073709551616}, {"etag": -9223372036854775809}]}',
        '{"shards": [{"etag": 9223372036854775808, "n": -9999999999999999999}]}',
    ],
)
def test_answers_as_json_loads(text: str) -> None:
    loaded = _load(text)
    assert loaded == json.loads(text)
    assert repr(loaded) == repr(json.loads(text))  # the same types too (an int is not a float)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"shards": [1, 2',
        '{"shards": [1 2]}',
        '{"shards": [1,]}',
        '{"a" 1}',
        "{'a': 1}",
        '{"a": 1,}',
        '{"a": 1} x',
        '{"a": 1}{',
    ],
)
def test_malformed_json_is_a_decode_error(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        _load(text)


def test_the_item_over_the_cap_stops_parsing() -> None:
    _load('{"shards": [1, 2, 3]}')
    # the malformed tail is never reached: the fourth item already refuses the body
    with pytest.raises(TooMany):
        _load('{"shards": [1, 2, 3, 4, this is not json')
    # the cap counts the named top-level list only
    assert _load('{"other": [1, 2, 3, 4, 5], "shards": [1]}') == {
        "other": [1, 2, 3, 4, 5],
        "shards": [1],
    }

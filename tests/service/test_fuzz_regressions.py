"""Regressions found by fuzzing the REST API (see tests/service/test_api_fuzz.py).

Each test is one input that used to answer a 500 or an answer docs/rest-api.md does not list.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.service._helpers import API, error


def test_undecodable_json_body_is_invalid_request(client: TestClient) -> None:
    # Not UTF-8: FastAPI raised a bare 400 "There was an error parsing the body".
    response = client.post(
        f"{API}/datasets", content=b"\xb6", headers={"Content-Type": "application/json"}
    )
    body = error(response, 422, "invalid_request")
    assert body["errors"][0]["type"] == "json_invalid"

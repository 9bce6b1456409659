"""A bounded, deterministic property-based fuzz of the REST API.

"Bad input never produces a 500, a traceback or an undocumented answer":

* every operation of ``/openapi.json``, with inputs schemathesis generates from the schema and
  with inputs that break it (negative mode);
* shard registration on a staged version, with valid shards one or two of whose fields are
  replaced by hostile values (huge integers, bad hashes, odd URIs, malformed schemas);
* references (``{ref}``) from unicode text, very long strings, ``%``-escapes, ``@`` and ``:``,
  through every route that takes one.

Each answer must be below 500; an error must be JSON whose ``code`` equals the ``X-Error-Code``
header, whose (status, code) pair is listed in docs/rest-api.md, and whose ``detail`` is a short
sentence without a traceback.  Hypothesis runs derandomized with small example counts, so the
file is deterministic and quick; raise ``RECORDKEEPER_FUZZ_EXAMPLES`` to search longer.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from tests.service._helpers import API, publish, shard, stage

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rest-api.md"
#: Every (status, code) pair of the error tables of docs/rest-api.md.
DOCUMENTED = {
    (int(status), code)
    for status, code in re.findall(r"^\| (\d{3}) \| `(\w+)`", DOCS.read_text(), re.M)
}
MAX_DETAIL = 1000 + len("… (truncated)")
EXAMPLES = int(os.environ.get("RECORDKEEPER_FUZZ_EXAMPLES", "0")) or None


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=EXAMPLES or examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


def _header(headers: Any, name: str) -> str | None:
    """A header from httpx (str values) or schemathesis (list values) responses."""
    for key, value in headers.items():
        if key.lower() == name:
            return str(value[0] if isinstance(value, list) else value)
    return None


def assert_documented(status: int, headers: Any, text: str, what: object) -> None:
    """The answer is not a 5xx, and an error is exactly as docs/rest-api.md describes."""
    assert status < 500, (what, status, text[:500])
    assert "Traceback" not in text, (what, text[:500])
    if status == 204:
        return
    content_type = _header(headers, "content-type") or ""
    assert content_type.startswith("application/json"), (what, status, content_type)
    if status < 400:
        return
    body = json.loads(text)
    code = body.get("code")
    assert _header(headers, "x-error-code") == code, (what, status, text[:500])
    assert (status, code) in DOCUMENTED, (what, status, text[:500])
    detail = body.get("detail")
    assert isinstance(detail, str) and 0 < len(detail) <= MAX_DETAIL, (what, text[:500])


@pytest.fixture
def seeded(client: TestClient) -> Iterator[TestClient]:
    """The open-access client on a registry with a committed version, an alias, a checkpoint
    and a staged version, so that generated requests can reach past "not found"."""
    version = publish(client, "coco")
    assert client.put(f"{API}/datasets/coco/aliases/prod", json={"version": version["name"]})
    response = client.put(
        f"{API}/models/det/checkpoints/ckpt-1", json={"data": [{"version": "coco@prod"}]}
    )
    assert response.status_code == 201, response.text
    stage(client, "coco", desc="wip")
    logging.disable(logging.ERROR)  # the 500s we look for would log tracebacks
    try:
        yield client
    finally:
        logging.disable(logging.NOTSET)


# ------------------------------------------------------------------------- schema-driven


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_as_documented(seeded: TestClient, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", seeded.app)
    strategies = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the app's own schema must load
        strategies.append(result.ok().as_strategy(generation_mode=mode))

    @fuzz_settings(examples=300)
    @given(case=st.one_of(strategies))
    def check(case: Any) -> None:
        response = case.call()
        assert_documented(
            response.status_code, response.headers, response.text, case.as_curl_command()
        )

    check()


# ------------------------------------------------------------------- shard registration

INT64 = 2**63
integers = st.one_of(
    st.integers(),
    st.integers(min_value=INT64 - 3, max_value=2**64 + 3),
    st.integers(min_value=-(2**64), max_value=-INT64 + 3),
    st.sampled_from([2**31 - 1, 2**31, 2**32]),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | integers
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
hexish = st.text("0123456789abcdefABCDEFg \x00", max_size=70)
PREFIX = "s3://ml-data/datasets/coco/fuzz/"
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "split": st.sampled_from(["train", "Train", "a" * 300, "", "t/x", "train\x00"])
    | st.text(max_size=20)
    | json_values,
    "index": integers | json_values,
    "count": integers,
    "size": integers,
    "record_count": integers,
    "uri": st.sampled_from(
        [
            "s3://ml-data/datasets/../x",
            "s3://ml-data/datasets/%2e%2e/x",
            "S3://ML-DATA/datasets/x",
            "s3://ml-data/datasets//x",
            "s3://ml-data/datasets/a?b#c",
            "file:///etc/passwd",
            "s3://ml-data/datasets/" + "a" * 5000,
        ]
    )
    | st.text(max_size=30).map(lambda tail: PREFIX + tail)
    | st.text(max_size=30)
    | json_values,
    "compression": st.sampled_from(["none", "gzip", "zlib", "GZIP", "lz4"]) | json_values,
    "sha256": hexish | json_values,
    "crc32c": hexish,
    "records_sha256": hexish,
    "schema": st.none()
    | json_values
    | st.fixed_dictionaries(
        {
            "record_type": st.sampled_from(["example", "sequence_example", "x"]) | json_values,
            "record_count": integers,
            "features": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.text(max_size=10) | json_values,
                        "kind": st.sampled_from(["int64", "float", "bytes", "x"]) | json_values,
                        "min_count": integers,
                        "max_count": integers,
                        "present_count": integers,
                        "min": json_values,
                        "max": json_values,
                    }
                ),
                max_size=3,
            )
            | json_values,
        }
    ),
    "storage_identity": st.none()
    | json_values
    | st.fixed_dictionaries(
        {
            "backend": st.sampled_from(["file", "s3", "gcs", "x"]),
            "mtime_ns": integers,
            "size": integers,
            "generation": integers | st.text(max_size=5),
            "etag": json_values,
            "crc32c": json_values,
        }
    ),
}


def test_shard_registration_answers_as_documented(seeded: TestClient) -> None:
    client = seeded
    serial = itertools.count()

    @st.composite
    def mutated_shard(draw: st.DrawFn) -> dict[str, Any]:
        n = next(serial)
        index = draw(st.integers(0, 3))
        body = shard(PREFIX, index, 4, content=str(n), uri=f"{PREFIX}{n}-{index}.tfrecord")
        for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=2)):
            if draw(st.integers(0, 9)) == 0:
                body.pop(name, None)
            else:
                body[name] = draw(FIELDS[name])
        return body

    @fuzz_settings(examples=120)
    @given(
        bodies=st.lists(mutated_shard(), min_size=1, max_size=3),
        wrap=st.sampled_from(["shards", "bare", "other"]),
    )
    def check(bodies: list[dict[str, Any]], wrap: str) -> None:
        version = stage(client, "coco", root="s3://ml-data/datasets")
        payload: Any = {"shards": bodies} if wrap == "shards" else bodies
        if wrap == "other":
            payload = {"shards": bodies[0]}
        name = version["name"]
        response = client.post(f"{API}/versions/{name}/shards", json=payload)
        assert_documented(response.status_code, response.headers, response.text, bodies)
        for answer in (
            client.get(f"{API}/versions/{name}"),
            client.post(f"{API}/versions/{name}/commit", json={"on_duplicate": "commit"}),
            client.get(f"{API}/versions/{name}/schema"),
        ):
            assert_documented(answer.status_code, answer.headers, answer.text, bodies)

    check()


# ---------------------------------------------------------------- free-form JSON fields


def test_free_form_json_is_stored_only_if_it_can_be_answered(seeded: TestClient) -> None:
    """metadata, metrics and storage_identity are stored as sent: later reads must render."""
    client = seeded
    serial = itertools.count()
    objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)

    @fuzz_settings(examples=60)
    @example(value={"a": [2**64]})
    @example(value={"a": {"b": -(2**63) - 1}})
    @given(value=objects)
    def check(value: dict[str, Any]) -> None:
        n = next(serial)
        staged = client.post(f"{API}/datasets/coco/versions", json={"metadata": value})
        assert_documented(staged.status_code, staged.headers, staged.text, value)
        checkpoint = client.put(
            f"{API}/models/det/checkpoints/fuzz-{n}", json={"metrics": value, "metadata": value}
        )
        assert_documented(checkpoint.status_code, checkpoint.headers, checkpoint.text, value)
        version = stage(client, "coco", root="s3://ml-data/datasets")
        body = shard(PREFIX, 0, 1, content=f"json{n}", storage_identity=value)
        body["uri"] = f"{PREFIX}json-{n}.tfrecord"
        url = f"{API}/versions/{version['name']}/shards"
        registered = client.post(url, json={"shards": [body]})
        assert_documented(registered.status_code, registered.headers, registered.text, value)
        for url in (
            f"{API}/versions/{version['name']}",
            f"{API}/datasets/coco/versions",
            f"{API}/models/det/checkpoints",
            f"{API}/events",
        ):
            answer = client.get(url, params={"limit": 1000} if "versions/" not in url else {})
            assert_documented(answer.status_code, answer.headers, answer.text, (url, value))

    check()


# ----------------------------------------------------------------------------- references

refs = st.one_of(
    st.text(max_size=40),
    st.text(max_size=2000),
    st.text("coco_20231015@v:%$#/?.sha256abcdef0123456789\u00ff\u0130\u212a", max_size=60),
    st.builds(
        "{}@{}".format, st.sampled_from(["coco", "Coco", "x" * 200, ""]), st.text(max_size=40)
    ),
    st.builds("coco@v{}".format, integers),
    st.builds("coco@{}".format, integers),
    st.builds("coco_20231015_v{}".format, integers),
    st.builds("coco@sha256:{}".format, hexish),
    st.builds("coco_{}_v1".format, st.text("0123456789", min_size=8, max_size=8)),
)


def _encode(ref: str, how: str) -> str:
    if how == "quoted":
        return urllib.parse.quote(ref, safe="")
    if how == "twice":
        return urllib.parse.quote(urllib.parse.quote(ref, safe=""), safe="")
    return urllib.parse.quote(ref, safe="@:%")  # '@', ':' and '%' sent as they are


def test_references_answer_as_documented(seeded: TestClient) -> None:
    client = seeded

    @fuzz_settings(examples=120)
    @given(
        ref=refs,
        how=st.sampled_from(["quoted", "twice", "raw"]),
        expect=st.none() | hexish | st.builds("sha256:{}".format, hexish),
    )
    def check(ref: str, how: str, expect: str | None) -> None:
        path = _encode(ref, how)
        query = {} if expect is None else {"expect_digest": expect}
        requests: list[tuple[str, str, Any, dict[str, str]]] = [
            ("GET", f"{API}/versions/{path}", None, query),
            ("GET", f"{API}/versions/{path}/schema", None, {}),
            ("GET", f"{API}/versions/{path}/consumers", None, {}),
            ("POST", f"{API}/versions/{path}/deprecate", {"reason": "fuzz"}, {}),
            ("PUT", f"{API}/datasets/coco/aliases/golden", {"version": ref}, {}),
            ("PUT", f"{API}/datasets/coco/aliases/{path}", {"version": "coco@v1"}, {}),
            ("PUT", f"{API}/models/det/checkpoints/ckpt-9", {"data": [{"version": ref}]}, {}),
            ("POST", f"{API}/datasets/coco/versions", {"desc": ref, "date": ref[:10]}, {}),
            ("GET", f"{API}/datasets/coco/versions", None, {"since": ref[:12]}),
            ("GET", f"{API}/lineage/graph", None, {"version": ref}),
            ("GET", f"{API}/shards/consumers", None, {"sha256": ref}),
            ("GET", f"{API}/schemas/{path}", None, {}),
        ]
        for method, url, body, params in requests:
            response = client.request(method, url, json=body, params=params)
            assert_documented(response.status_code, response.headers, response.text, (url, ref))

    check()


def test_the_fuzz_knows_the_documented_codes() -> None:
    # Guards the regular expression above against a reformatted docs table.
    assert (500, "internal_error") in DOCUMENTED
    assert (409, "checkpoint_conflict") in DOCUMENTED
    assert len(DOCUMENTED) >= 35

"""The provenance rules of the core (shared by client and service): canonical params, parent
specs, credentials stripped, the document's rules."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidParams, InvalidProvenance, InvalidRequest
from recordkeeper.core.provenance import (
    MAX_PARAMS_DEPTH,
    canonical_params,
    parse_parent_spec,
    strip_userinfo,
    validate_provenance,
)

DIGEST = "sha256:" + "0" * 64


def test_canonical_params_sort_keys_and_digest_the_canonical_bytes() -> None:
    a, data, digest = canonical_params({"b": [1, 2.5, None], "a": {"y": True, "x": "é"}})
    assert data == b'{"a":{"x":"\xc3\xa9","y":true},"b":[1,2.5,null]}'
    assert list(a) == ["a", "b"]
    assert canonical_params({"a": {"x": "é", "y": True}, "b": (1, 2.5, None)})[2] == digest


@pytest.mark.parametrize(
    "value",
    [
        ["a list"],
        "text",
        {"when": datetime.date(2026, 12, 1)},
        {"tags": {"a", "b"}},
        {"blob": b"bytes"},
        {1: "int key"},
        {"x": float("nan")},
        {"x": float("inf")},
        {"x": 2**64},
        {"x": "y" * (64 * 1024)},
    ],
)
def test_params_without_a_canonical_form_are_refused(value: Any) -> None:
    with pytest.raises(InvalidParams):
        canonical_params(value)


def test_params_nesting_is_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(MAX_PARAMS_DEPTH + 1):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(InvalidParams, match="deeper"):
        canonical_params(deep)


def test_params_text_follows_the_text_policy() -> None:
    with pytest.raises(InvalidRequest):
        canonical_params({"x": "nul\x00"})


def test_a_params_digest_sent_must_be_theirs() -> None:
    _, _, digest = canonical_params({"a": 1})
    assert validate_provenance({"params": {"a": 1}, "params_digest": digest})["params_digest"] == (
        digest
    )
    with pytest.raises(InvalidParams):
        validate_provenance({"params": {"a": 1}, "params_digest": DIGEST})
    with pytest.raises(InvalidParams):
        validate_provenance({"params_digest": digest})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("coco@v2", ("coco@v2", "source")),
        ("coco@v2:base", ("coco@v2", "base")),
        ("coco@v2:my-labels_2", ("coco@v2", "my-labels_2")),
        ("coco@sha256:abcdef012345", ("coco@sha256:abcdef012345", "source")),
        ("coco@sha256:abcdef012345:labels", ("coco@sha256:abcdef012345", "labels")),
        ("coco_20231015_v3_add_person", ("coco_20231015_v3_add_person", "source")),
    ],
)
def test_parent_specs(spec: str, expected: tuple[str, str]) -> None:
    assert parse_parent_spec(spec) == expected


def test_a_parent_spec_with_a_bad_role_is_refused() -> None:
    with pytest.raises(InvalidProvenance):
        parse_parent_spec("coco@v2:Not-A-Role")


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:tok@github.com/a/b.git", "https://github.com/a/b.git"),
        ("https://tok@github.com/a/b.git", "https://github.com/a/b.git"),
        ("ssh://git@host:22/a.git", "ssh://host:22/a.git"),
        ("git@github.com:a/b.git", "git@github.com:a/b.git"),
        ("https://github.com/a/b.git", "https://github.com/a/b.git"),
    ],
)
def test_userinfo_is_stripped(url: str, clean: str) -> None:
    assert strip_userinfo(url) == clean


@pytest.mark.parametrize(
    "document",
    [
        {"parents": [{"ref": "coco@v1", "role": "base"}, {"ref": "coco@v2", "role": "base"}]},
        {"parents": [{"ref": "coco@v1"}, {"ref": "coco@v1"}]},
        {"parents": [{"ref": "coco@v1", "role": "BASE"}]},
        {"parents": [{"ref": "coco@v1", "extra": 1}]},
        {"sources": [{"uri": "s3://k:s@bucket/x"}]},
        {
            "sources": [
                {
                    "uri": "gs://a/",
                    "identity": {"method": "md5", "digest": DIGEST, "files": 1, "size": 1},
                }
            ]
        },
        {
            "sources": [
                {
                    "uri": "gs://a/",
                    "identity": {"method": "listing", "digest": "x", "files": 1, "size": 1},
                }
            ]
        },
        {"sources": [{"uri": "gs://a/"}, {"uri": "gs://a/"}]},
        {"producer": {"vcs": "svn"}},
        {"producer": {"vcs": "unknown", "commit": "a" * 40}},
        {"producer": {"vcs": "git", "commit": "abc"}},
        {"producer": {"vcs": "git", "diff_digest": DIGEST, "dirty": False}},
        {"producer": {"vcs": "git", "entry": "/abs/prep.py"}},
        {"producer": {"vcs": "git", "remote": "https://u:p@h/r.git"}},
        {"environment": {"python": "3.11 && id"}},
        {"environment": {"PATH": "/bin"}},
        {"command": "python prep.py"},
        {"note": ""},
        {"note": "x" * 4001},
        {"unknown": 1},
    ],
)
def test_documents_breaking_a_rule_are_refused(document: dict[str, Any]) -> None:
    with pytest.raises(InvalidProvenance):
        validate_provenance(document)

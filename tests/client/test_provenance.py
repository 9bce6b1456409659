"""The client's provenance helpers without a service: roles of parents, redacted commands,
the value object and its JSON form, params files."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidParams, InvalidProvenance
from recordkeeper.core.provenance import empty_provenance, has_provenance, validate_provenance
from recordkeeper.provenance import (
    Provenance,
    Source,
    assign_roles,
    build_provenance,
    capture_git,
    command_line,
    load_params,
)

DIGEST = "sha256:" + "0" * 64


def test_roles_a_lone_parent_of_the_same_dataset_is_the_base() -> None:
    assert assign_roles("coco", [("coco@v2", None)]) == [{"ref": "coco@v2", "role": "base"}]
    assert assign_roles("coco", [("coco@v2", None), ("o365@v1", None)]) == [
        {"ref": "coco@v2", "role": "base"},
        {"ref": "o365@v1", "role": "source"},
    ]
    # two candidates, or an explicit base: nothing is guessed
    assert [p["role"] for p in assign_roles("coco", [("coco@v1", None), ("coco@v2", None)])] == [
        "source",
        "source",
    ]
    assert [p["role"] for p in assign_roles("coco", [("coco@v1", "base"), ("coco@v2", None)])] == [
        "base",
        "source",
    ]


def test_commands_are_redacted() -> None:
    argv = [
        "prep.py",
        "--token=abc",
        "--password",
        "hunter2",
        "--api-key=k",
        "--src",
        "https://u:p@host/x",
        "--lr=0.1",
    ]
    assert command_line(argv) == [
        "prep.py",
        "--token=***",
        "--password",
        "***",
        "--api-key=***",
        "--src",
        "https://host/x",
        "--lr=0.1",
    ]


def test_secrets_inside_arguments_are_redacted() -> None:
    """A password in an option's URL, a presigned URL and an assignment: the option names say
    nothing, the URLs and names do."""
    argv = [
        "prep.py",
        "--db-url=postgresql://etl:hunter2@db/raw",
        "https://b.s3.amazonaws.com/raw.tar?X-Amz-Credential=AKIA&X-Amz-Signature=ab12",
        "HF_TOKEN=hf_abc",
    ]
    assert command_line(argv) == [
        "prep.py",
        "--db-url=postgresql://db/raw",
        "https://b.s3.amazonaws.com/raw.tar",
        "HF_TOKEN=***",
    ]


def test_a_remote_with_a_token_in_its_query_is_recorded_without_it(tmp_path: Path) -> None:
    """``capture_git`` strips what the service would refuse: the recorded document is accepted
    as captured."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["remote", "add", "origin", "https://git.example.com/a/prep.git?private_token=glpat-x"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    producer = capture_git(repo)
    assert producer.remote == "https://git.example.com/a/prep.git"
    document = build_provenance(code=producer, command=None, environment=False)
    assert validate_provenance(document)["producer"]["remote"] == producer.remote


def test_one_source_or_parent_need_not_be_in_a_list() -> None:
    """As one URI string is: a ``Source``, a ``{"uri": ...}`` mapping, a version (anything
    with ``name`` and ``dataset``); a single number is refused with a code."""
    quiet = {"code": None, "command": None, "environment": False}
    for given in (Source("gs://raw/", None), {"uri": "gs://raw/", "identity": None}):
        document = build_provenance(dataset="coco", sources=given, **quiet)
        assert document["sources"] == [{"uri": "gs://raw/", "identity": None}]
    version = SimpleNamespace(name="coco_20261201_v1", dataset="coco")
    document = build_provenance(dataset="coco", parents=version, **quiet)
    assert document["parents"] == [{"ref": "coco_20261201_v1", "role": "base"}]
    with pytest.raises(InvalidProvenance, match="not float"):
        build_provenance(dataset="coco", sources=1.5, **quiet)


def test_an_empty_document_records_nothing() -> None:
    assert validate_provenance(None) == empty_provenance()
    assert not has_provenance(validate_provenance({}))
    assert Provenance.from_dict(empty_provenance()).empty
    assert Provenance.from_dict(None).to_dict() == empty_provenance()


def test_provenance_round_trips_through_its_json_form() -> None:
    document = {
        "parents": [{"name": "coco_20261201_v1", "dataset": "coco", "number": 1, "role": "base"}],
        "sources": [
            {
                "uri": "gs://raw/",
                "identity": {"method": "listing", "digest": DIGEST, "files": 2, "size": 9},
            }
        ],
        "producer": {
            "vcs": "git",
            "commit": "a" * 40,
            "remote": None,
            "branch": "main",
            "dirty": True,
            "diff_digest": DIGEST,
            "entry": "prep.py",
        },
        "params": {"a": {"b": [1]}},
        "params_digest": DIGEST,
        "command": ["prep.py"],
        "environment": {"python": "3.11.9", "tensorflow": None, "recordkeeper": "1.0"},
        "note": "n",
    }
    value = Provenance.from_dict(document)
    assert value.to_dict() == document
    assert value.base is not None and value.base.ref == "coco@v1"
    assert value.producer is not None and value.producer.short == "aaaaaaa+dirty"
    with pytest.raises(TypeError):
        value.params["a"] = 2  # type: ignore[index]


def test_params_files(tmp_path: Any) -> None:
    (tmp_path / "p.yaml").write_text("b: 1\na: [x, 2.5]\n")
    (tmp_path / "p.json").write_text('{"a": ["x", 2.5], "b": 1}')
    assert load_params(tmp_path / "p.yaml") == load_params(tmp_path / "p.json")
    (tmp_path / "bad.yaml").write_text("a: [unclosed\n")
    with pytest.raises(InvalidParams):
        load_params(tmp_path / "bad.yaml")
    with pytest.raises(InvalidParams):
        load_params(tmp_path / "missing.yaml")


def test_a_bad_role_reads_the_same_from_python_the_cli_and_the_service() -> None:
    from recordkeeper.core.errors import InvalidProvenance
    from recordkeeper.core.provenance import parse_parent_spec

    said = []
    for attempt in (
        lambda: assign_roles("coco", [("coco@v2", "Labels")]),
        lambda: parse_parent_spec("coco@v2:Labels"),
        lambda: validate_provenance(
            {**empty_provenance(), "parents": [{"ref": "coco@v2", "role": "Labels"}]}
        ),
    ):
        with pytest.raises(InvalidProvenance) as caught:
            attempt()
        said.append(str(caught.value).split(": ", 1)[1])
    assert len(set(said)) == 1, said
    assert "(base, source, labels or a lowercase slug" in said[0]

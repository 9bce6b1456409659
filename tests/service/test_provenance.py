"""Provenance of a version over the in-process app (SQLite and PostgreSQL): given at stage,
shown on every version answer, replaceable while staged, immutable once committed; bad input
gets a stable code and stores nothing; the log, children and versions-from-a-source reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from recordkeeper.core.provenance import MAX_PARAMS_BYTES
from tests.service._helpers import API, commit, error, publish, register, shards, stage

COMMIT = "3f2a9c1" + "0" * 33
DIGEST = "sha256:" + "ab" * 32


def _provenance(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "parents": [{"ref": "coco@v1", "role": "base"}],
        "sources": [
            {
                "uri": "s3://raw/coco/annotations/",
                "identity": {"method": "listing", "digest": DIGEST, "files": 3, "size": 1200},
            }
        ],
        "producer": {
            "vcs": "git",
            "commit": COMMIT,
            "remote": "https://github.com/acme/prep.git",
            "branch": "main",
            "dirty": True,
            "diff_digest": DIGEST,
            "entry": "scripts/prep.py",
        },
        "params": {"min_area": 32, "categories": ["person"], "aug": {"flip": True}},
        "command": ["python", "scripts/prep.py", "--split", "train"],
        "environment": {"python": "3.11.9", "tensorflow": None, "recordkeeper": "0.9.0"},
        "note": "add person categories",
    }
    body.update(overrides)
    return body


def _versions(client: TestClient) -> list[dict[str, Any]]:
    response = client.get(f"{API}/datasets/coco/versions")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def test_provenance_is_given_at_stage_and_shown_everywhere(client: TestClient) -> None:
    v1 = publish(client, content="one")
    assert v1["provenance"]["parents"] == [] and v1["provenance"]["producer"] is None
    v2 = publish(client, content="two", provenance=_provenance())
    prov = v2["provenance"]
    assert prov["parents"] == [{"name": v1["name"], "dataset": "coco", "number": 1, "role": "base"}]
    assert prov["sources"][0]["identity"]["digest"] == DIGEST
    assert prov["producer"]["commit"] == COMMIT and prov["producer"]["dirty"] is True
    # params are stored canonically (keys sorted) with the digest of their canonical bytes
    assert list(prov["params"]) == ["aug", "categories", "min_area"]
    assert prov["params_digest"].startswith("sha256:")
    for answer in (
        client.get(f"{API}/versions/{v2['name']}").json(),
        client.get(f"{API}/versions/coco@latest?shards=false").json(),
        _versions(client)[0],
    ):
        assert answer["provenance"] == prov
    # the same params in another order have the same digest
    other = publish(
        client,
        content="three",
        provenance={"params": {"aug": {"flip": True}, "min_area": 32, "categories": ["person"]}},
    )
    assert other["provenance"]["params_digest"] == prov["params_digest"]


def test_provenance_of_a_staged_version_can_be_replaced_not_after_commit(
    client: TestClient,
) -> None:
    v1 = publish(client, content="one")
    staged = stage(client, provenance={"note": "first draft"})
    assert staged["provenance"]["note"] == "first draft"
    url = f"{API}/versions/{staged['name']}/provenance"
    response = client.put(url, json=_provenance())
    assert response.status_code == 200, response.text
    assert response.json()["parents"][0]["name"] == v1["name"]
    register(client, staged["name"], shards(staged["storage_prefix"], 1, content="x"))
    committed = commit(client, staged["name"]).json()
    assert committed["provenance"]["note"] == "add person categories"
    body = error(client.put(url, json={"note": "rewritten"}), 409, "provenance_immutable")
    assert body["state"] == "committed"
    body = error(
        client.put(f"{API}/versions/{committed['name']}/provenance", json={}),
        409,
        "provenance_immutable",
    )
    assert client.get(f"{API}/versions/{committed['name']}").json()["provenance"]["note"] == (
        "add person categories"
    )


def test_replacing_a_derived_versions_provenance_keeps_its_base(client: TestClient) -> None:
    """A version staged with ``base`` keeps that base as its ``base`` parent when its
    provenance is replaced (it stayed derived at commit, but its history had lost the link)."""
    v1 = publish(client, content="one")
    v2 = publish(client, content="two")
    staged = stage(client, base="coco@v1")
    url = f"{API}/versions/{staged['name']}/provenance"
    response = client.put(url, json={"note": "replaced", "sources": [{"uri": "gs://raw/a/"}]})
    assert response.status_code == 200, response.text
    base = {"name": v1["name"], "dataset": "coco", "number": 1, "role": "base"}
    assert response.json()["parents"] == [base] and response.json()["note"] == "replaced"
    # the base sent back by its exact name (as a GET answers it) is the same parent
    again = {"parents": [{"ref": v1["name"], "role": "base"}], "note": "again"}
    assert client.put(url, json=again).json()["parents"] == [base]
    # another base is a second base
    other = {"parents": [{"ref": v2["name"], "role": "base"}]}
    error(client.put(url, json=other), 422, "invalid_provenance")
    register(client, staged["name"], shards(staged["storage_prefix"], 1, content="x"))
    committed = commit(client, staged["name"]).json()
    assert committed["provenance"]["parents"] == [base]


def test_a_command_sent_with_secrets_is_stored_redacted(client: TestClient) -> None:
    """The client redacts the command it captures; one sent over REST as it was typed is
    redacted by the service all the same: a password in a database URL, a token option, an
    assignment and a presigned URL never reach the registry."""
    command = [
        "python",
        "prep.py",
        "--db-url=postgresql://etl:hunter2@db/raw",
        "--token",
        "ghp_secret",
        "AWS_SECRET_ACCESS_KEY=wJalr",
        "https://b.s3.amazonaws.com/raw?X-Amz-Signature=ab12&versionId=3",
        "--lr=0.1",
    ]
    staged = stage(client, provenance={"command": command})
    expected = [
        "python",
        "prep.py",
        "--db-url=postgresql://db/raw",
        "--token",
        "***",
        "AWS_SECRET_ACCESS_KEY=***",
        "https://b.s3.amazonaws.com/raw?versionId=3",
        "--lr=0.1",
    ]
    assert staged["provenance"]["command"] == expected
    url = f"{API}/versions/{staged['name']}/provenance"
    replaced = client.put(url, json={"command": command})
    assert replaced.status_code == 200 and replaced.json()["command"] == expected
    stored = client.get(f"{API}/versions/{staged['name']}").text
    assert all(secret not in stored for secret in ("hunter2", "ghp_secret", "wJalr", "ab12"))


@pytest.mark.parametrize(
    ("provenance", "status", "code"),
    [
        ({"parents": [{"ref": "coco@v7"}]}, 404, "parent_not_found"),
        ({"parents": [{"ref": "objects365@v1"}]}, 404, "parent_not_found"),
        ({"parents": [{"ref": "coco@v1", "role": "Base!"}]}, 422, "invalid_provenance"),
        (
            {"parents": [{"ref": "coco@v1", "role": "base"}, {"ref": "coco@v1", "role": "labels"}]},
            422,
            "invalid_provenance",
        ),
        ({"parents": [{"ref": "not a ref"}]}, 400, "invalid_reference"),
        ({"params": {"x": "y" * MAX_PARAMS_BYTES}}, 422, "invalid_params"),
        ({"params": {"a": 1}, "params_digest": DIGEST}, 422, "invalid_params"),
        ({"params_digest": DIGEST}, 422, "invalid_params"),
        ({"params": ["not", "an", "object"]}, 422, "invalid_request"),
        ({"note": "bad \ud800 text"}, 422, "invalid_request"),
        ({"note": "nul \x00"}, 422, "invalid_request"),
        ({"sources": [{"uri": "https://user:secret@host/raw/"}]}, 422, "invalid_provenance"),
        # credentials in a query or a fragment: presigned S3 and GCS URLs, SAS, OAuth tokens
        (
            {
                "sources": [
                    {"uri": "https://b.s3.amazonaws.com/raw?X-Amz-Signature=ab&X-Amz-Date=1"}
                ]
            },
            422,
            "invalid_provenance",
        ),
        (
            {"sources": [{"uri": "https://acct.blob.core.windows.net/raw?sv=1&sig=ab"}]},
            422,
            "invalid_provenance",
        ),
        ({"sources": [{"uri": "gs://raw/coco/?access_token=ya29.x"}]}, 422, "invalid_provenance"),
        ({"sources": [{"uri": "https://host/raw/#id_token=abc"}]}, 422, "invalid_provenance"),
        (
            {"producer": {"vcs": "git", "remote": "https://github.com/a/b.git?token=ghp_x"}},
            422,
            "invalid_provenance",
        ),
        (
            {"producer": {"vcs": "git", "remote": "https://tok@github.com/a"}},
            422,
            "invalid_provenance",
        ),
        ({"producer": {"vcs": "git", "commit": "HEAD"}}, 422, "invalid_provenance"),
        ({"producer": {"vcs": "git", "entry": "../outside.py"}}, 422, "invalid_provenance"),
        ({"environment": {"python": "3.11; rm -rf"}}, 422, "invalid_provenance"),
        ({"environment": {"HOME": "/root"}}, 422, "invalid_request"),
    ],
)
def test_bad_provenance_gets_a_stable_code_and_stores_nothing(
    client: TestClient, provenance: dict[str, Any], status: int, code: str
) -> None:
    publish(client, content="one")
    before = _versions(client)
    # sent as ASCII JSON: a lone surrogate travels as the escape "\ud800"
    raw = {"headers": {"content-type": "application/json"}}
    stage_body = json.dumps({"provenance": provenance})
    error(client.post(f"{API}/datasets/coco/versions", content=stage_body, **raw), status, code)
    assert _versions(client) == before  # no staging left behind
    staged = stage(client)
    url = f"{API}/versions/{staged['name']}/provenance"
    error(client.put(url, content=json.dumps(provenance), **raw), status, code)
    answer = client.get(f"{API}/versions/{staged['name']}").json()
    assert answer["provenance"]["parents"] == [] and answer["provenance"]["note"] is None


def test_parents_must_be_committed_and_never_the_version_itself(client: TestClient) -> None:
    publish(client, content="one")
    staged = stage(client)
    other = stage(client)
    body = error(
        client.put(
            f"{API}/versions/{staged['name']}/provenance",
            json={"parents": [{"ref": other["name"]}]},
        ),
        409,
        "parent_not_committed",
    )
    assert body["parent"] == other["name"] and body["state"] == "staged"
    error(
        client.put(
            f"{API}/versions/{staged['name']}/provenance",
            json={"parents": [{"ref": staged["name"]}]},
        ),
        422,
        "provenance_cycle",
    )
    client.post(f"{API}/versions/{other['name']}/abandon")
    error(
        client.post(
            f"{API}/datasets/coco/versions",
            json={"provenance": {"parents": [{"ref": other["name"]}]}},
        ),
        409,
        "parent_not_committed",
    )


def test_parents_from_other_datasets_children_and_sources(client: TestClient) -> None:
    coco = publish(client, content="c")
    o365 = publish(client, "objects365", content="o")
    mixed = publish(
        client,
        "merged",
        content="m",
        provenance={
            "parents": [
                {"ref": "coco@v1", "role": "base"},
                {"ref": "objects365@latest", "role": "labels"},
            ],
            "sources": [{"uri": "gs://raw/extra.json", "identity": None}],
        },
    )
    assert [(p["dataset"], p["role"]) for p in mixed["provenance"]["parents"]] == [
        ("coco", "base"),
        ("objects365", "labels"),
    ]
    children = client.get(f"{API}/versions/{o365['name']}/children").json()["data"]
    assert [(c["name"], c["role"]) for c in children] == [(mixed["name"], "labels")]
    assert client.get(f"{API}/versions/{coco['name']}/children").json()["data"][0]["role"] == (
        "base"
    )
    found = client.get(f"{API}/sources/versions", params={"uri": "gs://raw/extra.json"})
    assert [v["name"] for v in found.json()["data"]] == [mixed["name"]]
    assert client.get(f"{API}/sources/versions", params={"uri": "gs://raw/x"}).json() == {
        "data": []
    }


def test_a_source_asked_with_its_credentials_is_found_without_echoing_them(
    client: TestClient,
) -> None:
    """The client records a presigned source without its signature; asking about it with the
    URL it was listed with (versions from a source, impact, the graph) finds that version, and
    no answer repeats the secret."""
    recorded = "https://b.s3.amazonaws.com/raw/a.json?versionId=3"
    version = publish(client, content="s", provenance={"sources": [{"uri": recorded}]})
    asked = recorded + "&X-Amz-Credential=AKIA&X-Amz-Signature=f00dfeed"
    found = client.get(f"{API}/sources/versions", params={"uri": asked})
    assert [v["name"] for v in found.json()["data"]] == [version["name"]]
    impact = client.get(f"{API}/lineage/impact", params={"source": asked})
    assert impact.status_code == 200 and impact.json()["target"]["source"] == recorded
    assert [v["name"] for v in impact.json()["versions"]] == [version["name"]]
    graph = client.get(f"{API}/lineage/graph", params={"source": asked})
    assert graph.status_code == 200 and graph.json()["root"] == f"source:{recorded}"
    for answer in (found, impact, graph):
        assert "f00dfeed" not in answer.text and "AKIA" not in answer.text
    bad = client.get(f"{API}/sources/versions", params={"uri": "gs://raw/../etc/"})
    assert error(bad, 422, "invalid_request")  # as impact: no recorded source has '..'


def test_log_summarises_each_version_against_its_base(client: TestClient) -> None:
    v1 = publish(client, count=2, content="a")
    # v2: a change of v1 — the same two shards plus... (content differs: all "changed")
    v2 = stage(
        client,
        provenance={
            "parents": [{"ref": v1["name"], "role": "base"}],
            "producer": {"vcs": "git", "commit": COMMIT, "dirty": False},
        },
    )
    bodies = shards(v2["storage_prefix"], 3, content="a")
    register(client, v2["name"], bodies)
    v2 = commit(client, v2["name"]).json()
    v3 = publish(client, count=1, content="a")  # no base: compared with v2
    response = client.get(f"{API}/datasets/coco/log")
    assert response.status_code == 200, response.text
    log = response.json()
    assert log["count"] == 3
    first, second, third = log["data"]
    assert first["name"] == v3["name"] and first["compared_with"] == v2["name"]
    assert second["name"] == v2["name"] and second["compared_with"] == v1["name"]
    assert second["commit"] == COMMIT and second["dirty"] is False
    assert second["parents"][0]["role"] == "base"
    assert third["compared_with"] is None and third["change"] is None
    # v1 has train-0/1 of 2, v2 train-0/1/2 of 3: every shard differs in its count, so the
    # diff matches shards by (split, index): 2 changed, 1 added
    assert second["change"]["shards_added"] + second["change"]["shards_changed"] == 3
    assert second["change"]["records_added"] >= 10
    error(client.get(f"{API}/datasets/nope/log"), 404, "dataset_not_found")

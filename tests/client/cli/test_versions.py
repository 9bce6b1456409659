"""``recordkeeper ls DATASET``: published versions newest first; ``--all`` and ``--state``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.core.refs import PUBLISHED_STATES
from tests.client import _lineage_app
from tests.client._lineage_app import Switch, publish

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client
runner = _lineage_app.runner

pytest.importorskip("fastapi")


def _history(client: rk.Client) -> dict[str, str]:
    """v1 committed, v2 deprecated, v3 committed, then a staged and an abandoned attempt."""
    v1 = publish(client, "first")
    v2 = publish(client, "second")
    client.deprecate(v2, "bad labels")
    v3 = publish(client, "third")
    staged = client.stage("coco", desc="wip")
    abandoned = client.stage("coco", desc="bad")
    client.abandon(abandoned)
    return {
        "v1": v1.name,
        "v2": v2.name,
        "v3": v3.name,
        "staged": staged.name,
        "abandoned": abandoned.name,
    }


def _names(runner: CliRunner, *args: str) -> list[str]:
    result = runner.invoke(cli.app, ["ls", "coco", *args, "--json"])
    assert result.exit_code == 0, result.output
    return [v["name"] for v in json.loads(result.stdout)]


def test_ls_lists_published_versions_newest_first(runner: CliRunner, client: rk.Client) -> None:
    names = _history(client)
    assert _names(runner) == [names["v3"], names["v2"], names["v1"]]
    assert _names(runner, "--limit", "1") == [names["v3"]]  # the newest version, not an attempt
    assert _names(runner, "--limit", "2") == [names["v3"], names["v2"]]
    table = runner.invoke(cli.app, ["ls", "coco"]).output
    assert names["v3"] in table and "deprecated" in table
    assert names["abandoned"] not in table and names["staged"] not in table


def test_ls_all_and_state(runner: CliRunner, client: rk.Client) -> None:
    names = _history(client)
    everything = _names(runner, "--all")
    assert set(everything) == set(names.values())
    assert everything[2:] == [names["v3"], names["v2"], names["v1"]]  # attempts (no number) first
    assert _names(runner, "--state", "abandoned") == [names["abandoned"]]
    assert _names(runner, "--state", "deprecated", "--state", "abandoned") == [
        names["abandoned"],
        names["v2"],
    ]
    both = runner.invoke(cli.app, ["ls", "coco", "--all", "--state", "staged"])
    assert both.exit_code == 2 and "not both" in both.output
    top = runner.invoke(cli.app, ["ls", "--all"])
    assert top.exit_code == 2 and "ls DATASET" in top.output


def test_versions_of_several_states(
    client: rk.Client, switch: Switch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several states in one listing (the service filters by all of them), newest first, with
    ``limit`` honoured across pages."""
    names = _history(client)
    monkeypatch.setattr("recordkeeper.http.PAGE_SIZE", 1)
    published = client.versions("coco", state=PUBLISHED_STATES)
    assert [v.name for v in published] == [names["v3"], names["v2"], names["v1"]]
    two = client.versions("coco", state=["committed", "deprecated"], limit=2)
    assert [(v.name, v.state) for v in two] == [
        (names["v3"], "committed"),
        (names["v2"], "deprecated"),
    ]
    assert [v.name for v in client.versions("coco", state="committed")] == [
        names["v3"],
        names["v1"],
    ]
    with pytest.raises(rk.InvalidRequest):
        client.versions("coco", state=[])


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "coco",
            "'coco' is neither a version name nor a reference; to name its newest version use "
            "'coco@latest' (or coco@vN, coco@<alias>)",
        ),
        (
            "Coco",
            "'Coco' is neither a version name (dataset_YYYYMMDD_vN[_desc], e.g. coco_20231015_v3) "
            "nor a reference of the form dataset@selector (e.g. coco@latest)",
        ),
        (
            "coco_20231301_v3",
            "version name 'coco_20231301_v3': date '20231301' is not a calendar date: "
            "month must be in 1..12",
        ),
    ],
)
def test_a_bad_reference_is_one_sentence(
    runner: CliRunner, client: rk.Client, ref: str, message: str
) -> None:
    """Said once, with the reference to use when the text is a bare dataset name."""
    publish(client, "first")
    result = runner.invoke(cli.app, ["show", ref])
    assert result.exit_code == 1
    assert result.stderr == f"error: {message} [invalid_reference]\n"


def test_verify_an_unknown_split_has_a_code(runner: CliRunner, client: rk.Client) -> None:
    v1 = publish(client, "first")
    result = runner.invoke(cli.app, ["verify", "coco@latest", "--split", "trian"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {v1.name} has no split 'trian'; splits: train, validation [invalid_request]\n"
    )
    body = json.loads(
        runner.invoke(cli.app, ["verify", "coco@latest", "--split", "trian", "--json"]).stderr
    )
    assert body["code"] == "invalid_request"
    assert runner.invoke(cli.app, ["verify", "coco@latest", "--split", "train"]).exit_code == 0


def test_publishing_a_local_path_that_does_not_exist_is_file_not_found(
    runner: CliRunner, tmp_path: object
) -> None:
    """As cli.md promises for a local file (it was exit 3 ``storage_error``)."""
    missing = f"{tmp_path}/data/coco"
    result = runner.invoke(cli.app, ["publish", missing, "--name", "coco", "--copy"])
    assert result.exit_code == 3
    assert result.stderr.strip().endswith("[file_not_found]"), result.stderr
    assert missing in result.stderr and "Traceback" not in result.output


def test_show_quotes_the_recorded_command_as_a_shell_would() -> None:
    """An argument with a space is shown quoted: the line can be pasted to run it again."""
    from recordkeeper.cli.versions import provenance_lines
    from recordkeeper.provenance import Provenance

    command = ["recordkeeper", "publish", "data", "--note", "more boxes", "--params", "p.yaml"]
    lines = provenance_lines(Provenance.from_dict({"command": command}))
    assert "command recordkeeper publish data --note 'more boxes' --params p.yaml" in lines


def test_show_tells_a_repository_without_commits_from_no_repository() -> None:
    """``git init`` and no commit yet was shown as 'not run in a git work tree'."""
    from recordkeeper.cli.versions import provenance_lines
    from recordkeeper.provenance import Provenance

    fresh = {"vcs": "git", "commit": None, "branch": "main", "dirty": True}
    lines = provenance_lines(Provenance.from_dict({"producer": fresh}))
    assert "code    a git work tree with no commit yet (branch main)" in lines
    lines = provenance_lines(Provenance.from_dict({"producer": {"vcs": "unknown"}}))
    assert "code    unknown (not run in a git work tree)" in lines

"""``compare``: a group's best value follows the metric's direction (issue 26, item 7) —
the highest accuracy, the lowest loss, or what ``direction``/``--direction`` says."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from tests.client import _lineage_app
from tests.client._lineage_app import publish

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client
runner = _lineage_app.runner

pytest.importorskip("fastapi")

#: per data version: the metrics of three checkpoints (loss falls, accuracy rises)
CURVES = {
    "first": [(1.0, 0.50, 7.0), (0.6, 0.70, 3.0), (0.8, 0.65, 9.0)],
    "second": [(0.9, 0.55, 5.0), (0.4, 0.90, 4.0), (0.5, 0.85, 1.0)],
}


def _train(client: rk.Client) -> dict[str, str]:
    names = {}
    for desc, curve in CURVES.items():
        version = publish(client, desc)
        names[desc] = version.name
        for step, (loss, accuracy, kpi) in enumerate(curve, start=1):
            client.register_checkpoint(
                model="det",
                checkpoint=f"ckpt-{step}",
                step=step,
                run=f"run-{desc}",
                data={"train": version},
                metrics={"loss": loss, "val_accuracy": accuracy, "kpi": kpi},
            )
    return names


def test_best_is_the_highest_accuracy_and_the_lowest_loss(client: rk.Client) -> None:
    names = _train(client)
    accuracy = client.compare("det", metric="val_accuracy")
    assert accuracy.direction == "max" and accuracy.direction_known
    assert {g.data: g.best for g in accuracy.groups} == {
        names["first"]: 0.70,
        names["second"]: 0.90,
    }
    assert accuracy.best_group is not None and accuracy.best_group.data == names["second"]
    group = accuracy.to_json()["groups"][0]
    assert (group["best"], group["min"], group["max"]) == (0.70, 0.50, 0.70)
    assert "best = highest" in accuracy.to_text()

    loss = client.compare("det", metric="loss")
    assert loss.direction == "min"
    assert {g.data: g.best for g in loss.groups} == {names["first"]: 0.6, names["second"]: 0.4}
    assert loss.best_group is not None and loss.best_group.data == names["second"]


def test_a_name_that_says_nothing_is_assumed_lower_and_said_so(client: rk.Client) -> None:
    names = _train(client)
    assumed = client.compare("det", metric="kpi")
    assert (assumed.direction, assumed.direction_known) == ("min", False)
    assert "assumed" in assumed.to_text()
    said = client.compare("det", metric="kpi", direction="max")
    assert {g.data: g.best for g in said.groups} == {names["first"]: 9.0, names["second"]: 5.0}
    assert "assumed" not in said.to_text()
    with pytest.raises(rk.InvalidInput, match="direction"):
        client.compare("det", metric="kpi", direction="up")


def test_cli_direction(runner: CliRunner, client: rk.Client) -> None:
    names = _train(client)
    shown = runner.invoke(cli.app, ["compare", "det", "--metric", "val_accuracy"])
    assert shown.exit_code == 0, shown.output
    assert "best = highest" in shown.output and "best" in shown.output
    body = json.loads(
        runner.invoke(
            cli.app, ["compare", "det", "--metric", "kpi", "--direction", "max", "--json"]
        ).output
    )
    assert body["direction"] == "max" and body["direction_known"] is True
    assert {g["data"]: g["best"] for g in body["groups"]} == {
        names["first"]: 9.0,
        names["second"]: 5.0,
    }
    bad = runner.invoke(cli.app, ["compare", "det", "--direction", "sideways"])
    assert bad.exit_code != 0 and "direction" in bad.output

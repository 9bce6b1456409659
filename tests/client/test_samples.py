"""Sample records (issue 26, item 6): publishing, a writer's and a derivation's commit send the
first records of each split, decoded, with the version (no extra pass over the data);
``client.record_sample`` / ``recordkeeper head REF --record-sample`` attach one afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from tests.client._records import example_bytes, write_tfrecord

pytest.importorskip("fastapi")


def _labels(sample: dict[str, Any], split: str) -> list[Any]:
    records = next(s["records"] for s in sample["splits"] if s["split"] == split)
    return [r["features"].get("label") for r in records]


def test_the_writer_sends_the_records_that_streamed_by(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real_head = rk.DatasetVersion.head
    monkeypatch.setattr(
        rk.DatasetVersion,
        "head",
        lambda self, *a, **k: reads.append(a[0]) or real_head(self, *a, **k),
    )
    with client.writer("coco", shard_size="1kB") as w:
        for i in range(40):
            w.write(example_bytes({"label": [i], "caption": [b"record %d" % i]}), split="train")
        w.write(example_bytes({"label": [99]}), split="validation")
    sample = client.sample(w.version.name)
    assert sample is not None and sample["source"] == "publish"
    assert _labels(sample, "train") == [[0], [1], [2]]
    assert _labels(sample, "validation") == [[99]]
    first = sample["splits"][0]["records"][0]
    assert first["features"]["caption"] == ["record 0"] and first["kind"] == "example"
    assert reads == []  # from the records written, no read of storage


def test_publish_and_derive_send_one_and_sampling_can_be_off(
    client: rk.Client, tmp_path: Path
) -> None:
    data = tmp_path / "store" / "raw"
    data.mkdir(parents=True)
    write_tfrecord(
        data / "train-00000-of-00002.tfrecord", [example_bytes({"label": [i]}) for i in range(5)]
    )
    write_tfrecord(data / "train-00001-of-00002.tfrecord", [example_bytes({"label": [9]})])
    published = client.publish(rk.Dataset.from_directory(data, name="raw"), progress=False)
    sample = client.sample(published.name)
    assert sample is not None and _labels(sample, "train") == [[0], [1], [2]]
    with client.derive(published.name) as d:
        d.write(example_bytes({"label": [7]}), split="extra")
    derived = client.sample(d.version.name)
    assert derived is not None
    assert _labels(derived, "extra") == [[7]] and _labels(derived, "train") == [[0], [1], [2]]
    with client.writer("quiet", sample_records=0) as w:
        w.write(example_bytes({"label": [1]}))
    assert client.sample(w.version.name) is None


def test_record_sample_and_the_cli_attach_one_later(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    with client.writer("coco", shard_size="1kB", sample_records=0) as w:
        for i in range(20):
            w.write(example_bytes({"label": [i], "blob": [bytes(range(200))]}), split="train")
    name = w.version.name
    assert client.sample(name) is None
    stored = client.record_sample("coco@latest", records=2)
    assert stored["source"] == "attach" and _labels(stored, "train") == [[0], [1]]
    assert stored["splits"][0]["records"][0]["features"]["blob"][0].startswith("<200 bytes: 0001")
    assert client.sample(name) == stored
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["head", "coco@latest", "-n", "4", "--record-sample"])
    assert result.exit_code == 0, result.output
    assert f"{name}: stored a sample of 4 records (1 split)" in result.stdout
    assert "label: [3]" in result.stdout
    as_json = CliRunner().invoke(
        app, ["head", "coco@latest", "-n", "1", "--record-sample", "--json"]
    )
    assert json.loads(as_json.stdout)["sample"]["splits"][0]["records"][0]["index"] == 0
    with pytest.raises(rk.InvalidSample):
        body = {"splits": [{"split": "nope", "records": []}]}  # not a split of the version
        client.registry.http.api("PUT", f"/versions/{name}/sample", json=body)


def test_head_cuts_a_long_value_list_as_the_sample_does(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MNIST-like record printed all its 784 pixel values per record; the UI says its
    sample is decoded "as recordkeeper head shows them", and the sample keeps 50."""
    from recordkeeper.cli import common
    from recordkeeper.cli.app import app

    with client.writer("pixels") as w:
        w.write(example_bytes({"image": [0.5] * 784, "label": [7]}), split="train")
    monkeypatch.setattr(common, "Client", lambda *a, **k: client)
    result = CliRunner().invoke(app, ["head", "pixels@latest", "-n", "1"])
    assert result.exit_code == 0, result.output
    fifty = ", ".join(["0.5"] * 50)  # one line, longer than a pipe's 240 columns
    assert f"  image: [{fifty}, …] (784 values; --json shows all)\n" in result.stdout
    assert "  label: [7]\n" in result.stdout
    as_json = CliRunner().invoke(app, ["head", "pixels@latest", "-n", "1", "--json"])
    assert json.loads(as_json.stdout)["records"][0]["features"]["image"] == [0.5] * 784


def test_a_sample_that_cannot_be_stored_warns_and_the_version_stays(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise rk.InvalidSample("refused")

    real = client.registry.http.api

    def api(method: str, path: str, **kwargs: Any) -> Any:
        return (
            refuse()
            if path.endswith("/sample") and method == "PUT"
            else real(method, path, **kwargs)
        )

    monkeypatch.setattr(client.registry.http, "api", api)
    with (
        pytest.warns(RuntimeWarning, match="sample records were not stored"),
        client.writer("coco") as w,
    ):
        w.write(example_bytes({"label": [1]}))
    assert client.resolve(w.version.name).state == "committed"

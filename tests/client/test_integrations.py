"""The bridges against the real components: an ``mlflow server`` (SQLite backend) started here,
OpenLineage events through openlineage-python's HTTP and file transports to a real HTTP consumer
(validated against the OpenLineage JSON schema, vendored in tests/client/openlineage_spec from
the OpenLineage repository, Apache-2.0), Hugging Face ``datasets`` and pandas.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper.errors import CorruptShard
from tests.client._records import example_bytes
from tests.servers.mlflow_server import mlflow_server as start_mlflow_server
from tests.servers.ports import LOCALHOST

pytest.importorskip("fastapi")
SPEC = Path(__file__).parent / "openlineage_spec"


def _publish(
    client: rk.Client, desc: str = "first", n: int = 30, **provenance: Any
) -> rk.DatasetVersion:
    with client.writer("coco", desc=desc, shard_size=400, **provenance) as w:
        for i in range(n):
            record = example_bytes(
                {"label": [i % 10], "image": [b"<img-%d>" % i], "score": [i / 4.0]}
            )
            w.write(record, split="train" if i < n - 10 else "validation")
    return w.version


# -- MLflow ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("mlflow")
    with start_mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


def test_log_data_shows_the_versions_as_mlflow_dataset_inputs(
    client: rk.Client, mlflow_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    from recordkeeper.integrations.mlflow import active_run_metadata, log_data

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    mlflow.set_tracking_uri(mlflow_server)
    train = _publish(client)
    evaluation = _publish(client, "second", 40)
    with mlflow.start_run() as run:
        logged = log_data({"train": train, "eval": evaluation}, client=client)
        again = log_data({"train": train}, client=client)  # once per run and role
        metadata = active_run_metadata()
    assert [d.name for d in logged] == [train.name, evaluation.name] and again == []
    assert metadata["mlflow_run_id"] == run.info.run_id

    got = mlflow.MlflowClient(mlflow_server).get_run(run.info.run_id)
    inputs = {i.dataset.name: i for i in got.inputs.dataset_inputs}
    assert set(inputs) == {train.name, evaluation.name}
    ds = inputs[train.name]
    assert ds.dataset.source_type == "recordkeeper"
    source = json.loads(ds.dataset.source)
    assert source["content_digest"] == train.content_digest
    assert source["storage_prefix"] == train.storage_prefix
    assert train.content_digest and train.content_digest.endswith(ds.dataset.digest) is False
    assert ds.dataset.digest in train.content_digest
    columns = {c["name"]: c["type"] for c in json.loads(ds.dataset.schema)["mlflow_colspec"]}
    assert columns == {"image": "binary", "label": "long", "score": "float"}
    assert json.loads(ds.dataset.profile)["splits"]["train"]["record_count"] == 20
    tags = {t.key: t.value for t in ds.tags}
    assert tags["mlflow.data.context"] == "train" and tags["recordkeeper.version"] == train.name
    assert got.data.tags["recordkeeper.data.train"] == train.name
    assert got.data.tags["recordkeeper.data.eval"] == evaluation.name
    assert got.data.tags["recordkeeper.data.train.digest"] == train.content_digest


def test_importing_recordkeeper_imports_no_bridge() -> None:
    import subprocess

    code = (
        "import sys, recordkeeper, recordkeeper.tf;"
        "print(sorted(m for m in ('mlflow','openlineage','datasets','pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- OpenLineage -------------------------------------------------------------------------------


class _Consumer(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append({"path": self.path, "event": json.loads(body)})
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def lineage_consumer() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Consumer", (_Consumer,), {"received": []})
    server = HTTPServer((LOCALHOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOCALHOST}:{server.server_port}", handler.received
    finally:
        server.shutdown()
        server.server_close()


def _validators() -> tuple[Any, dict[str, Any]]:
    import jsonschema_rs

    schemas = {}
    for path in SPEC.glob("*.json"):
        schema = json.loads(path.read_text())
        schemas[schema["$id"]] = schema
    main = next(s for s in schemas.values() if s["$id"].endswith("/OpenLineage.json"))

    def retrieve(uri: str) -> Any:
        return schemas[uri.split("#")[0]]

    event = jsonschema_rs.validator_for(main, retriever=retrieve, validate_formats=True)
    facets = {
        "schema": "SchemaDatasetFacet",
        "version": "DatasetVersionDatasetFacet",
        "jobType": "JobTypeJobFacet",
    }
    by_name = {}
    for key, name in facets.items():
        schema = next(s for i, s in schemas.items() if i.endswith(f"/{name}.json"))
        by_name[key] = jsonschema_rs.validator_for(schema, retriever=retrieve)
    return event, by_name


def _validate(event: dict[str, Any]) -> None:
    validator, facets = _validators()
    validator.validate(event)
    for dataset in event.get("inputs", []) + event.get("outputs", []):
        for key, facet in dataset.get("facets", {}).items():
            facets[key].validate({key: facet})
    for key, facet in event["job"].get("facets", {}).items():
        facets[key].validate({key: facet})


def test_publishing_emits_openlineage_start_and_complete_over_http(
    client: rk.Client,
    tmp_path: Path,
    lineage_consumer: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openlineage.client")
    url, received = lineage_consumer
    assert _publish(client, "off") and received == []  # off by default
    monkeypatch.setenv("RECORDKEEPER_OPENLINEAGE_URL", url)
    v = _publish(client, "on", 31)
    events = [r["event"] for r in received]
    assert {r["path"] for r in received} == {"/api/v1/lineage"}
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        _validate(event)
    start, complete = events
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert complete["job"] == {
        **complete["job"],
        "namespace": "recordkeeper",
        "name": "publish.coco",
    }
    (output,) = complete["outputs"]
    assert output["name"] == v.name and output["namespace"] == "recordkeeper://testserver"
    assert output["facets"]["version"]["datasetVersion"] == v.content_digest
    fields = {f["name"]: f["type"] for f in output["facets"]["schema"]["fields"]}
    assert fields == {"image": "bytes", "label": "int64", "score": "float"}
    # the inputs are the version's provenance: its parent version and its raw source
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "annotations.json").write_text("{}")
    received.clear()
    _publish(client, "derived", 32, parents=[v.name], sources=[str(raw)], code=None)
    start = received[0]["event"]
    _validate(start)
    names = {(i["namespace"], i["name"]) for i in start["inputs"]}
    assert ("recordkeeper://testserver", v.name) in names
    assert any(name.endswith("/raw") for _, name in names), names


def test_training_events_name_the_consumed_versions_and_the_checkpoint(
    client: rk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openlineage.client")
    from recordkeeper.checkpoint_lineage import CheckpointRef
    from recordkeeper.integrations.openlineage import emit_training
    from recordkeeper.tf.saves import SavedCheckpoint

    v = _publish(client)
    events_file = tmp_path / "events.jsonl"
    monkeypatch.setenv("RECORDKEEPER_OPENLINEAGE_FILE", str(events_file))
    body = {"data": [{"version": v.name, "role": "train", "splits": None}]}
    saved = SavedCheckpoint("/ckpt/ckpt-3", CheckpointRef("det", "ckpt-3", "r1"), body, None, ())
    emit_training(client, saved)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in events:
        _validate(event)
    assert [i["name"] for i in events[1]["inputs"]] == [v.name]
    assert events[1]["outputs"][0]["name"] == "det@r1/ckpt-3"
    assert events[1]["job"]["name"] == "train.det"


# -- Hugging Face datasets, pandas, notebook display -------------------------------------------


def test_to_hf_dataset_decodes_the_records_without_tensorflow(
    client: rk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    v = client.resolve(_publish(client).name)
    ds = v.to_hf_dataset("train")
    assert len(ds) == 20
    assert ds[3] == {"image": b"<img-3>", "label": 3, "score": 0.75}
    streamed = list(v.to_hf_dataset("validation", streaming=True))
    assert [r["label"] for r in streamed] == [i % 10 for i in range(20, 30)]
    with pytest.raises(KeyError):
        v.to_hf_dataset("nope")


def test_to_hf_dataset_refuses_a_shard_whose_bytes_changed(client: rk.Client) -> None:
    pytest.importorskip("datasets")
    v = client.resolve(_publish(client).name)
    shard = v.splits["validation"].shards[0]
    path = Path(shard.uri.removeprefix("file://"))
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptShard):
        list(v.to_hf_dataset("validation", streaming=True))


def test_to_pandas_and_notebook_display_escape_everything(client: rk.Client) -> None:
    pandas = pytest.importorskip("pandas")
    import dataclasses

    from recordkeeper.integrations.html import diff_html
    from recordkeeper.integrations.pandas import to_pandas

    v = _publish(client)
    listed = client.versions("coco")
    frame = listed.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and list(frame["name"]) == [v.name]
    assert listed == [client.versions("coco")[0]]  # still a list
    assert "showing" not in listed._repr_html_() and v.name in listed._repr_html_()
    shards = client.resolve(v.name).shards.to_pandas()
    assert len(shards) == v.shard_count and "sha256" in shards.columns
    shown = dataclasses.replace(client.resolve(v.name), created_by="<script>alert(1)</script>")
    html = shown._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "content digest" in html and v.content_digest in html
    diff = client.diff(v.name, _publish(client, "other", 31).name)
    assert len(to_pandas(diff)) > 0 and diff._repr_html_() == diff_html(diff)
    assert "<table" in diff._repr_html_()


def test_checkpoints_lineage_and_compare_as_dataframes_and_html(client: rk.Client) -> None:
    pytest.importorskip("pandas")
    from recordkeeper.integrations.pandas import to_pandas

    v = _publish(client)
    for k in (1, 2):
        client.register_checkpoint(
            model="det",
            checkpoint=f"ckpt-{k}",
            step=k,
            uri=f"file:///models/det/ckpt-{k}",
            data={"train": v},
            parent="det/ckpt-1" if k == 2 else None,
            metrics={"loss": 1.0 / k},
            metadata={"note": "<b>bold</b>"},
        )
    frame = client.checkpoints("det").to_pandas()
    assert frame.equals(to_pandas(client.checkpoints("det")))
    assert list(frame["checkpoint"]) == ["ckpt-2", "ckpt-1"] and "ref" in frame.columns
    lineage = client.lineage("det/ckpt-2")
    rows = lineage.to_pandas()
    assert set(rows["version"]) == {v.name} and set(rows["role"]) == {"train"}
    html = lineage._repr_html_()
    assert v.name in html and "lineage of det@" in html and "<b>" not in html
    points = client.compare("det", metric="loss").to_pandas()
    assert sorted(points["value"]) == [0.5, 1.0]
    assert len(client.consumers(v.name).to_pandas()) == 2

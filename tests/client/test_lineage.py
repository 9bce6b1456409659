"""The client's lineage calls and the registration queue, against the real app in-process."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from recordkeeper.checkpoint_lineage import DataUse, normalize_data
from recordkeeper.core.lineage import run_of
from recordkeeper.lineage_queue import RegistrationQueue, RegistrationRejected
from tests.client import _lineage_app
from tests.client._lineage_app import Switch, publish
from tests.core.test_lineage import one_entry_columns

# Fixtures shared with test_lineage_cli.py.
app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client

pytest.importorskip("fastapi")


def test_normalize_data_forms() -> None:
    assert normalize_data(
        {"train": "coco@v1", "eval": ["coco@v2", {"version": "coco@v3", "splits": "test"}]}
    ) == [
        DataUse("coco@v1", "train"),
        DataUse("coco@v2", "eval"),
        DataUse("coco@v3", "eval", ("test",)),
    ]
    assert normalize_data([{"ref": "coco@v1", "role": "test"}, DataUse("coco@v1")]) == [
        DataUse("coco@v1", "test"),
        DataUse("coco@v1", "train"),
    ]
    assert (
        normalize_data({"train": "coco@v1", "extra": {"ref": "x@v1", "role": "train"}})[1].role
        == "train"
    )
    for bad in (
        {"finetune": "coco@v1"},
        "coco@v1",
        {"train": {"splits": ["a"]}},
    ):
        with pytest.raises(rk.InvalidCheckpoint):
            normalize_data(bad)
    for bad_ref in ({"train": 3}, {"train": "coco@@"}):  # as the service answers: not a checkpoint
        with pytest.raises(rk.InvalidReference):
            normalize_data(bad_ref)


def _answer(entries: int) -> dict[str, Any]:
    """An upstream answer as the service gives it: ``entries`` versions used by one segment."""
    segment = {
        "model": "det",
        "run": "r1",
        "checkpoint": "ckpt-1",
        "ref": "det@r1/ckpt-1",
        "state": "present",
        "step": 1,
        "depth": 0,
        "splits": ["train"],
    }
    data = [
        {
            "version": f"coco_20231015_v{i}",
            "dataset": "coco",
            "number": i,
            "content_digest": None,
            "state": "committed",
            "role": "train",
            "splits": ["train"],
            "segments": [segment],
        }
        for i in range(1, entries + 1)
    ]
    return {
        "checkpoint": {"model": "det", "checkpoint": "ckpt-1", "run": "r1", "state": "present"},
        "chain": [{k: segment[k] for k in ("model", "run", "checkpoint", "ref", "state")}],
        "data": data,
        "versions": [e["version"] for e in data],
    }


def test_lineage_builds_its_entries_on_first_access(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from recordkeeper.core.lineage import LineageEntry

    built: list[str] = []
    real = LineageEntry.from_json

    def counting(body: Any) -> LineageEntry:
        built.append(body["version"])
        return real(body)

    monkeypatch.setattr(LineageEntry, "from_json", counting)
    body = _answer(3)
    lineage = rk.Lineage.from_dict(body)
    # what needs no entries builds none: versions come from the answer
    assert lineage.versions == ["coco_20231015_v1", "coco_20231015_v2", "coco_20231015_v3"]
    assert lineage.checkpoint.ref == rk.CheckpointRef("det", "ckpt-1", "r1")
    assert [link["ref"] for link in lineage.chain] == ["det@r1/ckpt-1"]
    assert built == []
    assert [e.number for e in lineage.data] == [1, 2, 3]
    assert lineage.data[0].segments[0].ref == rk.CheckpointRef("det", "ckpt-1", "r1")
    assert len(built) == 3
    assert lineage.for_role("train") == list(lineage.data) and len(built) == 3  # built once
    # a plain frozen dataclass to its users: equality, repr, replace, versions from data
    eager = rk.Lineage(lineage.checkpoint, lineage.chain, lineage.data)
    assert eager == lineage == rk.Lineage.from_dict(body)
    assert rk.Lineage.from_dict(body) == eager  # compared before its first access
    assert "coco_20231015_v2" in repr(rk.Lineage.from_dict(body))
    fewer = dataclasses.replace(rk.Lineage.from_dict(body), data=lineage.data[:1])
    assert fewer.versions == ["coco_20231015_v1"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        lineage.data = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        lineage.nothing  # type: ignore[attr-defined]  # noqa: B018


def test_malformed_compact_answers_are_server_errors() -> None:
    body = _answer(2)
    columns = one_entry_columns([5, "train"])  # no chain link at depth 5
    chain = [{**link, "depth": 0, "step": 1} for link in body["chain"]]
    packed = {**body, "chain": chain, "data": None, "compact": {"columns": columns}}
    lineage = rk.Lineage.from_dict(packed)
    assert lineage.versions == ["coco_20231015_v1", "coco_20231015_v2"]  # from the answer
    with pytest.raises(rk.ServerError, match=r"malformed compact lineage.*depth 5"):
        lineage.data  # noqa: B018
    columns["uses"] = [[0, "train"]]
    assert rk.Lineage.from_dict(packed).data[0].segments[0].ref.checkpoint == "ckpt-1"


def test_graph_nodes_and_consumers_read_the_data_state() -> None:
    version = {
        "id": "version:coco_20231015_v1",
        "kind": "version",
        "name": "coco_20231015_v1",
        "data_state": "deleted",
        "data_deleted_at": "2026-12-01T10:00:00Z",
        "data_deleted_reason": "retention",
    }
    stored = {"id": "version:coco_20231016_v2", "kind": "version", "name": "coco_20231016_v2"}
    checkpoint = {"id": "checkpoint:det@r1/ckpt-1", "kind": "checkpoint", "model": "det"}
    graph = rk.LineageGraph.from_dict(
        {"root": checkpoint["id"], "nodes": [checkpoint, version, stored], "edges": []}
    )
    ckpt, gone, kept = graph.nodes
    assert gone.data_deleted and gone.data_status() == "data deleted 2026-12-01 (retention)"
    assert (kept.data_state, kept.data_deleted, kept.data_status()) == ("stored", False, "stored")
    assert (ckpt.data_state, ckpt.data_deleted, ckpt.data_status()) == (None, False, None)
    consumers = rk.Consumers.from_dict(
        {"versions": [{**version, "content_digest": None}], "data": [], "models": [], "count": 0}
    )
    assert consumers.data_deleted == {"coco_20231015_v1": "data deleted 2026-12-01 (retention)"}
    assert rk.Consumers.from_dict({"versions": [stored], "count": 0}).data_deleted == {}


def test_register_lineage_consumers_graph(client: rk.Client) -> None:
    v1 = publish(client, "first")
    for k in (1, 2):
        info = client.register_checkpoint(
            model="det",
            checkpoint=f"ckpt-{k}",
            step=k,
            uri=f"file:///models/det/ckpt-{k}",
            data={"train": v1, "eval": v1},
            parent=f"det/ckpt-{k - 1}" if k > 1 else None,
        )
        assert info.created is True and info.versions == [v1.name]
    again = client.register_checkpoint(
        model="det",
        checkpoint="ckpt-2",
        step=2,
        uri="file:///models/det/ckpt-2",
        data={"train": v1, "eval": v1},
        parent="det/ckpt-1",
    )
    assert again.created is False
    with pytest.raises(rk.CheckpointConflict) as conflict:
        client.register_checkpoint(
            model="det",
            checkpoint="ckpt-2",
            step=3,
            uri="file:///models/det/ckpt-2",
            data={"train": v1},
        )
    assert set(conflict.value.extra["fields"]) >= {"step", "parent", "data"}
    run = run_of(None, "file:///models/det/ckpt-1")  # the directory's run
    assert again.run == run and again.ref == rk.CheckpointRef("det", "ckpt-2", run)
    v2 = publish(client, "second")
    client.register_checkpoint(
        model="det",
        checkpoint="ckpt-3",
        step=3,
        uri="file:///models/det/ckpt-3",
        data={"train": "coco@latest"},
        parent="det/ckpt-2",
        saved_models={"serving": "file:///models/det/ckpt-3_saved_modules/serving"},
    )
    lineage = client.lineage("det/ckpt-3")  # asked in the compact form
    assert lineage == rk.Lineage.from_dict(client.lineage_json("det/ckpt-3"))  # the full form
    packed = client.lineage_json("det/ckpt-3", form="compact")
    assert packed["data"] is None and set(packed["compact"]["columns"]) >= {"version", "uses"}
    assert lineage.versions == [v1.name, v2.name]
    assert [e.role for e in lineage.for_role("eval")] == ["eval"]
    train_v1 = next(e for e in lineage.data if e.version == v1.name and e.role == "train")
    assert [s.checkpoint for s in train_v1.segments] == ["ckpt-1", "ckpt-2"]
    assert lineage.checkpoint.saved_models[0].uri.endswith("ckpt-3_saved_modules/serving")
    assert lineage.checkpoint.parent == rk.CheckpointRef("det", "ckpt-2", run)

    r = f"det@{run}"
    used = client.consumers(v1)
    assert used.refs == [f"{r}/ckpt-1", f"{r}/ckpt-2", f"{r}/ckpt-3"]
    assert [c.direct for c in used.checkpoints] == [True, True, False]
    assert used.model_names == ["det"]
    assert client.consumers("coco@v1", transitive=False).refs == [f"{r}/ckpt-1", f"{r}/ckpt-2"]
    shard = v2.splits["train"].shards[0]
    assert client.shard_consumers(shard.uri).refs == [f"{r}/ckpt-3"]
    assert client.shard_consumers(shard.sha256).refs == [f"{r}/ckpt-3"]
    assert client.shard_consumers(v2.splits["validation"].shards[0].sha256).count == 0
    graph = client.lineage_graph(checkpoint="det/ckpt-2", depth=1)
    assert graph.root == f"checkpoint:{r}/ckpt-2"
    assert {n.id for n in graph.nodes} >= {f"checkpoint:{r}/ckpt-1", f"checkpoint:{r}/ckpt-3"}
    assert [m.name for m in client.models()] == ["det"]
    assert [c.checkpoint for c in client.checkpoints("det")] == ["ckpt-3", "ckpt-2", "ckpt-1"]
    with pytest.raises(rk.CheckpointNotFound):
        client.lineage("det/ckpt-9")
    with pytest.raises(rk.ModelNotFound):
        client.checkpoints("nobody")

    with pytest.raises(rk.VersionInUse) as in_use:
        client.deprecate(v1, "bad labels")
    assert in_use.value.extra["checkpoints"] == [f"{r}/ckpt-1", f"{r}/ckpt-2"]
    assert client.deprecate(v1, "bad labels", force=True).state == "deprecated"


def test_invalid_input_is_refused_before_any_request(client: rk.Client, switch: Switch) -> None:
    with pytest.raises(rk.InvalidCheckpoint):
        client.register_checkpoint(model="Det", checkpoint="ckpt-1")
    with pytest.raises(rk.InvalidCheckpoint):
        client.register_checkpoint(model="det", checkpoint="ckpt-1", step=-1)
    with pytest.raises(rk.InvalidCheckpoint):
        client.register_checkpoint(model="det", checkpoint="ckpt-1", parent="det/ckpt-1")
    with pytest.raises(rk.InvalidCheckpoint):
        client.shard_consumers("not-a-uri")
    assert switch.requests == []


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.consumers("mnist_classifier/ckpt-2"),
        lambda c: c.consumers("coco"),
        lambda c: c.lineage_graph(version="coco@@"),
        lambda c: c.check_model("det/ckpt-1", data=["coco"]),
    ],
)
def test_a_bad_version_reference_is_invalid_reference(
    client: rk.Client, switch: Switch, call: Any
) -> None:
    """The text is a version reference: ``invalid_reference``, as the service answers, not
    ``invalid_checkpoint``; refused before any request."""
    with pytest.raises(rk.InvalidReference) as caught:
        call(client)
    assert caught.value.code == "invalid_reference"
    assert not isinstance(caught.value, rk.InvalidCheckpoint)
    assert switch.requests == []


def _body(model: str, name: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    from recordkeeper.checkpoint_lineage import checkpoint_body

    return checkpoint_body(model=model, checkpoint=name, parent=parent, **extra)


def test_queue_keeps_order_and_never_loses_or_duplicates(
    client: rk.Client, switch: Switch, tmp_path: Path
) -> None:
    v1 = publish(client, "first")
    queue = RegistrationQueue(client, tmp_path / "q" / "pending.jsonl")
    assert queue.submit(_body("det", "ckpt-1", data={"train": v1})) is not None
    switch.down = True
    assert queue.submit(_body("det", "ckpt-2", "det/ckpt-1", data={"train": v1})) is None
    assert queue.submit(_body("det", "ckpt-3", "det/ckpt-2", data={"train": v1})) is None
    lines = [json.loads(x) for x in queue.path.read_text().splitlines()]
    assert [x["body"]["checkpoint"] for x in lines] == ["ckpt-2", "ckpt-3"]
    assert all(x["url"] == client.url for x in lines)
    switch.down = False
    # the next registration sends the queued ones first, in order (ckpt-3's parent is ckpt-2)
    info = queue.submit(_body("det", "ckpt-4", "det/ckpt-3", data={"train": v1}))
    assert info is not None and info.checkpoint == "ckpt-4"
    puts = [path for method, path in switch.requests if method == "PUT" and "/checkpoints/" in path]
    assert [p.rsplit("/", 1)[-1] for p in puts] == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    assert not queue.path.exists() and queue.pending() == []
    assert [c.checkpoint for c in client.checkpoints("det")] == [
        "ckpt-4",
        "ckpt-3",
        "ckpt-2",
        "ckpt-1",
    ]
    # a crash after the answer but before the file was rewritten: sending again is harmless
    queue._append(
        queue.path, queue._entry(_body("det", "ckpt-4", "det/ckpt-3", data={"train": v1}), None)
    )
    result = queue.flush()
    assert result.pending == 0 and result.registered[0].created is False
    assert len(client.checkpoints("det")) == 4


def test_queue_sets_refused_entries_aside_and_keeps_unknown_parents(
    client: rk.Client, tmp_path: Path
) -> None:
    v1 = publish(client, "first")
    queue = RegistrationQueue(client, tmp_path / "pending.jsonl")
    entries = [
        _body("det", "ckpt-1", data={"train": "coco@v9"}),  # refused: no such version
        _body("det", "ckpt-7", "old/ckpt-6", data={"train": v1}),  # parent never registered
    ]
    for body in entries:
        queue._append(queue.path, queue._entry(body, None))
    with pytest.warns(RegistrationRejected, match="no version 9"):
        result = queue.flush()
    assert (result.pending, result.rejected, len(result.registered)) == (0, 1, 1)
    rejected = [json.loads(x) for x in queue.rejected_path.read_text().splitlines()]
    assert rejected[0]["error"]["code"] == "version_not_found"
    kept = client.checkpoint("det/ckpt-7")
    assert kept.parent is None and kept.metadata["unregistered_parent"] == "old/ckpt-6"


def test_queue_when_nothing_listens(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = rk.Client(f"http://127.0.0.1:{port}", retries=0)
    queue = RegistrationQueue(down, tmp_path / "pending.jsonl")
    assert queue.submit(_body("det", "ckpt-1")) is None
    result = queue.flush()
    assert result.pending == 1 and result.registered == ()
    assert queue.pending()[0]["checkpoint"] == "ckpt-1"
    # other services' entries in a shared file are left alone
    other = RegistrationQueue(rk.Client("http://127.0.0.1:1", retries=0), queue.path)
    assert other.pending() == []


def test_lineage_asks_the_packed_form_then_compact_from_an_older_service(
    client: rk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``client.lineage`` asks for the packed form; a service without it (422 naming ``form``)
    is asked for the compact form from then on.  Both give the full form's lineage, and a
    packed answer's ``consumed`` (built on first access) is the full form's."""
    v1 = publish(client, "first")
    for k in (1, 2):
        client.register_checkpoint(
            model="det",
            checkpoint=f"ckpt-{k}",
            step=k,
            uri=f"file:///models/det/ckpt-{k}",
            data=[
                {"version": v1, "role": "train", "records": 5 * k},
                {"version": v1, "role": "eval"},
            ],
            parent=f"det/ckpt-{k - 1}" if k > 1 else None,
        )
    full = rk.Lineage.from_dict(client.lineage_json("det/ckpt-2"))
    assert {c["role"]: c["records"] for c in full.consumed} == {"train": 15, "eval": 0}
    packed = client.lineage("det/ckpt-2")
    assert "consumed" not in packed.__dict__  # not built yet
    assert packed.versions == full.versions and "data" not in packed.__dict__
    assert packed == full and packed.consumed == full.consumed
    assert packed.epochs(v1.name) == full.epochs(v1.name) is not None

    asked: list[str | None] = []
    real = client.http.api

    def older_service(method: str, path: str, **kwargs: Any) -> Any:
        form = (kwargs.get("params") or {}).get("form")
        asked.append(form)
        if form == "packed":
            raise rk.InvalidRequest("query.form: Input should be 'full' or 'compact'")
        return real(method, path, **kwargs)

    monkeypatch.setattr(client.http, "api", older_service)
    monkeypatch.setattr(client.http, "refused_forms", set())
    assert client.lineage("det/ckpt-2") == full
    assert client.lineage("det/ckpt-1").versions == [v1.name]
    assert asked == ["packed", "compact", "compact"]

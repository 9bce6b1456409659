"""Issue 21, item 1: a training job killed inside a tracked save does not cut the lineage.

A real ``tf.train.CheckpointManager`` subclass (the ``SavedModelCheckpointManager`` stand-in)
runs in a subprocess against the live service (a real socket) and is killed with SIGKILL in
each window of its third save: during the SavedModel export (checkpoint files written,
``ckpt-1`` already deleted by ``max_to_keep``), just before the registration is sent, and just
before the deletion that save made is recorded.  A resumed process trains on newer data from
the checkpoint on disk: ``ckpt-3`` is registered with the data it trained on (v1) and its parent,
``ckpt-4`` descends from it, ``ckpt-1``'s deletion is recorded, and the CLI's tree ends at a real
root.  On main, ``ckpt-3`` stayed unregistered and ``ckpt-4`` had only
``metadata.unregistered_parent``: "which data trained ckpt-4" answered v2 alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.core.lineage import run_for_directory
from recordkeeper.lineage_queue import RegistrationQueue
from tests.integration.conftest import LiveService

ROOT = Path(__file__).resolve().parents[2]


def publish(client: rk.Client, desc: str) -> rk.DatasetVersion:
    with client.writer("crash_data", desc=desc) as w:
        for i in range(8):
            w.write(f"{desc}-{i}".encode(), split="train")
    return client.resolve(w.version.name)


def killed_trainer(
    service: LiveService, directory: Path, queue: Path, data: str, where: str
) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration._crash_trainer",
            service.url,
            str(directory),
            str(queue),
            data,
            "3",
            where,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == -9, (done.returncode, done.stderr[-3000:])


@pytest.mark.tf
@pytest.mark.parametrize("where", ["export", "register", "delete"])
def test_a_job_killed_inside_save_keeps_its_chain_data_and_deletions(
    live_service: LiveService, tensorflow: ModuleType, tmp_path: Path, where: str
) -> None:
    client = live_service.client()
    v1, v2 = publish(client, "first"), publish(client, "second")
    directory, queue = tmp_path / "run", tmp_path / "queue.jsonl"
    killed_trainer(live_service, directory, queue, v1.name, where)
    assert (directory / "ckpt-3.index").exists()  # the checkpoint the killed save wrote
    assert not (directory / "ckpt-1.index").exists()  # and the one it deleted

    # the job is resumed: a new process, newer data, restoring the latest checkpoint
    from tests.integration._crash_trainer import tracked

    resumed = tracked(live_service.url, str(directory), str(queue), v2.name)
    assert resumed.restore_or_initialize().endswith("ckpt-3")
    assert resumed.save().endswith("ckpt-4")

    run = run_for_directory(directory.as_uri())
    ref = lambda n: rk.CheckpointRef("crashy", f"ckpt-{n}", run)  # noqa: E731
    third = client.checkpoint(ref(3))
    assert third.parent == ref(2) and third.versions == [v1.name]
    assert third.uri == (directory / "ckpt-3").as_uri()
    if where != "export":  # its export was complete when the process died
        assert [s.name for s in third.saved_models] == ["serving"]
    fourth = client.checkpoint(ref(4))
    assert fourth.parent == ref(3) and "unregistered_parent" not in fourth.metadata
    lineage = client.lineage(ref(4))
    assert lineage.versions == [v1.name, v2.name]  # the killed segment's data is not lost
    assert [link["checkpoint"] for link in lineage.chain] == [f"ckpt-{n}" for n in (4, 3, 2, 1)]
    assert client.checkpoint(ref(1)).deleted  # the deletion the killed save made
    assert client.checkpoint(ref(2)).deleted  # and the one the resumed save made
    assert not RegistrationQueue(client, queue).pending()
    assert not (directory / ".recordkeeper-save-intent.json").exists()

    out = CliRunner().invoke(cli.app, ["--url", live_service.url, "lineage", str(ref(4))])
    assert out.exit_code == 0, out.output
    assert out.output.count("root") == 1 and "not registered" not in out.output, out.output


def test_cli_never_calls_a_checkpoint_with_an_unregistered_parent_root(
    live_service: LiveService, tmp_path: Path
) -> None:
    client = live_service.client()
    v1 = publish(client, "first")
    queue = RegistrationQueue(client, tmp_path / "queue.jsonl")
    body = rk.checkpoint_lineage.checkpoint_body(
        model="tuned",
        checkpoint="ckpt-2",
        data={"train": v1},
        parent="base/ckpt-6",  # trained before tracking started: never registered
        run="r1",
    )
    info = queue.submit(body)
    assert info is not None and info.metadata["unregistered_parent"] == "base/ckpt-6"
    runner = CliRunner()
    for target in ("tuned@r1/ckpt-2",):
        out = runner.invoke(cli.app, ["--url", live_service.url, "lineage", target])
        assert out.exit_code == 0, out.output
        assert "root" not in out.output, out.output
        assert "parent not registered: base/ckpt-6" in out.output, out.output
    # a child of it: the chain's end is that checkpoint, still not a root
    child = rk.checkpoint_lineage.checkpoint_body(
        model="tuned", checkpoint="ckpt-3", data={"train": v1}, parent="tuned@r1/ckpt-2", run="r1"
    )
    assert queue.submit(child) is not None
    out = runner.invoke(cli.app, ["--url", live_service.url, "lineage", "tuned@r1/ckpt-3"])
    assert out.exit_code == 0, out.output
    assert "root" not in out.output and "parent not registered: base/ckpt-6" in out.output

"""Lineage through the data end to end over a real socket (SQLite and PostgreSQL), with a git
repository made in the test, a preprocessing script run as a real process, and real TensorFlow
training through the tracked checkpoint manager: the checkpoint's lineage runs down the chain of
derived versions to the raw files and the commit; a changed raw file is detected and its impact
reaches every derived version and checkpoint; the CLI shows both."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from tests.integration.conftest import LiveService

pytestmark = [pytest.mark.tf]

SCRIPT = """\
import sys
from pathlib import Path

import recordkeeper as rk

url, raw, parent, desc = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
with rk.Client(url).writer(
    "coco",
    desc=desc,
    parents=[parent] if parent != "-" else [],
    sources=[raw.as_uri() + "/"],
    params={"desc": desc, "min_area": 16},
) as w:
    for path in sorted((raw / "images").iterdir()):
        w.write(desc.encode() + path.read_bytes(), split="train")
print(w.version.name)
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@pytest.fixture(params=["sqlite", "postgresql"])
def service(
    request: pytest.FixtureRequest, live_service_factory: Callable[..., LiveService], data_dir: Path
) -> LiveService:
    store = data_dir.parent / "store"
    store.mkdir(exist_ok=True)
    url = (
        request.getfixturevalue("postgres_database_url") if request.param == "postgresql" else None
    )
    return live_service_factory(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri(), data_dir.as_uri(), data_dir.parent.as_uri()],
        database_url=url,
    )


def test_raw_files_to_checkpoint_and_back(
    service: LiveService, tensorflow: ModuleType, data_dir: Path, tmp_path: Path
) -> None:
    tf = tensorflow
    repo = tmp_path / "prep"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "Test")
    (repo / "preprocess.py").write_text(SCRIPT)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "preprocess")
    head = _git(repo, "rev-parse", "HEAD")
    raw = data_dir / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "annotations.json").write_text('{"objects": 4}')
    for i in range(4):
        (raw / "images" / f"{i}.jpg").write_bytes(bytes([i]) * (50 + i))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    names = []
    for parent, desc in (("-", "first_import"), ("coco@v1", "min_area"), ("coco@v2", "add_person")):
        done = subprocess.run(
            [sys.executable, str(repo / "preprocess.py"), service.url, str(raw), parent, desc],
            cwd=str(tmp_path),
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        names.append(done.stdout.strip().splitlines()[-1])

    client = service.client()
    v3 = client.resolve("coco@v3")
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    manager = rk.tf.track(
        tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path / "ck"), 3),
        client=client,
        model="det",
        data={"train": v3},
        run="prep",
        queue=tmp_path / "queue.jsonl",
    )
    xs, ys = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    for _ in range(2):
        model.fit(xs, ys, epochs=1, verbose=0)
        manager.save()

    lineage = client.lineage("det@prep/ckpt-2")
    assert [e.version for e in lineage.history] == list(reversed(names))
    assert all(e.producer is not None and e.producer["commit"] == head for e in lineage.history)
    assert all(e.producer["entry"] == "preprocess.py" for e in lineage.history)  # type: ignore[index]
    assert lineage.history[0].parents[0]["role"] == "base"
    assert lineage.sources() == [raw.as_uri() + "/"]
    lines = lineage.describe_data()
    assert lines[0] == f"coco@v3 ← coco@v2 + add_person @ {head[:7]} ← {raw.as_uri()}/"
    assert lines[2].strip() == f"coco@v1 ← first_import @ {head[:7]} ← {raw.as_uri()}/"

    runner = CliRunner()
    shown = runner.invoke(app, ["--url", service.url, "lineage", "det@prep/ckpt-2"])
    assert shown.exit_code == 0, shown.output
    assert "data history" in shown.output and head[:7] in shown.output
    assert "coco@v1 ← first_import" in shown.output

    # a raw file changes: the listing identity no longer matches, and its impact is everything
    (raw / "annotations.json").write_text('{"objects": 5}')
    (check,) = client.resolve("coco@v1").provenance.check_sources()
    assert check.changed is True
    changed = (raw / "annotations.json").as_uri()
    impact = client.impact(source=changed)
    assert impact.version_names == names and impact.derived == []  # all three recorded raw/
    assert impact.refs == ["det@prep/ckpt-1", "det@prep/ckpt-2"]
    assert client.impact(version="coco@v2").derived == [names[2]]
    listed = runner.invoke(app, ["--url", service.url, "impact", "--source", changed])
    assert listed.exit_code == 0, listed.output
    assert "@prep/ckpt-2" in listed.output and names[0] in listed.output
    log = runner.invoke(app, ["--url", service.url, "log", "coco"])
    assert log.exit_code == 0 and names[1] in log.output and head[:7] in log.output

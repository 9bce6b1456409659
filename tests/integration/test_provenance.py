"""Provenance end to end over a real socket (SQLite and PostgreSQL), with a real git repository
made in the test: a clean commit, then a dirty change; the entry script run as a real process;
no git / not a repository recorded as unknown; sources on local storage and on S3 (SeaweedFS)
whose listing identity changes when a raw file changes; the CLI's publish options, ``show`` and
``log``; bad input refused before anything is staged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app
from recordkeeper.provenance import capture_git, source_identity
from tests.client._records import frame, sample_examples
from tests.integration._scenarios import put_bytes
from tests.integration.conftest import LiveService

SECRET_REMOTE = "https://deploy:s3cret-token@git.example.com/acme/prep.git"
CLEAN_REMOTE = "https://git.example.com/acme/prep.git"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with one commit: scripts/prep.py and params.yaml, an origin with a
    token in its URL."""
    path = tmp_path / "prep-repo"
    (path / "scripts").mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "t@example.com")
    _git(path, "config", "user.name", "Test")
    _git(path, "remote", "add", "origin", SECRET_REMOTE)
    (path / "scripts" / "prep.py").write_text("print('prep v1')\n")
    (path / "params.yaml").write_text("min_area: 32\ncategories: [person, car]\nlr: 0.5\n")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "prep v1")
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def service(
    request: pytest.FixtureRequest, live_service_factory: Callable[..., LiveService], data_dir: Path
) -> LiveService:
    store = data_dir.parent / "store"
    store.mkdir(exist_ok=True)
    url = None
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_database_url")
    return live_service_factory(
        storage_root=store.as_uri(),
        allowed_roots=[store.as_uri(), data_dir.as_uri()],
        database_url=url,
    )


def _raw(data_dir: Path) -> Path:
    raw = data_dir / "raw"
    raw.mkdir(exist_ok=True)
    (raw / "annotations.json").write_text('{"images": 3}')
    (raw / "img").mkdir(exist_ok=True)
    for i in range(3):
        (raw / "img" / f"{i}.jpg").write_bytes(bytes([i]) * (100 + i))
    return raw


def _shards(data_dir: Path, name: str, count: int, start: int = 0) -> rk.Dataset:
    out = data_dir / name
    out.mkdir()
    for i in range(count):
        data = frame(sample_examples(5, start + i * 5))
        (out / f"train-{i:05d}-of-{count:05d}.tfrecord").write_bytes(data)
    return rk.Dataset.from_directory(out.as_uri(), name="coco")


def test_provenance_over_a_socket_with_a_real_git_repository(
    service: LiveService, repo: Path, data_dir: Path
) -> None:
    client = service.client()
    raw = _raw(data_dir)
    head = _git(repo, "rev-parse", "HEAD")

    v1 = client.publish(_shards(data_dir, "v1", 2), desc="first", code=repo, progress=False)
    p1 = v1.provenance
    assert p1.producer is not None and p1.producer.vcs == "git"
    assert (p1.producer.commit, p1.producer.branch, p1.producer.dirty) == (head, "main", False)
    assert p1.producer.remote == CLEAN_REMOTE  # the token never leaves the machine
    assert p1.producer.diff_digest is None
    assert p1.environment is not None and p1.environment.python == sys.version.split()[0]
    assert p1.environment.recordkeeper == rk.__version__

    # a dirty work tree: a tracked change and an untracked file
    (repo / "scripts" / "prep.py").write_text("print('prep v2, uncommitted')\n")
    (repo / "notes.txt").write_text("scratch")
    v2 = client.publish(
        _shards(data_dir, "v2", 3, start=100),
        desc="add_person",
        parents=["coco@v1"],  # the one parent of the same dataset: the base
        sources=[raw.as_uri() + "/"],
        params=repo / "params.yaml",
        code=repo,
        note="add person categories",
        progress=False,
    )
    p2 = client.resolve("coco@v2").provenance
    assert p2 == v2.provenance
    assert p2.base is not None and p2.base.name == v1.name and p2.base.role == "base"
    assert p2.producer is not None and p2.producer.dirty is True and p2.producer.commit == head
    dirty_digest = p2.producer.diff_digest
    assert dirty_digest is not None and dirty_digest.startswith("sha256:")
    assert p2.params == {"categories": ["person", "car"], "lr": 0.5, "min_area": 32}
    assert p2.params_digest is not None
    assert p2.note == "add person categories"
    (source,) = p2.sources
    assert source.identity is not None and source.identity.method == "listing"
    assert (source.identity.files, source.identity.size) == (4, 13 + 100 + 101 + 102)
    assert "s3cret" not in json.dumps(p2.to_dict())

    # another uncommitted change: another digest of the diff
    (repo / "scripts" / "prep.py").write_text("print('prep v2, changed again')\n")
    assert capture_git(repo).diff_digest not in (None, dirty_digest)

    # did the raw data change?  Not yet; then one raw file changes, then one is added.
    assert [c.changed for c in p2.check_sources()] == [False]
    (raw / "img" / "1.jpg").write_bytes(b"\xff" * 250)
    (check,) = p2.check_sources()
    assert check.changed is True and check.current.size != source.identity.size
    assert client.versions_from_source(source.uri)[0]["name"] == v2.name
    assert [c["name"] for c in client.children("coco@v1")] == [v2.name]

    # the history: v2 against its base v1, v1 the first
    second, first = client.log("coco")
    assert second["name"] == v2.name and second["compared_with"] == v1.name
    assert second["commit"] == head and second["dirty"] is True
    assert second["change"]["records_added"] == 15 and second["change"]["records_removed"] == 10
    assert first["change"] is None

    # immutable once committed
    with pytest.raises(rk.ProvenanceImmutable):
        client.set_provenance(v2.name, {"note": "rewritten"})
    assert client.resolve(v2.name).provenance.note == "add person categories"


def test_bad_provenance_is_refused_before_anything_is_staged(
    service: LiveService, data_dir: Path, tmp_path: Path
) -> None:
    client = service.client()
    v1 = client.publish(_shards(data_dir, "v1", 1), progress=False, code=None)
    with pytest.raises(rk.ParentNotFound):
        client.publish(_shards(data_dir, "a", 1, 10), parents=["coco@v9"], progress=False)
    with pytest.raises(rk.ParentNotFound):
        client.publish(_shards(data_dir, "b", 1, 20), parents=["nosuch@v1"], progress=False)
    bad = tmp_path / "bad.yaml"
    bad.write_text("when: 2026-12-01\n")  # a YAML date has no canonical JSON form
    with pytest.raises(rk.InvalidParams):
        client.publish(_shards(data_dir, "c", 1, 30), params=bad, progress=False)
    with pytest.raises(rk.InvalidParams):
        client.publish(_shards(data_dir, "d", 1, 40), params={"blob": "x" * 70_000}, progress=False)
    with pytest.raises(rk.InvalidProvenance):
        client.publish(
            _shards(data_dir, "e", 1, 50), parents=[("coco@v1", "Not A Role")], progress=False
        )
    staged = client.stage("coco")
    with pytest.raises(rk.ParentNotCommitted):
        client.set_provenance(staged.name, {"parents": [{"ref": client.stage("coco").name}]})
    with pytest.raises(rk.ProvenanceCycle):
        client.set_provenance(staged.name, {"parents": [{"ref": staged.name}]})
    with pytest.raises(rk.InvalidRequest):  # text outside the text policy
        client.set_provenance(staged.name, {"note": "lone \ud800 surrogate"})
    # only v1 was committed; every refused publish staged nothing (the two stagings above are
    # this test's own)
    names = [v.name for v in client.versions("coco", state=None)]
    assert v1.name in names and len(names) == 3


def test_no_git_or_not_a_repository_is_recorded_as_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert capture_git(plain) == rk.Producer(vcs="unknown")
    empty_path = tmp_path / "empty-bin"
    empty_path.mkdir()
    monkeypatch.setenv("PATH", str(empty_path))  # no git at all
    assert capture_git(plain) == rk.Producer(vcs="unknown")


def test_the_entry_script_is_captured_from_a_real_process(
    service: LiveService, repo: Path, data_dir: Path
) -> None:
    _shards(data_dir, "v1", 1)
    script = repo / "scripts" / "publish_it.py"
    script.write_text(
        "import sys, recordkeeper as rk\n"
        "client = rk.Client(sys.argv[1])\n"
        "ds = rk.Dataset.from_directory(sys.argv[2], name='coco')\n"
        "v = client.publish(ds, progress=False, note='from a script')\n"
        "print(v.name)\n"
    )
    _git(repo, "add", "scripts/publish_it.py")
    _git(repo, "commit", "-q", "-m", "publish script")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script), service.url, (data_dir / "v1").as_uri(), "--token=abc"],
        cwd=str(data_dir),  # git is found from the script, not from the working directory
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    version = service.client().resolve(done.stdout.strip())
    producer = version.provenance.producer
    assert producer is not None and producer.entry == "scripts/publish_it.py"
    assert producer.commit == _git(repo, "rev-parse", "HEAD") and producer.dirty is False
    assert version.provenance.command is not None
    assert version.provenance.command[-1] == "--token=***"


@pytest.mark.parametrize(
    "tool", ["console script", "python -m recordkeeper.cli", "python -m an installed package"]
)
def test_a_tools_entry_script_is_not_the_code_that_made_the_data(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """``recordkeeper convert`` (code "auto") recorded the git state around its own console
    script — the recordkeeper checkout holding the venv — as the producer of the data.  A
    tool's entry script (the interpreter's scripts directory, recordkeeper's own modules) is
    not the user's code: git is asked in the current directory instead."""
    import sysconfig
    import types

    import recordkeeper.cli

    if tool == "console script":
        entry = os.path.join(sysconfig.get_path("scripts"), "recordkeeper")
        assert os.path.isfile(entry), "the venv's recordkeeper console script"
    elif tool == "python -m recordkeeper.cli":
        entry = os.path.join(os.path.dirname(recordkeeper.cli.__file__), "__main__.py")
    else:  # a Jupyter kernel's launcher is such a module too
        entry = os.path.join(os.path.dirname(pytest.__file__), "__main__.py")
        assert entry.startswith(sysconfig.get_path("purelib")), entry
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__=entry))
    monkeypatch.chdir(repo)
    producer = capture_git()
    assert producer.commit == _git(repo, "rev-parse", "HEAD")
    assert producer.remote == CLEAN_REMOTE and producer.entry is None


def test_cli_publish_show_and_log(service: LiveService, repo: Path, data_dir: Path) -> None:
    raw = _raw(data_dir)
    _shards(data_dir, "v1", 2)
    _shards(data_dir, "v2", 3, start=50)
    runner = CliRunner()
    base = ["--url", service.url]

    def run(*args: str) -> Any:
        result = runner.invoke(app, [*base, *args])
        assert result.exit_code == 0, result.output
        return result

    run("publish", (data_dir / "v1").as_uri(), "--name", "coco", "--desc", "first")
    cwd = os.getcwd()
    os.chdir(repo)  # the CLI records the git state of the work tree it runs in
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run(
                "publish",
                (data_dir / "v2").as_uri(),
                "--name",
                "coco",
                "--parent",
                "coco@v1:base",
                "--source",
                raw.as_uri(),
                "--params",
                str(repo / "params.yaml"),
                "--note",
                "second cut",
                "--json",
            )
    finally:
        os.chdir(cwd)
    published = json.loads(result.stdout)
    prov = published["provenance"]
    assert prov["parents"][0]["role"] == "base"
    assert prov["producer"]["commit"] == _git(repo, "rev-parse", "HEAD")
    assert prov["command"]  # sys.argv of the process (here pytest's: CliRunner runs in it)
    shown = run("show", "coco@v2").stdout
    assert "parent  coco_" in shown and "(base)" in shown
    assert "source  " + raw.as_uri() in shown and "note    second cut" in shown
    log = run("log", "coco").stdout
    assert "v2" in log and "v1" in log and "first version" in log
    assert "+1 shard," in log or "~" in log
    entries = json.loads(run("log", "coco", "--json").stdout)
    assert [e["number"] for e in entries] == [2, 1]
    assert entries[0]["compared_with"] == entries[1]["name"]


@pytest.mark.s3
def test_source_identity_on_s3_changes_when_a_raw_object_changes(
    live_service_factory: Callable[..., LiveService], s3_bucket: str, s3_server: Any
) -> None:
    opts = dict(s3_server.storage_options)
    prefix = f"{s3_bucket}/raw/coco"
    for i in range(3):
        put_bytes(f"{prefix}/part-{i}.json", b'{"i": %d}' % i, opts)
    first = source_identity(prefix + "/", opts)
    assert (first.method, first.files) == ("listing", 3)
    assert source_identity(prefix + "/", opts) == first  # a listing again: the same identity
    hashed = source_identity(prefix + "/", opts, hash_contents=True)
    assert hashed.method == "sha256" and hashed.digest != first.digest

    service = live_service_factory(storage_root=f"{s3_bucket}/datasets", allowed_roots=[s3_bucket])
    client = service.client(storage_options=opts)
    with client.writer("coco", sources=[prefix + "/"], params={"a": 1}, code=None) as w:
        for rec in sample_examples(20):
            w.write(rec)
    recorded = client.resolve("coco@latest").provenance
    assert recorded.sources[0].identity == first
    assert [c.changed for c in recorded.check_sources(opts)] == [False]

    put_bytes(f"{prefix}/part-1.json", b'{"i": 1, "fixed": true}', opts)  # the raw data changed
    (check,) = recorded.check_sources(opts)
    assert check.changed is True and check.current.digest != first.digest
    put_bytes(f"{prefix}/part-1.json", b'{"i": 9}', opts)  # same size as before, new ETag
    assert source_identity(prefix + "/", opts).digest != first.digest

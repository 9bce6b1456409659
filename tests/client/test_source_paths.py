"""Raw sources given as local paths: recorded as ``file://`` URIs (a directory keeps its
trailing ``/``), and found again by the same path in ``impact`` and ``versions_from_source``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.provenance import source_uri
from tests.client import _lineage_app

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client
runner = _lineage_app.runner

pytest.importorskip("fastapi")


def test_source_uri_keeps_a_directorys_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert source_uri("raw/") == f"file://{tmp_path}/raw/"
    assert source_uri("raw") == f"file://{tmp_path}/raw"
    assert source_uri("raw/a.json") == f"file://{tmp_path}/raw/a.json"
    assert source_uri("gs://raw/coco/") == "gs://raw/coco/"


@pytest.fixture
def raw_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``raw/annotations.json`` in ``tmp_path``, made the working directory (sources are given
    as the relative path ``raw/``, as a preprocessing script run there would)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "annotations.json").write_text("{}")
    return tmp_path / "raw"


def test_a_local_path_finds_what_a_publish_with_it_recorded(
    client: rk.Client, runner: CliRunner, tmp_path: Path, raw_in_cwd: Path
) -> None:
    with client.writer("coco", desc="prep", sources=["raw/"], code=None) as w:
        w.write(b"record", split="train")
    name = w.version.name
    (source,) = w.version.provenance.sources
    assert source.uri == f"file://{tmp_path}/raw/"  # as `--source raw/` wrote it
    assert [v["name"] for v in client.versions_from_source("raw/")] == [name]
    assert client.impact(source="raw/annotations.json").version_names == [name]

    answer = runner.invoke(cli.app, ["impact", "--source", "raw/annotations.json", "--json"])
    assert answer.exit_code == 0, answer.output
    assert [v["name"] for v in json.loads(answer.stdout)["versions"]] == [name]
    tree = runner.invoke(cli.app, ["impact", "--source", "raw/annotations.json"])
    assert f"file://{tmp_path}/raw/annotations.json" in tree.output and name in tree.output

    neither = runner.invoke(cli.app, ["impact"])
    assert neither.exit_code == 2 and "exactly one" in neither.output


def test_writer_publish_and_derive_hash_sources_when_asked(
    client: rk.Client, tmp_path: Path, raw_in_cwd: Path
) -> None:
    """``hash_sources=True`` (docs/provenance.md; ``--hash-sources`` in the CLI) reads each
    source for a sha256 identity, in every call that records sources."""
    with client.writer("coco", sources=["raw/"], code=None, hash_sources=True) as w:
        w.write(b"one", split="train")
    with client.derive(w.version.name, sources=["raw/"], code=None, hash_sources=True) as d:
        d.write(b"two", split="train")
    (tmp_path / "data").mkdir()
    version = client.resolve(w.version.name)
    (tmp_path / "data" / "train.tfrecord").write_bytes(
        Path(version.splits["train"].shards[0].uri.removeprefix("file://")).read_bytes()
    )
    dataset = rk.Dataset.from_directory(str(tmp_path / "data"), name="other")
    published = client.publish(
        dataset, sources=["raw/"], code=None, hash_sources=True, copy_to=True
    )
    for made in (w.version, d.version, published):
        (source,) = made.provenance.sources
        assert source.identity is not None and source.identity.method == "sha256", made.name
    with client.writer("coco", sources=["raw/"], code=None) as plain:
        plain.write(b"three", split="train")
    (source,) = plain.version.provenance.sources
    assert source.identity is not None and source.identity.method == "listing"


def test_cli_derive_hashes_sources_when_asked(
    client: rk.Client, runner: CliRunner, tmp_path: Path, raw_in_cwd: Path
) -> None:
    with client.writer("coco", code=None) as w:
        w.write(b"one", split="train")
        w.write(b"two", split="validation")
    args = ["derive", w.version.name, "--remove-split", "validation", "--no-code"]
    answer = runner.invoke(cli.app, [*args, "--source", "raw/", "--hash-sources", "--json"])
    assert answer.exit_code == 0, answer.output
    (source,) = json.loads(answer.stdout)["provenance"]["sources"]
    assert source["uri"] == f"file://{tmp_path}/raw/" and source["identity"]["method"] == "sha256"


def test_hashing_sources_reports_progress_over_every_byte(tmp_path: Path) -> None:
    from recordkeeper.provenance import source_identity

    raw = tmp_path / "raw"
    (raw / "a").mkdir(parents=True)
    (raw / "a" / "one.json").write_bytes(b"x" * 1000)
    (raw / "two.json").write_bytes(b"y" * 234)

    class Seen:
        total = 0

        def advance(self, nbytes: int) -> None:
            self.total += nbytes

    seen = Seen()
    hashed = source_identity(str(raw), hash_contents=True, progress=seen)
    assert (hashed.method, hashed.files, hashed.size, seen.total) == ("sha256", 2, 1234, 1234)
    listed = Seen()
    source_identity(str(raw), progress=listed)  # a listing reads nothing: nothing to report
    assert listed.total == 0

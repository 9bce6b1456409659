"""Every code block of README.md and docs/ runs, against a real service on a real socket.

Each Markdown file is one test: a fresh service (SQLite + local storage, as `dev.py serve` runs
it), a fresh working directory, and the file's blocks run in order, as a reader would type them
(the rules and directives are in ``tests/integration/_markdown.py``). A failure names the file
and line of the block and shows what it printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration._markdown import Block, Document, DocumentError, console_commands, parse

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
S3_BUCKET = "ml-data"
GCS_BUCKET = "bucket"


@pytest.fixture(params=DOCUMENTS, ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS])
def document(request: pytest.FixtureRequest) -> Document:
    return parse(request.param)


class DocSession:
    """Where one document's blocks run: a working directory, an environment, a namespace."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.namespace: dict[str, Any] = {"__name__": "__doc__"}

    def run(self, block: Block) -> None:
        if block.language == "python":
            self._python(block)
        elif block.language == "console":
            self._shell(block, console_commands(block.code))
        elif block.language in {"bash", "sh", "shell"}:
            self._shell(block, block.code)
        elif block.language == "json":
            _parse(block, json.loads)
        elif block.language == "yaml":
            _parse(block, yaml.safe_load)

    def _python(self, block: Block) -> None:
        output = io.StringIO()
        code = compile(block.code, f"{block.path}:{block.line}", "exec")
        try:
            with contextlib.redirect_stdout(output):
                exec(code, self.namespace)
        except Exception as error:
            if block.raises and type(error).__name__ == block.raises:
                return
            pytest.fail(
                f"{block.where}: the Python block raised\n{block.code}\n--- output ---\n"
                f"{output.getvalue()}\n--- traceback ---\n{traceback.format_exc()}",
                pytrace=False,
            )
        if block.raises:
            pytest.fail(
                f"{block.where}: expected {block.raises}, nothing was raised", pytrace=False
            )

    def _shell(self, block: Block, script: str) -> None:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if os.environ.get("RECORDKEEPER_DOCTEST_ECHO"):  # pytest -s: see what a reader sees
            print(f"--- {block.where}\n{done.stdout}{done.stderr}")
        if done.returncode != block.exit_code:
            pytest.fail(
                f"{block.where}: exit {done.returncode} (expected {block.exit_code})\n{script}\n"
                f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}",
                pytrace=False,
            )


def _parse(block: Block, parser: Callable[[str], object]) -> None:
    try:
        parser(block.code)
    except Exception as error:
        pytest.fail(f"{block.where}: not valid {block.language}: {error}", pytrace=False)


@pytest.fixture
def session(
    document: Document,
    request: pytest.FixtureRequest,
    live_service_factory: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[DocSession]:
    workdir = tmp_path / "work"
    (workdir / "data").mkdir(parents=True)
    (workdir / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    store = tmp_path / "store"
    store.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    roots = [store.as_uri(), workdir.as_uri(), home.as_uri()]
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        # commands import the checkout under test, wherever the venv's install points
        "PYTHONPATH": os.pathsep.join(str(ROOT / p) for p in ("client", "service", "")),
    }
    cleanups: list[Callable[[], None]] = []
    if "s3" in document.uses:
        s3 = request.getfixturevalue("s3_server")
        s3.delete_bucket(S3_BUCKET)
        roots.append(s3.make_bucket(S3_BUCKET))
        env.update(s3.env)
        cleanups.append(lambda: s3.delete_bucket(S3_BUCKET))
    if "gcs" in document.uses:
        gcs = request.getfixturevalue("gcs_server")
        roots.append(gcs.make_bucket(GCS_BUCKET))
        env.update(gcs.env)
    service = live_service_factory(storage_root=store.as_uri(), allowed_roots=roots)
    env["RECORDKEEPER_URL"] = service.url
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(workdir)
    yield DocSession(workdir, dict(os.environ))
    for cleanup in cleanups:
        cleanup()


def test_every_block_runs(document: Document, session: DocSession) -> None:
    for block in document.blocks:
        if block.skip is None:
            session.run(block)


def test_skipped_blocks_say_why(document: Document) -> None:
    for block in document.blocks:
        if block.skip is not None:
            assert len(block.skip.split()) >= 3, f"{block.where}: say why the block is skipped"


def test_the_runner_can_fail(tmp_path: Path) -> None:
    """A block that fails, a block without a language, a missing expected error: each is caught."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```python\nx = 1\n```\n\n<!-- doctest: raises KeyError -->\n```python\n{}[1]\n```\n"
    )
    session = DocSession(tmp_path, dict(os.environ))
    for block in parse(doc).blocks:
        session.run(block)
    doc.write_text("<!-- doctest: exit 3 -->\n```console\n$ exit 2\noutput\n```\n")
    with pytest.raises(pytest.fail.Exception, match="exit 2 \\(expected 3\\)"):
        session.run(parse(doc).blocks[0])
    doc.write_text("<!-- doctest: raises KeyError -->\n\nprose\n\n```python\nx = 2\n```\n")
    session.run(parse(doc).blocks[0])  # a directive applies to the block right after it only
    doc.write_text("```python\nassert x == 3, 'wrong'\n```\n")
    with pytest.raises(pytest.fail.Exception, match="wrong"):
        session.run(parse(doc).blocks[0])
    doc.write_text("```\nplain\n```\n")
    with pytest.raises(DocumentError, match="must say what it is"):
        parse(doc)


def test_console_commands() -> None:
    code = "$ recordkeeper ls \\\n  --json\n[]\n$ echo done\ndone\n"
    assert console_commands(code) == "recordkeeper ls \\\n  --json\necho done"

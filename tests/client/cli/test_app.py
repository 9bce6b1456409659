"""The CLI app: every command registered one way, and one error handler that hides no bug."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import typer
from typer.testing import CliRunner

import recordkeeper.cli
from recordkeeper.cli import app, common
from recordkeeper.cli.app import COMMANDS
from recordkeeper.cli.common import ExitCode, arrange_global_options, exit_code_for
from recordkeeper.core import errors
from recordkeeper.core.errors import VersionNotFound

_NOT_COMMAND_MODULES = {"app", "common", "__main__"}


def _names(typer_app: typer.Typer) -> set[str]:
    return set(typer.main.get_command(typer_app).commands)


def test_every_command_module_is_registered_in_the_one_list() -> None:
    modules = {
        info.name
        for info in pkgutil.iter_modules(recordkeeper.cli.__path__)
        if info.name not in _NOT_COMMAND_MODULES
    }
    assert modules == {
        "alias",
        "auth",
        "cache",
        "check_model",
        "derive",
        "gc",
        "lineage",
        "saved_models",
        "records",
        "retention",
        "versions",
    }
    registered = {f.__module__ for f in COMMANDS}
    for name in modules:
        module = importlib.import_module(f"recordkeeper.cli.{name}")
        assert module.register in COMMANDS, name
    assert {f"recordkeeper.cli.{m}" for m in modules} <= registered


def test_the_app_has_exactly_what_the_registered_modules_add() -> None:
    added: list[str] = []
    for register in COMMANDS:
        fresh = typer.Typer()
        fresh.callback()(lambda: None)  # a group even when the module adds one command
        register(fresh)
        added.extend(_names(fresh))
    assert len(added) == len(set(added)), "a command name is registered twice"
    assert _names(app) == set(added)
    documented = {
        "publish", "resolve", "show", "ls", "verify", "diff", "alias",
        "lineage", "consumers", "lock", "checkpoints", "gc", "check-model", "retention",
    }  # fmt: skip
    assert documented <= set(added)


@pytest.mark.parametrize("bug", [TypeError("boom"), KeyError("boom"), AttributeError("boom")])
def test_programming_errors_are_named_and_surface_with_their_traceback_when_debugging(
    monkeypatch: pytest.MonkeyPatch, bug: Exception
) -> None:
    """No traceback by default (issue 21: a proxy's answer made ``show`` print one), but the
    bug is named as one, with its type, and RECORDKEEPER_DEBUG=1 lets it propagate."""

    def broken(*args: object, **kwargs: object) -> object:
        raise bug

    monkeypatch.setattr(common, "Client", broken)
    monkeypatch.delenv("RECORDKEEPER_DEBUG", raising=False)
    result = CliRunner().invoke(app, ["resolve", "coco@latest"])
    assert result.exit_code == ExitCode.ERROR
    line = result.output.strip()
    assert line.startswith(f"error: unexpected {type(bug).__name__}: {bug}")
    assert "a bug in recordkeeper" in line and "RECORDKEEPER_DEBUG=1" in line
    assert line.endswith("[unexpected_error]")
    monkeypatch.setenv("RECORDKEEPER_DEBUG", "1")
    result = CliRunner().invoke(app, ["resolve", "coco@latest"])
    assert result.exception is bug  # not turned into "error: ..." and exit 1
    assert "error:" not in result.output
    with pytest.raises(type(bug)):
        CliRunner().invoke(app, ["resolve", "coco@latest"], catch_exceptions=False)


def test_user_errors_print_the_detail_and_code_and_their_exit_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Missing:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def resolve(self, ref: str, **kwargs: object) -> object:
            raise VersionNotFound(f"coco has no version {ref}")

    monkeypatch.setattr(common, "Client", Missing)
    result = CliRunner().invoke(app, ["resolve", "coco@v7"])
    assert result.exit_code == ExitCode.NOT_FOUND == 3
    assert result.output.strip() == "error: coco has no version coco@v7 [version_not_found]"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (FileNotFoundError(2, "No such file or directory"), ExitCode.NOT_FOUND, "file_not_found"),
        (PermissionError("denied"), ExitCode.ERROR, "os_error"),
    ],
)
def test_os_errors_are_user_errors(
    monkeypatch: pytest.MonkeyPatch, error: OSError, status: ExitCode, code: str
) -> None:
    def failing(*args: object, **kwargs: object) -> object:
        raise error

    monkeypatch.setattr(common, "Client", failing)
    result = CliRunner().invoke(app, ["resolve", "coco@latest"])
    assert result.exit_code == status
    assert result.output == f"error: {error} [{code}]\n"  # the code as with --json (cli.md)


def test_every_error_the_cli_finds_itself_has_a_code() -> None:
    """``error: <detail> [<code>]`` (docs/cli.md): a CliError cannot be made without a code."""
    assert inspect.signature(common.CliError).parameters["code"].default is inspect.Parameter.empty
    for printer in (common.fail, common.report_error):
        assert inspect.signature(printer).parameters["code"].annotation == "str"


def test_a_missing_config_file_is_a_user_error() -> None:
    result = CliRunner().invoke(app, ["lock", "/nonexistent/train.yaml"])
    assert result.exit_code == 1
    assert result.output.startswith("error: ")
    assert "/nonexistent/train.yaml" in result.output


# -- CLI conventions (issue 9, point 8) ------------------------------------------------------


class _Recorder:
    """A Client stand-in that records how it was made and fails with a chosen error."""

    made: ClassVar[list[tuple[object, ...]]] = []
    error: ClassVar[Exception] = VersionNotFound("coco has no version 7", dataset="coco")

    def __init__(self, *args: object, **kwargs: object) -> None:
        _Recorder.made.append(args)

    def resolve(self, ref: str, **kwargs: object) -> object:
        raise _Recorder.error


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> type[_Recorder]:
    monkeypatch.setattr(common, "Client", _Recorder)
    monkeypatch.setattr(_Recorder, "made", [])
    monkeypatch.setattr(_Recorder, "error", _Recorder.error)
    return _Recorder


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"recordkeeper {recordkeeper.__version__}\n"


def test_json_errors_are_a_json_object_on_stderr(recorder: type[_Recorder]) -> None:
    for args in (["resolve", "coco@v7", "--json"], ["--json", "resolve", "coco@v7"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == ExitCode.NOT_FOUND
        assert result.stdout == ""
        body = json.loads(result.stderr)
        assert body == {
            "code": "version_not_found",
            "detail": "coco has no version 7",
            "dataset": "coco",
        }


def test_json_usage_errors(recorder: type[_Recorder]) -> None:
    result = CliRunner().invoke(app, ["resolve", "--json", "--bogus"])
    assert result.exit_code == ExitCode.USAGE == 2
    body = json.loads(result.stderr)
    assert body["code"] == "usage" and "--bogus" in body["detail"]
    plain = CliRunner().invoke(app, ["resolve", "--bogus"])
    assert plain.exit_code == ExitCode.USAGE and "--bogus" in plain.stderr
    assert CliRunner().invoke(app, ["nope", "--json"]).exit_code == ExitCode.USAGE


def test_global_options_after_the_subcommand(recorder: type[_Recorder]) -> None:
    result = CliRunner().invoke(
        app, ["resolve", "coco@v7", "--url", "http://127.0.0.1:9", "--token=t0k"]
    )
    assert result.exit_code == ExitCode.NOT_FOUND
    assert recorder.made == [("http://127.0.0.1:9", "t0k")]


def test_arrange_global_options() -> None:
    commands = ["ls", "alias"]
    assert arrange_global_options(["ls", "--url", "u", "coco"], commands) == [
        "--url", "u", "ls", "coco",
    ]  # fmt: skip
    assert arrange_global_options(["--json", "alias", "ls", "coco"], commands) == [
        "alias", "ls", "coco", "--json",
    ]  # fmt: skip
    assert arrange_global_options(["ls", "--", "--url"], commands) == ["ls", "--", "--url"]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.VersionNotFound("x"), ExitCode.NOT_FOUND),
        (errors.CheckpointNotFound("x"), ExitCode.NOT_FOUND),
        (errors.DigestMismatch("x"), ExitCode.VERIFICATION_FAILED),
        (errors.CorruptShard("x"), ExitCode.VERIFICATION_FAILED),
        (errors.StaleLock("x"), ExitCode.VERIFICATION_FAILED),
        (errors.VersionDeprecated("x"), ExitCode.VERIFICATION_FAILED),
        (errors.ServiceUnavailable("x"), ExitCode.SERVICE_UNREACHABLE),
        (errors.AuthenticationRequired("x"), ExitCode.REFUSED),
        (errors.PermissionDenied("x"), ExitCode.REFUSED),
        (errors.StorageRootNotAllowed("x"), ExitCode.REFUSED),
        (errors.VersionInUse("x"), ExitCode.REFUSED),
        (errors.InvalidReference("x"), ExitCode.ERROR),
        (errors.ServerError("x"), ExitCode.ERROR),
        (errors.StorageError("x"), ExitCode.ERROR),
        (errors.StorageError("x", reason="denied"), ExitCode.ERROR),
        (errors.StorageError("x", reason="missing"), ExitCode.NOT_FOUND),  # a local file too
        (errors.CorruptShard("x", reason="missing"), ExitCode.VERIFICATION_FAILED),
    ],
)
def test_exit_statuses(recorder: type[_Recorder], error: Exception, status: ExitCode) -> None:
    assert exit_code_for(error) == status
    recorder.error = error
    assert CliRunner().invoke(app, ["resolve", "coco@v7"]).exit_code == status


def test_exit_statuses_are_distinct_and_documented() -> None:
    assert len({int(c) for c in ExitCode}) == len(ExitCode)
    doc = (Path(__file__).parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` |" in doc, code


def test_help_shows_defaults_and_names_the_lock_file() -> None:
    result = CliRunner().invoke(app, ["lock", "--help"], env={"COLUMNS": "200"})
    assert "train.yaml → train.lock.yaml" in result.stdout
    assert "CONFIG.lock " not in result.stdout
    assert "[default: data]" in result.stdout
    top = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout
    assert "http://127.0.0.1:8080" in top


@pytest.mark.parametrize("args", [["cache", "du"], ["cache", "du", "--json"], ["--help"]])
def test_a_reader_that_stops_reading_ends_the_command_quietly(
    tmp_path: Path, args: list[str]
) -> None:
    """``recordkeeper log coco --json | head`` said ``error: [Errno 32] Broken pipe [os_error]``
    (the JSON printer's write failed; rich's console and click's --help already ended quietly).
    Every command now ends as they do: nothing on stderr, status 1."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "recordkeeper.cli", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env={**os.environ, "RECORDKEEPER_CACHE_DIR": str(tmp_path)},
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr == b""
    assert done.returncode == ExitCode.ERROR


def test_output_is_printed_as_written() -> None:
    """``check-leakage`` printed ``coco_v3:validation in coco_v3🚋 0/128`` for
    ``coco_v3:train: 0/128``: rich read ``:train:`` as an emoji code."""
    out = common.console()
    with out.capture() as captured:
        out.print("ok   coco_v3:validation in coco_v3:train: 0/128 records, :smile: 127.0.0.1")
    assert captured.get() == (
        "ok   coco_v3:validation in coco_v3:train: 0/128 records, :smile: 127.0.0.1\n"
    )

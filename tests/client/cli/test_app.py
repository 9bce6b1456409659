"""The CLI app: every command registered one way, and one error handler that hides no bug."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import typer
from typer.testing import CliRunner

import recordkeeper.cli
from recordkeeper.cli import app, common
from recordkeeper.cli.app import COMMANDS
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
    assert modules == {"alias", "check_model", "gc", "lineage", "versions"}
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
        "lineage", "consumers", "lock", "checkpoints", "gc", "check-model",
    }  # fmt: skip
    assert documented <= set(added)


@pytest.mark.parametrize("bug", [TypeError("boom"), KeyError("boom"), AttributeError("boom")])
def test_programming_errors_surface_with_their_traceback(
    monkeypatch: pytest.MonkeyPatch, bug: Exception
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise bug

    monkeypatch.setattr(common, "Client", broken)
    result = CliRunner().invoke(app, ["resolve", "coco@latest"])
    assert result.exception is bug  # not turned into "error: ..." and exit 1
    assert "error:" not in result.output
    with pytest.raises(type(bug)):
        CliRunner().invoke(app, ["resolve", "coco@latest"], catch_exceptions=False)


def test_user_errors_print_the_detail_and_code_and_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    class Missing:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def resolve(self, ref: str, **kwargs: object) -> object:
            raise VersionNotFound(f"coco has no version {ref}")

    monkeypatch.setattr(common, "Client", Missing)
    result = CliRunner().invoke(app, ["resolve", "coco@v7"])
    assert result.exit_code == 1
    assert result.output.strip() == "error: coco has no version coco@v7 [version_not_found]"


@pytest.mark.parametrize(
    "error", [FileNotFoundError(2, "No such file or directory"), PermissionError("denied")]
)
def test_os_errors_are_user_errors(monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    def failing(*args: object, **kwargs: object) -> object:
        raise error

    monkeypatch.setattr(common, "Client", failing)
    result = CliRunner().invoke(app, ["resolve", "coco@latest"])
    assert result.exit_code == 1
    assert result.output == f"error: {error}\n"


def test_a_missing_config_file_is_a_user_error() -> None:
    result = CliRunner().invoke(app, ["lock", "/nonexistent/train.yaml"])
    assert result.exit_code == 1
    assert result.output.startswith("error: ")
    assert "/nonexistent/train.yaml" in result.output

"""The public surface: sorted __all__, no heavy imports, CLI errors without tracebacks."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli import app, parse_storage_options


def test_all_is_sorted_and_complete() -> None:
    assert rk.__all__ == sorted(rk.__all__)
    for name in rk.__all__:
        assert hasattr(rk, name), name
    for name in (
        "Client",
        "Dataset",
        "DatasetVersion",
        "Shard",
        "Split",
        "VerifyReport",
        "VersionDiff",
        "ShardProblem",
        "DuplicateWarning",
    ):
        assert name in rk.__all__


def test_every_error_class_is_exported() -> None:
    """``rk.<Error>`` for every error of recordkeeper.core.errors (the tree in its docstring),
    as recordkeeper.errors has them: a caller catches what the service answers by its class."""
    from recordkeeper import errors
    from recordkeeper.core import errors as core_errors

    classes = [
        name
        for name in core_errors.__all__
        if isinstance(getattr(core_errors, name), type)
        and issubclass(getattr(core_errors, name), core_errors.RecordkeeperError)
    ]
    assert "TokenNameTaken" in classes and "UnsupportedFormat" in classes
    assert [n for n in classes if n not in rk.__all__] == []
    assert [n for n in classes if getattr(rk, n) is not getattr(errors, n)] == []
    assert type(errors.error_for_code("token_name_taken", "taken")) is rk.TokenNameTaken


def test_import_is_light() -> None:
    code = (
        "import recordkeeper, sys; "
        "heavy = [m for m in ('tensorflow', 'tensorflow_datasets', 's3fs', 'gcsfs', 'rich', "
        "'fsspec', 'httpx') "
        "if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_storage_option_parsing() -> None:
    assert parse_storage_options(
        [
            "key=abc",
            "anon=true",
            "client_kwargs.endpoint_url=http://127.0.0.1:1",
            "client_kwargs.region_name=us-east-1",
            "retries=3",
        ]
    ) == {
        "key": "abc",
        "anon": True,
        "retries": 3,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:1", "region_name": "us-east-1"},
    }


def test_cli_errors_print_code_and_exit_status() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--url", "http://127.0.0.1:9", "resolve", "coco@latest"])
    assert result.exit_code == 5  # service unreachable
    assert "[service_unavailable]" in result.stderr and "127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["resolve", "Not A Ref"])
    assert result.exit_code == 1 and "[invalid_reference]" in result.stderr


def test_cli_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    for command in ("publish", "resolve", "show", "ls", "verify", "diff", "alias"):
        assert command in result.stdout


def test_help_on_the_client_shows_every_method_with_its_signature_and_docstring() -> None:
    """``help(rk.Client)`` lists each façade method as a method (it showed 34 of 38 as
    ``<recordkeeper.client._Bound object>``, with no signature or docstring)."""
    import inspect
    import pydoc

    text = pydoc.render_doc(rk.Client, renderer=pydoc.plaintext)
    assert " object>" not in text and "object at 0x" not in text
    public = [name for name in dir(rk.Client) if not name.startswith("_")]
    methods = [name for name in public if callable(getattr(rk.Client, name))]
    assert len(methods) >= 38, methods
    for name in methods:
        member = getattr(rk.Client, name)
        assert inspect.isfunction(member), name
        assert member.__doc__, f"Client.{name} has no docstring"
        assert f" |  {name}(self" in text, f"help(rk.Client) does not show {name}(self, ...)"

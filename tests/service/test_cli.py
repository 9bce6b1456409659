"""The service commands (``serve``, ``db``, ``token``) on a throwaway Typer app."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from recordkeeper_service import migrate
from recordkeeper_service.cli import register
from recordkeeper_service.db import Database
from recordkeeper_service.repository.tokens import TokenRepository, hash_secret


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> CliRunner:
    for name in ("RECORDKEEPER_HOST", "RECORDKEEPER_PORT", "RECORDKEEPER_AUTH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    return CliRunner()


def test_db_upgrade_and_current(
    cli: typer.Typer, runner: CliRunner, empty_database_url: str
) -> None:
    env = {"RECORDKEEPER_DATABASE_URL": empty_database_url}
    current = runner.invoke(cli, ["db", "current"], env=env)
    assert current.exit_code == 1
    assert "NOT at head" in current.output
    upgraded = runner.invoke(cli, ["db", "upgrade"], env=env)
    assert upgraded.exit_code == 0, upgraded.output
    assert f"to {migrate.head_revision()}" in upgraded.output
    again = runner.invoke(cli, ["db", "upgrade"], env=env)
    assert "already at" in again.output
    current = runner.invoke(cli, ["db", "current"], env=env)
    assert current.exit_code == 0
    assert "at head" in current.output


def test_db_and_token_commands_print_json(
    cli: typer.Typer, runner: CliRunner, empty_database_url: str
) -> None:
    """``--json`` on every db and token command (issue 26: only ``token list`` had it)."""
    env = {"RECORDKEEPER_DATABASE_URL": empty_database_url}
    current = runner.invoke(cli, ["db", "current", "--json"], env=env)
    assert current.exit_code == 1
    assert json.loads(current.stdout)["at_head"] is False
    upgraded = json.loads(runner.invoke(cli, ["db", "upgrade", "--json"], env=env).stdout)
    assert upgraded["upgraded"] is True and upgraded["current"] == migrate.head_revision()
    again = json.loads(runner.invoke(cli, ["db", "upgrade", "--json"], env=env).stdout)
    assert again["upgraded"] is False
    status = json.loads(runner.invoke(cli, ["db", "current", "--json"], env=env).stdout)
    assert status["at_head"] is True and status["head"] == migrate.head_revision()
    created = runner.invoke(cli, ["token", "create", "--name", "ci", "--json"], env=env)
    token = json.loads(created.stdout)
    assert token["name"] == "ci" and token["scope"] == "read" and token["secret"]
    revoked = runner.invoke(cli, ["token", "revoke", str(token["id"]), "--json"], env=env)
    assert json.loads(revoked.stdout)["revoked_at"] is not None


def test_token_commands(cli: typer.Typer, runner: CliRunner, database_url: str) -> None:
    env = {"RECORDKEEPER_DATABASE_URL": database_url}
    created = runner.invoke(cli, ["token", "create", "--scope", "write", "--name", "ci"], env=env)
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith("rk_")
    database = Database(database_url, pool_size=1)
    try:
        token = TokenRepository(database).authenticate(secret)
        assert (token.name, token.scope) == ("ci", "write")
    finally:
        database.dispose()

    listed = runner.invoke(cli, ["token", "list"], env=env)
    assert "ci" in listed.output and "write" in listed.output
    assert secret not in listed.output and hash_secret(secret) not in listed.output
    as_json = runner.invoke(cli, ["token", "list", "--json"], env=env)
    assert '"scope": "write"' in as_json.output

    revoked = runner.invoke(cli, ["token", "revoke", str(token.id)], env=env)
    assert revoked.exit_code == 0
    assert "revoked" in runner.invoke(cli, ["token", "list"], env=env).output
    missing = runner.invoke(cli, ["token", "revoke", "4242"], env=env)
    assert missing.exit_code == 1
    bad = runner.invoke(cli, ["token", "create", "--scope", "root", "--name", "x"], env=env)
    assert bad.exit_code == 1
    assert "scope" in bad.output


def test_token_commands_refuse_an_unmigrated_database(
    cli: typer.Typer, runner: CliRunner, empty_database_url: str
) -> None:
    env = {"RECORDKEEPER_DATABASE_URL": empty_database_url}
    result = runner.invoke(cli, ["token", "create", "--name", "ci"], env=env)
    assert result.exit_code == 1
    assert "recordkeeper db upgrade" in result.output


def test_serve_refuses_public_address_without_tokens(
    cli: typer.Typer, runner: CliRunner, database_url: str, store: str
) -> None:
    env = {"RECORDKEEPER_DATABASE_URL": database_url, "RECORDKEEPER_STORAGE_ROOT": store}
    result = runner.invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0"], env=env)
    assert result.exit_code == 1
    assert "token create" in result.output


def test_serve_refuses_a_database_not_at_head(
    cli: typer.Typer, runner: CliRunner, empty_database_url: str, store: str
) -> None:
    env = {"RECORDKEEPER_DATABASE_URL": empty_database_url, "RECORDKEEPER_STORAGE_ROOT": store}
    result = runner.invoke(cli, ["serve", "--port", "0"], env=env)
    assert result.exit_code == 1
    assert "recordkeeper db upgrade" in result.output


def test_invalid_configuration_is_reported(cli: typer.Typer, runner: CliRunner) -> None:
    env = {"RECORDKEEPER_ALLOWED_ROOTS": "file:///"}
    result = runner.invoke(cli, ["db", "current"], env=env)
    assert result.exit_code == 1
    assert "invalid configuration" in result.output
    assert "whole file system" in result.output

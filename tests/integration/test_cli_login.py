"""``recordkeeper login`` and profiles (issue 26, item 7): a URL and a checked token saved per
profile in a 0600 file, used by later commands and by ``rk.Client()``; ``--profile`` and
``RECORDKEEPER_PROFILE`` pick one; a profile's token never goes to another URL."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper.cli.app import app
from tests.integration.conftest import LiveService


def _token(service: LiveService, name: str, scope: str = "read") -> str:
    answer = httpx.post(
        f"{service.url}/api/v1/tokens", json={"name": name, "scope": scope}, timeout=30
    )
    answer.raise_for_status()
    return str(answer.json()["token"])


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cfg" / "profiles.ini"
    monkeypatch.setenv("RECORDKEEPER_CONFIG", str(path))
    for name in ("RECORDKEEPER_URL", "RECORDKEEPER_TOKEN", "RECORDKEEPER_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return path


def test_login_saves_a_checked_profile_used_by_cli_and_python(
    live_service_factory: Callable[..., LiveService], config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = live_service_factory()
    secret = _token(service, "alice", "write")
    runner = CliRunner()
    done = runner.invoke(app, ["login", "--url", service.url, "--with-token"], input=secret + "\n")
    assert done.exit_code == 0, done.output
    assert f"logged in to {service.url} as alice (write); profile 'default'" in done.stdout
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert secret in config.read_text()
    # later commands and rk.Client() use it without --url/--token
    listed = runner.invoke(app, ["ls", "--json"])
    assert listed.exit_code == 0, listed.output
    with rk.Client() as client:
        assert client.url == service.url and client.token == secret
        assert client.http.api("GET", "/whoami")["name"] == "alice"
    # a second profile, picked by --profile or RECORDKEEPER_PROFILE
    other = _token(service, "bob")
    done = runner.invoke(
        app, ["login", "--profile", "ci", "--url", service.url, "--token", other, "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["name"] == "bob"
    shown = runner.invoke(app, ["--profile", "ci", "profiles", "--json"])
    rows = {r["profile"]: r for r in json.loads(shown.stdout)["profiles"]}
    assert rows["ci"]["active"] and not rows["default"]["active"]
    assert other not in shown.stdout  # tokens are masked
    monkeypatch.setenv("RECORDKEEPER_PROFILE", "ci")
    with rk.Client() as client:
        assert client.token == other
    # an explicit URL elsewhere never receives a profile's token
    with rk.Client("http://127.0.0.1:9") as client:
        assert client.token is None
    monkeypatch.delenv("RECORDKEEPER_PROFILE")
    # logout removes it; naming a profile never saved is a clear error
    assert runner.invoke(app, ["--profile", "ci", "logout"]).exit_code == 0
    missing = runner.invoke(app, ["--profile", "ci", "ls"])
    assert missing.exit_code == 1 and "no profile 'ci'" in missing.stderr
    assert "[invalid_input]" in missing.stderr


def test_login_refuses_a_bad_token_and_saves_nothing(
    live_service_factory: Callable[..., LiveService], config: Path
) -> None:
    service = live_service_factory()
    done = CliRunner().invoke(app, ["login", "--url", service.url, "--token", "rk_" + "x" * 40])
    assert done.exit_code != 0 and "[unauthorized]" in done.stderr
    assert not config.exists()


def test_a_profile_file_others_can_read_warns(config: Path) -> None:
    from recordkeeper.profiles import Profile, ProfileFileWarning, load_profile, save_profile

    save_profile(Profile("default", "http://127.0.0.1:1", "rk_secret"))
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    config.chmod(0o644)
    with pytest.warns(ProfileFileWarning, match="chmod 600"):
        assert load_profile() == Profile("default", "http://127.0.0.1:1", "rk_secret")

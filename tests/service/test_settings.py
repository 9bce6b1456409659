"""Settings from RECORDKEEPER_* variables, defaults and the refusals of unsafe values."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from recordkeeper_service.settings import Settings, is_loopback


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import os

    for name in list(os.environ):
        if name.startswith("RECORDKEEPER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    return tmp_path


def test_defaults_live_in_the_per_user_dir(clean_env: Path) -> None:
    settings = Settings()
    base = clean_env / "recordkeeper"
    assert settings.uses_embedded_database
    assert settings.effective_database_url == f"sqlite:///{base / 'registry.db'}"
    assert settings.storage_root == (base / "storage").as_uri() + "/"
    assert settings.allowed_roots == [settings.storage_root]
    assert (settings.auth, settings.host, settings.port) == ("auto", "127.0.0.1", 8080)
    assert settings.max_body_bytes == 64 * 1024 * 1024
    assert settings.open_access
    assert not base.exists(), "settings must not create anything"


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORDKEEPER_DATABASE_URL", "postgresql://u@db/rk")
    monkeypatch.setenv("RECORDKEEPER_STORAGE_ROOT", "s3://ml-data/datasets")
    monkeypatch.setenv("RECORDKEEPER_ALLOWED_ROOTS", "s3://ml-data/, gs://team-a/")
    monkeypatch.setenv("RECORDKEEPER_AUTH", "required")
    monkeypatch.setenv("RECORDKEEPER_MAX_BODY_BYTES", "1048576")
    settings = Settings()
    assert not settings.uses_embedded_database
    assert settings.storage_root == "s3://ml-data/datasets/"
    assert settings.allowed_roots == ["s3://ml-data/", "gs://team-a/"]
    assert settings.auth == "required"
    assert not settings.open_access
    assert settings.max_body_bytes == 1048576


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"allowed_roots": "file:///"}, "whole file system"),
        ({"allowed_roots": "s3://"}, "bucket"),
        ({"storage_root": "s3://a/x", "allowed_roots": "s3://b/"}, "not inside"),
        ({"storage_root": "relative/path"}, "scheme"),
        ({"allowed_roots": "s3://a/../b"}, "'..'"),
        ({"auth": "off"}, "auth"),
        ({"max_body_bytes": 10}, "max_body_bytes"),
    ],
)
def test_unsafe_settings_are_refused(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**values)  # type: ignore[arg-type]


def test_open_access_only_on_loopback() -> None:
    assert Settings(host="127.0.0.1").open_access
    assert Settings(host="localhost").open_access
    assert Settings(host="::1").open_access
    assert not Settings(host="0.0.0.0").open_access
    assert not Settings(host="10.1.2.3").open_access
    assert not Settings(host="127.0.0.1", auth="required").open_access
    assert is_loopback("127.8.9.10")
    assert not is_loopback("example.com")


def test_trusted_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().trusted_proxies == []
    monkeypatch.setenv("RECORDKEEPER_TRUSTED_PROXIES", " 127.0.0.1, ::1,10.1.2.0/24 ,[fe80::1]")
    assert Settings().trusted_proxies == ["127.0.0.1/32", "::1/128", "10.1.2.0/24", "fe80::1/128"]
    monkeypatch.setenv("RECORDKEEPER_TRUSTED_PROXIES", "proxy.internal")
    with pytest.raises(ValidationError, match="RECORDKEEPER_TRUSTED_PROXIES"):
        Settings()

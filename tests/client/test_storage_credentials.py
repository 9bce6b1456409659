"""Missing object-store credentials are a clear error with a stable code and a hint (issue 26,
item 7), not botocore's raw ``NoCredentialsError``: against a real S3 endpoint (SeaweedFS)."""

from __future__ import annotations

from pathlib import Path

import pytest

import recordkeeper as rk
from recordkeeper import storage
from tests.servers.s3 import S3Server


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_reading_without_credentials_names_where_they_are_looked_for(
    s3_server: S3Server, s3_bucket: str, no_aws_credentials: None
) -> None:
    uri = f"{s3_bucket}/a.tfrecord"
    with storage.open_write(uri, s3_server.storage_options) as sink:
        sink.write(b"x")
    anonymous_client = {"client_kwargs": s3_server.storage_options["client_kwargs"]}
    for call in (
        lambda: storage.open_read(uri, anonymous_client).read(),
        lambda: storage.stat_object(uri, anonymous_client),
        lambda: storage.list_files(s3_bucket, anonymous_client),
    ):
        with pytest.raises(rk.StorageCredentialsMissing) as caught:
            call()
        error = caught.value
        assert error.code == "storage_credentials_missing"
        assert isinstance(error, rk.StorageError) and error.extra["reason"] == "no_credentials"
        assert "AWS_ACCESS_KEY_ID" in str(error) and "storage_options" in str(error)
        assert "NoCredentialsError" in str(error)  # the backend's own words stay, at the end


def test_the_cli_prints_the_code_and_hint(
    s3_server: S3Server,
    s3_bucket: str,
    no_aws_credentials: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import typer

    from recordkeeper.cli.common import handle_errors

    options = {"client_kwargs": s3_server.storage_options["client_kwargs"]}
    with pytest.raises(typer.Exit) as caught:
        handle_errors(lambda: storage.list_files(s3_bucket, options))
    assert caught.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: {s3_bucket}: no S3 credentials were found; set AWS_ACCESS_KEY_ID"
    )
    assert err.rstrip().endswith("[storage_credentials_missing]")
    assert "Traceback" not in err

"""What counts as a secret in recorded text (``recordkeeper.core.secrets``): credentials in
URLs (userinfo, signed-URL and token parameters) and in command lines."""

from __future__ import annotations

import pytest

from recordkeeper.core.secrets import (
    is_secret_name,
    redact_command,
    strip_credentials,
    url_credentials,
)


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:tok@github.com/a/b.git", "https://github.com/a/b.git"),
        ("ssh://git@host:22/a.git", "ssh://host:22/a.git"),
        ("git@github.com:a/b.git", "git@github.com:a/b.git"),  # scp-like: a login, kept
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=A&X-Amz-Credential=AKIA%2F1"
            "&X-Amz-Security-Token=t&X-Amz-Signature=ab&versionId=3",
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=A&versionId=3",
        ),
        (
            "https://storage.googleapis.com/b/k?X-Goog-Signature=ab",
            "https://storage.googleapis.com/b/k",
        ),
        (
            "https://a.blob.core.windows.net/c?sv=2020&sig=ab%3D",
            "https://a.blob.core.windows.net/c?sv=2020",
        ),
        (
            "https://d.cloudfront.net/k?Policy=p&Signature=s&Key-Pair-Id=K",
            "https://d.cloudfront.net/k?Policy=p&Key-Pair-Id=K",
        ),
        ("https://host/x?%74oken=abc&page=2", "https://host/x?page=2"),  # percent-encoded name
        ("https://host/cb#access_token=abc&state=1", "https://host/cb#state=1"),
        ("https://host/x?api_key=1&apikey=2&password=3", "https://host/x"),
        (
            "gs://raw/coco/?generation=5&design=x&signal=1",
            "gs://raw/coco/?generation=5&design=x&signal=1",
        ),
        ("/local/path?token=x", "/local/path?token=x"),  # not a URL
    ],
)
def test_urls_lose_their_credentials_and_keep_the_rest(url: str, clean: str) -> None:
    assert strip_credentials(url) == clean
    assert url_credentials(clean) is None
    assert (url_credentials(url) is None) == (url == clean)


def test_what_credentials_a_url_carries_is_said() -> None:
    assert url_credentials("s3://key:secret@bucket/x") == "user:password@"
    assert (
        url_credentials("https://h/x?a=1&X-Amz-Signature=ab") == "the parameter 'X-Amz-Signature'"
    )
    assert url_credentials("https://h/x?token") is None  # a name without a value holds nothing


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("--token", True),
        ("--gh-token", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("db.password", True),
        ("--apiKey", True),
        ("sig", True),
        ("X-Amz-Credential", True),
        ("--design", False),
        ("--signal", False),
        ("--lr", False),
        ("versionId", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_a_command_line_is_redacted_and_redacting_again_changes_nothing() -> None:
    argv = [
        "prep.py",
        "--token=abc",
        "--password",
        "hunter2",
        "--db-url=postgresql://etl:pw@db/raw",
        "DATABASE_URL=postgres://etl:pw@db/raw",
        "AWS_SECRET_ACCESS_KEY=wJalr",
        "-H",
        "Authorization: Bearer abc",
        "--src",
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=ab&versionId=3",
        "--lr=0.1",
        "model.layers=4",
    ]
    redacted = redact_command(argv)
    assert redacted == [
        "prep.py",
        "--token=***",
        "--password",
        "***",
        "--db-url=postgresql://db/raw",
        "DATABASE_URL=postgres://db/raw",
        "AWS_SECRET_ACCESS_KEY=***",
        "-H",
        "Authorization: ***",
        "--src",
        "https://b.s3.amazonaws.com/k?versionId=3",
        "--lr=0.1",
        "model.layers=4",
    ]
    assert redact_command(redacted) == redacted

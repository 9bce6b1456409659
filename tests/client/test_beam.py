"""``recordkeeper.beam``: its public surface, what it pickles, and refusals before any job runs."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import recordkeeper as rk

beam = pytest.importorskip("apache_beam")

import recordkeeper.beam as rkb  # noqa: E402


def test_all_is_sorted_and_complete() -> None:
    assert rkb.__all__ == sorted(rkb.__all__)
    for name in rkb.__all__:
        assert hasattr(rkb, name), name


def test_import_recordkeeper_does_not_import_beam() -> None:
    code = "import recordkeeper, sys; assert 'apache_beam' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_service_config_pickles_url_token_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECORDKEEPER_TOKEN", raising=False)
    client = rk.Client("http://127.0.0.1:9", "secret-token", storage_options={"anon": True})
    config = pickle.loads(pickle.dumps(rkb.ServiceConfig.of(client)))
    assert (config.url, config.token, dict(config.storage_options)) == (
        "http://127.0.0.1:9",
        "secret-token",
        {"anon": True},
    )
    assert "secret-token" not in repr(config)
    worker = config.client()
    assert (worker.url, worker.token, worker.storage_options) == (
        "http://127.0.0.1:9",
        "secret-token",
        {"anon": True},
    )


def test_send_token_false_leaves_the_token_to_the_workers_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = rk.Client("http://127.0.0.1:9", "launcher-token")
    config = rkb.ServiceConfig.of(client, send_token=False)
    assert b"launcher-token" not in pickle.dumps(config)
    monkeypatch.setenv("RECORDKEEPER_TOKEN", "worker-token")
    assert config.client().token == "worker-token"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"num_shards": 0}, rk.InvalidRequest),
        ({"num_shards": True}, rk.InvalidRequest),
        ({"shard_size": "lots"}, rk.InvalidRequest),
        ({"shard_size": 0}, rk.InvalidRequest),
        ({"compression": "brotli"}, rk.InvalidInput),
        ({"split": "Not A Split"}, rk.InvalidInput),
    ],
)
def test_write_refuses_bad_arguments_when_built(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        rkb.WriteVersionedTFRecords("coco", **kwargs)


def test_read_refuses_an_unknown_verify_mode() -> None:
    with pytest.raises(ValueError, match="verify"):
        rkb.ReadVersion("coco@latest", verify="sometimes")  # type: ignore[arg-type]

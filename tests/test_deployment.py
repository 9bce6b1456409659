"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none exists here).

The compose file must describe a working deployment: PostgreSQL, an S3 server, a GCS emulator,
one-shot jobs (migrations, buckets, the first admin token), the service with a health check;
every image pinned to a version; every dependency waiting for health or success; settings the
service accepts.  The image must be slim (multi-stage, slim base), run as a non-root user and
install no TensorFlow.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

SERVICE = "recordkeeper"
INFRASTRUCTURE = {"postgres", "s3", "gcs"}
ONE_SHOT = {"migrate", "buckets", "admin-token"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def test_every_part_is_there(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == INFRASTRUCTURE | ONE_SHOT | {SERVICE}
    assert "postgres" in services["postgres"]["image"]
    assert "seaweedfs" in services["s3"]["image"] or "minio" in services["s3"]["image"]
    assert "fake-gcs-server" in services["gcs"]["image"]


def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service.get("image")
        if "build" in service:
            assert image is None or not image.endswith(":latest"), name
            continue
        assert image, f"{name} has neither image nor build"
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned"


def _test_command(healthcheck: dict[str, Any]) -> str:
    test = healthcheck["test"]
    assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL"), test
    return " ".join(test[1:])


def test_long_running_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    assert "pg_isready" in _test_command(services["postgres"]["healthcheck"])
    assert ":8333/" in _test_command(services["s3"]["healthcheck"])
    assert ":4443/" in _test_command(services["gcs"]["healthcheck"])
    service_check = _test_command(services[SERVICE]["healthcheck"])
    assert "/readyz" in service_check and ":8080" in service_check
    for name in INFRASTRUCTURE | {SERVICE}:
        assert services[name].get("restart") == "unless-stopped", name


def _depends(service: dict[str, Any]) -> dict[str, str]:
    depends = service.get("depends_on", {})
    assert isinstance(depends, dict), "depends_on must name a condition for each dependency"
    return {name: spec["condition"] for name, spec in depends.items()}


def test_dependencies_wait_for_health_or_success(services: dict[str, dict[str, Any]]) -> None:
    assert _depends(services["migrate"]) == {"postgres": "service_healthy"}
    assert _depends(services["buckets"]) == {"s3": "service_healthy", "gcs": "service_healthy"}
    assert _depends(services["admin-token"]) == {"migrate": "service_completed_successfully"}
    assert _depends(services[SERVICE]) == {
        "postgres": "service_healthy",
        "s3": "service_healthy",
        "gcs": "service_healthy",
        "migrate": "service_completed_successfully",
        "buckets": "service_completed_successfully",
        "admin-token": "service_completed_successfully",
    }
    for name in ONE_SHOT:
        assert services[name].get("restart") == "no", name
    assert services["migrate"]["command"] == ["recordkeeper", "db", "upgrade"]
    assert services[SERVICE]["command"][:2] == ["recordkeeper", "serve"]


def test_the_service_settings_are_valid_and_point_at_the_other_containers(
    services: dict[str, dict[str, Any]],
) -> None:
    from recordkeeper_service.settings import Settings

    env = {k: str(v) for k, v in services[SERVICE]["environment"].items()}
    for name in ONE_SHOT:  # every job runs with the service's settings
        assert services[name]["environment"] == services[SERVICE]["environment"], name
    settings = Settings(
        **{
            k.removeprefix("RECORDKEEPER_").lower(): v
            for k, v in env.items()
            if k.startswith("RECORDKEEPER_")
        }
    )
    assert "@postgres:5432/" in (settings.database_url or "")
    assert settings.auth == "required"
    assert settings.storage_root.startswith("s3://ml-data/")
    assert any(root.startswith("gs://") for root in settings.allowed_roots)
    assert env["AWS_ENDPOINT_URL"] == "http://s3:8333"
    assert env["STORAGE_EMULATOR_HOST"] == "http://gcs:4443"
    buckets = "\n".join(services["buckets"]["command"])
    for root in settings.allowed_roots:
        assert f'"{root.split("://")[1].split("/")[0]}"' in buckets, root


def test_ports_are_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_data_lives_in_named_volumes(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose["volumes"])
    used = {
        str(volume).split(":")[0]
        for service in services.values()
        for volume in service.get("volumes", [])
    }
    assert used == declared
    mounts = {name: " ".join(s.get("volumes", [])) for name, s in services.items()}
    assert "/var/lib/postgresql/data" in mounts["postgres"]
    assert "/data" in mounts["s3"] and "/storage" in mounts["gcs"]
    assert "/run/recordkeeper" in mounts["admin-token"]


def _stages(text: str) -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), split into build stages."""
    logical = re.sub(r"\\\n", " ", text)
    stages: list[list[str]] = []
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_the_image_is_slim_non_root_and_without_tensorflow() -> None:
    text = DOCKERFILE.read_text()
    stages = _stages(text)
    assert len(stages) >= 2, "build in one stage, run from another (no compiler in the image)"
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.MULTILINE))
    final = stages[-1]
    base = final[0].split()[1]
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim(-\w+)?", base), base
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    runs = " ".join(line for line in final if line.upper().startswith("RUN "))
    assert "gcc" not in runs, "the final stage must not carry a compiler"
    assert "recordkeeper[server,s3,gcs]" in runs
    install_lines = " ".join(
        line for stage in stages for line in stage if line.upper().startswith("RUN ")
    )
    assert "tensorflow" not in install_lines.lower()
    assert not re.search(r"\[[^\]]*\b(tf|all)\b[^\]]*\]", install_lines), (
        "the tf/all extras pull TensorFlow"
    )
    assert any(line.upper().startswith("HEALTHCHECK ") and "/readyz" in line for line in final)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored

"""Service configuration: ``RECORDKEEPER_*`` environment variables read by pydantic-settings.

Nothing is read or created at import time; :class:`Settings` reads the environment when it is
constructed (``Settings()``), and tests pass their own values (``Settings(database_url=...)``).

The embedded defaults live in the per-user data directory (``platformdirs.user_data_dir
("recordkeeper")``, e.g. ``~/.local/share/recordkeeper`` on Linux): the SQLite registry
``registry.db`` and the local storage root ``storage/``.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

import platformdirs
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from recordkeeper.core.endpoint import DEFAULT_HOST, DEFAULT_PORT
from recordkeeper.core.roots import UriError, as_root, configured_roots

__all__ = [
    "DEFAULT_LINEAGE_CACHE_BYTES",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SMALL_BODY_BYTES",
    "DEFAULT_SHARD_PAGES_CACHE_BYTES",
    "DEFAULT_VERSION_CACHE_BYTES",
    "Settings",
    "default_database_path",
    "default_storage_root",
    "is_loopback",
    "user_data_dir",
]

#: Shard registration (up to 10,000 shards with their schemas).
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
#: Every other body (names, metadata up to ``MAX_JSON_OBJECT_BYTES``, lineage, tokens, gc).
DEFAULT_MAX_SMALL_BODY_BYTES = 1024 * 1024
#: Per worker: the cache of committed versions (approximate bytes of its records).
DEFAULT_VERSION_CACHE_BYTES = 128 * 1024 * 1024
#: Per worker: rendered shard pages of published versions (~35 MB for a 100,000-shard version's
#: compact pages: two such versions and the pages of smaller ones fit, so switching between a
#: parent and its derived version re-renders nothing).
DEFAULT_SHARD_PAGES_CACHE_BYTES = 128 * 1024 * 1024
#: Per worker: rendered upstream lineage answers (~330-400 KB each over a 100-checkpoint chain).
DEFAULT_LINEAGE_CACHE_BYTES = 128 * 1024 * 1024


def user_data_dir() -> Path:
    """The per-user data directory holding the embedded database and storage."""
    return Path(platformdirs.user_data_dir("recordkeeper"))


def default_database_path() -> Path:
    """Where the embedded SQLite registry lives when ``RECORDKEEPER_DATABASE_URL`` is unset."""
    return user_data_dir() / "registry.db"


def default_storage_root() -> str:
    """The ``file://`` URI of the embedded local storage root."""
    return (user_data_dir() / "storage").as_uri()


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Every setting of the service; see docs/configuration.md."""

    model_config = SettingsConfigDict(
        env_prefix="RECORDKEEPER_", extra="ignore", validate_default=True
    )

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the registry; unset means the embedded SQLite file.",
    )
    storage_root: str = Field(
        default_factory=default_storage_root,
        description="Default root URI for new versions (file://, s3://, gs://).",
    )
    allowed_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="URI prefixes where shards may live; empty means [storage_root].",
    )
    auth: Literal["auto", "required"] = "auto"
    host: str = DEFAULT_HOST
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)
    max_body_bytes: int = Field(
        default=DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        description="Largest request body: shard registration, and the ceiling of every route.",
    )
    max_small_body_bytes: int = Field(
        default=DEFAULT_MAX_SMALL_BODY_BYTES,
        ge=1024,
        description="Largest body of every route but shard registration (capped by "
        "max_body_bytes).",
    )
    version_cache_bytes: int = Field(
        default=DEFAULT_VERSION_CACHE_BYTES,
        ge=0,
        description="Approximate memory, per worker, of the cache of committed versions.",
    )
    shard_pages_cache_bytes: int = Field(
        default=DEFAULT_SHARD_PAGES_CACHE_BYTES,
        ge=0,
        description="Memory, per worker, of the rendered shard pages of published versions.",
    )
    lineage_cache_bytes: int = Field(
        default=DEFAULT_LINEAGE_CACHE_BYTES,
        ge=0,
        description="Memory, per worker, of the rendered upstream lineage answers kept.",
    )
    db_pool_size: int = Field(default=5, ge=1, le=1000)
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    log_format: Literal["json", "text"] = Field(
        default="json",
        description="Service logs as one JSON object per line, or as text for a terminal.",
    )
    request_log: bool = Field(
        default=True,
        description="Write one log line per request (level info; docs/operations.md).",
    )
    metrics: Literal["read", "public", "off"] = Field(
        default="read",
        description="Who may scrape GET /metrics: any token with read scope (and anonymous "
        "callers where open access applies), anyone, or nobody (no route, requests not "
        "counted).",
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Addresses or networks of the reverse proxies in front of the service; "
        "their forwarding headers name the client (logs), and no request from them is ever "
        "served as the anonymous admin.  Empty: no forwarding header is believed.",
    )

    @field_validator("allowed_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: list[str]) -> list[str]:
        proxies = []
        for entry in value:
            try:
                proxies.append(str(ipaddress.ip_network(entry.strip("[]"), strict=False)))
            except ValueError:
                raise ValueError(
                    f"RECORDKEEPER_TRUSTED_PROXIES: {entry!r} is not an IP address or network "
                    "(names are not accepted: a proxy is recognised by the address it connects "
                    "from)"
                ) from None
        return proxies

    @field_validator("storage_root")
    @classmethod
    def _check_storage_root(cls, value: str) -> str:
        try:
            return as_root(value)
        except UriError as exc:
            raise ValueError(f"RECORDKEEPER_STORAGE_ROOT: {exc}") from None

    @field_validator("allowed_roots")
    @classmethod
    def _check_allowed_roots(cls, value: list[str]) -> list[str]:
        try:
            return list(configured_roots(value, "RECORDKEEPER_ALLOWED_ROOTS"))
        except UriError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _roots_contain_storage_root(self) -> Settings:
        if not self.allowed_roots:
            self.allowed_roots = [self.storage_root]
        elif not any(self.storage_root.startswith(root) for root in self.allowed_roots):
            raise ValueError(
                f"RECORDKEEPER_STORAGE_ROOT {self.storage_root!r} is not inside "
                f"RECORDKEEPER_ALLOWED_ROOTS ({', '.join(self.allowed_roots)}); "
                "new versions could not be staged under the default root"
            )
        return self

    @property
    def uses_embedded_database(self) -> bool:
        """True when no database URL was configured and the per-user SQLite file is used."""
        return self.database_url is None

    @property
    def effective_database_url(self) -> str:
        """The database URL in use (the embedded SQLite file when none is configured)."""
        if self.database_url is not None:
            return self.database_url
        return f"sqlite:///{default_database_path()}"

    @property
    def open_access(self) -> bool:
        """Requests without a token act as admin: only with auth=auto on a loopback address."""
        return self.auth == "auto" and is_loopback(self.host)

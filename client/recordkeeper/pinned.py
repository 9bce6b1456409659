"""Pinned training configs: lock data references to exact versions and content digests.

A training config (YAML or JSON) names its data under a ``data`` key::

    data:
      train: coco@latest
      eval: coco_20231015_v3
      extra: {ref: objects365@prod, role: train, splits: [train]}

``recordkeeper lock train.yaml`` (:func:`lock_config`) resolves every reference now and writes
``train.lock.yaml`` beside it (or rewrites the file with ``--inplace``) with each entry pinned::

    data:
      train: {version: coco_20231015_v3, digest: "sha256:9f2c…", locked_from: coco@latest}
      eval: {version: coco_20231015_v3, digest: "sha256:9f2c…"}

:func:`load_pinned` (or :meth:`recordkeeper.Client.resolve_pinned`) reads a config — preferring
its lock file when one exists — and returns :class:`PinnedData`, a mapping of entry name →
:class:`~recordkeeper.DatasetVersion`.  It fails loudly: a content digest that differs from the
pin raises :class:`~recordkeeper.errors.DigestMismatch`, a version deprecated since it was locked
raises :class:`~recordkeeper.errors.VersionDeprecated`, and an alias that was never locked raises
:class:`~recordkeeper.errors.InvalidReference` (pass ``strict=False`` to resolve it anyway).

The most recently loaded :class:`PinnedData` is remembered (:func:`current`): a checkpoint
manager tracked without ``data=`` records it, so the lineage of every checkpoint is the pinned
data with no extra code.  Entry names ``train``/``eval``/``test`` are roles; ``validation`` and
``val`` mean ``eval``; other names need an explicit ``role``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import InvalidHash, InvalidInput, InvalidReference, VersionDeprecated
from recordkeeper.core.lineage import ROLES
from recordkeeper.core.refs import parse_reference
from recordkeeper.lineage import DataUse
from recordkeeper.registry import Registry

if TYPE_CHECKING:
    from recordkeeper.models import DatasetVersion

__all__ = [
    "LOCK_SUFFIX",
    "InvalidConfig",
    "PinnedData",
    "PinnedEntry",
    "Resolver",
    "current",
    "load_pinned",
    "lock_config",
    "lock_path",
    "resolve_pinned",
]


class Resolver(Protocol):
    """What pinning needs from a client: resolving a reference (``Client``, ``Registry``)."""

    def resolve(
        self, ref: str, *, expect_digest: str | None = None, shards: bool = True
    ) -> DatasetVersion: ...


LOCK_SUFFIX = ".lock"
DATA_KEY = "data"
_ROLE_ALIASES = {"validation": "eval", "val": "eval", "valid": "eval"}
_ENTRY_KEYS = {"ref", "version", "digest", "locked_from", "role", "splits"}

_current: PinnedData | None = None
_current_lock = threading.Lock()


class InvalidConfig(InvalidInput):
    """A training config cannot be read or its ``data`` section is malformed."""

    code = "invalid_config"


@dataclass(frozen=True)
class PinnedEntry:
    """One data entry: what the config asked for and what it is pinned to."""

    key: str
    role: str
    ref: str
    digest: str | None = None
    locked_from: str | None = None
    splits: tuple[str, ...] | None = None

    @property
    def locked(self) -> bool:
        return self.digest is not None

    def to_config(self) -> dict[str, Any]:
        """The locked form written into a lock file."""
        out: dict[str, Any] = {"version": self.ref, "digest": self.digest}
        if self.locked_from and self.locked_from != self.ref:
            out["locked_from"] = self.locked_from
        if self.role != _default_role(self.key):
            out["role"] = self.role
        if self.splits is not None:
            out["splits"] = list(self.splits)
        return out


class PinnedData(Mapping[str, "DatasetVersion"]):
    """Resolved pinned data: entry name → :class:`~recordkeeper.DatasetVersion`.

    ``entries`` keep the role and splits of each; :meth:`lineage_data` is what a tracked
    checkpoint manager records.
    """

    def __init__(
        self,
        entries: tuple[PinnedEntry, ...],
        versions: Mapping[str, DatasetVersion],
        *,
        path: Path | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.entries = entries
        self._versions = dict(versions)
        self.path = path
        self.config: Mapping[str, Any] = dict(config or {})

    def __getitem__(self, key: str) -> DatasetVersion:
        return self._versions[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._versions)

    def __len__(self) -> int:
        return len(self._versions)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v.name}" for k, v in self._versions.items())
        return f"PinnedData({shown})"

    def lineage_data(self) -> list[DataUse]:
        """The entries as lineage data (exact version names, roles, splits)."""
        return [
            DataUse(version=self._versions[e.key].name, role=e.role, splits=e.splits)
            for e in self.entries
        ]


def current() -> PinnedData | None:
    """The pinned data most recently loaded in this process (used by tracked managers)."""
    with _current_lock:
        return _current


def _set_current(pinned: PinnedData) -> None:
    global _current
    with _current_lock:
        _current = pinned


# -- reading and writing configs -----------------------------------------------------------


def lock_path(path: str | Path) -> Path:
    """``train.yaml`` → ``train.lock.yaml`` (a lock file's own path is returned unchanged)."""
    path = Path(path)
    if path.stem.endswith(LOCK_SUFFIX):
        return path
    return path.with_name(f"{path.stem}{LOCK_SUFFIX}{path.suffix}")


def _is_json(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidConfig(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        loaded = json.loads(text) if _is_json(path) else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if _is_json(path) else "YAML"
        raise InvalidConfig(f"{path} is not valid {kind}: {exc}") from None
    if not isinstance(loaded, dict):
        raise InvalidConfig(f"{path} must hold a mapping at the top level")
    return loaded


def _write(path: Path, config: Mapping[str, Any]) -> None:
    if _is_json(path):
        text = json.dumps(config, indent=2) + "\n"
    else:
        text = yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _data_section(config: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise InvalidConfig(f"{where} has no '{key}' section naming the training data")
        node = node[part]
    if not isinstance(node, Mapping) or not node:
        raise InvalidConfig(f"{where}: '{key}' must map entry names to data references")
    return node


def _with_data(config: Mapping[str, Any], key: str, data: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(config)
    parts = key.split(".")
    node = out
    for part in parts[:-1]:
        node[part] = dict(node[part])
        node = node[part]
    node[parts[-1]] = dict(data)
    return out


def _default_role(key: str) -> str | None:
    if key in ROLES:
        return key
    return _ROLE_ALIASES.get(key)


def parse_entries(data: Mapping[str, Any], where: str = "config") -> tuple[PinnedEntry, ...]:
    """Entries of a ``data`` section (plain references or mappings)."""
    entries = []
    for key, value in data.items():
        spot = f"{where}: data.{key}"
        if isinstance(value, str):
            value = {"ref": value}
        if not isinstance(value, Mapping):
            raise InvalidConfig(f"{spot} must be a reference or a mapping, got {value!r}")
        unknown = set(value) - _ENTRY_KEYS
        if unknown:
            raise InvalidConfig(f"{spot} has unknown keys {sorted(unknown)}")
        ref = value.get("version") or value.get("ref")
        if not isinstance(ref, str):
            raise InvalidConfig(f"{spot} needs 'ref' (or 'version' in a lock file)")
        try:
            parse_reference(ref)
        except InvalidReference as exc:
            raise InvalidReference(f"{spot}: {exc.detail}") from None
        role = value.get("role") or _default_role(str(key))
        if role not in ROLES:
            raise InvalidConfig(
                f"{spot}: cannot tell the role of entry {key!r}; add role: train, eval or test"
            )
        splits = value.get("splits")
        if splits is not None and (
            not isinstance(splits, list) or not all(isinstance(s, str) for s in splits)
        ):
            raise InvalidConfig(f"{spot}: splits must be a list of split names")
        digest = value.get("digest")
        if digest is not None:
            try:
                digest = parse_digest(digest)
            except InvalidHash as exc:
                raise InvalidConfig(f"{spot}: {exc.detail}") from None
        entries.append(
            PinnedEntry(
                key=str(key),
                role=str(role),
                ref=ref.strip(),
                digest=digest,
                locked_from=value.get("locked_from"),
                splits=tuple(splits) if splits is not None else None,
            )
        )
    return tuple(entries)


# -- resolving -----------------------------------------------------------------------------


def _check_state(version: DatasetVersion, entry: PinnedEntry, allow_deprecated: bool) -> None:
    if version.state == "deprecated" and not allow_deprecated:
        reason = f" ({version.deprecated_reason})" if version.deprecated_reason else ""
        raise VersionDeprecated(
            f"data.{entry.key} is pinned to {version.name}, which has been deprecated{reason}; "
            "re-lock the config on a good version (recordkeeper lock --update) or pass "
            "allow_deprecated=True",
            version=version.name,
            reason=version.deprecated_reason,
        )


def _resolve_entry(
    client: Resolver, entry: PinnedEntry, *, strict: bool, allow_deprecated: bool
) -> DatasetVersion:
    if entry.digest is None and strict and not parse_reference(entry.ref).is_pinned:
        raise InvalidReference(
            f"data.{entry.key} is {entry.ref!r}, an alias that can move; run "
            "`recordkeeper lock` on the config and train from the lock file "
            "(or pass strict=False to resolve it now)",
            ref=entry.ref,
        )
    version = client.resolve(entry.ref, expect_digest=entry.digest)
    _check_state(version, entry, allow_deprecated)
    return version


def resolve_pinned(
    client: Resolver,
    config: str | Path | Mapping[str, Any],
    *,
    key: str = DATA_KEY,
    strict: bool = True,
    allow_deprecated: bool = False,
    remember: bool = True,
) -> PinnedData:
    """Resolve the data of a config (a path, or an already-loaded mapping).

    A path whose lock file exists beside it (``train.yaml`` → ``train.lock.yaml``) is read
    from the lock file.  ``remember`` makes the result :func:`current` for tracked managers.
    """
    path: Path | None = None
    if isinstance(config, str | Path):
        path = Path(config)
        locked = lock_path(path)
        if locked != path and locked.exists():
            path = locked
        loaded = _read(path)
    else:
        loaded = dict(config)
    where = str(path) if path else "config"
    entries = parse_entries(_data_section(loaded, key, where), where)
    versions = {
        e.key: _resolve_entry(client, e, strict=strict, allow_deprecated=allow_deprecated)
        for e in entries
    }
    pinned = PinnedData(entries, versions, path=path, config=loaded)
    if remember:
        _set_current(pinned)
    return pinned


def load_pinned(
    path: str | Path,
    *,
    client: Resolver | None = None,
    key: str = DATA_KEY,
    strict: bool = True,
    allow_deprecated: bool = False,
) -> PinnedData:
    """Read a pinned config and resolve its data (a :class:`~recordkeeper.registry.Registry` is
    made from ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN`` if no client is given)."""
    if client is None:
        client = Registry.from_env()
    return resolve_pinned(client, path, key=key, strict=strict, allow_deprecated=allow_deprecated)


def lock_config(
    client: Resolver,
    path: str | Path,
    *,
    inplace: bool = False,
    output: str | Path | None = None,
    update: bool = False,
    key: str = DATA_KEY,
) -> tuple[Path, PinnedData]:
    """Pin every data reference of the config at ``path``; return the file written.

    Already locked entries are verified against their digest and kept; with ``update`` they
    are re-resolved from the reference they were locked from (``locked_from``).  Deprecated
    versions are refused.  The rest of the config is copied unchanged (YAML comments are not
    kept when rewriting a file).
    """
    source = Path(path)
    config = _read(source)
    where = str(source)
    entries = parse_entries(_data_section(config, key, where), where)
    locked_entries = []
    versions: dict[str, DatasetVersion] = {}
    for entry in entries:
        if entry.locked and not update:
            version = client.resolve(entry.ref, expect_digest=entry.digest, shards=False)
            origin = entry.locked_from
        else:
            origin = entry.locked_from or entry.ref
            version = client.resolve(origin, shards=False)
        _check_state(version, entry, allow_deprecated=False)
        if version.content_digest is None:
            raise InvalidInput(f"data.{entry.key}: {version.name} has no content digest")
        versions[entry.key] = version
        locked_entries.append(
            PinnedEntry(
                key=entry.key,
                role=entry.role,
                ref=version.name,
                digest=version.content_digest,
                locked_from=origin,
                splits=entry.splits,
            )
        )
    data = {e.key: e.to_config() for e in locked_entries}
    target = Path(output) if output else (source if inplace else lock_path(source))
    _write(target, _with_data(config, key, data))
    return target, PinnedData(tuple(locked_entries), versions, path=target, config=config)

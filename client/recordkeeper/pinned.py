"""Pinned training configs: lock data references to exact versions and content digests.

A training config (YAML or JSON) names its data under a ``data`` key::

    data:
      train: coco@latest
      eval: coco_20231015_v3
      extra: {ref: objects365@prod, role: train, splits: [train]}

``recordkeeper lock train.yaml`` (:func:`recordkeeper.locking.lock_config`) resolves every
reference and writes ``train.lock.yaml`` beside it (or rewrites the file with ``--inplace``)
with each entry pinned, plus a digest of what the config's data section asked for::

    data:
      train: {version: coco_20231015_v3, digest: "sha256:9f2c…", locked_from: coco@latest}
      eval: {version: coco_20231015_v3, digest: "sha256:9f2c…"}
    recordkeeper_lock: {config: train.yaml, data_digest: "sha256:41d0…"}

Pins never move silently: locking again keeps every entry already pinned in the lock file and
re-resolves only new entries and entries whose request changed in the config; ``update=True``
(``--update``) moves pins to what their reference resolves to now.  What changed is returned
(:attr:`PinnedData.changes`: old → new, added, removed) and printed by the CLI.

:func:`load_pinned` (or :meth:`recordkeeper.Client.resolve_pinned`) reads a config — preferring
its lock file when one exists — and returns :class:`PinnedData`, a mapping of entry name →
:class:`~recordkeeper.DatasetVersion`.  It fails loudly: a lock whose config's data section has
changed since it was written raises :class:`~recordkeeper.errors.StaleLock` naming the entries,
a content digest that differs from the pin raises :class:`~recordkeeper.errors.DigestMismatch`,
a version deprecated since it was locked raises :class:`~recordkeeper.errors.VersionDeprecated`,
an alias that was never locked raises :class:`~recordkeeper.errors.InvalidReference` (pass
``strict=False`` to resolve it anyway), and shards that are no longer the registered bytes raise
:class:`~recordkeeper.errors.CorruptShard` (``verify="fast"`` by default: storage identities, no
download; ``"deep"`` re-reads and re-hashes; ``None`` skips).
:func:`recordkeeper.locking.check_lock` (``recordkeeper lock --check``) answers the same
questions without raising, for CI.

This module reads configs and lock files, defines what makes a lock stale, and resolves;
writing and checking lock files is :mod:`recordkeeper.locking`.

The digest covers, per entry, the reference asked for, the role and the splits (canonical JSON):
reformatting the file or editing anything outside the data section does not make a lock stale.

The most recently loaded :class:`PinnedData` is remembered (:func:`current`): a checkpoint
manager tracked without ``data=`` records it, so the lineage of every checkpoint is the pinned
data with no extra code.  Entry names ``train``/``eval``/``test`` are roles; ``validation`` and
``val`` mean ``eval``; other names need an explicit ``role``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import yaml

from recordkeeper.checkpoint_lineage import DataUse
from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.digests import format_digest, parse_digest
from recordkeeper.core.errors import (
    InvalidHash,
    InvalidInput,
    InvalidReference,
    StaleLock,
    VersionDeprecated,
)
from recordkeeper.core.lineage import ROLES
from recordkeeper.core.refs import parse_reference
from recordkeeper.registry import Registry

if TYPE_CHECKING:
    from recordkeeper.values import DatasetVersion

__all__ = [
    "DATA_KEY",
    "LOCK_META_KEY",
    "LOCK_SUFFIX",
    "InvalidConfig",
    "PinChange",
    "PinnedData",
    "PinnedEntry",
    "Resolver",
    "check_state",
    "current",
    "data_digest",
    "data_section",
    "differences",
    "load_pinned",
    "lock_meta",
    "lock_path",
    "parse_entries",
    "read_config",
    "resolve_pinned",
    "source_of",
    "staleness",
    "with_data",
    "write_config",
]


class Resolver(Protocol):
    """What pinning needs from a client: resolving a reference (``Client``, ``Registry``)."""

    def resolve(
        self, ref: str, *, expect_digest: str | None = None, shards: bool = True
    ) -> DatasetVersion: ...


LOCK_SUFFIX = ".lock"
#: The top-level key of a lock file recording its config and the digest of its data section.
LOCK_META_KEY = "recordkeeper_lock"
DATA_KEY = "data"
Verify = Literal["fast", "deep"] | None
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

    @property
    def requested(self) -> str:
        """The reference the config asked for (what a lock entry was locked from)."""
        return self.locked_from or self.ref

    def request(self) -> dict[str, Any]:
        """What the config asks of this entry: the part :func:`data_digest` covers."""
        return {
            "ref": self.requested,
            "role": self.role,
            "splits": list(self.splits) if self.splits is not None else None,
        }

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


@dataclass(frozen=True)
class PinChange:
    """What :func:`lock_config` did to one entry of the lock file.

    ``change`` is ``added`` (a new entry), ``removed`` (gone from the config), ``updated``
    (moved by ``update=True``), ``relocked`` (its request changed in the config), or
    ``unchanged`` (``available`` then names the version its reference resolves to now, when
    that differs from the pin: ``lock --update`` would move it there).
    """

    key: str
    change: Literal["added", "removed", "updated", "relocked", "unchanged"]
    requested: str | None = None
    old_version: str | None = None
    new_version: str | None = None
    old_digest: str | None = None
    new_digest: str | None = None
    available: str | None = None

    def describe(self) -> str:
        """``train: coco_…_v3 → coco_…_v4 (updated, from coco@latest)``."""
        if self.change == "added":
            return f"{self.key}: + {self.new_version} (added, from {self.requested})"
        if self.change == "removed":
            return f"{self.key}: - {self.old_version} (removed from the config)"
        if self.change == "unchanged":
            note = (
                f"; {self.requested} is now {self.available} (lock --update moves it)"
                if self.available
                else ""
            )
            return f"{self.key}: {self.new_version} (unchanged{note})"
        return (
            f"{self.key}: {self.old_version} → {self.new_version} "
            f"({self.change}, from {self.requested})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry": self.key,
            "change": self.change,
            "requested": self.requested,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "old_digest": self.old_digest,
            "new_digest": self.new_digest,
            "available": self.available,
        }


class PinnedData(Mapping[str, "DatasetVersion"]):
    """Resolved pinned data: entry name → :class:`~recordkeeper.DatasetVersion`.

    ``entries`` keep the role and splits of each; :meth:`lineage_data` is what a tracked
    checkpoint manager records.  ``changes`` is what :func:`lock_config` changed in the lock
    file (empty for data that was loaded).
    """

    def __init__(
        self,
        entries: tuple[PinnedEntry, ...],
        versions: Mapping[str, DatasetVersion],
        *,
        path: Path | None = None,
        config: Mapping[str, Any] | None = None,
        changes: tuple[PinChange, ...] = (),
    ) -> None:
        self.entries = entries
        self._versions = dict(versions)
        self.path = path
        self.config: Mapping[str, Any] = dict(config or {})
        self.changes = changes

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


def read_config(path: Path) -> dict[str, Any]:
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


def write_config(path: Path, config: Mapping[str, Any]) -> None:
    if _is_json(path):
        text = json.dumps(config, indent=2) + "\n"
    else:
        text = yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def data_section(config: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise InvalidConfig(f"{where} has no '{key}' section naming the training data")
        node = node[part]
    if not isinstance(node, Mapping) or not node:
        raise InvalidConfig(f"{where}: '{key}' must map entry names to data references")
    return node


def with_data(config: Mapping[str, Any], key: str, data: Mapping[str, Any]) -> dict[str, Any]:
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


# -- the data digest and staleness -----------------------------------------------------


def data_digest(entries: Sequence[PinnedEntry]) -> str:
    """``sha256:…`` of what a data section asks for: per entry the reference asked for, the
    role and the splits (canonical JSON).  A config and its lock have the same digest."""
    body = {e.key: e.request() for e in entries}
    return format_digest(hashlib.sha256(canonical_json(body)).hexdigest())


def differences(asked: Sequence[PinnedEntry], locked: Sequence[PinnedEntry]) -> dict[str, str]:
    """Entry → how the config's ``asked`` entries differ from the ``locked`` ones."""
    old = {e.key: e for e in locked}
    new = {e.key: e for e in asked}
    found: dict[str, str] = {}
    for key, entry in new.items():
        was = old.get(key)
        if was is None:
            found[key] = f"added ({entry.requested})"
        elif was.request() != entry.request():
            before, after = was.request(), entry.request()
            found[key] = "changed: " + ", ".join(
                f"{name} {before[name]!r} → {after[name]!r}"
                for name in ("ref", "role", "splits")
                if before[name] != after[name]
            )
    for key in old.keys() - new.keys():
        found[key] = f"removed (was {old[key].requested})"
    return dict(sorted(found.items()))


def lock_meta(config: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = config.get(LOCK_META_KEY)
    return meta if isinstance(meta, Mapping) else {}


def source_of(lock: Path, config: Mapping[str, Any]) -> Path | None:
    """The config a lock file was written from, if it is a separate file that exists."""
    name = lock_meta(config).get("config")
    if not isinstance(name, str) or not name:
        return None
    source = lock.parent / name
    return source if source != lock and source.exists() else None


def staleness(
    config: Mapping[str, Any],
    entries: Sequence[PinnedEntry],
    key: str,
    source: Path | None,
    *,
    lock_file: bool = False,
) -> dict[str, str]:
    """Entry → why the lock (``config`` with its ``entries``) is stale; empty when it is fresh.

    The one validation of a lock, shared by :func:`load_pinned` and ``recordkeeper lock
    --check``.  A lock file (``lock_file``: read from a lock's path) must carry its own
    ``recordkeeper_lock`` section (removing it used to pass both).  A lock written from a
    separate config (``source``) is compared with that config's data section now; a config
    locked in place with the digest recorded when it was locked (entries added since without a
    pin are named).
    """
    if lock_file and not lock_meta(config):
        return {
            "*": f"it has no {LOCK_META_KEY} section, so it was not written (or was edited "
            "since) by `recordkeeper lock`"
        }
    recorded = lock_meta(config).get("data_digest")
    if source is not None:
        asked = parse_entries(data_section(read_config(source), key, str(source)), str(source))
        found = differences(asked, entries)
        if not found and recorded is not None and recorded != data_digest(asked):
            found = {"*": "the lock's data section was edited by hand"}
        return found
    if recorded is None or recorded == data_digest(entries):
        return {}
    unpinned = {e.key: f"added ({e.requested}) without a pin" for e in entries if not e.locked}
    return unpinned or {"*": "the data section was edited since it was locked"}


def _stale_error(lock: Path | None, stale: Mapping[str, str]) -> StaleLock:
    listed = "; ".join(f"data.{k}: {why}" if k != "*" else why for k, why in stale.items())
    return StaleLock(
        f"{lock or 'the lock'} is stale: {listed}; run `recordkeeper lock` on the config "
        "(`--update` also moves existing pins)",
        lock=str(lock) if lock else None,
        entries=dict(stale),
    )


# -- resolving -----------------------------------------------------------------------------


def check_state(version: DatasetVersion, entry: PinnedEntry, allow_deprecated: bool) -> None:
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
    check_state(version, entry, allow_deprecated)
    return version


def _verify(version: DatasetVersion, entry: PinnedEntry, verify: Verify) -> None:
    if verify is None:
        return
    if verify not in ("fast", "deep"):
        raise InvalidInput(f"verify must be 'fast', 'deep' or None, got {verify!r}")
    version.verify(deep=verify == "deep", splits=entry.splits, progress=False).raise_for_problems()


def resolve_pinned(
    client: Resolver,
    config: str | Path | Mapping[str, Any],
    *,
    key: str = DATA_KEY,
    strict: bool = True,
    allow_deprecated: bool = False,
    remember: bool = True,
    verify: Verify = "fast",
) -> PinnedData:
    """Resolve the data of a config (a path, or an already-loaded mapping).

    A path whose lock file exists beside it (``train.yaml`` → ``train.lock.yaml``) is read
    from the lock file, which must not be stale (:class:`~recordkeeper.errors.StaleLock`).
    ``verify`` checks the shards of every entry on storage (its splits only): ``"fast"``
    compares storage identities, ``"deep"`` re-reads and re-hashes, ``None`` skips.
    ``remember`` makes the result :func:`current` for tracked managers.
    """
    path: Path | None = None
    source: Path | None = None
    if not isinstance(config, str | Path | Mapping):
        raise InvalidConfig(
            "a pinned config is a path or a mapping (the loaded config), "
            f"got {type(config).__name__}"
        )
    if isinstance(config, str | Path):
        path = Path(config)
        locked = lock_path(path)
        if locked != path and locked.exists():
            path, source = locked, path
        loaded = read_config(path)
        source = source or source_of(path, loaded)
    else:
        loaded = dict(config)
    where = str(path) if path else "config"
    entries = parse_entries(data_section(loaded, key, where), where)
    is_lock = path is not None and (source is not None or lock_path(path) == path)
    stale = staleness(loaded, entries, key, source, lock_file=is_lock)
    if stale:
        raise _stale_error(path, stale)
    versions = {
        e.key: _resolve_entry(client, e, strict=strict, allow_deprecated=allow_deprecated)
        for e in entries
    }
    for entry in entries:
        _verify(versions[entry.key], entry, verify)
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
    verify: Verify = "fast",
) -> PinnedData:
    """Read a pinned config and resolve its data (a :class:`~recordkeeper.registry.Registry` is
    made from ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN`` if no client is given); see
    :func:`resolve_pinned` for ``verify``."""
    if client is None:
        client = Registry.from_env()
    return resolve_pinned(
        client, path, key=key, strict=strict, allow_deprecated=allow_deprecated, verify=verify
    )

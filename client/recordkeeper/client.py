"""The recordkeeper :class:`Client`: talks to the registry service and hands out versions.

Configuration lives on the instance: the URL and token default to ``RECORDKEEPER_URL`` /
``RECORDKEEPER_TOKEN`` read when the client is made (not at import time).  The client is a thin
façade: it builds one :class:`recordkeeper.http.HttpCore` (requests, retries, typed errors,
paging) and a :class:`recordkeeper.registry.Registry` on it, and its methods are the functions
of the modules that implement them (registry, writer, publish, lineage, gc) bound to that
registry or HTTP helper: each signature and docstring is stated once, where the work is done,
and type checkers see it through the façade.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import recordkeeper.checkpoint_lineage as lineage_calls
from recordkeeper import checkpoint_check, gc, leakage, retention, samples
from recordkeeper.compare import compare
from recordkeeper.core.errors import InvalidInput
from recordkeeper.derive import Derivation
from recordkeeper.http import DEFAULT_URL, HttpCore
from recordkeeper.lineage_queue import FlushResult, RegistrationQueue
from recordkeeper.pinned import (
    DATA_KEY,
    PinnedData,
    data_section,
    load_pinned,
    parse_entries,
    read_config,
)
from recordkeeper.publish import publish
from recordkeeper.registry import (
    MAX_SHARDS_PER_REQUEST,
    DuplicateWarning,
    Registry,
)
from recordkeeper.writer import VersionWriter, convert

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_URL", "MAX_SHARDS_PER_REQUEST", "Client", "DuplicateWarning"]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _bound_to(
    part: str, target: Callable[Concatenate[Any, _P], _R]
) -> Callable[Concatenate[Client, _P], _R]:
    """A façade method: ``target`` with its first argument bound to one of the client's parts.

    A plain function (so ``help(rk.Client)`` lists it as a method), named, documented and typed
    as ``target`` (``inspect.signature`` follows ``__wrapped__``): ``client.versions(...)`` is
    ``client.registry.versions(...)``.
    """

    @functools.wraps(target)
    def method(client: Client, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return target(getattr(client, part), *args, **kwargs)

    # help() shows ``name(self, ...)`` whatever the target calls its first parameter.
    signature = inspect.signature(target)
    first, *rest = signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[first.replace(name="self", annotation=inspect.Parameter.empty), *rest]
    )
    return method


def _on_registry(
    target: Callable[Concatenate[Registry, _P], _R],
) -> Callable[Concatenate[Client, _P], _R]:
    return _bound_to("registry", target)


def _on_http(
    target: Callable[Concatenate[HttpCore, _P], _R],
) -> Callable[Concatenate[Client, _P], _R]:
    return _bound_to("http", target)


class Client:
    """A connection to one recordkeeper service.

    ``http_client`` may be any :class:`httpx.Client`; FastAPI's ``TestClient(app)`` runs the
    client against an app in-process.  ``storage_options`` are the default fsspec options
    (credentials, endpoint) for versions this client resolves, writes or publishes.  Without
    ``url``/``token`` (and their environment variables), the saved profile is used: ``profile``,
    else ``RECORDKEEPER_PROFILE``, else ``default`` (``recordkeeper login``; see
    :mod:`recordkeeper.profiles`).
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        storage_options: Mapping[str, Any] | None = None,
        profile: str | None = None,
    ) -> None:
        self.http = HttpCore.from_env(
            url, token, http_client=http_client, timeout=timeout, retries=retries, profile=profile
        )
        self.registry = Registry(self.http, storage_options)
        self.url = self.http.base_url
        self.token = self.http.token

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    @property
    def storage_options(self) -> dict[str, Any]:
        """Default fsspec options for versions this client resolves, writes or publishes."""
        return self.registry.storage_options

    @storage_options.setter
    def storage_options(self, value: Mapping[str, Any] | None) -> None:
        self.registry.storage_options = dict(value or {})

    def close(self) -> None:
        """Close connections this client opened."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- every method below is its implementation's, bound to this client's registry or HTTP
    # helper (signature, types and docstring are stated once, where the work is done) -----------

    # service
    info = _on_registry(Registry.info)
    health = _on_registry(Registry.health)

    # reading
    datasets = _on_registry(Registry.datasets)
    versions = _on_registry(Registry.versions)
    log = _on_registry(Registry.log)
    children = _on_registry(Registry.children)
    versions_from_source = _on_registry(Registry.versions_from_source)
    resolve = _on_registry(Registry.resolve)
    verify = _on_registry(Registry.verify)
    schema = _on_registry(Registry.schema)
    diff = _on_registry(Registry.diff)

    # record identity (recordkeeper.record_sets)
    index = _on_registry(Registry.index)
    record_sets = _on_registry(Registry.record_sets)
    record_diffs = _on_registry(Registry.record_diffs)
    versions_with_records = _on_registry(Registry.versions_with_records)
    check_leakage = _on_registry(Registry.check_leakage)

    # leakage policies of datasets, leakage results of versions (recordkeeper.leakage)
    leakage_policy = _on_http(leakage.leakage_policy)
    set_leakage_policy = _on_http(leakage.set_leakage_policy)
    version_leakage = _on_http(leakage.version_leakage)
    record_lineage = _on_registry(Registry.record_lineage)

    # sample records of a version (recordkeeper.samples)
    record_sample = _on_registry(samples.record_sample)
    sample = _on_registry(samples.get_sample)

    # aliases
    set_alias = _on_registry(Registry.set_alias)
    aliases = _on_registry(Registry.aliases)
    alias_history = _on_registry(Registry.alias_history)
    delete_alias = _on_registry(Registry.delete_alias)

    # lifecycle
    stage = _on_registry(Registry.stage)
    register_shards = _on_registry(Registry.register_shards)
    set_provenance = _on_registry(Registry.set_provenance)
    commit = _on_registry(Registry.commit)
    abandon = _on_registry(Registry.abandon)
    deprecate = _on_registry(Registry.deprecate)

    # writing (recordkeeper.writer, recordkeeper.publish)
    writer = _on_registry(VersionWriter)
    derive = _on_registry(Derivation)
    publish = _on_registry(publish)
    convert = _on_registry(convert)

    # lineage (recordkeeper.checkpoint_lineage, recordkeeper.pinned, recordkeeper.lineage_queue)
    register_checkpoint = _on_http(lineage_calls.register_checkpoint)
    checkpoint_at = _on_http(lineage_calls.checkpoint_at)
    checkpoint = _on_http(lineage_calls.checkpoint)
    checkpoints = _on_http(lineage_calls.checkpoints)
    models = _on_http(lineage_calls.models)
    lineage = _on_http(lineage_calls.lineage)
    lineage_json = _on_http(lineage_calls.lineage_json)
    consumers = _on_http(lineage_calls.consumers)
    shard_consumers = _on_http(lineage_calls.shard_consumers)
    lineage_graph = _on_http(lineage_calls.lineage_graph)
    impact = _on_http(lineage_calls.impact)
    impact_json = _on_http(lineage_calls.impact_json)
    mark_checkpoint_deleted = _on_http(lineage_calls.mark_checkpoint_deleted)
    check_checkpoints = _on_registry(checkpoint_check.check_checkpoints)
    check_model = _on_http(lineage_calls.check_model)
    compare = _on_http(compare)

    def resolve_pinned(self, path: str | Path, **kwargs: Any) -> PinnedData:
        """Resolve a pinned training config (see :mod:`recordkeeper.pinned`)."""
        return load_pinned(path, client=self, **kwargs)

    def flush_checkpoints(self, queue: str | Path | None = None) -> FlushResult:
        """Send checkpoint registrations queued while the service was unreachable."""
        return RegistrationQueue(self, queue).flush()

    # garbage collection (recordkeeper.gc)
    gc_candidates = _on_registry(gc.gc_candidates)
    collect_garbage = _on_registry(gc.collect_garbage)

    # retention of committed versions (recordkeeper.retention)
    retention_policy = _on_registry(retention.get_policy)
    retention_policies = _on_registry(retention.list_policies)
    set_retention_policy = _on_registry(retention.set_policy)
    delete_retention_policy = _on_registry(retention.delete_policy)
    retention_plan = _on_registry(retention.retention_plan)
    apply_retention = _on_registry(retention.apply_retention)
    pin_versions = _on_registry(retention.pin_versions)
    unpin = _on_registry(retention.unpin)
    pins = _on_registry(retention.list_pins)

    def pin_lock(
        self, lock: str | Path, *, label: str | None = None, data_key: str = DATA_KEY
    ) -> list[dict[str, Any]]:
        """Register the versions a lock file names as retention pins (``recordkeeper retention
        pin LOCK``): while a policy keeps pinned versions, retention never deletes their data.

        ``label`` defaults to the lock file's path as given; pinning again is a no-op and
        :meth:`unpin` (``label``) releases them.  A config that is not locked (an entry
        without a digest) is refused: pin what training reads, not an alias that may move.
        """
        if not isinstance(lock, str | Path):
            raise InvalidInput(f"a lock file is a path, got {type(lock).__name__}")
        path = Path(lock)
        entries = parse_entries(data_section(read_config(path), data_key, str(path)), str(path))
        loose = [e.key for e in entries if not e.locked]
        if loose:
            raise InvalidInput(
                f"{path}: data.{loose[0]} is not locked (no digest); pin a lock file "
                "(recordkeeper lock CONFIG writes one)"
            )
        return retention.pin_versions(self.registry, label or str(lock), [e.ref for e in entries])


# A façade method is named as the client names it (``help`` would say
# ``delete_retention_policy = delete_policy(...)``).
for _name, _member in vars(Client).items():
    if inspect.isfunction(_member) and hasattr(_member, "__wrapped__"):
        _member.__name__, _member.__qualname__ = _name, f"Client.{_name}"

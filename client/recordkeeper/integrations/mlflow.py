"""The data versions a run trained on, in MLflow (extra ``mlflow``).

:func:`log_data` logs versions (a :class:`~recordkeeper.DatasetVersion`, a
:class:`~recordkeeper.pinned.PinnedData`, a role → version mapping, or a list of them) to the
active (or a given) MLflow run:

* as **dataset inputs** (``mlflow.log_input``): a :class:`RecordkeeperDataset` named after the
  version, with a 36-character digest (the start of the content digest), its schema as MLflow
  column specs, a profile (records, shards, bytes per split) and a :class:`RecordkeeperSource`
  (``source_type="recordkeeper"``: the reference, the service URL, the storage prefix, the full
  content digest); the input's tags are ``mlflow.data.context`` (the role: ``train``,
  ``eval``, ...), ``recordkeeper.role``, ``recordkeeper.split`` and ``recordkeeper.version``;
* as **run tags**: ``recordkeeper.data.<role>`` = the version name (several versions in one role
  are comma-separated) and ``recordkeeper.data.<role>.digest`` = its content digest.

A version is logged once per run and role (MLflow refuses nothing, but the inputs list would
grow at every save).

The tracked checkpoint manager (``recordkeeper.tf.track``) does this by itself at every save
while an MLflow run is active in the process (:class:`MlflowSaveHook`), and records the run in
the checkpoint's ``metadata`` (:data:`RUN_ID_KEY`, :data:`EXPERIMENT_ID_KEY`): the reverse link
from a checkpoint to its MLflow run.  MLflow is never imported by that hook unless the training
script imported it already.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import mlflow
from mlflow.data.dataset import Dataset
from mlflow.data.dataset_source import DatasetSource
from mlflow.types.schema import ColSpec, DataType, Schema

if TYPE_CHECKING:
    from recordkeeper.client import Client
    from recordkeeper.values import DatasetVersion

__all__ = [
    "EXPERIMENT_ID_KEY",
    "RUN_ID_KEY",
    "MlflowSaveHook",
    "RecordkeeperDataset",
    "RecordkeeperSource",
    "active_run_metadata",
    "dataset_of",
    "log_data",
]

log = logging.getLogger(__name__)

#: Checkpoint metadata keys of the MLflow run a tracked save happened in.
RUN_ID_KEY = "mlflow_run_id"
EXPERIMENT_ID_KEY = "mlflow_experiment_id"

_DIGEST_SIZE = 36  # MLflow's limit on a dataset digest
_KINDS = {"int64": DataType.long, "float": DataType.float, "bytes": DataType.binary}


class RecordkeeperSource(DatasetSource):
    """Where a recordkeeper version lives: its reference, service, storage prefix and digest."""

    def __init__(
        self,
        ref: str,
        *,
        url: str | None = None,
        storage_prefix: str | None = None,
        content_digest: str | None = None,
    ) -> None:
        self.ref = ref
        self.url = url
        self.storage_prefix = storage_prefix
        self.content_digest = content_digest

    @staticmethod
    def _get_source_type() -> str:
        return "recordkeeper"

    def load(self) -> Any:
        """The version, resolved with a default client (``RECORDKEEPER_URL``)."""
        import recordkeeper

        return recordkeeper.Client(self.url).resolve(self.ref)

    @staticmethod
    def _can_resolve(raw_source: Any) -> bool:
        return isinstance(raw_source, str) and raw_source.startswith("recordkeeper:")

    @classmethod
    def _resolve(cls, raw_source: Any) -> RecordkeeperSource:
        return cls(str(raw_source).removeprefix("recordkeeper:"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "url": self.url,
            "storage_prefix": self.storage_prefix,
            "content_digest": self.content_digest,
        }

    @classmethod
    def from_dict(cls, source_dict: dict[Any, Any]) -> RecordkeeperSource:
        return cls(
            source_dict["ref"],
            url=source_dict.get("url"),
            storage_prefix=source_dict.get("storage_prefix"),
            content_digest=source_dict.get("content_digest"),
        )


class RecordkeeperDataset(Dataset):
    """A recordkeeper version as an MLflow dataset (metadata only: no records are read)."""

    def __init__(
        self,
        source: RecordkeeperSource,
        *,
        name: str,
        digest: str | None,
        schema: Schema | None = None,
        profile: Mapping[str, Any] | None = None,
    ) -> None:
        self._schema = schema
        self._profile = dict(profile or {})
        super().__init__(source=source, name=name, digest=digest)

    def _compute_digest(self) -> str:  # only when the version has no content digest
        import hashlib

        return hashlib.sha256(self.name.encode()).hexdigest()[:_DIGEST_SIZE]

    @property
    def schema(self) -> Schema | None:
        return self._schema

    @property
    def profile(self) -> Any:
        return self._profile

    def to_dict(self) -> dict[str, str]:
        config = super().to_dict()
        if self._schema is not None:
            config["schema"] = json.dumps({"mlflow_colspec": self._schema.to_dict()})
        config["profile"] = json.dumps(self._profile)
        return config


def _mlflow_schema(version: DatasetVersion) -> Schema | None:
    try:
        features = version.schema.features
    except Exception:  # a version made offline, a service that cannot say: no schema
        log.debug("no schema for %s", version.name, exc_info=True)
        return None
    specs: list[Any] = []
    for f in features:
        kind = _KINDS.get(str(f.kind))
        if kind is None:
            continue
        specs.append(ColSpec(kind, f.name, required=f.present_count > 0))
    return Schema(specs) if specs else None


def dataset_of(version: DatasetVersion, *, url: str | None = None) -> RecordkeeperDataset:
    """``version`` as an MLflow dataset (``url``: the service it was resolved from)."""
    digest = version.content_digest
    short = digest.split(":", 1)[-1][:_DIGEST_SIZE] if digest else None
    profile = {
        "record_count": version.record_count,
        "shard_count": version.shard_count,
        "size": version.size,
        "splits": {
            name: {"record_count": s.record_count, "shard_count": s.shard_count, "size": s.size}
            for name, s in sorted(version.splits.items())
        },
        "schema_digest": version.schema_digest,
    }
    source = RecordkeeperSource(
        version.name, url=url, storage_prefix=version.storage_prefix, content_digest=digest
    )
    return RecordkeeperDataset(
        source, name=version.name, digest=short, schema=_mlflow_schema(version), profile=profile
    )


def _entries(data: Any, client: Client | None) -> list[tuple[DatasetVersion, str, str | None]]:
    """(version, role, split) of ``data``: a version, pinned data, role → version, a list."""
    from recordkeeper.pinned import PinnedData
    from recordkeeper.values import DatasetVersion

    if isinstance(data, DatasetVersion):
        return [(data, "train", None)]
    if isinstance(data, PinnedData):
        return [
            (data[e.key], e.role, ",".join(e.splits) if e.splits else None) for e in data.entries
        ]
    if isinstance(data, Mapping):
        found = []
        for role, value in data.items():
            found += [(v, str(role), s) for v, _, s in _entries(value, client)]
        return found
    if isinstance(data, str):
        if client is None:
            raise TypeError(f"logging {data!r} (a reference) needs client=")
        return [(client.resolve(data), "train", None)]
    if isinstance(data, Iterable):
        found = []
        for item in data:
            version = getattr(item, "version", None)
            if isinstance(item, Mapping) or version is not None:  # a DataUse or its JSON form
                ref = item["version"] if isinstance(item, Mapping) else version
                role = item.get("role") if isinstance(item, Mapping) else item.role
                splits = item.get("splits") if isinstance(item, Mapping) else item.splits
                resolved = ref if isinstance(ref, DatasetVersion) else None
                if resolved is None:
                    if client is None:
                        raise TypeError(f"logging {ref!r} (a reference) needs client=")
                    resolved = client.resolve(str(ref))
                found.append((resolved, str(role or "train"), ",".join(splits) if splits else None))
            else:
                found += _entries(item, client)
        return found
    raise TypeError(f"cannot log {type(data).__name__} as MLflow dataset inputs")


_logged_lock = threading.Lock()
_logged: set[tuple[str, str, str]] = set()  # (run id, role, version) logged in this process


def log_data(
    data: Any,
    *,
    run_id: str | None = None,
    client: Client | None = None,
    tags: bool = True,
) -> list[RecordkeeperDataset]:
    """Log ``data`` (see the module docstring) to the MLflow run ``run_id`` (default: the active
    run; one is started, as ``mlflow.log_input`` does, when none is); returns the datasets
    logged (those already logged to that run in that role in this process are skipped).

    ``client`` resolves references given as strings; ``tags=False`` logs no run tags.
    """
    entries = _entries(data, client)
    url = client.url if client is not None else None
    if run_id is None:
        run = mlflow.active_run() or mlflow.start_run()
        run_id = run.info.run_id
    tracking = mlflow.MlflowClient()
    logged: list[RecordkeeperDataset] = []
    inputs = []
    by_role: dict[str, list[DatasetVersion]] = {}
    for version, role, split in entries:
        by_role.setdefault(role, []).append(version)
        key = (run_id, role, version.name)
        with _logged_lock:
            if key in _logged:
                continue
            _logged.add(key)
        dataset = dataset_of(version, url=url)
        input_tags = {
            "mlflow.data.context": role,
            "recordkeeper.role": role,
            "recordkeeper.version": version.name,
        }
        if split:
            input_tags["recordkeeper.split"] = split
        inputs.append(_dataset_input(dataset, input_tags))
        logged.append(dataset)
    if inputs:
        tracking.log_inputs(run_id, datasets=inputs)
    if tags:
        for role, versions in by_role.items():
            names = list(dict.fromkeys(v.name for v in versions))
            digests = list(dict.fromkeys(v.content_digest or "" for v in versions))
            tracking.set_tag(run_id, f"recordkeeper.data.{role}", ",".join(names)[:5000])
            tracking.set_tag(run_id, f"recordkeeper.data.{role}.digest", ",".join(digests)[:5000])
    return logged


def _dataset_input(dataset: RecordkeeperDataset, tags: Mapping[str, str]) -> Any:
    from mlflow.entities import DatasetInput, InputTag

    return DatasetInput(
        dataset=dataset._to_mlflow_entity(),
        tags=[InputTag(key=k, value=str(v)[:500]) for k, v in tags.items()],
    )


def active_run_metadata() -> dict[str, str]:
    """The active MLflow run as checkpoint metadata (empty without one, or when the process has
    not imported MLflow: this never imports it)."""
    module = sys.modules.get("mlflow")
    if module is None:
        return {}
    try:
        run = module.active_run()
    except Exception:
        return {}
    if run is None:
        return {}
    return {RUN_ID_KEY: run.info.run_id, EXPERIMENT_ID_KEY: run.info.experiment_id}


class MlflowSaveHook:
    """A tracked manager's save callback: log the data of each save to the active MLflow run
    (the run id of the checkpoint's metadata when it has one), never raising."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __call__(self, saved: Any) -> None:
        run_id = (saved.body.get("metadata") or {}).get(RUN_ID_KEY)
        if not run_id:
            return
        data = list(saved.body.get("data") or ())
        if data:
            log_data(data, run_id=str(run_id), client=self.client)
        mlflow.MlflowClient().set_tag(str(run_id), "recordkeeper.checkpoint", str(saved.ref))
